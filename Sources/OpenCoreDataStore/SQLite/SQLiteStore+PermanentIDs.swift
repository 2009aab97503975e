import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Step 1 of a save: the permanent IDs of the rows it inserts (after each table's current maximum primary key, and in
/// Core Data's layout after the maximum `Z_PRIMARYKEY` records for the table's root entity, which it then advances), and
/// the temporary → permanent mapping that relationships between new objects need (built on first need).
final class PermanentIDs {
    let permanent: [NSManagedObjectID]
    private let inserts: [StoreSaveRequest.Insert]  // shares the request's storage: no copy
    private var byTemporary: [NSManagedObjectID: NSManagedObjectID]?

    init(
        for inserts: [StoreSaveRequest.Insert], tableName: (NSEntityDescription) -> String, store identifier: String,
        recordsMaximum: Bool, in db: Database
    ) throws {
        var nextPK: [ObjectIdentifier: Int64] = [:]  // by root entity (one table each)
        var rootNumbers: [ObjectIdentifier: Int] = [:]
        var permanent: [NSManagedObjectID] = []
        permanent.reserveCapacity(inserts.count)
        for index in inserts.indices {  // by index: `for insert in` copies each insert (two reference counts)
            // An object given a permanent ID before its save (`obtainPermanentIDs(for:)`) is written under it: the
            // store reserved its key then (after `Z_MAX`, which it advanced), so new keys never meet it.
            if !inserts[index].objectID.isTemporaryID {
                permanent.append(inserts[index].objectID)
                continue
            }
            let entity = inserts[index].objectID.entity
            let root = entity._rootEntityIdentity
            let pk: Int64
            if let next = nextPK[root] {
                pk = next
            } else {
                var maximum = try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(sqlQuote(tableName(entity)))") ?? 0
                if recordsMaximum {
                    let number = entity.rootEntity.entityID
                    rootNumbers[root] = number
                    let recorded = try Int64.fetchOne(db, sql: "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?", arguments: [number])
                    maximum = max(maximum, recorded ?? 0)
                }
                pk = maximum + 1
            }
            nextPK[root] = pk + 1
            permanent.append(NSManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: pk))
        }
        for (root, number) in rootNumbers {
            try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ?", arguments: [nextPK[root]! - 1, number])
        }
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

extension SQLiteStore {
    /// Permanent IDs for objects not yet saved (`obtainPermanentIDs(for:)`): keys after each table's largest and its
    /// recorded `Z_MAX`, which is advanced in the same transaction, so no later save gives them to another row.
    ///
    /// - Throws: `CoreDataError(.persistentStoreOperation)` for a store of the former layout (it records no maximum
    ///   to reserve keys in; migrate it), or a store error.
    package func reservePermanentIDs(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID] {
        guard schema.isAppleLayout else {
            throw CoreDataError(
                .persistentStoreOperation,
                "Permanent IDs cannot be reserved in a store of OpenCoreData's former layout (it records no key maximum); migrate the store first."
            )
        }
        let held = try checkOpen()
        let reserve = { (db: Database) throws -> [NSManagedObjectID] in
            var next: [ObjectIdentifier: Int64] = [:]
            var numbers: [ObjectIdentifier: Int] = [:]
            var reserved: [NSManagedObjectID] = []
            for id in objectIDs {
                guard id.isTemporaryID else {
                    reserved.append(id)
                    continue
                }
                let root = id.entity._rootEntityIdentity
                if next[root] == nil {
                    let number = id.entity.rootEntity.entityID
                    let table = sqlQuote(self.schema.tableName(for: id.entity))
                    let stored = try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(table)") ?? 0
                    let recorded = try Int64.fetchOne(db, sql: "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?", arguments: [number]) ?? 0
                    next[root] = max(stored, recorded) + 1
                    numbers[root] = number
                }
                reserved.append(NSManagedObjectID(entity: id.entity, storeIdentifier: self.identifier, primaryKey: next[root]!))
                next[root]! += 1
            }
            for (root, number) in numbers {
                try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ?", arguments: [next[root]! - 1, number])
            }
            return reserved
        }
        do {
            if let held { return try reserve(held) }
            return try writer.write(reserve)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "reserve permanent IDs in")
        }
    }
}
