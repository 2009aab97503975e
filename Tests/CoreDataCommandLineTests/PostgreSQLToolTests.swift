import CoreDataCommandLine
import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// `coredata` with `--store postgresql://…`: import, fetch, info and migrate on a PostgreSQL store, the model read back
/// from the store's cache, and the URL's password in no line of any output.
@Suite(.enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLToolTests {
    let dir = TemporaryDirectory()
    var groceriesModel: String { Fixtures.url("Groceries.xcdatamodel").path }

    @Test func migrateMovesAPostgreSQLStoreToTheCurrentVersion() throws {
        try MigrateToolTests().migrateMovesAStoreToTheCurrentVersion(StorePlaces(.postgreSQL))
    }

    @Test func importFetchAndInfoOnAPostgreSQLStoreNeverPrintThePassword() throws {
        let database = try PostgreSQLTestDatabase()
        // The test server trusts every local login, so any password opens it: this one must appear nowhere.
        var components = try #require(URLComponents(url: database.url, resolvingAgainstBaseURL: false))
        components.password = "s3cret-pass-word"
        let store = try #require(components.string)
        let file = dir.file("g.json")
        try Data(groceriesJSON.utf8).write(to: file)
        var outputs: [String] = []
        func run(_ arguments: [String]) -> (code: Int32, out: String, err: String) {
            let result = coredata(arguments)
            outputs += [result.out, result.err]
            return result
        }
        let imported = run(["import", "--model", groceriesModel, "--store", store, "--entity", "Products", file.path])
        #expect(imported.code == 0, "\(imported.err)")
        #expect(imported.out.contains("Imported 9 objects (Products: 9) into postgresql://"), "\(imported.out)")
        // No --model: the store's own cache (Z_MODELCACHE) gives it.
        let fetched = run([
            "fetch", "--store", store, "--entity", "Products", "--predicate", "name CONTAINS[cd] 'cheese' AND price < 500", "--sort",
            "name",
            "--sort", "price:desc",
        ])
        #expect(fetched.code == 0, "\(fetched.err)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(fetched.out.utf8)) as? [[String: Any]])
        #expect(rows.map { $0["name"] as? String } == ["Cheddar Cheese", "Cheddar Cheese", "Parmesan Cheese"])
        #expect(rows.map { ($0["price"] as? NSNumber)?.intValue } == [400, 221, 345])
        let info = run(["info", "--store", store])
        #expect(info.code == 0, "\(info.err)")
        let described = try #require(try JSONSerialization.jsonObject(with: Data(info.out.utf8)) as? [String: Any])
        #expect((described["store"] as? String)?.hasPrefix("postgresql://postgres:***@127.0.0.1") == true, "\(described["store"] ?? "")")
        #expect((described["metadata"] as? [String: Any])?["NSStoreType"] as? String == NSPostgreSQLStoreType)
        #expect((described["model"] as? [String: Any])?["matchesStore"] as? Bool == true, "\(info.out)")
        // A failure names the server and database, not the password.
        let missing = run(["fetch", "--store", store + "_missing", "--model", groceriesModel, "--entity", "Products"])
        #expect(missing.code != 0 && missing.err.contains(database.name + "_missing"), "\(missing.err)")
        for output in outputs { #expect(!output.contains("s3cret"), "\(output)") }
    }
}
