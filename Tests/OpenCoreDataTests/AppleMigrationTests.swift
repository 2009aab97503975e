import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Stores Apple's Core Data wrote migrate to their bundle's current model version: every object of an entity the
/// newer version still has is there after, with every value readable (`../shared/corpus/apple-stores`; skipped with a
/// notice when absent).
@Suite(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout")) struct AppleMigrationTests {
    /// The stores that migrate today.
    ///
    /// Not the others, rightly: CoreDataPlus's V2 and Wibosco's two older stores gain a required value without
    /// default (their apps migrate them with custom stages). Artsy's earlier files change relationships' destinations
    /// to other entities (`Album.cover`: `Artwork` → `Image`); Artsy's own tests migrate them with an inferred mapping
    /// on Apple's platforms (`ARAppDataMigrationsTest.m`), and so do we, dropping the links that no longer fit.
    static let migrating: Set<String> = [
        "artsy-folio/ArtsyPartner_1.3.sqlite", "artsy-folio/ArtsyPartner_1.3.5.sqlite", "artsy-folio/ArtsyPartner_1.4.sqlite",
        "artsy-folio/ArtsyPartner_1.6.sqlite", "artsy-folio/ArtsyPartner_2.0.sqlite",
        "artsy-folio/oss_stubbed_data.sqlite", "bnr-coredatastack/TestModel.sqlite", "ddg-bookmarks/Bookmarks_V1.sqlite",
        "ddg-bookmarks/Bookmarks_V2.sqlite", "ddg-bookmarks/Bookmarks_V3.sqlite", "ddg-bookmarks/Bookmarks_V4.sqlite",
        "ddg-bookmarks/Bookmarks_V5.sqlite", "ddg-syncmetadata/SyncMetadata_V3.sqlite", "jbergier-migration/Example_v1.0.0.sqlite",
        "jbergier-migration/Example_v1.1.0.sqlite", "jbergier-migration/Example_v1.1.2.sqlite", "jbergier-migration/Example_v1.2.0.sqlite",
        "wibosco-migration/CoreDataMigration_Example_WAL.sqlite",
    ]

    /// As an app opens its store: a container with the bundle's current version, migrating automatically, finds the
    /// version that wrote the store among the bundle's (Artsy's stores keep no model cache) or in the store's cache,
    /// and keeps every object of the entities that remain.
    @Test func aContainerWithTheBundlesModelMigratesEveryStoreAsAnAppWould() throws {
        let stores = AppleStoreTests.storesWithModels()
        try #require(!stores.isEmpty, "the corpus is there")
        let dir = TemporaryDirectory()
        var opened: [String] = []
        for (store, versions) in stores {
            let name = store.deletingLastPathComponent().lastPathComponent + "/" + store.lastPathComponent
            guard Self.migrating.contains(name), let bundle = versions.first?.deletingLastPathComponent() else { continue }
            let copy = try AppleStoreTests.copy(store, into: dir)
            let metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: copy)
            let source =
                try NSManagedObjectModel.version(inBundleAt: bundle, forStoreMetadata: metadata)
                ?? NSManagedObjectModel.cachedModel(ofStoreAt: copy)
            let before = try counts(copy, source)
            let current = try NSManagedObjectModel(contentsOf: bundle)
            let container = NSPersistentContainer(name: "App", managedObjectModel: current)
            container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: copy)]
            do {
                try container.loadPersistentStores()
            } catch {
                Issue.record("\(name): \(error)")
                continue
            }
            try container.removeStores()
            let after = try counts(copy, current)
            let kept = before.filter { current.entitiesByName[$0.key] != nil }
            #expect(kept.allSatisfy { after[$0.key] == $0.value }, "\(name): before \(kept) after \(after)")
            opened.append(name)
        }
        print("AppleMigrationTests: \(opened.count) stores opened by a container with their bundle's current version")
        #expect(opened.count == Self.migrating.count, "opened \(opened.sorted())")
    }

    @Test func everyAppleStoreMigratesToItsBundlesCurrentVersion() throws {
        let stores = AppleStoreTests.storesWithModels()
        try #require(!stores.isEmpty, "the corpus is there")
        let dir = TemporaryDirectory()
        var migrated: Set<String> = []
        var report: [String] = []
        for (store, versions) in stores {
            let name = store.deletingLastPathComponent().lastPathComponent + "/" + store.lastPathComponent
            guard let bundle = versions.first?.deletingLastPathComponent(), bundle.pathExtension == "xcdatamodeld",
                let current = try? NSManagedObjectModel(contentsOf: bundle)
            else { continue }
            let copy = try AppleStoreTests.copy(store, into: dir)
            // The version that wrote it: the one that opens it.
            var source: NSManagedObjectModel?
            for version in versions {
                guard let model = try? NSManagedObjectModel(contentsOf: version) else { continue }
                let reading = AppleStoreTests.readOnlyContainer(copy, model)
                if (try? reading.loadPersistentStores()) != nil {
                    source = model
                    try reading.removeStores()
                    break
                }
            }
            guard let source, source.entityVersionHashesByName != current.entityVersionHashesByName else { continue }
            let before = try counts(copy, source)
            do {
                try SQLiteStore.migrateStore(at: copy, to: current, from: source)
                let container = AppleStoreTests.readOnlyContainer(copy, current)
                try container.loadPersistentStores()
                try AppleStoreTests().checkEveryObject(container, model: current, file: copy, name: name)
                let after = try counts(copy, current)
                let kept = before.filter { current.entitiesByName[$0.key] != nil }
                #expect(kept.allSatisfy { after[$0.key] == $0.value }, "\(name): before \(kept) after \(after)")
                migrated.insert(name)
            } catch {
                report.append("\(name): \(error)")
            }
        }
        print("AppleMigrationTests: \(migrated.count) stores migrated to their bundle's current version: \(migrated.sorted())")
        print("AppleMigrationTests: not migrated: \(report.joined(separator: "\n"))")
        #expect(migrated.isSuperset(of: Self.migrating), "no longer migrating: \(Self.migrating.subtracting(migrated).sorted())")
    }

    /// Each entity's own objects, by a read-only open with `model`.
    func counts(_ store: URL, _ model: NSManagedObjectModel) throws -> [String: Int] {
        let container = AppleStoreTests.readOnlyContainer(store, model)
        try container.loadPersistentStores()
        defer { try? container.removeStores() }
        let context = container.newBackgroundContext()
        return try context.performAndWait {
            var counts: [String: Int] = [:]
            for entity in model.entities {
                let request = NSFetchRequest<NSManagedObject>(entityName: entity.name)
                request.includesSubentities = false
                counts[entity.name] = try context.count(for: request)
            }
            return counts
        }
    }
}

/// A store migrated here records the hashes Apple's Core Data records for the same model version, ordered
/// relationships included: DuckDuckGo's bookmark stores of versions 1 to 4, migrated to version 5, record exactly
/// the hashes Apple's framework wrote into the version-5 store, so Core Data on Apple's platforms recognises them.
@Suite(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout")) struct AppleMigratedHashTests {
    @Test func migratedStoresRecordApplesHashesForTheirNewVersion() throws {
        let dir = TemporaryDirectory()
        let target = try AppleStoreTests.corpusCopy("ddg-bookmarks/Bookmarks_V5.sqlite", into: dir)
        let apple = try AppleVersionHashTests.storedHashes(target)
        let version5 = try NSManagedObjectModel(
            contentsOf: AppleStoreTests.corpus.appendingPathComponent(
                "ddg-bookmarks/BookmarksModel.xcdatamodeld/BookmarksModel 5.xcdatamodel"))
        #expect(version5.entityVersionHashesByName == apple)
        var migrated = 0
        for n in 1...4 {
            let store = try AppleStoreTests.corpusCopy("ddg-bookmarks/Bookmarks_V\(n).sqlite", into: dir)
            guard try AppleVersionHashTests.storedHashes(store) != apple else { continue }  // already version 5's
            _ = try SQLiteStore.migrateStore(at: store, to: version5)
            #expect(try AppleVersionHashTests.storedHashes(store) == apple, "Bookmarks_V\(n)")
            migrated += 1
        }
        #expect(migrated > 0)
        print("AppleMigratedHashTests: \(migrated) DuckDuckGo stores migrated to version 5 record Apple's hashes for it")
    }
}
