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
        let found = try read(oneStatement: isOneStatement(objectIDs)) { db in try core.rows(for: objectIDs, on: db) }
        countRowsRead(found.count)
        return found
    }

    package func rowsByPrimaryKey(for objectIDs: [NSManagedObjectID]) throws -> [Int64: RowSnapshot] {
        let found = try read(oneStatement: isOneStatement(objectIDs)) { db in try core.rowsByPrimaryKey(for: objectIDs, on: db) }
        countRowsRead(found.count)
        return found
    }

    /// Whether the rows of `objectIDs` are read by one statement: up to 500 keys of one table (the usual read: a
    /// batch, a fault).
    private func isOneStatement(_ objectIDs: [NSManagedObjectID]) -> Bool {
        objectIDs.count <= 500 && objectIDs.allSatisfy { $0.entity === objectIDs[0].entity }
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
