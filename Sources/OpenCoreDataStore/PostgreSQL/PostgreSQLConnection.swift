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

    static func append(_ argument: SQLArgument, to bindings: inout PostgresBindings) {
        switch argument {
        case .null: bindings.appendNull()
        case .integer(let i): bindings.append(i)
        case .real(let d): bindings.append(d)
        case .text(let s): bindings.append(s)
        case .blob(let d): bindings.append(ByteBuffer(bytes: d))
        }
    }

    package func forEachRow(sql: String, arguments: [SQLArgument], _ body: (PostgreSQLRow) throws -> Void) throws {
        for row in try query(sql, arguments).rows { try body(PostgreSQLRow(row)) }
    }

    @discardableResult
    package func run(sql: String, arguments: [SQLArgument]) throws -> Int {
        try query(sql, arguments).metadata.rows ?? 0
    }

    package func prepare(sql: String) throws -> PostgreSQLStatement { PostgreSQLStatement(sql: sql, connection: self) }

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

/// A statement a save prepared: its text, run with the values each row binds.
package struct PostgreSQLStatement: RelationalStatement {
    let sql: String
    let connection: PostgreSQLConnection

    @discardableResult
    package func run(_ body: (inout PostgreSQLBinder) throws -> Void) throws -> Int {
        var binder = PostgreSQLBinder()
        try body(&binder)
        return try connection.query(sql, binder.bindings).metadata.rows ?? 0
    }
}

/// Binds a row's values for PostgreSQL: 64-bit integers, `double precision`, text, `bytea`.
package struct PostgreSQLBinder: RelationalBinder {
    var bindings = PostgresBindings()
    package mutating func bindNull() throws { bindings.appendNull() }
    package mutating func bind(_ value: Int64) throws { bindings.append(value) }
    package mutating func bind(_ value: Double) throws { bindings.append(value) }
    package mutating func bind(_ text: String) throws { bindings.append(text) }
    package mutating func bind(_ data: Data) throws { bindings.append(ByteBuffer(bytes: data)) }
}

/// A row of a PostgreSQL result, its columns read as SQLite's storage classes: integers of any width and booleans as
/// integers, reals, text (and decimals, which the store keeps as text), `bytea` as blobs.
package struct PostgreSQLRow: RelationalRow {
    let cells: PostgresRandomAccessRow

    init(_ row: PostgresRow) { cells = row.makeRandomAccess() }

    /// How many columns the row has.
    package var count: Int { cells.count }

    package func value(_ index: Int) -> SQLArgument {
        let cell = cells[index]
        guard cell.bytes != nil else { return .null }
        do {
            switch cell.dataType {
            case .int8: return .integer(try cell.decode(Int64.self))
            case .int4: return .integer(Int64(try cell.decode(Int32.self)))
            case .int2: return .integer(Int64(try cell.decode(Int16.self)))
            case .bool: return .integer(try cell.decode(Bool.self) ? 1 : 0)
            case .float8: return .real(try cell.decode(Double.self))
            case .float4: return .real(Double(try cell.decode(Float.self)))
            case .bytea:
                var buffer = try cell.decode(ByteBuffer.self)
                return .blob(buffer.readData(length: buffer.readableBytes) ?? Data())
            case .numeric: return .text(try cell.decode(String.self))
            default: return .text(try cell.decode(String.self))
            }
        } catch {
            return .null
        }
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
