import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import OpenCoreDataModel
import OpenCoreDataPredicate
import PostgresNIO

/// One connection to a PostgreSQL server, used synchronously.
///
/// Each statement is sent through postgres-nio's `EventLoopFuture` API and waited for on the calling thread (a
/// context's queue), with a timeout, never on an event loop and never by suspending a task. The event loops are NIO's shared group, so a caller blocked here never holds
/// the thread the answer arrives on.
///
/// Not thread-safe: a pool hands a connection to one caller at a time.
package final class PostgreSQLConnection: RelationalWriteConnection, @unchecked Sendable {
    package let location: PostgreSQLLocation
    let connection: PostgresConnection
    /// How long one statement may take before the connection is given up (closed) and the call throws.
    let timeout: TimeInterval
    private let logger: Logger
    /// Statements sent since the store last reset the count (to tell a connection that was dead before any of its
    /// work reached the server).
    var statementsRun = 0
    /// Whether this session has persistent history's temporary table of pending changes.
    var hasHistoryTable = false

    package var dialect: any SQLDialect { PostgreSQLDialect() }
    /// PostgreSQL's wire protocol numbers parameters with 16 bits.
    package var parameterLimit: Int { 65_535 }
    /// Whether the server has closed the connection (or it was closed after an error that left it unusable).
    package var isClosed: Bool { connection.isClosed }

    /// Connects and logs in.
    ///
    /// - Throws: `CoreDataError(.persistentStoreOpen)` naming the server and database: unreachable, refused, a wrong
    ///   password, a database that does not exist, a TLS failure, or no answer within `timeout`.
    package init(_ location: PostgreSQLLocation, timeout: TimeInterval = 10, logger: Logger = Logger(label: "OpenCoreData.PostgreSQL"))
        throws
    {
        self.location = location
        self.timeout = timeout
        self.logger = logger
        var configuration: PostgresConnection.Configuration
        if let folder = location.socketFolder {
            configuration = .init(
                unixSocketPath: "\(folder)/.s.PGSQL.\(location.port)", username: location.user, password: location.secret,
                database: location.database)
        } else {
            configuration = .init(
                host: location.host, port: location.port, username: location.user, password: location.secret, database: location.database,
                tls: try Self.tls(location))
        }
        configuration.options.connectTimeout = .milliseconds(Int64(timeout * 1000))
        let future = PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.any(), configuration: configuration, id: Self.nextID(), logger: logger)
        do {
            connection = try Self.wait(for: future, timeout: timeout, doing: "connect to \(location)")
            if let isolation = location.isolation {
                try run(sql: "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL \(isolation)")
            }
        } catch let error as CoreDataError {
            throw CoreDataError(.persistentStoreOpen, error.message, underlyingError: error.underlyingError)
        } catch {
            throw CoreDataError(.persistentStoreOpen, Self.describe(error, doing: "connect to \(location)"), underlyingError: error)
        }
    }

    /// postgres-nio requires a connection closed before it goes: one still open is closed here (waited for, briefly,
    /// unless this is an event loop's thread, which must not wait).
    deinit {
        guard !connection.isClosed else { return }
        if connection.eventLoop.inEventLoop {
            connection.close().whenComplete { _ in }
        } else {
            _ = try? Self.wait(for: connection.close(), timeout: min(timeout, 2), doing: "close")
        }
    }

    /// Closes the connection (waiting for the server to see it go, within the timeout).
    package func close() {
        _ = try? Self.wait(for: connection.close(), timeout: timeout, doing: "close")
    }

    private static let ids = NSLock()
    nonisolated(unsafe) private static var lastID = 0
    private static func nextID() -> Int {
        ids.withLock {
            lastID += 1; return lastID
        }
    }

    /// The TLS a location asks for: none, or a context that checks the server's certificate against the CA file
    /// (and its name, for `verify-full`) or, for `require`, not at all (as libpq's `require`).
    private static func tls(_ location: PostgreSQLLocation) throws -> PostgresConnection.Configuration.TLS {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch location.tls {
        case .disable: return .disable
        case .require: tls.certificateVerification = .none
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let file = location.rootCertificateFile {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
            } catch {
                throw CoreDataError(.persistentStoreOpen, "Cannot read the CA certificates in \(file) for \(location): \(error).")
            }
        }
        do {
            return .require(try NIOSSLContext(configuration: tls))
        } catch {
            throw CoreDataError(.persistentStoreOpen, "Cannot set up TLS for \(location): \(error).")
        }
    }

    // MARK: Waiting

    /// The value of `future`, waited for on this thread for at most `timeout` seconds.
    static func wait<T: Sendable>(for future: EventLoopFuture<T>, timeout: TimeInterval, doing what: String) throws -> T {
        precondition(!future.eventLoop.inEventLoop, "OpenCoreData's PostgreSQL store must not be called on a NIO event loop")
        let done = DispatchSemaphore(value: 0)
        let outcome = Outcome<T>()
        future.whenComplete { result in
            outcome.set(result)
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else {
            throw CoreDataError(.persistentStoreOperation, "Could not \(what): no answer within \(timeout) seconds.")
        }
        return try outcome.get()
    }

    /// A result handed from an event loop to the waiting thread.
    private final class Outcome<T: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        private var result: Result<T, any Error>?
        func set(_ result: Result<T, any Error>) { lock.withLock { self.result = result } }
        func get() throws -> T { try lock.withLock { result! }.get() }
    }

    // MARK: Statements

    /// Runs `sql` with `arguments` and returns its rows and the number of rows it changed.
    func query(_ sql: String, _ arguments: [SQLArgument]) throws -> PostgresQueryResult {
        var bindings = PostgresBindings(capacity: arguments.count)
        for argument in arguments { Self.append(argument, to: &bindings) }
        return try query(sql, bindings)
    }

    func query(_ sql: String, _ bindings: PostgresBindings) throws -> PostgresQueryResult {
        try settleSent(before: sql)
        statementsRun += 1
        let first = statementsRun == 1
        let future = connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
        do {
            return try Self.wait(for: future, timeout: timeout, doing: "run a statement on \(location)")
        } catch let error as CoreDataError {
            // No answer in time: the connection is in an unknown state, and is not used again.
            connection.close().whenComplete { _ in }
            throw error
        } catch {
            throw PostgreSQLError(error, sql: sql, location: location, wasFirstStatement: first)
        }
    }

    // MARK: Statements sent without waiting

    /// Statements sent and not yet waited for, in order (postgres-nio runs a connection's statements one after
    /// another): a bulk insert's next rows are bound while the server writes the previous ones.
    private var sent: [(sql: String, first: Bool, answer: EventLoopFuture<PostgresQueryResult>)] = []

    /// Sends a statement whose answer the next statement waits for (see `settleSent`).
    func send(_ sql: String, _ bindings: PostgresBindings) {
        statementsRun += 1
        sent.append((sql, statementsRun == 1, connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)))
    }

    /// Waits for every statement sent, then throws the first one's error, if any — unless `sql` rolls back, which
    /// must still run after a failed statement.
    private func settleSent(before sql: String) throws {
        guard !sent.isEmpty else { return }
        let waiting = sent
        sent = []
        var failure: (any Error)?
        for statement in waiting {
            do {
                _ = try Self.wait(for: statement.answer, timeout: timeout, doing: "run a statement on \(location)")
            } catch let error as CoreDataError {
                connection.close().whenComplete { _ in }
                failure = failure ?? error
            } catch {
                failure = failure ?? PostgreSQLError(error, sql: statement.sql, location: location, wasFirstStatement: statement.first)
            }
        }
        if let failure, !sql.hasPrefix("ROLLBACK") { throw failure }
    }

    static func append(_ argument: SQLArgument, to bindings: inout PostgresBindings) {
        switch argument {
        case .null: bindings.appendNull()
        case .integer(let i): bindings.append(i)
        case .real(let d): bindings.append(d)
        case .text(let s): bindings.append(s)
        case .blob(let d): bindings.append(ByteBuffer(bytes: d))
        }
    }

    /// Runs a query and hands each row to `body` on this thread while later rows still arrive.
    ///
    /// The event loop appends rows to a `RowHandoff` as they are parsed; this thread takes them in batches, so decoding
    /// here overlaps the server's work and the transfer (a collected result would wait for the last row). Each wait
    /// for the next batch has the statement timeout. When `body` throws, the rest of the rows are dropped as they
    /// come and the statement is waited for, leaving the connection ready for the next one.
    package func forEachRow(sql: String, arguments: [SQLArgument], _ body: (PostgreSQLRow) throws -> Void) throws {
        try settleSent(before: sql)
        var bindings = PostgresBindings(capacity: arguments.count)
        for argument in arguments { Self.append(argument, to: &bindings) }
        statementsRun += 1
        let first = statementsRun == 1
        let handoff = RowHandoff()
        connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger) { row in handoff.add(row) }
            .whenComplete { handoff.finish($0) }
        var rows: [PostgresRow] = []
        var cells: [PostgreSQLRow.Cell] = []
        do {
            while try handoff.take(into: &rows, timeout: timeout) {
                for row in rows {
                    cells.removeAll(keepingCapacity: true)
                    for cell in row { cells.append(PostgreSQLRow.Cell(cell)) }
                    try body(PostgreSQLRow(cells: cells))
                }
            }
        } catch let error as PostgreSQLHandoffFailure {
            if error.timedOut {
                connection.close().whenComplete { _ in }
                throw CoreDataError(
                    .persistentStoreOperation, "Could not run a statement on \(location): no answer within \(timeout) seconds.")
            }
            throw PostgreSQLError(error.underlying!, sql: sql, location: location, wasFirstStatement: first)
        } catch {
            handoff.drop()
            _ = try? handoff.take(into: &rows, timeout: timeout)
            throw error
        }
    }

    @discardableResult
    package func run(sql: String, arguments: [SQLArgument]) throws -> Int {
        try query(sql, arguments).metadata.rows ?? 0
    }

    package func prepare(sql: String) throws -> PostgreSQLStatement { PostgreSQLStatement(sql: sql, connection: self) }

    /// A bulk insert's statement: its binder collects each column's values into one array parameter.
    package func prepareBulk(sql: String, columns: [(name: String, type: String?)]) throws -> PostgreSQLStatement? {
        PostgreSQLStatement(sql: sql, connection: self, arrayColumns: columns)
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws (or the connection is lost,
    /// which the server rolls back itself).
    package func inTransaction<T>(_ body: () throws -> T) throws -> T {
        try run(sql: "BEGIN")
        do {
            let result = try body()
            try run(sql: "COMMIT")
            return result
        } catch {
            if !isClosed { _ = try? run(sql: "ROLLBACK") }
            throw error
        }
    }

    /// Describes a client or connection error, naming the server and database (never the password).
    static func describe(_ error: any Error, doing what: String) -> String {
        if let psql = error as? PSQLError {
            if let message = psql.serverInfo?[.message] { return "Could not \(what): \(message)." }
            switch psql.code {
            case .connectionError, .serverClosedConnection, .uncleanShutdown:
                let reason = psql.underlying.map { "\($0)" } ?? "\(psql.code)"
                return "Could not \(what): the server cannot be reached (\(reason))."
            default: return "Could not \(what): \(psql.code)\(psql.underlying.map { " (\($0))" } ?? "")."
            }
        }
        return "Could not \(what): \(error)."
    }
}

/// A statement's error from the server or the client, with the SQLSTATE the store decides by.
package struct PostgreSQLError: Error, CustomStringConvertible {
    /// The server's SQLSTATE (`23505` unique violation, `40001` serialization failure, …), nil for a client error.
    package let sqlState: String?
    package let message: String
    package let sql: String
    /// The constraint (a unique index's name) the server says the statement broke.
    package let constraintName: String?
    /// Whether the statement was the first of the work the connection was lent for (nothing before it reached the
    /// server).
    package let wasFirstStatement: Bool
    package let underlying: any Error

    init(_ error: any Error, sql: String, location: PostgreSQLLocation, wasFirstStatement: Bool = false) {
        self.wasFirstStatement = wasFirstStatement
        underlying = error
        self.sql = sql
        let psql = error as? PSQLError
        sqlState = psql?.serverInfo?[.sqlState]
        constraintName = psql?.serverInfo?[.constraintName]
        let detail = psql?.serverInfo?[.detail].map { " (\($0))" } ?? ""
        message = (psql?.serverInfo?[.message]).map { $0 + detail } ?? PostgreSQLConnection.describe(error, doing: "reach \(location)")
    }

    package var description: String { "\(message) [SQL: \(sql.prefix(300))]" }

    /// A unique index refused the write.
    package var isUniqueViolation: Bool { sqlState == "23505" }
    /// The server asks the client to run the transaction again (serialization failure, deadlock).
    package var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }
    /// The connection is gone (server restarted or unreachable): the transaction did not commit.
    package var isConnectionLost: Bool {
        guard sqlState == nil || sqlState?.hasPrefix("08") == true || sqlState == "57P01" else { return false }
        return true
    }
}
