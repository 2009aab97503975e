import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// A request a context hands to its store as a whole (Core Data's `NSPersistentStoreRequest`): the batch requests.
public class NSPersistentStoreRequest: @unchecked Sendable {}

/// What a store request returns (Core Data's `NSPersistentStoreResult`).
public class NSPersistentStoreResult: @unchecked Sendable {}

/// What a batch insert returns.
public enum NSBatchInsertRequestResultType: UInt, Sendable {
    /// Whether it succeeded (`result` is `true`).
    case statusOnly = 0
    /// The new objects' IDs (`result` is `[NSManagedObjectID]`).
    case objectIDs = 1
    /// How many were inserted (`result` is an `Int`).
    case count = 2
}

/// Inserts rows straight into the store, without objects (Core Data's `NSBatchInsertRequest`): from dictionaries of
/// attribute values, or from a handler that fills one dictionary at a time and returns true when done.
///
/// For example:
/// ```swift
/// let request = NSBatchInsertRequest(entityName: "Item", objects: [["name": "pen", "score": 3], ["name": "ink"]])
/// request.resultType = .objectIDs
/// let ids = (try context.execute(request) as? NSBatchInsertResult)?.result as? [NSManagedObjectID]
/// ```
/// Keys must be attributes of the entity (relationships are not set by batch inserts, as in Core Data); missing
/// attributes take their defaults; a value of the wrong type or a missing required value fails the request, naming
/// entity and key, and nothing is inserted. The context's objects do not change: merge the result into contexts with
/// `NSManagedObjectContext.mergeChanges(fromRemoteContextSave:into:)`.
public final class NSBatchInsertRequest: NSPersistentStoreRequest, @unchecked Sendable {
    /// The entity's name.
    public let entityName: String
    /// The entity, when given.
    public var entity: NSEntityDescription?
    /// The rows to insert, as dictionaries of attribute values.
    public var objectsToInsert: [[String: Any]]?
    /// Fills the dictionary it is given with the next row's values and returns false, or returns true when there is
    /// no more row (the dictionary is then ignored).
    public var dictionaryHandler: ((NSMutableDictionary) -> Bool)?
    /// What the request returns.
    public var resultType: NSBatchInsertRequestResultType = .statusOnly

    /// A request inserting `objects` into the entity named `entityName`.
    public init(entityName: String, objects: [[String: Any]]) {
        self.entityName = entityName
        objectsToInsert = objects
    }

    /// A request inserting `objects` into `entity`.
    public init(entity: NSEntityDescription, objects: [[String: Any]]) {
        entityName = entity.name
        self.entity = entity
        objectsToInsert = objects
    }

    /// A request inserting the rows `handler` fills, one per call, until it returns true.
    public init(entityName: String, dictionaryHandler handler: @escaping (NSMutableDictionary) -> Bool) {
        self.entityName = entityName
        dictionaryHandler = handler
    }

    /// A request inserting into `entity` the rows `handler` fills, one per call, until it returns true.
    public init(entity: NSEntityDescription, dictionaryHandler handler: @escaping (NSMutableDictionary) -> Bool) {
        entityName = entity.name
        self.entity = entity
        dictionaryHandler = handler
    }
}

/// What a batch update returns.
public enum NSBatchUpdateRequestResultType: UInt, Sendable {
    /// Whether it succeeded (`result` is `true`).
    case statusOnlyResultType = 0
    /// The updated objects' IDs (`result` is `[NSManagedObjectID]`).
    case updatedObjectIDsResultType = 1
    /// How many were updated (`result` is an `Int`).
    case updatedObjectsCountResultType = 2
}

/// Sets attributes of every object a predicate matches, in the store, without objects (Core Data's
/// `NSBatchUpdateRequest`).
///
/// For example:
/// ```swift
/// let request = NSBatchUpdateRequest(entityName: "Item")
/// request.predicate = try FetchPredicate(format: "score < 10")
/// request.propertiesToUpdate = ["flagged": true]
/// request.resultType = .updatedObjectIDsResultType
/// ```
/// Keys must be attributes; values are checked against their types (a wrong one fails the request, naming entity and
/// key, and nothing changes). Each updated row's version advances, so a context holding unsaved changes to one of them
/// meets a merge conflict at its next save, as with Core Data.
public final class NSBatchUpdateRequest: NSPersistentStoreRequest, @unchecked Sendable {
    /// The entity's name.
    public let entityName: String
    /// The entity, when given.
    public var entity: NSEntityDescription?
    /// Which objects to update (nil: all of the entity).
    public var predicate: FetchPredicate?
    /// The new values, by attribute name.
    public var propertiesToUpdate: [AnyHashable: Any]?
    /// Whether objects of subentities are updated too (default true).
    public var includesSubentities = true
    /// What the request returns.
    public var resultType: NSBatchUpdateRequestResultType = .statusOnlyResultType

    /// A request updating objects of the entity named `entityName`.
    public init(entityName: String) { self.entityName = entityName }

    /// A request updating objects of `entity`.
    public init(entity: NSEntityDescription) {
        entityName = entity.name
        self.entity = entity
    }
}

/// What a batch delete returns.
public enum NSBatchDeleteRequestResultType: UInt, Sendable {
    /// Whether it succeeded (`result` is `true`).
    case resultTypeStatusOnly = 0
    /// The deleted objects' IDs, cascaded ones included (`result` is `[NSManagedObjectID]`).
    case resultTypeObjectIDs = 1
    /// How many were deleted (`result` is an `Int`).
    case resultTypeCount = 2
}

/// Deletes the objects a fetch request matches, or given objects, in the store, without objects (Core Data's
/// `NSBatchDeleteRequest`).
///
/// For example:
/// ```swift
/// let fetch = NSFetchRequest<NSManagedObject>(entityName: "Item")
/// fetch.predicate = try FetchPredicate(format: "done == YES")
/// let request = NSBatchDeleteRequest(fetchRequest: fetch)
/// request.resultType = .resultTypeObjectIDs
/// ```
/// Delete rules apply as Core Data documents for batch deletes: cascade deletes the destinations too, nullify clears
/// the links, and a deny rule with destinations fails the whole request (naming entity and relationship) with nothing
/// deleted.
public final class NSBatchDeleteRequest: NSPersistentStoreRequest, @unchecked Sendable {
    /// The entity, predicate and subentity choice of the fetch request, when the request was made from one.
    let fetchEntityName: String?
    let fetchEntity: NSEntityDescription?
    let fetchPredicate: FetchPredicate?
    let fetchIncludesSubentities: Bool
    /// The objects to delete, when the request was made from IDs.
    public let objectIDs: [NSManagedObjectID]?
    /// What the request returns.
    public var resultType: NSBatchDeleteRequestResultType = .resultTypeStatusOnly

    /// A request deleting what `fetchRequest` matches (its entity, predicate and `includesSubentities`).
    public init<T>(fetchRequest: NSFetchRequest<T>) {
        fetchEntityName = fetchRequest.entity?.name ?? fetchRequest.entityName
        fetchEntity = fetchRequest.entity
        fetchPredicate = fetchRequest.predicate
        fetchIncludesSubentities = fetchRequest.includesSubentities
        objectIDs = nil
    }

    /// A request deleting the objects with these IDs.
    public init(objectIDs: [NSManagedObjectID]) {
        self.objectIDs = objectIDs
        fetchEntityName = nil
        fetchEntity = nil
        fetchPredicate = nil
        fetchIncludesSubentities = true
    }
}

/// A batch insert's result (`result` as its `resultType` says).
public final class NSBatchInsertResult: NSPersistentStoreResult, @unchecked Sendable {
    /// The kind of result.
    public let resultType: NSBatchInsertRequestResultType
    /// `true`, the new objects' IDs, or their count.
    public let result: Any?
    init(_ type: NSBatchInsertRequestResultType, _ result: Any?) {
        resultType = type
        self.result = result
    }
}

/// A batch update's result (`result` as its `resultType` says).
public final class NSBatchUpdateResult: NSPersistentStoreResult, @unchecked Sendable {
    /// The kind of result.
    public let resultType: NSBatchUpdateRequestResultType
    /// `true`, the updated objects' IDs, or their count.
    public let result: Any?
    init(_ type: NSBatchUpdateRequestResultType, _ result: Any?) {
        resultType = type
        self.result = result
    }
}

/// A batch delete's result (`result` as its `resultType` says).
public final class NSBatchDeleteResult: NSPersistentStoreResult, @unchecked Sendable {
    /// The kind of result.
    public let resultType: NSBatchDeleteRequestResultType
    /// `true`, the deleted objects' IDs, or their count.
    public let result: Any?
    init(_ type: NSBatchDeleteRequestResultType, _ result: Any?) {
        resultType = type
        self.result = result
    }
}
