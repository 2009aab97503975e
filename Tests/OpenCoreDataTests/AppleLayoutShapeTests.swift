import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// A store this project writes has the shape Apple's Core Data gives the same model: for every corpus store that
/// opens with an XML model beside it, a new store written here from that model has the same tables with the same
/// columns (`../shared/corpus/apple-stores`; skipped with a notice when absent).
@Suite(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout")) struct AppleLayoutShapeTests {
    /// Stores whose tables and columns a new store written here reproduces exactly.
    ///
    /// Not the others, which Apple
    /// migrated in place (they keep columns and join-table numbering of earlier versions: Artsy's `oss_stubbed_data`,
    /// DuckDuckGo's V5 and Wibosco's WAL store hold columns their model no longer has, Wire renamed its join tables).
    static let sameShape: Set<String> = [
        "artsy-folio/ArtsyPartner_1.3.5.sqlite", "artsy-folio/ArtsyPartner_1.3.sqlite", "artsy-folio/ArtsyPartner_1.4.sqlite",
        "artsy-folio/ArtsyPartner_1.6.sqlite", "artsy-folio/ArtsyPartner_2.0.sqlite", "bnr-coredatastack/TestModel.sqlite",
        "coredataplus-samplemodel/SampleModel_V1.sqlite", "coredataplus-samplemodel/SampleModel_V2.sqlite",
        "coredataplus-samplemodel3/SampleModel3_V1.sqlite", "ddg-bookmarks/Bookmarks_V1.sqlite", "ddg-bookmarks/Bookmarks_V2.sqlite",
        "ddg-bookmarks/Bookmarks_V3.sqlite", "ddg-bookmarks/Bookmarks_V4.sqlite", "ddg-syncmetadata/SyncMetadata_V3.sqlite",
        "jbergier-migration/Example_v1.0.0.sqlite", "jbergier-migration/Example_v1.1.0.sqlite",
        "jbergier-migration/Example_v1.1.2.sqlite", "jbergier-migration/Example_v1.2.0.sqlite",
        "jbergier-migration/Example_v2.0.0.sqlite", "wibosco-migration/CoreDataMigration_Example_1.sqlite",
        "wibosco-migration/CoreDataMigration_Example_2.sqlite",
    ]

    /// Each entity table and join table of the database, with its columns (Core Data's bookkeeping and persistent
    /// history left out).
    static func shape(of file: URL) throws -> [String: [String]] {
        let queue = try DatabaseQueue(
            path: file.path,
            configuration: {
                var c = Configuration(); c.readonly = true; return c
            }())
        defer { try? queue.close() }
        return try queue.read { db in
            var tables: [String: [String]] = [:]
            for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z%'")
            where !["Z_METADATA", "Z_MODELCACHE", "Z_PRIMARYKEY"].contains(table) {
                tables[table] = try db.columns(in: table).map(\.name).sorted()
            }
            return tables
        }
    }

    @Test func newStoresHaveTheTablesAndColumnsAppleGivesTheSameModel() throws {
        let stores = AppleStoreTests.storesWithModels()
        try #require(!stores.isEmpty, "the corpus is there")
        let dir = TemporaryDirectory()
        var same: Set<String> = []
        var report: [String] = []
        for (index, (store, versions)) in stores.enumerated() {
            let name = store.deletingLastPathComponent().lastPathComponent + "/" + store.lastPathComponent
            let copy = try AppleStoreTests.copy(store, into: dir)
            for version in versions {
                guard let model = try? NSManagedObjectModel(contentsOf: version) else { continue }
                let reading = AppleStoreTests.readOnlyContainer(copy, model)
                do { try reading.loadPersistentStores() } catch {
                    print("AppleLayoutShapeTests: \(name) with \(version.lastPathComponent): \(error)")
                    continue
                }
                try reading.removeStores()
                let fresh = dir.file("fresh-\(index).sqlite")
                let writing = NSPersistentContainer(name: "Fresh", managedObjectModel: try NSManagedObjectModel(contentsOf: version))
                writing.persistentStoreDescriptions = [NSPersistentStoreDescription(url: fresh)]
                try writing.loadPersistentStores()
                try writing.removeStores()
                let apple = try Self.shape(of: copy).filter { !$0.key.hasPrefix("A") }
                let ours = try Self.shape(of: fresh)
                if apple == ours {
                    same.insert(name)
                } else {
                    let differing = Set(apple.keys).union(ours.keys).sorted().filter { apple[$0] != ours[$0] }
                    report.append(
                        "\(name): "
                            + differing.prefix(3).map { "\($0) Apple \(apple[$0] ?? []) ours \(ours[$0] ?? [])" }.joined(separator: "; "))
                }
                break
            }
        }
        print("AppleLayoutShapeTests: \(same.count) stores with the same shape: \(same.sorted())")
        print("AppleLayoutShapeTests: differing: \(report.joined(separator: "\n"))")
        #expect(same.isSuperset(of: Self.sameShape), "no longer the same: \(Self.sameShape.subtracting(same).sorted())")
    }
}
