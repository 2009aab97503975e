import Foundation
import Logging
import OpenCoreDataModel

/// The connections a PostgreSQL store shares among its callers: one per caller at a time, kept for the next when it
/// is still open, and made anew (retrying with backoff while the server cannot be reached) when none is idle.
final class PostgreSQLPool: @unchecked Sendable {
    let location: PostgreSQLLocation
    let timeout: TimeInterval
    /// At most this many connections wait idle; more are made while callers need them.
    let idleLimit: Int
    private let lock = NSLock()
    private var idle: [PostgreSQLConnection] = []
    private var closed = false
    private let logger: Logger

    init(_ location: PostgreSQLLocation, timeout: TimeInterval, idleLimit: Int = 4, logger: Logger) {
        self.location = location
        self.timeout = timeout
        self.idleLimit = idleLimit
        self.logger = logger
    }

    /// Runs `body` with a connection of its own.
    func withConnection<T>(_ body: (PostgreSQLConnection) throws -> T) throws -> T {
        let connection = try checkOut()
        defer { checkIn(connection) }
        return try body(connection)
    }

    private func checkOut() throws -> PostgreSQLConnection {
        while let connection = try lock.withLock({ () throws -> PostgreSQLConnection? in
            if closed { throw CoreDataError(.persistentStoreOperation, "The store \(location) has been closed.") }
            return idle.popLast()
        }) {
            if !connection.isClosed { return connection }
        }
        return try connect()
    }

    /// A new connection, tried again while the server cannot be reached.
    ///
    /// While it cannot be reached (restarting, say) the connection is tried again after 0.1, 0.2, 0.4 … s for as long
    /// as `timeout` allows. A refusal the server itself gives (wrong password, no such database) is final.
    func connect() throws -> PostgreSQLConnection {
        let deadline = Date().addingTimeInterval(timeout)
        var pause = 0.1
        while true {
            do {
                return try PostgreSQLConnection(location, timeout: timeout, logger: logger)
            } catch let error as CoreDataError {
                let unreachable = error.message.contains("cannot be reached") || error.message.contains("the database system is")
                guard unreachable, Date().addingTimeInterval(pause) < deadline else { throw error }
                Thread.sleep(forTimeInterval: pause)
                pause = min(pause * 2, 2)
            }
        }
    }

    private func checkIn(_ connection: PostgreSQLConnection) {
        let keep = lock.withLock { () -> Bool in
            guard !closed, !connection.isClosed, idle.count < idleLimit else { return false }
            idle.append(connection)
            return true
        }
        if !keep { connection.close() }
    }

    deinit { for connection in idle { connection.close() } }

    /// Closes every idle connection; later use throws.
    func close() {
        let connections = lock.withLock { () -> [PostgreSQLConnection] in
            closed = true
            defer { idle = [] }
            return idle
        }
        for connection in connections { connection.close() }
    }
}
