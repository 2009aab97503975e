import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// One property's value in a row snapshot.
package enum SnapshotValue: Sendable, Equatable {
    /// An attribute's value.
    case attribute(AttributeValue)
    /// A to-one relationship's destination, or `nil`.
    case toOne(NSManagedObjectID?)
    /// A to-many relationship: not part of the row; load it with `relatedObjectIDs`.
    case toMany
}

/// The stored state of one object: its ID, its optimistic-locking version and one value per property of its entity
/// (aligned with `entity.allProperties`).
package struct RowSnapshot: Sendable {
    package let objectID: NSManagedObjectID
    package let version: Int64
    package var values: [SnapshotValue]

    package init(objectID: NSManagedObjectID, version: Int64, values: [SnapshotValue]) {
        self.objectID = objectID
        self.version = version
        self.values = values
    }

    /// The value of a property by name, or `nil` if the entity has no such property.
    package func value(forKey key: String) -> SnapshotValue? {
        guard let i = objectID.entity.propertyIndex(named: key) else { return nil }
        return values[i]
    }
}

/// A fetch as the store executes it: entity, filter, order, window and what to return.
package struct StoreFetchRequest: Sendable {
    package enum ResultKind: Sendable, Equatable {
        /// Full rows.
        case rows
        /// Object IDs only.
        case objectIDs
        /// The number of matching rows.
        case count
        /// Dictionaries of the given key paths (attributes or to-one key paths).
        case dictionaries([String])
        /// Dictionaries of computed columns, with rows grouped or aggregated (`NSExpressionDescription`,
        /// `propertiesToGroupBy`, `havingPredicate`): read from the store alone, as Core Data does.
        case grouped(GroupedQuery)
    }

    /// A dictionary fetch whose columns are expressions: key paths, functions of them, aggregates (`sum:`, `count:`,
    /// `min:`, `max:`, `average:`) over the matching rows or over each group of them, the objects' IDs.
    package struct GroupedQuery: Sendable, Equatable {
        /// A column of the result: its key in each dictionary, what computes it, and the type of its value (nil:
        /// the expression's own).
        package struct Column: Sendable, Equatable {
            package var name: String
            package var expression: FetchExpression
            package var resultType: NSAttributeType?
            package init(name: String, expression: FetchExpression, resultType: NSAttributeType? = nil) {
                (self.name, self.expression, self.resultType) = (name, expression, resultType)
            }
        }
        /// The columns each dictionary holds, in order.
        package var columns: [Column]
        /// The values rows are grouped by (empty: no grouping; with an aggregate, one dictionary for all rows).
        package var groupBy: [Column]
        /// Which groups are returned; its key paths (or `$variables`) may name columns.
        package var having: FetchPredicate?
        package init(columns: [Column], groupBy: [Column] = [], having: FetchPredicate? = nil) {
            (self.columns, self.groupBy, self.having) = (columns, groupBy, having)
        }
    }

    package var entity: NSEntityDescription
    package var includesSubentities = true
    package var predicate: FetchPredicate?
    package var sortDescriptors: [FetchSortDescriptor] = []
    package var fetchLimit = 0
    package var fetchOffset = 0
    package var returnsDistinctResults = false
    package var resultKind: ResultKind = .rows
    /// The identifiers of the stores to read (`NSFetchRequest.affectedStores`); nil: every store holding the entity.
    package var affectedStores: Set<String>?

    package init(entity: NSEntityDescription, resultKind: ResultKind = .rows) {
        self.entity = entity
        self.resultKind = resultKind
    }

    /// The same request as a count limited to nothing: running it checks the predicate and sort descriptors
    /// (unknown keys, wrong value types) without reading rows.
    package func validatingOnly() -> StoreFetchRequest {
        var copy = self
        copy.resultKind = .count
        copy.fetchLimit = 1
        copy.fetchOffset = 0
        return copy
    }
}

/// What a store fetch returns.
package enum StoreFetchResult: Sendable {
    case rows([RowSnapshot])
    case objectIDs([NSManagedObjectID])
    case count(Int)
    case dictionaries([[String: AttributeValue]])
}

/// The changes one save writes, in one transaction.
package struct StoreSaveRequest: Sendable {
    /// A row to insert: its temporary ID and a value for each property of its entity.
    package struct Insert: Sendable {
        package var objectID: NSManagedObjectID
        package var values: [SnapshotValue]
        package init(objectID: NSManagedObjectID, values: [SnapshotValue]) {
            self.objectID = objectID
            self.values = values
        }
    }

    /// A row to update: the changed properties (by index in `entity.allProperties`) and the version it was read at.
    package struct Update: Sendable {
        package var objectID: NSManagedObjectID
        package var expectedVersion: Int64
        package var changes: [Int: SnapshotValue]
        /// The row as read at `expectedVersion` (one value per property), when the caller has it.
        ///
        /// Under the `.fail`
        /// policy the version check proves the row still holds it, so the store builds the row as saved from it and
        /// the changes instead of reading the row back.
        package var base: [SnapshotValue]?
        package init(objectID: NSManagedObjectID, expectedVersion: Int64, changes: [Int: SnapshotValue], base: [SnapshotValue]? = nil) {
            self.objectID = objectID
            self.expectedVersion = expectedVersion
            self.changes = changes
            self.base = base
        }
    }

    /// A row to delete, with the version it was read at.
    package struct Delete: Sendable {
        package var objectID: NSManagedObjectID
        package var expectedVersion: Int64
        package init(objectID: NSManagedObjectID, expectedVersion: Int64) {
            self.objectID = objectID
            self.expectedVersion = expectedVersion
        }
    }

    /// A link added to or removed from a to-many relationship.
    ///
    /// Stores that keep the relationship in the
    /// destination's foreign key (its inverse is to-one) learn the change from the destination's update and ignore it.
    package struct LinkChange: Sendable {
        package var relationship: NSRelationshipDescription
        package var source: NSManagedObjectID
        package var destination: NSManagedObjectID
        package var isInsert: Bool
        package init(relationship: NSRelationshipDescription, source: NSManagedObjectID, destination: NSManagedObjectID, isInsert: Bool) {
            self.relationship = relationship
            self.source = source
            self.destination = destination
            self.isInsert = isInsert
        }
    }

    /// The whole order of an ordered to-many relationship after the save.
    package struct OrderChange: Sendable {
        package var relationship: NSRelationshipDescription
        package var source: NSManagedObjectID
        package var destinations: [NSManagedObjectID]
        package init(relationship: NSRelationshipDescription, source: NSManagedObjectID, destinations: [NSManagedObjectID]) {
            self.relationship = relationship
            self.source = source
            self.destinations = destinations
        }
    }

    /// How to treat rows changed by someone else since they were read.
    package enum ConflictPolicy: Sendable {
        /// Fail the whole save (Core Data's default, `NSErrorMergePolicy`).
        case fail
        /// Write the changed properties anyway (`NSMergeByPropertyObjectTrumpMergePolicy`,
        /// `NSOverwriteMergePolicy`).
        case overwrite
    }

    package var inserts: [Insert] = []
    package var updates: [Update] = []
    package var deletes: [Delete] = []
    package var linkChanges: [LinkChange] = []
    /// The new order of ordered to-many relationships whose members or order changed.
    package var orderChanges: [OrderChange] = []
    package var conflictPolicy: ConflictPolicy = .fail
    /// Who saves, for persistent history.
    package var historyAuthor = HistoryAuthor()

    package init() {}

    package var isEmpty: Bool { inserts.isEmpty && updates.isEmpty && deletes.isEmpty && linkChanges.isEmpty }
}

/// What a save produced: permanent IDs for inserted objects and the rows as now stored.
package struct StoreSaveResult: Sendable {
    /// The stored rows of the inserted objects, in the order of the request's inserts; their IDs are the permanent
    /// ones the store gave them.
    package var insertedRows: [RowSnapshot]
    /// The stored rows of the updated objects after the save.
    package var updatedRows: [NSManagedObjectID: RowSnapshot]

    package init(insertedRows: [RowSnapshot], updatedRows: [NSManagedObjectID: RowSnapshot]) {
        self.insertedRows = insertedRows
        self.updatedRows = updatedRows
    }
}

/// A place objects are persisted: the SQLite store, or the same engine in memory.
///
/// For example:
/// ```swift
/// let store = container.persistentStoreCoordinator.persistentStores.first
/// print(store?.url?.path ?? "in memory", store?.type ?? "")
/// ```
/// This is the store's public face; what contexts ask of a store (fetching rows, saving) is the package's own
/// `StoreEngine`, not public API.
public protocol PersistentStore: AnyObject, Sendable {
    /// A unique identifier of the store, kept in the store itself; it appears in object ID URIs.
    var identifier: String { get }
    /// The store's type (`NSSQLiteStoreType`, `NSInMemoryStoreType`).
    var type: String { get }
    /// The file the store lives in, or `nil` in memory.
    var url: URL? { get }
    /// The model the store was opened with.
    var model: NSManagedObjectModel { get }
    /// The model configuration whose entities the store holds (`PF_DEFAULT_CONFIGURATION_NAME`: every entity).
    var configurationName: String { get }
    /// A number that changes whenever the store's contents change (for caches).
    var changeToken: Int64 { get throws }
    /// Closes the store; further use throws.
    func close() throws
}

/// What contexts ask of a store.
///
/// Implementations are thread-safe: contexts on different queues call them
/// concurrently.
package protocol StoreEngine: PersistentStore {
    /// Runs a fetch.
    func execute(_ request: StoreFetchRequest) throws -> StoreFetchResult
    /// Runs a fetch and hands each result's entity number (`NSEntityDescription.entityID`, checked against the model)
    /// and primary key, with the values of `keyPaths` (attributes or to-one key paths), to `body` in result order as
    /// the rows are read, without reading whole rows or making object IDs. The values are valid only during the call:
    /// copy what you keep. The request's `resultKind` is ignored.
    func forEachResultKey(
        _ request: StoreFetchRequest, values keyPaths: [String],
        _ body: (_ entityID: Int, _ primaryKey: Int64, _ values: ResultKeyValues) throws -> Void) throws
    /// The stored rows of the given objects; missing rows are absent from the result.
    func rows(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID: RowSnapshot]
    /// `rows(for:)` by primary key, for objects of one table (a batched fetch's objects): a reader that keys its rows
    /// so is spared building and walking a dictionary by ID.
    func rowsByPrimaryKey(for objectIDs: [NSManagedObjectID]) throws -> [Int64: RowSnapshot]
    /// The destinations of a to-many relationship of a stored object.
    func relatedObjectIDs(of objectID: NSManagedObjectID, relationship: NSRelationshipDescription) throws -> [NSManagedObjectID]
    /// The destinations of a to-many relationship of each of several stored objects (for prefetching): each source's
    /// in the relationship's order; a source with none, or not stored, is absent.
    func relatedObjectIDs(ofEach objectIDs: [NSManagedObjectID], relationship: NSRelationshipDescription) throws -> [NSManagedObjectID:
        [NSManagedObjectID]]
    /// Writes a save in one transaction: all of it or none of it.
    func save(_ request: StoreSaveRequest) throws -> StoreSaveResult
    /// Permanent IDs for the objects of these temporary IDs, reserved so that no save gives them to other rows (IDs
    /// that are already permanent come back as they are).
    func reservePermanentIDs(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID]
    /// The identifier of the store that holds the objects of `entity` (object IDs of its rows carry it): this store's,
    /// unless it stands for several.
    func storeIdentifier(for entity: NSEntityDescription) -> String
    /// Whether object IDs carrying `storeIdentifier` are this store's (or those of one of the stores it stands for).
    func holdsObjects(ofStore storeIdentifier: String) -> Bool
}

extension StoreEngine {
    /// `rows(for:)`, keyed again (stores that read rows themselves key them as they read).
    package func rowsByPrimaryKey(for objectIDs: [NSManagedObjectID]) throws -> [Int64: RowSnapshot] {
        let rows = try rows(for: objectIDs)
        var byKey: [Int64: RowSnapshot] = [:]
        byKey.reserveCapacity(rows.count)
        for (id, row) in rows { byKey[id.primaryKey] = row }
        return byKey
    }

    /// One read per source (stores that read several sources in one statement say so).
    package func relatedObjectIDs(ofEach objectIDs: [NSManagedObjectID], relationship: NSRelationshipDescription) throws
        -> [NSManagedObjectID: [NSManagedObjectID]]
    {
        var found: [NSManagedObjectID: [NSManagedObjectID]] = [:]
        for objectID in objectIDs where !objectID.isTemporaryID {
            let destinations = try relatedObjectIDs(of: objectID, relationship: relationship)
            if !destinations.isEmpty { found[objectID] = destinations }
        }
        return found
    }

    package func storeIdentifier(for entity: NSEntityDescription) -> String { identifier }
    package func holdsObjects(ofStore storeIdentifier: String) -> Bool { storeIdentifier == identifier }
}

extension PersistentStore {
    /// The default configuration (every entity of the model), for stores that do not say otherwise.
    public var configurationName: String { defaultConfigurationName }
}

/// The name Core Data gives the configuration of a store added without one: every entity of the model.
package let defaultConfigurationName = "PF_DEFAULT_CONFIGURATION_NAME"

/// Core Data's store type names.
public let NSSQLiteStoreType = "SQLite"
/// The type of a store that lives in memory only.
public let NSInMemoryStoreType = "InMemory"
