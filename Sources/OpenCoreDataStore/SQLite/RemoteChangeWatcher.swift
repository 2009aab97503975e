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

    /// What the watcher saw at one poll: the store's `data_version`, SQLite's count of commits to the file (the
    /// WAL index's change counter, nil when it cannot be read) and the count of this store's own commits.
    private struct Reading {
        var version: Int64
        var commits: UInt32?
        var ownCommits: Int
        /// The newest history transaction (nil without history), read before the counter: every transaction up to
        /// it is counted, so that the history handed over with a report never runs ahead of the count.
        var historyThrough: Int64?
    }

    init(store: SQLiteStore, interval: DispatchTimeInterval, onChange: @escaping @Sendable (RemoteCommits) -> Void) throws {
        let writer = store.writer
        let counter = store.commitCounter
        let keepsHistory = store.history != nil
        func read() throws -> Reading {
            // On the writer, so that no own commit lands between the numbers.
            try writer.writeWithoutTransaction { db in
                let version = try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0
                // (Prepared once: the watcher polls every few milliseconds.)
                let history = keepsHistory ? try Int64.fetchOne(db.cachedStatement(sql: "SELECT MAX(Z_PK) FROM ATRANSACTION")) ?? 0 : nil
                return Reading(version: version, commits: Self.walChangeCounter(db), ownCommits: counter.count, historyThrough: history)
            }
        }
        var last = try read()
        // A report made before the version moved: its move is still to come.
        var awaitingEcho = false
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "OpenCoreData.RemoteChangeWatcher"))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .microseconds(500))
        timer.setEventHandler { [weak self] in
            guard let self, !self.isCancelled, let now = try? read() else { return }
            var count: Int?
            if let before = last.commits, let after = now.commits {
                count = max(0, Int(after &- before) - (now.ownCommits - last.ownCommits))
            }
            // The counter is read after the version, so a commit landing between the two reads is counted before
            // the version moves: report as soon as other connections' commits are counted, and take the version's
            // move at the next poll, with nothing new counted, for that echo. Any other move with nothing counted is
            // reported with the count unknown (contexts then re-read): the counter is not trusted to hide a commit.
            let moved = now.version != last.version
            guard moved || (count ?? 0) > 0 else { return }
            last = now
            if moved, count == 0 {
                defer { awaitingEcho = false }
                if awaitingEcho { return }
                count = nil
            } else {
                awaitingEcho = !moved
            }
            onChange(RemoteCommits(count: count, historyThrough: now.historyThrough))
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
        try checkOpen()
        guard url != nil else {
            throw CoreDataError(.persistentStoreOperation, "An in-memory store has no other writers to watch for.")
        }
        do {
            return try RemoteChangeWatcher(store: self, interval: interval, onChange: onChange)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "watch")
        }
    }
}

/// What a remote-change call-back knows of the commits it reports.
package struct RemoteCommits: Sendable {
    /// How many commits other connections made since the last call-back; nil when SQLite's counter cannot be read.
    ///
    /// It may count too many (a commit that wrote only bookkeeping), never too few.
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
