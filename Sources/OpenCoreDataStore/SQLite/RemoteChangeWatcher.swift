import Dispatch
import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel

/// Watches a store file for commits made through other connections — other processes, or other stores opened on the
/// same file — and calls back after each (a few together when they come faster than the interval), with how many.
///
/// It asks SQLite's `PRAGMA data_version` on the store's own writing connection every `interval`: the number changes
/// when another connection has committed, and never for this store's own saves (they go through that connection), so
/// nothing is read from the database itself and no own save is taken for a remote one. Polling a pragma costs a few
/// microseconds; SQLite offers no notification across processes (a file watch on the WAL would fire for this
/// process's own writes too, and not at all for a store in rollback-journal mode).
package final class RemoteChangeWatcher: @unchecked Sendable {
    private let timer: any DispatchSourceTimer
    private let lock = NSLock()
    private var cancelled = false

    /// What the watcher saw at one poll: the store's `data_version` before and after the other reads, SQLite's count
    /// of commits to the file (the WAL index's change counter, nil when it cannot be read), the count of this store's
    /// own commits and the newest history transaction.
    private struct Reading {
        var version: Int64
        var commits: UInt32?
        var ownCommits: Int
        /// The newest history transaction (nil without history) among exactly the commits `commits` counts, so that
        /// the history handed over with a report covers the commits the report counts: no more, no fewer.
        var historyThrough: Int64?
        /// `data_version` read last: it has moved for every commit `commits` counts.
        var versionAfter: Int64
    }

    /// Starts polling `store` every `interval`.
    ///
    /// - Parameters:
    ///   - store: the store whose file is watched.
    ///   - interval: the time between polls.
    ///   - afterReadingHistory: for tests, called at each poll between reading the newest history transaction and
    ///     reading the commit counter again (where another writer's commit would make the two disagree).
    ///   - onChange: called on the watcher's queue with each report.
    /// - Throws: what reading the store's numbers the first time throws.
    init(
        store: SQLiteStore, interval: DispatchTimeInterval, afterReadingHistory: (@Sendable () -> Void)? = nil,
        onChange: @escaping @Sendable (RemoteCommits) -> Void
    ) throws {
        let writer = store.writer
        let counter = store.commitCounter
        let keepsHistory = store.history != nil
        func read() throws -> Reading {
            // On the writer, so that no own commit lands between the numbers.
            try writer.writeWithoutTransaction { db in
                let dataVersion = { try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0 }
                let version = try dataVersion()
                guard keepsHistory else {
                    let commits = Self.walChangeCounter(db)
                    return Reading(
                        version: version, commits: commits, ownCommits: counter.count, historyThrough: nil, versionAfter: try dataVersion())
                }
                // The counter and the newest transaction must describe the same commits. Read apart, a commit landing
                // between the two reads is counted in one report while its transaction goes with the next, where it
                // passes for that report's commit — and a commit of a writer that keeps no history, counted there, is
                // taken for it and never read. So the counter is read on both sides of the history: unchanged, no
                // commit landed in between (a commit is published by the very write that moves the counter).
                var reading = Reading(version: version, commits: nil, ownCommits: counter.count, historyThrough: nil, versionAfter: version)
                for _ in 0..<16 {
                    let before = Self.walChangeCounter(db)
                    // (Prepared once: the watcher polls every few milliseconds.)
                    reading.historyThrough = try Int64.fetchOne(db.cachedStatement(sql: "SELECT MAX(Z_PK) FROM ATRANSACTION")) ?? 0
                    afterReadingHistory?()
                    let after = Self.walChangeCounter(db)
                    if before == after {
                        reading.commits = after
                        break
                    }
                }
                // (Commits that keep landing leave the count unknown: contexts re-read, and the next poll counts afresh.)
                reading.versionAfter = try dataVersion()
                return reading
            }
        }
        var last = try read()
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "OpenCoreData.RemoteChangeWatcher"))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .microseconds(500))
        timer.setEventHandler { [weak self] in
            guard let self, !self.isCancelled, let now = try? read() else { return }
            var count: Int?
            if let before = last.commits, let after = now.commits {
                count = max(0, Int(after &- before) - (now.ownCommits - last.ownCommits))
            }
            // Every commit the last report counted landed before its last read of the version, so the version has
            // moved since then only for commits the counter has not seen before now: counted now, or missed by it. A
            // move with nothing counted is reported with the count unknown (contexts then re-read): the counter is
            // not trusted to hide a commit. Without both counts, any move since the last report's first read is one.
            let moved = count == nil ? now.version != last.version : now.version != last.versionAfter
            guard moved || (count ?? 0) > 0 else { return }
            last = now
            onChange(RemoteCommits(count: count == 0 ? nil : count, historyThrough: now.historyThrough))
        }
        timer.resume()
    }

    /// The WAL index's change counter (`iChange`, which SQLite increments with every commit that writes to the
    /// log, whoever makes it), read from the connection's own mapping of the `-shm` file; nil when there is none (a
    /// store not in WAL mode, or not read yet).
    ///
    /// Never through a file descriptor of our own: closing one would drop the POSIX locks SQLite holds on the file
    /// for this whole process, and another process could then take itself for the only one and truncate the file
    /// under this one's mapping.
    static func walChangeCounter(_ db: Database) -> UInt32? {
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK, let file,
            let methods = file.pointee.pMethods, methods.pointee.iVersion >= 2, let map = methods.pointee.xShmMap
        else { return nil }
        var region: UnsafeMutableRawPointer?
        // Region 0 as the connection has it mapped already (not extended: nothing is created).
        guard map(file, 0, 32768, 0, &region) == SQLITE_OK, let region else { return nil }
        let header = UnsafeRawPointer(region)
        guard header.load(fromByteOffset: 12, as: UInt8.self) != 0 else { return nil }  // isInit
        return header.load(fromByteOffset: 8, as: UInt32.self)
    }

    private var isCancelled: Bool { lock.withLock { cancelled } }

    /// Stops watching (no call-back starts after this returns).
    package func cancel() {
        lock.withLock {
            guard !cancelled else { return }
            cancelled = true
            timer.cancel()
        }
    }

    deinit { cancel() }
}

extension SQLiteStore {
    /// Starts watching for commits other connections make to this store's file (see `RemoteChangeWatcher`).
    ///
    /// - Throws: `CoreDataError` for an in-memory store (no other connection can reach it) or a closed one.
    package func watchRemoteChanges(
        every interval: DispatchTimeInterval = .milliseconds(5), _ onChange: @escaping @Sendable (RemoteCommits) -> Void
    ) throws -> any RemoteChangeWatching {
        try watchRemoteChanges(every: interval, afterReadingHistory: nil, onChange)
    }

    /// `watchRemoteChanges(every:_:)`, calling `afterReadingHistory` at each poll between its reads (see
    /// `RemoteChangeWatcher.init`): a test's way to commit at the worst moment.
    package func watchRemoteChanges(
        every interval: DispatchTimeInterval, afterReadingHistory: (@Sendable () -> Void)?,
        _ onChange: @escaping @Sendable (RemoteCommits) -> Void
    ) throws -> any RemoteChangeWatching {
        try checkOpen()
        guard url != nil else {
            throw CoreDataError(.persistentStoreOperation, "An in-memory store has no other writers to watch for.")
        }
        do {
            return try RemoteChangeWatcher(store: self, interval: interval, afterReadingHistory: afterReadingHistory, onChange: onChange)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "watch")
        }
    }
}

/// What a remote-change call-back knows of the commits it reports.
package struct RemoteCommits: Sendable {
    /// How many commits other connections made since the last call-back; nil when not known (SQLite's counter cannot
    /// be read, commits kept landing while the watcher read it, or the store changed without the counter moving).
    ///
    /// It may count too many (a commit that wrote only bookkeeping), never too few; never 0.
    package let count: Int?
    /// The newest history transaction among the commits counted (nil when the watcher does not tell): the history to
    /// hand over with them goes no further, or it could hold a commit the count missed — and a commit the count has
    /// but the history lacks would then go unnoticed (`RemoteChangeStore.takeOthersHistory(through:)`).
    package let historyThrough: Int64?

    package init(count: Int?, historyThrough: Int64? = nil) {
        self.count = count
        self.historyThrough = historyThrough
    }
}

/// Counts the commits of a store's writer connection that changed rows (those that reach the WAL, so that the
/// watcher can tell them from other connections' commits).
final class CommitCounter: TransactionObserver, @unchecked Sendable {
    private let lock = NSLock()
    private var commits = 0
    private var baseline: Int?

    var count: Int { lock.withLock { commits } }

    /// Starts counting on `db`, the writer connection.
    func install(on db: Database) {
        let total = db.totalChangesCount
        lock.withLock { baseline = total }
        db.add(transactionObserver: self, extent: .databaseLifetime)
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}

    func databaseWillCommit() throws {}

    func databaseDidCommit(_ db: Database) {
        let total = db.totalChangesCount
        lock.withLock {
            // Rows changed since the last commit: this commit wrote to the log. A commit that changed only the schema
            // is not counted, so the watcher may take it for another connection's (a spare re-read, never a miss).
            if let baseline, total > baseline { commits += 1 }
            baseline = total
        }
    }

    func databaseDidRollback(_ db: Database) {
        let total = db.totalChangesCount
        lock.withLock { baseline = total }
    }
}
