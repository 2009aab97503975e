import Foundation
import OpenCoreData
import OpenCoreDataStore

extension Requirement {
    /// The PostgreSQL server the PostgreSQL suites run against, from `OCD_POSTGRES_URL`
    /// (`postgresql://postgres@127.0.0.1:5432/postgres`): `.ci/run` starts a throwaway cluster and sets it.
    public static var postgresURL: URL? {
        ProcessInfo.processInfo.environment["OCD_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : URL(string: $0) }
    }

    /// Whether a PostgreSQL server was given (`OCD_POSTGRES_URL`).
    ///
    /// The first time it is asked without one, it prints one line saying how to run the PostgreSQL suites (each
    /// skipped suite then names only the missing variable).
    public static var postgresIsPresent: Bool { postgresPresence }

    private static let postgresPresence: Bool = {
        guard postgresURL == nil else { return true }
        let line =
            "PostgreSQL suites skipped: to run them, start a server and set "
            + "OCD_POSTGRES_URL=postgresql://postgres@127.0.0.1:PORT/postgres (.ci/run starts a throwaway cluster)\n"
        FileHandle.standardError.write(Data(line.utf8))
        return false
    }()

    /// The CA file that signed the test server's TLS certificate (for 127.0.0.1), from `OCD_POSTGRES_CA`.
    public static var postgresCA: String? {
        ProcessInfo.processInfo.environment["OCD_POSTGRES_CA"].flatMap { $0.isEmpty ? nil : $0 }
    }

}

/// A database of its own on the test server (`OCD_POSTGRES_URL`), created empty and dropped when released.
public final class PostgreSQLTestDatabase: @unchecked Sendable {
    /// The database's URL.
    public let url: URL
    /// The database's name (`ocd_` and 16 random hexadecimal digits).
    public let name: String
    private let server: URL

    /// Creates `ocd_<random>` on the server.
    public init() throws {
        guard let server = Requirement.postgresURL else { throw CoreDataError(.persistentStoreOpen, "OCD_POSTGRES_URL is not set") }
        self.server = server
        name = "ocd_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let admin = try PostgreSQLConnection(PostgreSQLLocation(server))
        defer { admin.close() }
        try admin.run(sql: "CREATE DATABASE \(name)")
        var components = URLComponents(url: server, resolvingAgainstBaseURL: false)!
        components.path = "/" + name
        url = components.url!
        dropsOnRelease = true
    }

    /// A database that exists already (a test cluster's `postgres`), not dropped when released.
    public static func existing(_ url: URL) throws -> PostgreSQLTestDatabase {
        PostgreSQLTestDatabase(existing: url)
    }

    /// A database for the whole test run (a suite's shared data set in a `static let`, which is never released):
    /// dropped when the test process exits.
    public static func forTheRun() throws -> PostgreSQLTestDatabase {
        let database = try PostgreSQLTestDatabase()
        DatabasesOfTheRun.keep(database)
        return database
    }

    private let dropsOnRelease: Bool

    private init(existing url: URL) {
        self.url = url
        server = url
        name = url.lastPathComponent
        dropsOnRelease = false
    }

    deinit { drop() }

    private let dropLock = NSLock()
    private var dropped = false

    /// Drops the database now (once; a database that exists already is left alone), closing its connections.
    fileprivate func drop() {
        let first = dropLock.withLock {
            defer { dropped = true }
            return !dropped
        }
        guard dropsOnRelease, first,
            let admin = try? PostgreSQLConnection(PostgreSQLLocation(server))
        else { return }
        _ = try? admin.run(sql: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        admin.close()
    }

    /// Runs SQL on the database directly (another program's writes, a check of what is stored).
    public func execute(_ sql: String) throws -> [[String?]] {
        let connection = try PostgreSQLConnection(PostgreSQLLocation(url))
        defer { connection.close() }
        var rows: [[String?]] = []
        try connection.forEachRow(sql: sql, arguments: []) { row in
            rows.append(
                (0..<row.count).map { index in
                    switch row.value(index) {
                    case .null: return nil
                    case .integer(let i): return String(i)
                    case .real(let d): return String(d)
                    case .text(let s): return s
                    case .blob(let d): return d.base64EncodedString()
                    }
                })
        }
        return rows
    }
}

/// The databases made for the whole run, dropped by an exit handler.
private enum DatabasesOfTheRun {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var kept: [PostgreSQLTestDatabase] = []
    nonisolated(unsafe) private static var handlerIsSet = false

    static func keep(_ database: PostgreSQLTestDatabase) {
        lock.withLock {
            kept.append(database)
            guard !handlerIsSet else { return }
            handlerIsSet = true
            atexit { DatabasesOfTheRun.dropAll() }
        }
    }

    private static func dropAll() {
        for database in lock.withLock({ kept }) { database.drop() }
    }
}

/// A PostgreSQL cluster of a test's own, for tests that restart or stop the server (which the shared one must not see).
///
/// Debian's PostgreSQL 15, initialised as `nobody` in a temporary folder, on a free loopback port, `fsync` off; stopped
/// and removed when released.
public final class PostgreSQLCluster: @unchecked Sendable {
    static let binaries = "/usr/lib/postgresql/15/bin"

    /// Whether a cluster can be made here: PostgreSQL 15's programs, and root to run them as `nobody`.
    public static var canStart: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: binaries + "/initdb")
            && FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser")
    }

    /// The port the server listens on (127.0.0.1).
    public let port: Int
    private let folder: String

    /// The cluster's `postgres` database.
    public var url: URL { URL(string: "postgresql://postgres@127.0.0.1:\(port)/postgres")! }

    /// Initialises and starts a cluster.
    public init() throws {
        folder = NSTemporaryDirectory() + "ocd-pg-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Self.run("/bin/chown", ["nobody", folder])
        port = try Self.freePort()
        try Self.asNobody("initdb", ["-D", folder + "/data", "-A", "trust", "-U", "postgres"])
        try start()
    }

    deinit {
        _ = try? Self.asNobody("pg_ctl", ["-D", folder + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Starts the server (again).
    public func start() throws {
        try Self.asNobody(
            "pg_ctl",
            [
                "-D", folder + "/data", "-l", folder + "/server.log", "-w", "-o",
                "-p \(port) -k \(folder) -c listen_addresses=127.0.0.1 -c fsync=off",
                "start",
            ])
    }

    /// Stops the server: `fast` ends every session (their transactions roll back), `immediate` as a crash would.
    public func stop(mode: String = "fast") throws {
        try Self.asNobody("pg_ctl", ["-D", folder + "/data", "-m", mode, "-w", "stop"])
    }

    /// Restarts the server (`pg_ctl restart`, fast).
    public func restart() throws {
        try stop()
        try start()
    }

    private static func asNobody(_ program: String, _ arguments: [String]) throws {
        try run("/usr/sbin/runuser", ["-u", "nobody", "--", binaries + "/" + program] + arguments)
    }

    /// Runs a program to its end (waited for by its own process ID, with a deadline: the server it starts lives on).
    private static func run(_ path: String, _ arguments: [String]) throws {
        let child = try ChildProcess(path, arguments)
        let status = child.wait(timeout: 60)
        guard status == 0 else {
            throw CoreDataError(
                .persistentStoreOpen,
                "\(path) \(arguments.joined(separator: " ")) exited with \(status.map(String.init) ?? "no status in 60 s")")
        }
    }

    /// A loopback port nothing listens on now.
    private static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(socket, pointer, length) == 0 else { return -1 }
                return getsockname(socket, pointer, &length)
            }
        }
        guard bound == 0 else { throw CoreDataError(.persistentStoreOpen, "no free port for a test cluster") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// Where a test's stores go, so that one test body runs on every back end: files in a temporary folder (SQLite), or
/// databases of their own on the test server (PostgreSQL, `OCD_POSTGRES_URL`), one per name, dropped with this value.
public final class StorePlaces: @unchecked Sendable {
    /// A kind of store.
    public enum Backend: String, Sendable {
        case sqlite, postgreSQL
    }

    /// Where this value puts stores.
    public let backend: Backend
    private let directory = TemporaryDirectory()
    fileprivate var databases: [String: PostgreSQLTestDatabase] = [:]
    fileprivate let lock = NSLock()

    /// Places on `backend` (for PostgreSQL, `OCD_POSTGRES_URL` must be set).
    public init(_ backend: Backend) { self.backend = backend }

    /// The URL of the store named `name` (the same URL for the same name).
    public func url(_ name: String) throws -> URL {
        switch backend {
        case .sqlite: return directory.file(name + ".sqlite")
        case .postgreSQL:
            return try lock.withLock {
                if let database = databases[name] { return database.url }
                let database = try PostgreSQLTestDatabase()
                databases[name] = database
                return database.url
            }
        }
    }
}

extension StorePlaces {
    /// The PostgreSQL database of the store named `name` (made by `url(_:)`), to run SQL on it directly.
    public func database(_ name: String) throws -> PostgreSQLTestDatabase {
        try lock.withLock { try databases[name].orThrow("no database named \(name)") }
    }

    /// Everything the store named `name` holds, to compare before and after: a SQLite store's file and WAL as they
    /// are, a PostgreSQL store's every table of its schema, row by row in key order.
    public func contents(_ name: String) throws -> [String] {
        switch backend {
        case .sqlite:
            let path = try url(name).path
            return ["", "-wal"].map { FileManager.default.contents(atPath: path + $0)?.base64EncodedString() ?? "-" }
        case .postgreSQL:
            let database = try database(name)
            let tables = try database.execute("SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")
            return try tables.compactMap { $0.first ?? nil }.flatMap { table in
                ["table \(table)"]
                    + (try database.execute("SELECT * FROM \(table) ORDER BY 1")).map { $0.map { $0 ?? "NULL" }.joined(separator: "|") }
            }
        }
    }
}

extension Optional {
    fileprivate func orThrow(_ message: String) throws -> Wrapped {
        guard let self else { throw CoreDataError(.persistentStoreOpen, message) }
        return self
    }
}
