import Foundation
import OpenCoreDataModel

// Persistent history on PostgreSQL: the relational core's reads and deletes, and other writers' transactions handed
// over for remote changes.
//
// A history transaction's number is a value of the commit counter (`ocd_history_key()`), taken under the lock on the
// counter's row that its database transaction holds until it commits. So numbers are given in commit order: once a
// reader sees a number committed, every smaller number is committed or rolled back (and a rolled-back number is given
// again, to the next writer, so none is skipped); and every value of the counter is one history transaction or one
// commit that recorded none (another program's SQL), never two. Reading "the transactions after my cursor, up to a
// value seen committed" therefore can neither skip one nor repeat one.
extension PostgreSQLStore: HistoryStore {
    /// Whether the store has persistent history tables (false when it cannot be read).
    package var keepsHistory: Bool {
        (try? withConnection(doing: "read") { try PersistentHistory.exists($0) }) ?? false
    }

    package func lastHistoryTransaction() throws -> Int64? {
        try withConnection(doing: "read the history of") { try core.lastHistoryTransaction(on: $0) }
    }

    /// The transactions after `bound`, oldest first, with their changes when `withChanges`.
    ///
    /// - Throws: `CoreDataError(.persistentStoreOperation)` when the store keeps no history or cannot be read.
    package func historyTransactions(after bound: StoreHistoryBound, withChanges: Bool) throws -> [StoreHistoryTransaction] {
        let transactions = try withConnection(doing: "read the history of") { connection in
            try connection.inTransaction {
                // One snapshot for the transactions and their changes.
                try connection.run(sql: "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return try core.historyTransactions(after: bound, withChanges: withChanges, on: connection)
            }
        }
        guard let transactions else { throw noHistory() }
        return transactions
    }

    /// Deletes the transactions up to `bound` and their changes; returns how many transactions went.
    package func deleteHistory(through bound: StoreHistoryBound) throws -> Int {
        try checkWritable()
        let count = try withConnection(doing: "delete the history of") { connection in
            heldConnection() === connection
                ? try core.deleteHistory(through: bound, on: connection)
                : try connection.inTransaction { try core.deleteHistory(through: bound, on: connection) }
        }
        guard let count else { throw noHistory() }
        return count
    }

    private func noHistory() -> CoreDataError {
        CoreDataError(
            .persistentStoreOperation,
            "The store at \(location) keeps no persistent history; add it with NSPersistentHistoryTrackingKey set to true.")
    }

    // MARK: Following other writers

    /// Starts following other writers' history transactions from the commit counter's value now; nil when the store
    /// has no history tables.
    package func startFollowingHistory() throws -> Int64? {
        // A read-only store records nothing but reads the history others record.
        guard try history != nil || lastHistoryTransaction() != nil else { return nil }
        let now = try commitCount()
        heldLock.withLock { historyCursor = now }
        return now
    }

    /// How many own transactions wait to be told apart from other writers' by the next remote-change notification.
    package var pendingOwnHistoryTransactions: Int { heldLock.withLock { ownHistory.count } }

    /// Where the store started following history (nil when it does not).
    func followedFrom() -> Int64? { heldLock.withLock { historyCursor } }

    /// Notes that a watcher saw the counter at `value`, committed: transactions up to it can be handed over.
    ///
    /// When every commit since the cursor was this store's own, the cursor moves past them (no other writer's
    /// transaction lies between, so none is skipped), so that own transactions do not pile up while nobody else writes.
    func noteWatched(through value: Int64, othersCame: Bool) {
        heldLock.withLock {
            watchedThrough = max(watchedThrough ?? value, value)
            guard !othersCame, let cursor = historyCursor, cursor < value,
                (cursor + 1...value).allSatisfy({ ownHistory.contains($0) })
            else { return }
            historyCursor = value
            ownHistory = ownHistory.filter { $0 > value }
        }
    }

    /// Other writers' transactions since the last call (or `startFollowingHistory`), up to the newest counter value a
    /// watcher saw committed, and that value; nil when the store is not followed. (Transaction numbers are counter
    /// values here, so the watcher's value bounds them already: `bound` is not needed.)
    package func takeOthersHistory(through bound: Int64?) throws -> (transactions: [StoreHistoryTransaction], last: Int64)? {
        guard let cursor = heldLock.withLock({ historyCursor }) else { return nil }
        let limit = try heldLock.withLock({ watchedThrough }) ?? commitCount()
        guard limit > cursor else { return ([], cursor) }
        let transactions = try historyTransactions(after: .transaction(cursor), withChanges: true).filter { $0.number <= limit }
        return heldLock.withLock {
            let own = ownHistory.filter { $0 <= limit }
            ownHistory.subtract(own)
            historyCursor = max(historyCursor ?? limit, limit)
            return (transactions.filter { !own.contains($0.number) }, limit)
        }
    }
}
