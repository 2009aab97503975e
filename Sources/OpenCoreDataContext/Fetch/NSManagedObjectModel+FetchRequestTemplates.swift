import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

extension NSManagedObjectModel {
    /// The model's stored fetch requests as fetch requests, by name; a template whose predicate does not parse is
    /// left out (`checkedFetchRequest(fromTemplate:substitutionVariables:)` says why).
    public var fetchRequestTemplatesByName: [String: NSFetchRequest<any NSFetchRequestResult>] {
        fetchRequestTemplateDescriptions.keys.reduce(into: [:]) { result, name in result[name] = fetchRequestTemplate(forName: name) }
    }

    /// A new fetch request made from the template named `name`, or nil when there is none (or its predicate does not
    /// parse: `checkedFetchRequest(fromTemplate:substitutionVariables:)` throws the reason).
    ///
    /// Unlike Core Data's, the request is a copy: changing it does not change the template.
    public func fetchRequestTemplate(forName name: String) -> NSFetchRequest<any NSFetchRequestResult>? {
        try? checkedFetchRequest(fromTemplate: name, substitutionVariables: nil)
    }

    /// A new fetch request made from the template named `name`, its predicate's `$VARIABLES` replaced by
    /// `variables`; nil when there is no such template or it cannot be made.
    public func fetchRequestFromTemplate(withName name: String, substitutionVariables variables: [String: Any])
        -> NSFetchRequest<any NSFetchRequestResult>?
    {
        try? checkedFetchRequest(fromTemplate: name, substitutionVariables: variables)
    }

    /// Stores `request` as the template named `name` (nil, or a request that names no entity, removes it).
    public func setFetchRequestTemplate(_ request: NSFetchRequest<any NSFetchRequestResult>?, forName name: String) {
        guard let request, let entityName = request.entityName else {
            fetchRequestTemplateDescriptions[name] = nil
            return
        }
        fetchRequestTemplateDescriptions[name] = FetchRequestTemplateDescription(
            name: name, entityName: entityName, predicateFormat: request.predicate?.canonicalFormat,
            fetchLimit: request.fetchLimit, fetchBatchSize: request.fetchBatchSize, includesPropertyValues: request.includesPropertyValues,
            returnsObjectsAsFaults: request.returnsObjectsAsFaults)
    }

    /// A new fetch request made from the template named `name` (with `variables` substituted when given).
    ///
    /// For example:
    /// ```swift
    /// let request = try model.checkedFetchRequest(fromTemplate: "CheapProducts", substitutionVariables: ["PRICE": 5])
    /// ```
    ///
    /// - Throws: `CoreDataError` naming the template when there is none, its predicate does not parse, or a variable
    ///   it needs is missing.
    public func checkedFetchRequest(fromTemplate name: String, substitutionVariables variables: [String: Any]?) throws
        -> NSFetchRequest<any NSFetchRequestResult>
    {
        guard let template = fetchRequestTemplateDescriptions[name] else {
            let known = fetchRequestTemplateDescriptions.keys.sorted().joined(separator: ", ")
            throw CoreDataError(
                .invalidModel, "The model has no fetch request template named '\(name)' (it has: \(known.isEmpty ? "none" : known)).")
        }
        let request = NSFetchRequest<any NSFetchRequestResult>(entityName: template.entityName)
        if let format = template.predicateFormat {
            do {
                var predicate = try FetchPredicate(format: format)
                if let variables { predicate = try predicate.withSubstitutionVariables(variables) }
                request.predicate = predicate
            } catch let error as CoreDataError {
                throw CoreDataError(
                    error.code, "The fetch request template '\(name)' (predicate \"\(format)\"): \(error.message)",
                    entityName: template.entityName)
            }
        }
        request.fetchLimit = template.fetchLimit
        request.fetchBatchSize = template.fetchBatchSize
        request.includesPropertyValues = template.includesPropertyValues
        request.returnsObjectsAsFaults = template.returnsObjectsAsFaults
        return request
    }
}
