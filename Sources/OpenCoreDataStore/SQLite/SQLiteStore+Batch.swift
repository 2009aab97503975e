import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

/// What a batch delete removes: the rows a fetch matches, or given objects.
package enum StoreBatchTargets: Sendable {
    case matching(StoreFetchRequest)
    case objectIDs([NSManagedObjectID])
}

// Batch requests: rows written, changed and deleted in SQL, one transaction each, without objects (Core Data's
// NSBatchInsertRequest, NSBatchUpdateRequest, NSBatchDeleteRequest).
extension SQLiteStore {
    /// Inserts rows of `entity` in one transaction, the chunks `next` hands over (one value per property of the
    /// entity, as a save's inserts) until it returns nil; returns how many, and their IDs when `collectingIDs`.
    package func batchInsert(
        _ entity: NSEntityDescription, collectingIDs: Bool, author: HistoryAuthor = HistoryAuthor(),
        next: () throws -> [[SnapshotValue]]?
    ) throws -> (count: Int, ids: [NSManagedObjectID]) {
        try batchWrite(doing: "batch-insert into", author: author) { db in
            try core.batchInsert(entity, collectingIDs: collectingIDs, on: SQLiteWriteConnection(db), next: next)
        }
    }

    /// Sets attributes of every row a fetch matches (each row's version advances, so optimistic locking sees the
    /// change); returns their IDs when `collectingIDs`, and how many.
    package func batchUpdate(
        _ request: StoreFetchRequest, values: [(index: Int, value: AttributeValue)], collectingIDs: Bool,
        author: HistoryAuthor = HistoryAuthor()
    ) throws -> (count: Int, ids: [NSManagedObjectID]) {
        try batchWrite(doing: "batch-update", author: author) { db in
            try core.batchUpdate(request, values: values, collectingIDs: collectingIDs, on: SQLiteWriteConnection(db))
        }
    }

    /// Deletes rows and applies their relationships' delete rules as Core Data's batch delete does.
    ///
    /// A deny rule with destinations refuses the whole request (naming entity and relationship), cascade deletes the
    /// destinations too, and every foreign key or join row that pointed at a deleted row goes. Returns the IDs of every
    /// row deleted.
    package func batchDelete(_ targets: StoreBatchTargets, author: HistoryAuthor = HistoryAuthor()) throws -> [NSManagedObjectID] {
        try batchWrite(doing: "batch-delete from", author: author) { db in try core.batchDelete(targets, on: SQLiteWriteConnection(db)) }
    }

    /// Runs a batch operation in one write transaction (or in the one `performAsOneTransaction` holds) and advances
    /// the change token with it.
    private func batchWrite<T>(doing what: String, author: HistoryAuthor, _ body: (Database) throws -> T) throws -> T {
        let held = try checkOpen()
        var number: Int64?
        func run(_ db: Database) throws -> T {
            let result = try body(db)
            number = try flushHistory(db, author: author)
            if schema.isAppleLayout {
                try AppleStoreMetadata.advanceChangeToken(db)
            } else {
                try db.execute(sql: "UPDATE Z_METADATA SET Z_VALUE = CAST(Z_VALUE AS INTEGER) + 1 WHERE Z_KEY = 'changeToken'")
            }
            return result
        }
        do {
            if let held {
                var result: T?
                try held.inSavepoint {
                    result = try run(held)
                    return .commit
                }
                return result!
            }
            let result = try withoutActuallyEscaping(run) { escapable in try writer.write(escapable) }
            noteCommittedHistory(number)
            return result
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: what)
        }
    }
}
