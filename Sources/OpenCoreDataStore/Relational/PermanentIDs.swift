import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Step 1 of a save: the permanent IDs of the rows it inserts (after each table's current maximum primary key, and in
/// Core Data's layout after the maximum `Z_PRIMARYKEY` records for the table's root entity, which it then advances), and
/// the temporary → permanent mapping that relationships between new objects need (built on first need).
final class PermanentIDs {
    let permanent: [NSManagedObjectID]
    private let inserts: [StoreSaveRequest.Insert]  // shares the request's storage: no copy
    private var byTemporary: [NSManagedObjectID: NSManagedObjectID]?

    init(for inserts: [StoreSaveRequest.Insert], core: RelationalCore, on connection: some RelationalConnection) throws {
        var keys = try KeyAllocation(count: inserts.count, id: { inserts[$0].objectID }, core: core, on: connection)
        var permanent: [NSManagedObjectID] = []
        permanent.reserveCapacity(inserts.count)
        for index in inserts.indices {  // by index: `for insert in` copies each insert (two reference counts)
            // An object given a permanent ID before its save (`obtainPermanentIDs(for:)`) is written under it: the
            // store reserved its key then (after `Z_MAX`, which it advanced), so new keys never meet it.
            let id = inserts[index].objectID
            permanent.append(id.isTemporaryID ? keys.take(for: id.entity, store: core.identifier) : id)
        }
        try keys.record(core: core, on: connection)
        self.permanent = permanent
        self.inserts = inserts
    }

    /// The ID a row is written under: a stored object's own, a new object's permanent one.
    ///
    /// - Throws: `CoreDataError(.managedObjectReferentialIntegrity)` for a temporary ID of no object being inserted.
    func resolve(_ id: NSManagedObjectID) throws -> NSManagedObjectID {
        if !id.isTemporaryID { return id }
        if byTemporary == nil { byTemporary = Dictionary(uniqueKeysWithValues: zip(inserts.lazy.map(\.objectID), permanent)) }
        guard let p = byTemporary![id] else {
            throw CoreDataError(
                .managedObjectReferentialIntegrity,
                "An object being saved points to \(id), which is neither stored nor being inserted (was it deleted or made in another context?)."
            )
        }
        return p
    }
}

/// New primary keys for the rows of some entities, after each table's largest key and, in Core Data's layout, the
/// `Z_MAX` that `Z_PRIMARYKEY` records for its root entity (keys handed out before their rows were written), which
/// `record` then advances.
///
/// Tables are visited in order of their root entity's number, whatever order the objects come in: on a server, reading
/// `Z_MAX` locks its row until the transaction ends, and two saves that locked the same rows in different orders
/// would wait for each other.
struct KeyAllocation {
    /// The root entities whose keys were read, in that order, and the next key of each (same positions).
    private let roots: [NSEntityDescription]
    private var next: [Int64]
    /// The position in `roots` by root entity.
    private let positions: [ObjectIdentifier: Int]
    /// The entity `take` was last asked for, and its root's position: objects come in runs of one entity.
    private var lastEntity: ObjectIdentifier?
    private var lastPosition = 0

    /// Reads the keys of the root entities of the temporary IDs among `count` objects (`id(i)` gives the `i`th).
    init(count: Int, id: (Int) -> NSManagedObjectID, core: RelationalCore, on connection: some RelationalConnection) throws {
        var byIdentity: [ObjectIdentifier: NSEntityDescription] = [:]
        var last: ObjectIdentifier?
        for index in 0..<count {
            let objectID = id(index)
            guard objectID.isTemporaryID else { continue }
            let entity = objectID.entity
            guard ObjectIdentifier(entity) != last else { continue }
            last = ObjectIdentifier(entity)
            byIdentity[entity._rootEntityIdentity] = entity.rootEntity
        }
        roots = byIdentity.values.sorted { $0.entityID < $1.entityID }
        next = try roots.map { try core.largestKey(of: $0, on: connection) + 1 }
        positions = Dictionary(uniqueKeysWithValues: roots.enumerated().map { (ObjectIdentifier($1), $0) })
    }

    /// A new permanent ID for an object of `entity`.
    mutating func take(for entity: NSEntityDescription, store: String) -> NSManagedObjectID {
        if ObjectIdentifier(entity) != lastEntity {
            lastEntity = ObjectIdentifier(entity)
            lastPosition = positions[entity._rootEntityIdentity]!
        }
        let key = next[lastPosition]
        next[lastPosition] = key + 1
        return NSManagedObjectID(entity: entity, storeIdentifier: store, primaryKey: key)
    }

    /// Records the keys taken as each root entity's largest (Core Data's layout), in the order they were read.
    func record(core: RelationalCore, on connection: some RelationalConnection) throws {
        for (root, next) in zip(roots, next) { try core.recordLargestKey(next - 1, of: root, on: connection) }
    }
}

extension RelationalCore {
    /// The largest primary key of `entity`'s table: its rows' largest, or in Core Data's layout the larger of that and
    /// the `Z_MAX` that `Z_PRIMARYKEY` records for the root entity, read first and locked until the transaction ends
    /// where the dialect locks rows (so that two writers on a server never take the same keys).
    func largestKey(of entity: NSEntityDescription, on connection: some RelationalConnection) throws -> Int64 {
        var largest: Int64 = 0
        if schema.isAppleLayout {
            try connection.forEachRow(
                sql: dialect.finalize("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?" + dialect.lockingRead),
                arguments: [.integer(Int64(entity.rootEntity.entityID))]
            ) { row in largest = row.optionalInteger(0) ?? 0 }
        }
        try connection.forEachRow(sql: "SELECT MAX(Z_PK) FROM \(dialect.quote(schema.tableName(for: entity)))", arguments: []) { row in
            largest = max(largest, row.optionalInteger(0) ?? 0)
        }
        return largest
    }

    /// Records `key` as the largest handed out for `entity`'s root (Core Data's layout; the former layout records none).
    func recordLargestKey(_ key: Int64, of entity: NSEntityDescription, on connection: some RelationalConnection) throws {
        guard schema.isAppleLayout else { return }
        try connection.run(
            sql: dialect.finalize("UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ?"),
            arguments: [.integer(key), .integer(Int64(entity.rootEntity.entityID))])
    }

    /// Permanent IDs for objects not yet saved (`obtainPermanentIDs(for:)`): keys after each table's largest and its
    /// recorded `Z_MAX`, which is advanced in the same transaction, so no later save gives them to another row.
    ///
    /// - Throws: `CoreDataError(.persistentStoreOperation)` for a store of the former layout (it records no maximum
    ///   to reserve keys in; migrate it), or a store error.
    package func reservePermanentIDs(for objectIDs: [NSManagedObjectID], on connection: some RelationalConnection) throws
        -> [NSManagedObjectID]
    {
        guard schema.isAppleLayout else {
            throw CoreDataError(
                .persistentStoreOperation,
                "Permanent IDs cannot be reserved in a store of OpenCoreData's former layout (it records no key maximum); migrate the store first."
            )
        }
        var keys = try KeyAllocation(count: objectIDs.count, id: { objectIDs[$0] }, core: self, on: connection)
        let reserved = objectIDs.map { $0.isTemporaryID ? keys.take(for: $0.entity, store: identifier) : $0 }
        try keys.record(core: self, on: connection)
        return reserved
    }
}
