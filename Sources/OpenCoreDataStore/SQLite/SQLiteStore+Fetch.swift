import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

// Fetching: the relational core's reads, on a reader of the pool (or the transaction `performAsOneTransaction` holds),
// counting the rows they decode.
extension SQLiteStore {
    package func execute(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        let result = try read { db in try core.execute(request, on: db) }
        if case .rows(let rows) = result { countRowsRead(rows.count) }
        return result
    }

    package func forEachResultKey(
        _ request: StoreFetchRequest, values keyPaths: [String],
        _ body: (_ entityID: Int, _ primaryKey: Int64, _ values: ResultKeyValues) throws -> Void
    ) throws {
        try read { db in try core.forEachResultKey(request, values: keyPaths, on: db, body) }
    }

    package func rows(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID: RowSnapshot] {
        var found: [NSManagedObjectID: RowSnapshot] = [:]
        found.reserveCapacity(objectIDs.count)
        try forEachStoredRow(of: objectIDs) { found[$0.objectID] = $0 }
        return found
    }

    package func rowsByPrimaryKey(for objectIDs: [NSManagedObjectID]) throws -> [Int64: RowSnapshot] {
        var found: [Int64: RowSnapshot] = [:]
        found.reserveCapacity(objectIDs.count)
        try forEachStoredRow(of: objectIDs) { found[$0.objectID.primaryKey] = $0 }
        return found
    }

    /// Reads the stored rows of the given objects, counting them (`rowsRead`).
    private func forEachStoredRow(of objectIDs: [NSManagedObjectID], _ body: (RowSnapshot) -> Void) throws {
        // Up to 500 keys of one table are one statement (the usual read: a batch, a fault).
        let oneStatement = objectIDs.count <= 500 && objectIDs.allSatisfy { $0.entity === objectIDs[0].entity }
        var count = 0
        try read(oneStatement: oneStatement) { db in
            try core.forEachRow(of: objectIDs, on: db) { row in
                count += 1
                body(row)
            }
        }
        countRowsRead(count)
    }

    /// The stored rows of the given objects, read with `db` (inside a save's or a batch request's transaction).
    func rows(for objectIDs: [NSManagedObjectID], in db: Database) throws -> [NSManagedObjectID: RowSnapshot] {
        try core.rows(for: objectIDs, on: db)
    }

    package func relatedObjectIDs(of objectID: NSManagedObjectID, relationship: NSRelationshipDescription) throws -> [NSManagedObjectID] {
        try read(oneStatement: true) { db in try core.relatedObjectIDs(of: objectID, relationship: relationship, on: db) }
    }

    package func relatedObjectIDs(ofEach objectIDs: [NSManagedObjectID], relationship: NSRelationshipDescription) throws
        -> [NSManagedObjectID: [NSManagedObjectID]]
    {
        try read(oneStatement: objectIDs.count <= 500) { db in
            try core.relatedObjectIDs(ofEach: objectIDs, relationship: relationship, on: db)
        }
    }

    func objectID(pk: Int64, entityID: Int) throws -> NSManagedObjectID { try core.objectID(pk: pk, entityID: entityID) }
}
