import Foundation

/// A fetch request stored in a model (Xcode's "Fetch Requests" in the model editor), as the model file describes it:
/// its entity, its predicate's format string and its options.
///
/// The context layer turns it into an `NSFetchRequest` (`fetchRequestTemplate(forName:)`,
/// `fetchRequestFromTemplate(withName:substitutionVariables:)`), parsing the predicate then.
///
/// For example:
/// ```swift
/// let cheap = model.fetchRequestTemplateDescriptions["CheapProducts"]?.predicateFormat   // "price < $PRICE"
/// ```
public struct FetchRequestTemplateDescription: Sendable, Equatable {
    /// The template's name.
    public var name: String
    /// The entity it fetches.
    public var entityName: String
    /// The predicate's format string (with `$VARIABLES` for substitution), if it has one.
    public var predicateFormat: String?
    /// The most results (0: no limit).
    public var fetchLimit: Int
    /// The batch size (0: no batching).
    public var fetchBatchSize: Int
    /// Whether fetched objects come with their values.
    public var includesPropertyValues: Bool
    /// Whether fetched objects come back as faults.
    public var returnsObjectsAsFaults: Bool

    /// A template fetching `entityName`, optionally filtered by `predicateFormat`.
    public init(
        name: String, entityName: String, predicateFormat: String? = nil, fetchLimit: Int = 0, fetchBatchSize: Int = 0,
        includesPropertyValues: Bool = true, returnsObjectsAsFaults: Bool = true
    ) {
        self.name = name
        self.entityName = entityName
        self.predicateFormat = predicateFormat
        self.fetchLimit = fetchLimit
        self.fetchBatchSize = fetchBatchSize
        self.includesPropertyValues = includesPropertyValues
        self.returnsObjectsAsFaults = returnsObjectsAsFaults
    }
}
