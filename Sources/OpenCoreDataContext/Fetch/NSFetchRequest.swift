import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// What a fetch returns, with Core Data's raw values.
///
/// For example:
/// ```swift
/// request.resultType = .managedObjectIDResultType
/// ```
public struct NSFetchRequestResultType: OptionSet, Sendable, Hashable {
    /// The result type's raw value, as in Core Data.
    public let rawValue: UInt
    /// A result type from its raw value.
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// Managed objects (the default).
    public static let managedObjectResultType = NSFetchRequestResultType([])
    /// Object IDs.
    public static let managedObjectIDResultType = NSFetchRequestResultType(rawValue: 1)
    /// Dictionaries of `propertiesToFetch` (`NSDictionary`); pending changes are not included.
    public static let dictionaryResultType = NSFetchRequestResultType(rawValue: 2)
    /// One `NSNumber`: the number of matching objects.
    public static let countResultType = NSFetchRequestResultType(rawValue: 4)
}

/// A description of what to fetch: an entity, a filter, an order, a window and a result type.
///
/// For example:
/// ```swift
/// let request = NSFetchRequest<NSManagedObject>(entityName: "Products")
/// request.predicate = try FetchPredicate(format: "price < %d", 500)
/// request.sortDescriptors = [FetchSortDescriptor(key: "price", ascending: true)]
/// request.fetchLimit = 12
/// let cheapest = try context.fetch(request)
/// ```
public final class NSFetchRequest<ResultType>: @unchecked Sendable, CustomStringConvertible {
    /// The name of the entity to fetch (used when `entity` is nil).
    public var entityName: String?
    /// The entity to fetch.
    public var entity: NSEntityDescription?
    /// Which objects to return; all when nil.
    public var predicate: FetchPredicate?
    /// The order of the results, first descriptor first; store order (by primary key) when nil.
    public var sortDescriptors: [FetchSortDescriptor]?
    /// The most results to return; 0 for no limit.
    public var fetchLimit: Int = 0
    /// How many results to skip.
    public var fetchOffset: Int = 0
    /// The stores to search, for a coordinator with several (one per configuration); nil: every store holding the
    /// entity.
    public var affectedStores: [any PersistentStore]?
    /// When positive, objects come back as faults whose rows load this many at a time on first access.
    public var fetchBatchSize: Int = 0
    /// What to return.
    public var resultType: NSFetchRequestResultType = .managedObjectResultType
    /// For dictionary results: property names (or descriptions), to-one key paths, or ``NSExpressionDescription``s
    /// (computed values, aggregates such as `sum:(amount)`, the object's ID) to include; all attributes when nil.
    ///
    /// For managed-object results, the names (or descriptions) of the properties to read with the fetch: its objects
    /// come as faults holding the values of those attributes, read in the statement that finds them, and read their
    /// whole row when another property is first read or any is changed. (A batched fetch, a child context's fetch and
    /// a fetch that has to weigh unsaved changes read whole rows.)
    public var propertiesToFetch: [Any]?
    /// For dictionary results: the property names, key paths or expression descriptions whose values group the rows;
    /// each dictionary is then one group, and `propertiesToFetch` may hold only these and aggregates.
    public var propertiesToGroupBy: [Any]?
    /// For grouped dictionary results: which groups are returned.
    ///
    /// A key path or `$variable` naming a fetched expression description stands for its value (`count > 1`,
    /// `$total >= 100`).
    public var havingPredicate: FetchPredicate?
    /// Whether objects of subentities are included (default true).
    public var includesSubentities: Bool = true
    /// Whether unsaved inserts, changes and deletes in the context show in the results (default true).
    public var includesPendingChanges: Bool = true
    /// For dictionary results, whether duplicate dictionaries are dropped.
    public var returnsDistinctResults: Bool = false
    /// Accepted for source compatibility; objects load their values lazily or eagerly as the fetch sees fit.
    public var returnsObjectsAsFaults: Bool = true
    /// Accepted for source compatibility (no effect).
    public var includesPropertyValues: Bool = true
    /// Relationship key paths (`"department"`, `"department.head"`, `"employees"`) whose rows a fetch of objects reads
    /// with its results, a statement per relationship rather than a fault per object on first access (not for a
    /// batched fetch, whose rows load with their batches).
    public var relationshipKeyPathsForPrefetching: [String]?

    /// A request for objects of the entity named `entityName` (and its subentities).
    public init(entityName: String) {
        self.entityName = entityName
    }

    /// A request with no entity yet: set `entity` or `entityName` before fetching.
    public init() {}

    /// The entity, predicate, sort descriptors and limits, for logs.
    public var description: String {
        var parts = ["entity: \(entity?.name ?? entityName ?? "nil")"]
        if let predicate { parts.append("predicate: \(predicate)") }
        if let sortDescriptors { parts.append("sortDescriptors: \(sortDescriptors)") }
        if fetchLimit > 0 { parts.append("limit: \(fetchLimit)") }
        if fetchOffset > 0 { parts.append("offset: \(fetchOffset)") }
        return "<NSFetchRequest \(parts.joined(separator: ", "))>"
    }

    /// The property names or key paths to fetch for dictionary results.
    func propertyKeyPaths(for entity: NSEntityDescription) throws -> [String] {
        guard let properties = propertiesToFetch else { return entity.allAttributes.filter { !$0.isTransient }.map(\.name) }
        return try properties.map { item in
            if let name = item as? String { return name }
            if let property = item as? NSPropertyDescription { return property.name }
            throw CoreDataError(
                .invalidFetchRequest, "propertiesToFetch holds \(type(of: item)); use property names or property descriptions.",
                entityName: entity.name)
        }
    }
}

extension NSFetchRequest {
    /// The request's computed or grouped dictionary columns, or nil when it fetches property values only (no
    /// expression description, grouping or `havingPredicate`).
    func groupedQuery(for entity: NSEntityDescription) throws -> StoreFetchRequest.GroupedQuery? {
        let fetched = propertiesToFetch ?? []
        guard fetched.contains(where: { $0 is NSExpressionDescription }) || propertiesToGroupBy != nil || havingPredicate != nil else {
            return nil
        }
        func column(_ item: Any, in list: String) throws -> StoreFetchRequest.GroupedQuery.Column {
            switch item {
            case let name as String: return .init(name: name, expression: .key(name))
            case let property as NSPropertyDescription: return .init(name: property.name, expression: .key(property.name))
            case let description as NSExpressionDescription:
                guard let expression = description.expression else {
                    throw CoreDataError(
                        .invalidFetchRequest, "The expression description '\(description.name)' in \(list) has no expression.",
                        entityName: entity.name)
                }
                let type = description.expressionResultType
                return .init(name: description.name, expression: expression, resultType: type == .undefinedAttributeType ? nil : type)
            default:
                throw CoreDataError(
                    .invalidFetchRequest,
                    "\(list) holds \(type(of: item)); use property names, property descriptions or expression descriptions.",
                    entityName: entity.name)
            }
        }
        let columns =
            propertiesToFetch == nil
            ? entity.allAttributes.filter { !$0.isTransient }.map {
                StoreFetchRequest.GroupedQuery.Column(name: $0.name, expression: .key($0.name))
            }
            : try fetched.map { try column($0, in: "propertiesToFetch") }
        return StoreFetchRequest.GroupedQuery(
            columns: columns, groupBy: try (propertiesToGroupBy ?? []).map { try column($0, in: "propertiesToGroupBy") },
            having: havingPredicate)
    }
}

extension NSFetchRequestResult where Self: NSManagedObject {
    /// A fetch request for this class's entity (`entityName`).
    public static func fetchRequest() -> NSFetchRequest<Self> {
        NSFetchRequest<Self>(entityName: entityName)
    }
}
