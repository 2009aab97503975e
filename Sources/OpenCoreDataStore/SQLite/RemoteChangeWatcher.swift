import Dispatch
import Foundation
import GRDB
import OpenCoreDataModel

/// Watches a store file for commits made through other connections — other processes, or other stores opened on the
/// same file — and calls back after each (a few together when they come faster than the interval).
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

    init(writer: any DatabaseWriter, interval: DispatchTimeInterval, onChange: @escaping @Sendable () -> Void) throws {
        func version() throws -> Int64 {
            try writer.writeWithoutTransaction { db in try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0 }
        }
        var last = try version()
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "OpenCoreData.RemoteChangeWatcher"))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .microseconds(500))
        timer.setEventHandler { [weak self] in
            guard let self, !self.isCancelled, let now = try? version() else { return }
            if now != last {
                last = now
                onChange()
            }
        }
        timer.resume()
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
    package func watchRemoteChanges(every interval: DispatchTimeInterval = .milliseconds(5), _ onChange: @escaping @Sendable () -> Void)
        throws -> RemoteChangeWatcher
    {
        try checkOpen()
        guard url != nil else {
            throw CoreDataError(.persistentStoreOperation, "An in-memory store has no other writers to watch for.")
        }
        do {
            return try RemoteChangeWatcher(writer: writer, interval: interval, onChange: onChange)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "watch")
        }
    }
}
