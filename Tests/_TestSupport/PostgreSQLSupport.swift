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
    public static var postgresIsPresent: Bool { postgresURL != nil }

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
    }

    deinit {
        guard let admin = try? PostgreSQLConnection(PostgreSQLLocation(server)) else { return }
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
