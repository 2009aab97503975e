import Foundation
import OpenCoreDataModel

/// Where a PostgreSQL store lives, read from its URL the way libpq reads one:
/// `postgresql://user[:password]@host[:port]/database[?sslmode=…&sslrootcert=…&host=/socket/folder&notify=off&isolation=…]`.
///
/// The password comes from the URL, else `PGPASSWORD`, else the first matching line of `~/.pgpass` (or `PGPASSFILE`).
/// It is never shown: `description` masks it, and every error and log line names the store by `description`.
package struct PostgreSQLLocation: Sendable, Hashable, CustomStringConvertible {
    /// How the connection is secured (`sslmode`).
    package enum TLSMode: String, Sendable, Hashable {
        /// No TLS (`disable`; `allow` and `prefer` too, which libpq tries in plain text first on a local server).
        case disable
        /// TLS, without checking the server's certificate (`require`).
        case require
        /// TLS, the certificate checked against the CA (`verify-ca`).
        case verifyCA = "verify-ca"
        /// TLS, the certificate checked against the CA and the host name (`verify-full`).
        case verifyFull = "verify-full"
    }

    package var host: String
    package var port: Int
    /// The folder of the server's Unix socket (`?host=/folder`), used instead of TCP when given.
    package var socketFolder: String?
    package var user: String
    package var database: String
    package var tls: TLSMode
    /// The CA certificates a `verify-ca` or `verify-full` connection trusts (`sslrootcert`).
    package var rootCertificateFile: String?
    /// Whether commits wake other processes with `NOTIFY` (`notify=off`: they find them by polling the history table,
    /// for engines without `LISTEN`/`NOTIFY` across nodes).
    package var notifies: Bool
    /// The isolation level of the store's transactions (`isolation=serializable` or `repeatable-read`; nil: the
    /// server's default, `READ COMMITTED` on PostgreSQL, `SERIALIZABLE` on CockroachDB).
    package var isolation: String?
    /// The password to connect with, from wherever it came: never part of a description.
    private let password: String?

    /// Reads a store URL.
    ///
    /// - Throws: `CoreDataError(.persistentStoreOpen)` naming what is wrong (the URL's password masked).
    package init(_ url: URL, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard StoreKind.isPostgreSQL(url), let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw CoreDataError(.persistentStoreOpen, "\(Self.masked(url)) is not a PostgreSQL URL (postgresql://user@host:port/database).")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        port = components.port ?? Int(environment["PGPORT"] ?? "") ?? 5432
        socketFolder = query["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        user = components.user.flatMap { $0.isEmpty ? nil : $0 } ?? environment["PGUSER"] ?? environment["USER"] ?? "postgres"
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? (environment["PGDATABASE"] ?? user) : path
        let mode = query["sslmode"] ?? environment["PGSSLMODE"] ?? "disable"
        switch mode {
        case "disable", "allow", "prefer": tls = .disable
        case "require": tls = .require
        case "verify-ca": tls = .verifyCA
        case "verify-full": tls = .verifyFull
        default:
            throw CoreDataError(
                .persistentStoreOpen,
                "\(Self.masked(url)) asks for sslmode=\(mode); use disable, require, verify-ca or verify-full.")
        }
        rootCertificateFile = query["sslrootcert"] ?? environment["PGSSLROOTCERT"]
        if tls == .verifyCA || tls == .verifyFull, rootCertificateFile == nil {
            throw CoreDataError(
                .persistentStoreOpen, "\(Self.masked(url)) asks for sslmode=\(mode) but names no CA file (sslrootcert=/path/to/ca.pem).")
        }
        switch query["notify"]?.lowercased() {
        case nil, "on", "true", "1": notifies = true
        case "off", "false", "0": notifies = false
        case let other?: throw CoreDataError(.persistentStoreOpen, "\(Self.masked(url)) has notify=\(other); use on or off.")
        }
        switch query["isolation"]?.lowercased() {
        case nil, "", "default": isolation = nil
        case "serializable": isolation = "SERIALIZABLE"
        case "repeatable-read", "repeatable read": isolation = "REPEATABLE READ"
        case "read-committed", "read committed": isolation = "READ COMMITTED"
        case let other?:
            throw CoreDataError(
                .persistentStoreOpen, "\(Self.masked(url)) has isolation=\(other); use serializable, repeatable-read or read-committed.")
        }
        let given = components.password.flatMap { $0.isEmpty ? nil : $0 }
        let (fileHost, port, database, user) = (socketFolder == nil ? host : "localhost", port, database, user)
        password =
            given ?? environment["PGPASSWORD"]
            ?? Self.passwordFile(environment).flatMap { Self.lookUp(in: $0, host: fileHost, port: port, database: database, user: user) }
    }

    /// The password to connect with (never printed).
    package var secret: String? { password }

    /// The store's URL without its password: `postgresql://user@host:port/database`.
    package var description: String {
        let place = socketFolder.map { "\(host):\(port)?host=\($0)" } ?? "\(host):\(port)"
        return "postgresql://\(user)@\(place)/\(database)"
    }

    /// `url` with its password, if any, replaced by `***`.
    package static func masked(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "a PostgreSQL URL" }
        if components.password != nil { components.password = "***" }
        return components.string ?? "a PostgreSQL URL"
    }

    /// `~/.pgpass`, or the file `PGPASSFILE` names.
    private static func passwordFile(_ environment: [String: String]) -> String? {
        if let file = environment["PGPASSFILE"] { return file }
        return environment["HOME"].map { $0 + "/.pgpass" }
    }

    /// The password of the first line of a `.pgpass` file that matches (`host:port:database:user:password`, `*`
    /// matching anything, `\:` and `\\` escaped).
    static func lookUp(in file: String, host: String, port: Int, database: String, user: String) -> String? {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return nil }
        for line in text.split(whereSeparator: \.isNewline) where !line.hasPrefix("#") {
            let fields = splitFields(String(line))
            guard fields.count == 5 else { continue }
            let wanted = [host, String(port), database, user]
            if zip(fields.prefix(4), wanted).allSatisfy({ $0 == "*" || $0 == $1 }) { return fields[4] }
        }
        return nil
    }

    private static func splitFields(_ line: String) -> [String] {
        var fields: [String] = []
        var current = ""
        var escaped = false
        for character in line {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == ":" {
                fields.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        fields.append(current)
        return fields
    }
}
