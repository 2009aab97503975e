import Foundation
import OpenCoreDataModel

// Writing transactions on PostgreSQL: the session's preparation, the settings each writing transaction makes, its
// history, the commit counter's values it takes (this store's own, told apart from other writers' by the watcher),
// retries after serialization failures, and the one transaction `performAsOneTransaction` holds open.
extension PostgreSQLStore {
    /// The commit counter's values this transaction set, if it wrote to the store's tables: from the one its first
    /// write took to the one its last history transaction took (its lock on the counter's row makes them its own).
    func ownCommitRange(_ connection: PostgreSQLConnection) throws -> ClosedRange<Int64>? {
        var range: ClosedRange<Int64>?
        try connection.forEachRow(
            sql: "SELECT NULLIF(current_setting('ocd.counted', true), '')::bigint, n FROM z_ocd_commits WHERE id = 1", arguments: []
        ) { row in
            if let first = row.optionalInteger(0) { range = first...max(first, row.integer(1)) }
        }
        return range
    }

    /// The own commit counts up to `value`, removed from those kept (the watcher has passed them).
    func takeOwnCommits(through value: Int64) -> Set<Int64> {
        heldLock.withLock {
            let passed = ownCommits.filter { $0 <= value }
            ownCommits.subtract(passed)
            return passed
        }
    }

    /// Notes a transaction's counter values as this store's own, before its `COMMIT` is sent: a watcher that reads
    /// them once committed — possibly before the commit's answer reaches this thread — never takes them for another
    /// writer's. (`forgetOwnCommits` when the commit fails: the values then go to the next writer.)
    func noteOwnCommits(_ range: ClosedRange<Int64>?) {
        guard let range else { return }
        heldLock.withLock {
            ownCommits.formUnion(range)
            if historyCursor != nil { ownHistory.formUnion(range) }
        }
    }

    func forgetOwnCommits(_ range: ClosedRange<Int64>?) {
        guard let range else { return }
        heldLock.withLock {
            ownCommits.subtract(range)
            ownHistory.subtract(range)
        }
    }

    /// Makes this session ready for a writing transaction: persistent history's temporary table, made outside any
    /// transaction (a rollback would take it back).
    func prepareSession(_ connection: PostgreSQLConnection) throws {
        guard let history, !connection.hasHistoryTable else { return }
        try connection.run(sql: history.pendingTableStatement(connection.dialect))
        connection.hasHistoryTable = true
    }

    /// The settings a writing transaction of this store makes first: its origin (`NOTIFY` payloads) and, when the store
    /// keeps history, `ocd.history` (the history triggers record only then).
    func beginWriting(_ connection: PostgreSQLConnection) throws {
        try connection.run(
            sql: "SELECT set_config('ocd.origin', $1, true), set_config('ocd.history', $2, true)",
            arguments: [.text(origin), .text(history == nil ? "off" : "on")])
    }

    /// Records the write's history (when the store keeps it) as the transaction numbered by the commit counter.
    func flushHistory(_ connection: PostgreSQLConnection, author: HistoryAuthor) throws {
        try history?.flush(connection, author: author) { connection in
            guard let key = try connection.integer("SELECT ocd_history_key()") else {
                throw CoreDataError(.persistentStoreOperation, "The commit counter of \(self.location) is missing; reopen the store.")
            }
            return key
        }
    }

    /// The connection whose transaction this thread holds, if any.
    func heldConnection() -> PostgreSQLConnection? {
        heldLock.withLock {
            guard let held, pthread_equal(held.thread, pthread_self()) != 0 else { return nil }
            return held.connection
        }
    }

    /// Runs `body` in a transaction of `connection`, then records its history: a savepoint inside the transaction this
    /// thread holds (a failed save then leaves the earlier ones), else a transaction of its own.
    func writing<T>(on connection: PostgreSQLConnection, author: HistoryAuthor, _ body: () throws -> T) throws -> T {
        guard heldConnection() === connection else {
            try prepareSession(connection)
            // A transaction the server gave up for a serialization failure or a deadlock (SQLSTATE 40001, 40P01:
            // other writers got there first; CockroachDB's SERIALIZABLE asks clients to retry them) left nothing:
            // it runs again, from its first statement, after a growing pause.
            var attempt = 0
            while true {
                var own: ClosedRange<Int64>?
                do {
                    return try connection.inTransaction {
                        try beginWriting(connection)
                        let result = try body()
                        try flushHistory(connection, author: author)
                        own = try ownCommitRange(connection)
                        noteOwnCommits(own)
                        return result
                    }
                } catch let error as PostgreSQLError where error.isRetryable && !connection.isClosed && attempt < Self.retries {
                    forgetOwnCommits(own)
                    attempt += 1
                    heldLock.withLock { retriedTransactions += 1 }
                    Thread.sleep(forTimeInterval: Self.pause(beforeRetry: attempt))
                } catch {
                    forgetOwnCommits(own)
                    throw error
                }
            }
        }
        try connection.run(sql: "SAVEPOINT ocd_save")
        do {
            let result = try body()
            try flushHistory(connection, author: author)
            try connection.run(sql: "RELEASE SAVEPOINT ocd_save")
            return result
        } catch {
            if !connection.isClosed { _ = try? connection.run(sql: "ROLLBACK TO SAVEPOINT ocd_save") }
            throw error
        }
    }
}

extension PostgreSQLStore: TransactionalStore {
    /// Runs `body` inside one transaction that the saves, batch requests and reads `body` makes on this thread join:
    /// its saves commit together when `body` returns, and none of them reach the server when it throws.
    ///
    /// Each save inside is a savepoint: a save that fails leaves the earlier ones in the transaction. Reads on the same
    /// thread see the saves made so far; other connections see none of them until the end (and other writers wait for
    /// the change token's row). After a failure, contexts that saved inside hold state the store no longer has: reset
    /// or discard them.
    ///
    /// - Throws: what `body` throws, unchanged; a `CoreDataError` when the transaction cannot begin or commit.
    package func performAsOneTransaction<T>(_ body: () throws -> T) throws -> T {
        precondition(heldConnection() == nil, "performAsOneTransaction does not nest")
        try checkWritable()
        var result: Result<T, any Error>?
        do {
            try pool.withConnection { connection in
                try prepareSession(connection)
                try connection.run(sql: "BEGIN")
                try beginWriting(connection)
                heldLock.withLock { held = (connection, pthread_self()) }
                result = Result { try body() }
                heldLock.withLock { held = nil }
                if case .success = result {
                    let own = try ownCommitRange(connection)
                    noteOwnCommits(own)
                    do {
                        try connection.run(sql: "COMMIT")
                    } catch {
                        forgetOwnCommits(own)
                        throw error
                    }
                } else if !connection.isClosed {
                    _ = try? connection.run(sql: "ROLLBACK")
                }
            }
        } catch {
            heldLock.withLock { held = nil }
            if case .failure(let bodyError)? = result { throw bodyError }
            throw Self.mapError(error, doing: "save to", location)
        }
        return try result!.get()
    }

    /// Runs `body` inside the transaction this thread already holds on the store, or in a new one: a coordinator
    /// saving to several stores nests one per store, so that a save fails in all or none.
    package func joiningTransaction<T>(_ body: () throws -> T) throws -> T {
        if heldConnection() != nil { return try body() }
        return try performAsOneTransaction(body)
    }
}
