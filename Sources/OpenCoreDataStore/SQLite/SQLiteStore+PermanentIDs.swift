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
