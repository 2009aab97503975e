import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataStore

/// The PostgreSQL store's connections: what errors say about the server, TLS when the URL asks for it, and where the
/// password comes from (never shown). Part of `PostgreSQLStoreTests` (its server requirement applies).
extension PostgreSQLStoreTests {
    @Test func errorsNameTheServerAndDatabaseButNeverThePassword() throws {
        let server = try #require(Requirement.postgresURL)
        var components = try #require(URLComponents(url: server, resolvingAgainstBaseURL: false))
        components.password = "hunter2-secret"
        components.path = "/no_such_database_here"
        let url = try #require(components.url)
        let container = NSPersistentContainer(name: "Missing", managedObjectModel: try Self.model())
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        var message = ""
        #expect {
            try container.loadPersistentStores()
        } throws: { error in
            message = "\(error) \((error as? CoreDataError)?.message ?? "") \(String(reflecting: error))"
            return true
        }
        #expect(message.contains("no_such_database_here") && message.contains("127.0.0.1"), "\(message)")
        #expect(!message.contains("hunter2"), "\(message)")
        // A server nobody listens on: unreachable, named, within the timeout.
        components.port = 1
        let store = #expect(throws: CoreDataError.self) {
            try PostgreSQLStore(url: components.url!, model: try Self.model(), timeout: 1)
        }
        #expect(
            store?.message.contains("cannot be reached") == true && store?.message.contains("hunter2") == false,
            "\(String(describing: store))")
    }

    /// TLS when the URL asks for it: `require` encrypts, `verify-full` also checks the certificate against the CA file
    /// and the host name, and a certificate no trusted CA signed is refused with an error naming the server.
    @Test(.enabled(if: Requirement.postgresCA != nil, "the test server has no TLS certificate: set OCD_POSTGRES_CA (.ci/run makes one)"))
    func tlsIsUsedWhenTheURLAsksForItAndTheCertificateIsChecked() throws {
        let database = try PostgreSQLTestDatabase()
        let ca = try #require(Requirement.postgresCA)
        func encrypted(_ query: String) throws -> Bool {
            let url = try #require(URL(string: database.url.absoluteString + "?" + query))
            let connection = try PostgreSQLConnection(PostgreSQLLocation(url))
            defer { connection.close() }
            var ssl = false
            try connection.forEachRow(sql: "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", arguments: []) { row in
                ssl = row.integer(0) == 1
            }
            return ssl
        }
        #expect(try encrypted("sslmode=disable") == false)
        #expect(try encrypted("sslmode=require") == true)
        #expect(try encrypted("sslmode=verify-full&sslrootcert=\(ca)") == true)
        // A store opens over it, too.
        let url = try #require(URL(string: database.url.absoluteString + "?sslmode=verify-full&sslrootcert=\(ca)"))
        _ = try PostgreSQLStore(url: url, model: try Self.model())
        // Another CA's certificates do not vouch for the server.
        let others = "/etc/ssl/certs/ca-certificates.crt"
        if FileManager.default.fileExists(atPath: others) {
            let refused = #expect(throws: CoreDataError.self) { _ = try encrypted("sslmode=verify-full&sslrootcert=\(others)") }
            #expect(refused?.message.contains("127.0.0.1") == true, "\(String(describing: refused))")
        }
        let missing = #expect(throws: CoreDataError.self) { _ = try encrypted("sslmode=verify-full") }
        #expect(missing?.message.contains("sslrootcert") == true)
    }

    /// A role that must give a password (the test server asks `ocd_password_check` for one over TCP; `.ci/run` sets
    /// that up): the password comes from the URL, else `PGPASSWORD`, else `.pgpass` (`PGPASSFILE`); a wrong one is an
    /// error naming the server, the database and the user — never the password.
    @Test func thePasswordComesFromTheURLThenPGPASSWORDThenPgpassAndIsNeverShown() throws {
        let database = try PostgreSQLTestDatabase()
        let secret = "Pw-\(UUID().uuidString.prefix(8))"
        _ = try database.execute(
            """
            DO $$ BEGIN CREATE ROLE ocd_password_check LOGIN PASSWORD '\(secret)';
            EXCEPTION WHEN duplicate_object THEN ALTER ROLE ocd_password_check LOGIN PASSWORD '\(secret)'; END $$
            """)
        var components = try #require(URLComponents(url: database.url, resolvingAgainstBaseURL: false))
        components.user = "ocd_password_check"
        let bare = try #require(components.url)
        func connects(_ url: URL, _ environment: [String: String] = [:]) throws {
            let connection = try PostgreSQLConnection(PostgreSQLLocation(url, environment: environment))
            connection.close()
        }
        // Without a password the server refuses the login; with the right one from any of the three places it admits it.
        let refused = #expect(throws: CoreDataError.self) { try connects(bare) }
        #expect(refused?.message.contains("ocd_password_check") == true, "\(String(describing: refused))")
        components.password = secret
        try connects(try #require(components.url))
        try connects(bare, ["PGPASSWORD": secret])
        let folder = TemporaryDirectory()
        let passfile = folder.file("pgpass")
        try Data("# host:port:database:user:password\n*:*:*:nobody:nope\n127.0.0.1:*:\(database.name):ocd_password_check:\(secret)\n".utf8)
            .write(to: passfile)
        try connects(bare, ["PGPASSFILE": passfile.path])
        // A wrong password: the message names server, database and user, and shows no password.
        components.password = "wrong-\(secret)"
        let wrong = #expect(throws: CoreDataError.self) { try connects(try #require(components.url)) }
        let message = wrong.map { "\($0.message) \(String(reflecting: $0))" } ?? ""
        #expect(message.contains("127.0.0.1") && message.contains(database.name) && message.contains("ocd_password_check"), "\(message)")
        #expect(!message.contains(secret), "\(message)")
        _ = try database.execute("DROP OWNED BY ocd_password_check")
    }
}
