import Dispatch
import Foundation
import Logging
import NIOCore
import OpenCoreDataModel
import PostgresNIO

/// Watches a PostgreSQL store for commits other writers make — other processes, other machines, other programs' SQL —
/// and calls back after them with how many.
///
/// Correctness rests on the commit counter (`z_ocd_commits`), which every writing transaction advances once, in the
/// transaction, whoever writes: the watcher compares it with the value it last saw, and counts the values this store's
/// own transactions set as its own. `NOTIFY` (sent by the same trigger at commit) only wakes the watcher early; it is
/// never trusted for what changed. The watcher listens on a connection of its own and, whenever that connection is
/// (re)made, listens first and then reads the counter, so no commit falls between; a poll reads the counter every
/// `pollInterval` as well (every `interval` when the URL says `notify=off`), in case a notification is lost.
final class PostgreSQLRemoteWatcher: RemoteChangeWatching, @unchecked Sendable {
    private let store: PostgreSQLStore
    private let onChange: @Sendable (RemoteCommits) -> Void
    private let queue = DispatchQueue(label: "OpenCoreData.PostgreSQLRemoteWatcher")
    private let timer: any DispatchSourceTimer
    private let lock = NSLock()
    private var cancelled = false
    /// The counter's value at the last check (on `queue`).
    private var last: Int64
    /// The connection `LISTEN` runs on, remade when lost (on `queue`).
    private var listener: PostgreSQLConnection?
    private var listenContext: PostgresListenContext?

    init(store: PostgreSQLStore, interval: DispatchTimeInterval, onChange: @escaping @Sendable (RemoteCommits) -> Void) throws {
        self.store = store
        self.onChange = onChange
        // From where the store follows history, when it does: the commits counted and the transactions handed over
        // then start at the same value.
        last = try store.followedFrom() ?? store.commitCount()
        let notifies = store.location.notifies
        // With notifications, the poll only backs them up (seconds); without, it is how commits are found.
        let poll: DispatchTimeInterval = notifies ? .seconds(2) : Self.atLeast(interval, milliseconds: 100)
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + poll, repeating: poll, leeway: .milliseconds(20))
        timer.setEventHandler { [weak self] in self?.tick(listening: notifies) }
        if notifies { queue.sync { listen() } }
        timer.resume()
    }

    private static func atLeast(_ interval: DispatchTimeInterval, milliseconds: Int) -> DispatchTimeInterval {
        switch interval {
        case .seconds(let s): return s * 1000 >= milliseconds ? interval : .milliseconds(milliseconds)
        case .milliseconds(let m): return .milliseconds(max(m, milliseconds))
        case .microseconds(let u): return .milliseconds(max(u / 1000, milliseconds))
        case .nanoseconds(let n): return .milliseconds(max(n / 1_000_000, milliseconds))
        default: return .milliseconds(milliseconds)
        }
    }

    private var isCancelled: Bool { lock.withLock { cancelled } }

    /// A poll: (re)listen when the connection is gone, then check the counter.
    private func tick(listening: Bool) {
        guard !isCancelled else { return }
        if listening, listener?.isClosed ?? true { listen() }
        check()
    }

    /// Listens on a new connection, then checks the counter: a commit made while no connection listened is found.
    private func listen() {
        listenContext?.stop()
        listener?.close()
        listener = nil
        guard let connection = try? PostgreSQLConnection(store.location, timeout: 5) else { return }
        let origin = store.origin
        listenContext = connection.connection.addListener(channel: PostgreSQLFunctions.commitChannel) { [weak self] _, message in
            // On an event loop: never wait here.
            guard message.payload != origin, let self else { return }
            self.queue.async { self.check() }
        }
        do {
            try connection.run(sql: "LISTEN \(PostgreSQLFunctions.commitChannel)")
            listener = connection
        } catch {
            listenContext?.stop()
            connection.close()
        }
        check()
    }

    /// Reads the counter and reports the commits since the last check that were not this store's own.
    private func check() {
        guard !isCancelled, let now = try? store.commitCount(), now != last else { return }
        let own = store.takeOwnCommits(through: now)
        let others = Int(now - last) - own.filter { $0 > last }.count
        if ProcessInfo.processInfo.environment["OCD_TRACE_WATCH"] != nil { print("WATCH \(last) -> \(now), own \(own.sorted())") }
        last = now
        store.noteWatched(through: now, othersCame: others > 0)
        if others > 0 { onChange(RemoteCommits(count: others)) }
    }

    func cancel() {
        lock.withLock { cancelled = true }
        timer.cancel()
        queue.sync {
            listenContext?.stop()
            listener?.close()
            listener = nil
        }
    }
}

extension PostgreSQLStore: RemoteChangeStore {
    /// Other processes and machines reach the same database.
    package var isShared: Bool { true }

    package func watchRemoteChanges(every interval: DispatchTimeInterval, _ onChange: @escaping @Sendable (RemoteCommits) -> Void) throws
        -> any RemoteChangeWatching
    {
        try PostgreSQLRemoteWatcher(store: self, interval: interval, onChange: onChange)
    }

    /// The commit counter's value.
    func commitCount() throws -> Int64 {
        try withConnection(doing: "read the commit counter of") { connection in
            try connection.integer("SELECT n FROM z_ocd_commits WHERE id = 1") ?? 0
        }
    }
}
