import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

extension SQLiteStore {
    /// Writes one save in a single transaction; on any error nothing is written.
    ///
    /// Primary keys for inserted rows are allocated inside the transaction (after the table's current maximum), so
    /// relationships between new objects are written directly. Updates and deletes check the row's `Z_OPT` version
    /// under the `.fail` policy and throw a merge conflict naming the object if someone else changed it.
    package func save(_ request: StoreSaveRequest) throws -> StoreSaveResult {
        let held = try checkOpen()
        do {
            if let held {
                // Inside `performAsOneTransaction`: a savepoint, so that a failed save leaves the earlier ones.
                var result: StoreSaveResult?
                var number: Int64?
                try held.inSavepoint {
                    result = try self.write(request, in: held, history: &number)
                    return .commit
                }
                // Noted as committed when the whole transaction commits (`performAsOneTransaction`).
                if let number { closedLock.withLock { heldHistoryNumbers.append(number) } }
                return result!
            }
            var number: Int64?
            let result = try writer.write { db in try self.write(request, in: db, history: &number) }
            noteCommittedHistory(number)
            return result
        } catch let error as CoreDataError {
            throw error
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw (try? constraintError(error, request)) ?? mapError(error, doing: "save to")
        } catch {
            throw mapError(error, doing: "save to")
        }
    }

    /// Writes a save inside the caller's transaction — its rows (`RelationalCore.write`), its history, the change
    /// token — and hands back the number of the history transaction it recorded.
    private func write(_ request: StoreSaveRequest, in db: Database, history number: inout Int64?) throws -> StoreSaveResult {
        var written = try core.write(request, on: SQLiteWriteConnection(db))
        number = try flushHistory(db, author: request.historyAuthor)
        if schema.isAppleLayout {
            try AppleStoreMetadata.advanceChangeToken(db)
        } else {
            try db.execute(sql: "UPDATE Z_METADATA SET Z_VALUE = CAST(Z_VALUE AS INTEGER) + 1 WHERE Z_KEY = 'changeToken'")
        }
        // The updated rows as now stored: those not built from what was written, read back.
        if !written.readBack.isEmpty { written.updatedRows.merge(try rows(for: written.readBack, in: db)) { _, read in read } }
        return StoreSaveResult(insertedRows: written.insertedRows, updatedRows: written.updatedRows)
    }

    /// Permanent IDs for objects not yet saved (`obtainPermanentIDs(for:)`), reserved in the store's key maximums.
    package func reservePermanentIDs(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID] {
        let held = try checkOpen()
        do {
            if let held { return try core.reservePermanentIDs(for: objectIDs, on: held) }
            return try writer.write { db in try core.reservePermanentIDs(for: objectIDs, on: db) }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "reserve permanent IDs in")
        }
    }
}

extension SQLiteStore {
    /// The error for a save SQLite refused with a unique index's constraint, from the columns SQLite names ("UNIQUE
    /// constraint failed: ZCAR.ZMAKER, ZCAR.ZMODEL"); nil when they are no uniqueness constraint's.
    func constraintError(_ error: DatabaseError, _ request: StoreSaveRequest) throws -> CoreDataError? {
        guard let list = error.message?.components(separatedBy: "failed: ").last else { return nil }
        let qualified = list.components(separatedBy: ", ").map { $0.components(separatedBy: ".") }
        guard let table = qualified.first?.first, qualified.allSatisfy({ $0.count == 2 }),
            let (entity, constraint) = schema.uniquenessConstraint(table: table, columns: qualified.map { $0[1] })
        else { return nil }
        return try read { db in try core.constraintError(entity: entity, constraint: constraint, request, on: db) }
    }
}
