import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// A property that changes kind between two versions of a real model: Mastodon for iOS made `Status.mentions` a
/// to-many relationship (to `Mention`) in version 2 and a Binary attribute in version 3, dropping `Mention`.
///
/// Core Data's inference (`_NSMappingModelBuilder`, in the published disassembly) logs "properties cannot be mapped
/// to other property types" and maps the destination property as a new one, leaving the source's values behind; the
/// migration succeeds. So does ours.
@Suite(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout")) struct PropertyKindChangeMigrationTests {
    static let bundle = Requirement.corpus.appendingPathComponent("models/mastodon.xcdatamodeld")

    static func version(_ name: String) throws -> NSManagedObjectModel {
        try NSManagedObjectModel(contentsOf: bundle.appendingPathComponent("\(name).xcdatamodel"))
    }

    @Test func aRelationshipThatBecomesAnAttributeIsMappedAsANewAttribute() throws {
        let (v2, v3) = (try Self.version("CoreData 2"), try Self.version("CoreData 3"))
        let mapping = try NSMappingModel.inferredMappingModel(forSourceModel: v2, destinationModel: v3)
        let status = try #require(mapping.entityMappings.first { $0.destinationEntityName == "Status" })
        let mentions = try #require(status.attributeMappings.first { $0.name == "mentions" })
        #expect(mentions.sourcePropertyName == nil, "a new attribute: nothing is read from the relationship")
        #expect(status.attributeMappings.first { $0.name == "content" }?.sourcePropertyName == "content")
    }

    @Test func aStoreOfTheOlderVersionMigratesKeepingEverythingElse() throws {
        let (v2, v3) = (try Self.version("CoreData 2"), try Self.version("CoreData 3"))
        let dir = TemporaryDirectory()
        let store = dir.file("Mastodon.sqlite")
        do {
            let stack = try TestStack(model: v2)
            try stack.container.removeStores()
            try FileManager.default.copyItem(at: stack.storeURL, to: store)
            for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: stack.storeURL.path + suffix) {
                try FileManager.default.copyItem(atPath: stack.storeURL.path + suffix, toPath: store.path + suffix)
            }
        }
        // A status with two mentions and its author, written as rows: every attribute column gets a value of its SQL
        // type (what the rows hold besides does not matter here), foreign keys are set where they link.
        try DatabaseQueue(path: store.path).write { db in
            func insert(_ entity: String, _ table: String, pk: Int64, _ values: [String: (any DatabaseValueConvertible)?]) throws {
                let ent = try #require(try Int64.fetchOne(db, sql: "SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = ?", arguments: [entity]))
                var row: [String: (any DatabaseValueConvertible)?] = ["Z_PK": pk, "Z_ENT": ent, "Z_OPT": 1]
                let columns = Set(try Row.fetchAll(db, sql: "PRAGMA table_info(\(table))").map { $0["name"] as String })
                for attribute in try #require(v2.entitiesByName[entity]).allAttributes where !attribute.isTransient {
                    let column = "Z" + attribute.name.uppercased()
                    guard columns.contains(column) else { continue }
                    switch attribute.attributeType {
                    case .stringAttributeType: row[column] = "x"
                    case .dateAttributeType, .doubleAttributeType, .floatAttributeType, .decimalAttributeType: row[column] = 700_000_000.0
                    case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType, .booleanAttributeType: row[column] = 0
                    default: continue
                    }
                }
                for (key, value) in values { row[key] = value }
                let keys = Array(row.keys)
                try db.execute(
                    sql: "INSERT INTO \(table) (\(keys.joined(separator: ", "))) VALUES (\(keys.map { _ in "?" }.joined(separator: ", ")))",
                    arguments: StatementArguments(keys.map { row[$0] ?? nil }))
                try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = max(Z_MAX, ?) WHERE Z_NAME = ?", arguments: [pk, entity])
            }
            try insert("MastodonUser", "ZMASTODONUSER", pk: 1, [:])
            try insert("Status", "ZSTATUS", pk: 1, ["ZID": "s1", "ZCONTENT": "hello @a @b", "ZAUTHOR": 1])
            for (pk, acct) in [(Int64(1), "a"), (2, "b")] { try insert("Mention", "ZMENTION", pk: pk, ["ZACCT": acct, "ZSTATUS": 1]) }
        }
        _ = try SQLiteStore.migrateStore(at: store, to: v3)

        let container = NSPersistentContainer(name: "Mastodon", managedObjectModel: v3)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: store)]
        try container.loadPersistentStores()
        defer { try? container.removeStores() }
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let statuses = try context.objects("Status")
            #expect(statuses.count == 1)
            let status = try #require(statuses.first)
            #expect(status.string("content") == "hello @a @b" && status.string("id") == "s1")
            #expect(status.value(forKey: "mentions") == nil, "the relationship's destinations are not carried into the attribute")
        }
        let column = try DatabaseQueue(path: store.path).read { db in
            try Row.fetchAll(db, sql: "PRAGMA table_info(ZSTATUS)").first { $0["name"] as String == "ZMENTIONS" }?["type"] as String?
        }
        #expect(column == "BLOB", "the attribute's column, in the type Core Data gives Binary")
        let tables = try DatabaseQueue(path: store.path).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        #expect(!tables.contains("ZMENTION"), "the entity the new version dropped is gone with its rows")
    }
}
