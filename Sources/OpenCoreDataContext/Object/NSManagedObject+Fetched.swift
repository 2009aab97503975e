import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

extension NSFetchedPropertyDescription {
    /// The fetch request the property runs, its predicate still holding `$FETCH_SOURCE`; Core Data's property.
    ///
    /// Nil when the model's predicate does not parse (reading the property then throws why).
    ///
    /// For example:
    /// ```swift
    /// let format = fetchedProperty.fetchRequest?.predicate?.predicateFormat
    /// ```
    public var fetchRequest: NSFetchRequest<NSManagedObject>? { try? request(predicate: nil) }

    /// The property's fetch request, with `predicate` (or the model's, unsubstituted).
    func request(predicate: FetchPredicate?) throws -> NSFetchRequest<NSManagedObject> {
        let template = fetchRequestTemplate
        let request = NSFetchRequest<NSManagedObject>(entityName: template.entityName)
        if let predicate {
            request.predicate = predicate
        } else if let format = template.predicateFormat {
            request.predicate = try FetchPredicate(format: format)
        }
        request.fetchLimit = template.fetchLimit
        request.fetchBatchSize = template.fetchBatchSize
        return request
    }
}

extension NSManagedObject {
    /// A fetched property's value: its fetch, run the first time it is read with `$FETCH_SOURCE` standing for this
    /// object (and `$FETCH_SOURCE.key.path` for that key path's value), then kept until the object is refreshed.
    func fetchedValue(at index: Int, _ property: NSFetchedPropertyDescription) throws -> [NSManagedObject] {
        if let cached = fetchedPropertyValues[index] { return cached }
        guard let context = managedObjectContext else { throw contextGone(property.name) }
        var predicate: FetchPredicate?
        if let format = property.fetchRequestTemplate.predicateFormat {
            let place = "The fetched property '\(entity.name).\(property.name)'"
            let parsed: FetchPredicate
            do {
                parsed = try FetchPredicate(format: format)
            } catch let error as CoreDataError {
                throw CoreDataError(
                    .predicateSyntax, "\(place) has a predicate that does not parse: \(error.message)", entityName: entity.name,
                    key: property.name)
            }
            predicate = try parsed.withSubstitutionVariables(["FETCH_SOURCE": self, "FETCHED_PROPERTY": property.name]) { variable, path in
                if variable == "FETCH_SOURCE" { return try self.checkedValue(forKeyPath: path.joined(separator: ".")) }
                // $FETCHED_PROPERTY is the property's description: its name, or a value of its userInfo.
                if variable == "FETCHED_PROPERTY" {
                    if path == ["name"] { return property.name }
                    if path.count == 2, path[0] == "userInfo" { return property.userInfo[path[1]] }
                }
                throw CoreDataError(
                    .invalidFetchRequest,
                    "\(place) reads $\(variable).\(path.joined(separator: ".")); only $FETCH_SOURCE's key paths and $FETCHED_PROPERTY's name and userInfo are supported.",
                    entityName: self.entity.name, key: property.name)
            }
        }
        let result = try context.fetch(try property.request(predicate: predicate))
        fetchedPropertyValues[index] = result
        return result
    }
}
