import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

// Persistent history on SQLite: the relational core's reads and deletes on the store's connections, the triggers
// installed on its writer connection, and the transactions told apart from other writers' for remote changes.
extension SQLiteStore {
    /// The number of the newest history transaction (0 when none); nil when the store keeps no history.
    package func lastHistoryTransaction() throws -> Int64? {
        try read { db in try core.lastHistoryTransaction(on: db) }
    }

    /// The transactions after `bound`, oldest first, with their changes when `withChanges`.
    ///
    /// A change of an entity the model no longer has (a store migrated since) is left out.
    ///
    /// - Throws: `CoreDataError(.persistentStoreOperation)` when the store keeps no history or cannot be read.
    package func historyTransactions(after bound: StoreHistoryBound, withChanges: Bool) throws -> [StoreHistoryTransaction] {
        guard let transactions = try read({ db in try core.historyTransactions(after: bound, withChanges: withChanges, on: db) }) else {
            throw noHistory()
        }
        return transactions
    }

    /// Deletes the transactions up to `bound` (a transaction and those before it, or those before a moment) and their
    /// changes; returns how many transactions went.
    package func deleteHistory(through bound: StoreHistoryBound) throws -> Int {
        let held = try checkOpen()
        func run(_ db: Database) throws -> Int {
            guard let count = try core.deleteHistory(through: bound, on: db) else { throw noHistory() }
            return count
        }
        do {
            if let held { return try run(held) }
            return try writer.write(run)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "delete the history of")
        }
    }

    /// Whether the store has persistent history tables (false when it cannot be read).
    package var keepsHistory: Bool {
        (try? read { db in try PersistentHistory.exists(db) }) ?? false
    }

    private func noHistory() -> CoreDataError {
        CoreDataError(
            .persistentStoreOperation,
            "The store \(url?.path ?? "in memory") keeps no persistent history; add it with NSPersistentHistoryTrackingKey set to true.")
    }
    /// Records the write's history (when the store keeps it); returns the transaction's number, noted as this
    /// store's own while a remote-change watcher needs to tell them apart (`noteCommittedHistory` after the commit).
    @discardableResult
    func flushHistory(_ db: Database, author: HistoryAuthor) throws -> Int64? {
        guard let number = try history?.flush(db, author: author) else { return nil }
        // Noted before the commit: a transaction rolled back stays noted, which can only make a remote-change
        // notification ask for a spare re-read, never hide another writer's commit.
        closedLock.withLock { if historyCursor != nil { _ = _ownHistoryTransactions.insert(number) } }
        return number
    }

    /// Notes the commit of own transaction `number`.
    ///
    /// When it follows the cursor directly (no other writer's transaction came between), the cursor moves past it, so
    /// that own transactions never pile up while no other writer commits. Otherwise it waits, committed, for the
    /// cursor to reach it: a remote-change notification moving the cursor up to the other writer's transaction before
    /// it then moves it past this one too.
    func noteCommittedHistory(_ number: Int64?) {
        guard let number else { return }
        closedLock.withLock {
            guard historyCursor != nil, _ownHistoryTransactions.contains(number) else { return }
            _ownCommittedHistory.insert(number)
            passOwnCommittedHistory()
        }
    }

    /// Moves the cursor past the committed own transactions that follow it directly (under `closedLock`).
    ///
    /// Only committed ones: a transaction rolled back leaves its number free for the next writer's, which the cursor
    /// must not have passed.
    private func passOwnCommittedHistory() {
        while let cursor = historyCursor, _ownCommittedHistory.remove(cursor + 1) != nil {
            historyCursor = cursor + 1
            _ownHistoryTransactions.remove(cursor + 1)
        }
    }

    /// How many own transactions wait to be told apart from other writers' by the next remote-change notification.
    package var pendingOwnHistoryTransactions: Int { closedLock.withLock { _ownHistoryTransactions.count } }

    /// Starts following other writers' history transactions from the newest one now (for remote-change
    /// notifications); nil when the store keeps no history.
    package func startFollowingHistory() throws -> Int64? {
        guard let last = try lastHistoryTransaction() else { return nil }
        closedLock.withLock { historyCursor = last }
        return last
    }

    /// Other writers' transactions since the last call (or `startFollowingHistory`), up to `bound` when given, with
    /// their changes, and the newest transaction number; nil when the store is not followed.
    package func takeOthersHistory(through bound: Int64?) throws -> (transactions: [StoreHistoryTransaction], last: Int64)? {
        guard let cursor = closedLock.withLock({ historyCursor }) else { return nil }
        if let bound, bound <= cursor { return ([], cursor) }
        var transactions = try historyTransactions(after: .transaction(cursor), withChanges: true)
        if let bound { transactions.removeAll { $0.number > bound } }  // the next report's
        let last = transactions.last?.number ?? cursor
        return closedLock.withLock {
            let own = _ownHistoryTransactions.filter { $0 <= last }
            _ownHistoryTransactions.subtract(own)
            _ownCommittedHistory.subtract(own)
            historyCursor = max(historyCursor ?? last, last)
            // An own commit that came right after the other writer's, noted while the cursor was still before that
            // one, is passed now (else it would wait for another writer's next commit: none may come).
            passOwnCommittedHistory()
            return (transactions.filter { !own.contains($0.number) }, last)
        }
    }

    /// Creates the history tables when asked (and the tombstone columns the model needs), and installs the triggers
    /// on the writer connection when the store keeps history.
    static func startHistory(
        writer: any DatabaseWriter, schema: RelationalSchema, model: NSManagedObjectModel, requested: Bool, readOnly: Bool, path: String?
    ) throws -> PersistentHistory? {
        let place = path ?? "the in-memory store"
        do {
            // Read-write, on the writer: a reader connection opened here would outlive the writer's checkpoint on
            // close and change when the file is written back.
            guard !readOnly, try requested || writer.writeWithoutTransaction({ try PersistentHistory.exists($0) }) else { return nil }
            guard schema.isAppleLayout else {
                throw CoreDataError(
                    .persistentStoreOpen,
                    "\(place) is in this project's former layout, which cannot keep persistent history; migrate it to a new store first.")
            }
            return try writer.writeWithoutTransaction { db in
                try db.inTransaction {
                    try PersistentHistory.create(db, model: model)
                    return .commit
                }
                let history = try PersistentHistory(db)
                try db.execute(sql: history.pendingTableStatement(SQLiteDialect()))
                for statement in history.triggerStatements(schema: schema, model: model, dialect: SQLiteDialect()) {
                    try db.execute(sql: statement)
                }
                return history
            }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw openError(error, path: path)
        }
    }
}
