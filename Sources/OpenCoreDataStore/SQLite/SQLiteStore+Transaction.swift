import Foundation
import GRDB
import OpenCoreDataModel

extension SQLiteStore {
    /// Runs `body` inside one write transaction that the saves and reads `body` makes on this thread join: its saves
    /// commit together when `body` returns, and none of them reach the file when it throws.
    ///
    /// Each save inside is a savepoint: a save that fails leaves the earlier ones in the transaction, as a failed save
    /// leaves the store. Reads on the same thread see the saves made so far; other connections see none of them until
    /// the end, and other writers wait. After a failure, contexts that saved inside hold state the store no longer
    /// has: reset or discard them.
    ///
    /// `coredata import` uses it to save an arbitrarily long file in batches, with memory bounded by a batch, and still
    /// import all of it or nothing.
    ///
    /// ```swift
    /// try store.performAsOneTransaction {
    ///     for batch in batches { insert(batch, into: context); try context.save(); context.reset() }
    /// }
    /// ```
    ///
    /// - Throws: what `body` throws, unchanged; a `CoreDataError` when the transaction cannot begin or commit.
    package func performAsOneTransaction<T>(_ body: () throws -> T) throws -> T {
        let held = try checkOpen()
        precondition(held == nil, "performAsOneTransaction does not nest")
        var result: Result<T, any Error>?
        do {
            try writer.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    closedLock.withLock { heldTransaction = (db, pthread_self()) }
                    defer { closedLock.withLock { heldTransaction = nil } }
                    result = Result { try body() }
                    if case .failure = result { return .rollback }
                    return .commit
                }
            }
        } catch let error as CoreDataError {
            closedLock.withLock { heldHistoryNumbers = [] }
            throw error
        } catch {
            closedLock.withLock { heldHistoryNumbers = [] }
            if case .failure(let bodyError) = result { throw bodyError }
            throw mapError(error, doing: "save to")
        }
        let recorded = closedLock.withLock {
            defer { heldHistoryNumbers = [] }
            return heldHistoryNumbers
        }
        if case .success = result {
            for number in recorded.sorted() { noteCommittedHistory(number) }
        }
        return try result!.get()
    }
}

extension SQLiteStore {
    /// Runs `body` inside the transaction this thread already holds on the store (`performAsOneTransaction`), or in a
    /// new one: a coordinator saving to several stores nests one per store, so that a save fails in all or none.
    package func joiningTransaction<T>(_ body: () throws -> T) throws -> T {
        if try checkOpen() != nil { return try body() }
        return try performAsOneTransaction(body)
    }
}
