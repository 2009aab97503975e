import Foundation
import GRDB
import OpenSwiftData
import Testing
import _TestSupport

/// A to-do item as the smallest SwiftData apps declare it: a date and a text.
@Model final class Todo {
    var time: Date
    var text: String

    init(time: Date, text: String) {
        self.time = time
        self.text = text
    }
}

/// The file a container writes has the layout of a `default.store` SwiftData wrote on iOS.
///
/// What such a file holds is public only as its listing: `sqlite3 default.store` on a store a one-model app wrote in
/// the iOS simulator shows the tables `ACHANGE`, `ATRANSACTION`, `ATRANSACTIONSTRING`, `ZTODO`, `Z_METADATA`,
/// `Z_MODELCACHE` and `Z_PRIMARYKEY` (persistent history on, as SwiftData keeps it), and `ZTODO`'s columns `Z_PK INTEGER
/// PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZTIME TIMESTAMP, ZTEXT VARCHAR` (a blog post on android.benigumo.com,
/// "【SwiftData】 データストアファイルを SQLite コマンドで見てみる"). The app's source is not public, so the column order
/// after the three of Core Data's own is not checked: the names and types are.
@Suite struct SwiftDataStoreLayoutTests {
    @Test func aOneModelStoreHasTheTablesAndColumnsSwiftDataWrites() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("default.store")
        do {
            let container = try ModelContainer(for: Todo.self, configurations: ModelConfiguration(url: url))
            let context = ModelContext(container)
            context.insert(Todo(time: Date(timeIntervalSinceReferenceDate: 1000), text: "Buy milk"))
            try context.save()
        }
        let file = try storeFile(url)
        let tables = try file.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        }
        #expect(
            Set(tables) == ["ACHANGE", "ATRANSACTION", "ATRANSACTIONSTRING", "ZTODO", "Z_METADATA", "Z_MODELCACHE", "Z_PRIMARYKEY"],
            "\(tables.sorted())")
        let columns = try file.read { db in
            try Row.fetchAll(db, sql: "PRAGMA table_info(ZTODO)").map { row -> String in
                let name: String = row["name"]
                let type: String = row["type"]
                return "\(name) \(type)"
            }
        }
        #expect(Array(columns.prefix(3)) == ["Z_PK INTEGER", "Z_ENT INTEGER", "Z_OPT INTEGER"], "\(columns)")
        #expect(Set(columns.dropFirst(3)) == ["ZTIME TIMESTAMP", "ZTEXT VARCHAR"], "\(columns)")
        let primaryKey = try file.read { db in try Int.fetchOne(db, sql: "SELECT pk FROM pragma_table_info('ZTODO') WHERE name = 'Z_PK'") }
        #expect(primaryKey == 1)
        let row = try file.read { db in try Row.fetchOne(db, sql: "SELECT Z_ENT, Z_OPT, ZTIME, ZTEXT FROM ZTODO") }
        let stored = try #require(row)
        #expect(stored["ZTEXT"] as String == "Buy milk")
        #expect(stored["ZTIME"] as Double == 1000, "a date is stored as seconds since 2001, as Core Data stores it")
        let entityNumber = try file.read { db in try Int.fetchOne(db, sql: "SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Todo'") }
        #expect(entityNumber == stored["Z_ENT"] as Int, "the row's entity number is the one Z_PRIMARYKEY gives Todo")
        let changes = try file.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ACHANGE") }
        #expect(changes == 1, "the insert is in the store's history")
    }
}
