import Foundation
import GRDB
import OpenCoreData
import OpenCoreDataModel
import Testing
import _TestSupport

/// Version hashes computed as Core Data computes them: equal to the `NSStoreModelVersionHashes` Apple's Core Data
/// recorded in the corpus's stores (`../shared/corpus/apple-stores`, skipped with a notice when absent), and sensitive
/// to exactly what Apple documents as part of them.
@Suite(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout")) struct AppleVersionHashTests {
    /// The stores whose every entity hash we reproduce from the XML model that wrote them.
    ///
    /// The two left out have no XML version that wrote them in the corpus (MagicalRecord's Recipes, RestKit's seed).
    static let matchingXML: Set<String> = [
        "artsy-folio/ArtsyPartner_1.3.5.sqlite", "artsy-folio/ArtsyPartner_1.3.sqlite",
        "artsy-folio/ArtsyPartner_1.4.sqlite", "artsy-folio/ArtsyPartner_1.6.sqlite",
        "artsy-folio/ArtsyPartner_2.0.sqlite", "artsy-folio/oss_stubbed_data.sqlite",
        "bnr-coredatastack/TestModel.sqlite", "coredataplus-samplemodel/SampleModel_V1.sqlite",
        "coredataplus-samplemodel/SampleModel_V2.sqlite", "coredataplus-samplemodel3/SampleModel3_V1.sqlite",
        "ddg-syncmetadata/SyncMetadata_V3.sqlite", "jbergier-migration/Example_v1.0.0.sqlite",
        "jbergier-migration/Example_v1.1.0.sqlite", "jbergier-migration/Example_v1.1.2.sqlite",
        "jbergier-migration/Example_v1.2.0.sqlite", "jbergier-migration/Example_v2.0.0.sqlite",
        "wibosco-migration/CoreDataMigration_Example_1.sqlite", "wibosco-migration/CoreDataMigration_Example_2.sqlite",
        "wibosco-migration/CoreDataMigration_Example_WAL.sqlite", "ddg-bookmarks/Bookmarks_V1.sqlite",
        "ddg-bookmarks/Bookmarks_V2.sqlite", "ddg-bookmarks/Bookmarks_V3.sqlite", "ddg-bookmarks/Bookmarks_V4.sqlite",
        "ddg-bookmarks/Bookmarks_V5.sqlite", "wire-zmessaging/store2-101-0.wiredatabase",
    ]

    /// Each entity's stored hash against the model's: (entities that agree, entities in the store).
    static func agreement(_ model: NSManagedObjectModel, _ stored: [String: Data]) -> (Int, Int) {
        let current = model.entityVersionHashesByName
        return (stored.filter { current[$0.key] == $0.value }.count, stored.count)
    }

    static func storedHashes(_ copy: URL) throws -> [String: Data] { try Requirement.recordedVersionHashes(copy) }

    @Test func theHashesOfEachStoresXMLModelAreTheOnesAppleRecorded() throws {
        let stores = AppleStoreTests.storesWithModels()
        try #require(!stores.isEmpty, "the corpus is there")
        let dir = TemporaryDirectory()
        var matching: Set<String> = []
        var report: [String] = []
        for (store, versions) in stores {
            let name = store.deletingLastPathComponent().lastPathComponent + "/" + store.lastPathComponent
            let stored = try Self.storedHashes(try AppleStoreTests.copy(store, into: dir))
            var best = (0, stored.count)
            for version in versions {
                guard let model = try? NSManagedObjectModel(contentsOf: version),
                    Set(model.entitiesByName.keys) == Set(stored.keys)
                else { continue }
                let agreed = Self.agreement(model, stored)
                if agreed.0 > best.0 { best = agreed }
            }
            if best.0 == best.1, best.1 > 0 { matching.insert(name) }
            report.append("\(name) \(best.0)/\(best.1)")
        }
        print("AppleVersionHashTests: entity hashes equal to Apple's, per store: \(report.joined(separator: ", "))")
        #expect(matching.isSuperset(of: Self.matchingXML), "no longer equal: \(Self.matchingXML.subtracting(matching).sorted())")
    }

    /// The same from the model each store caches (no XML needed): this also checks the compiled-model reader, which
    /// must carry everything the hash reads (the "preserve after deletion" flag, for one).
    @Test func theHashesOfEachStoresCachedModelAreTheOnesAppleRecorded() throws {
        let stores = AppleStoreTests.allStores()
        try #require(!stores.isEmpty, "the corpus is there")
        let dir = TemporaryDirectory()
        var matching: [String] = []
        var others: [String] = []
        var entities = (0, 0)
        for store in stores {
            let name = store.deletingLastPathComponent().lastPathComponent + "/" + store.lastPathComponent
            let copy = try AppleStoreTests.copy(store, into: dir)
            guard let model = try? NSManagedObjectModel.cachedModel(ofStoreAt: copy) else { continue }
            let agreed = Self.agreement(model, try Self.storedHashes(copy))
            entities = (entities.0 + agreed.0, entities.1 + agreed.1)
            if agreed.0 == agreed.1 { matching.append(name) } else { others.append("\(name) \(agreed.0)/\(agreed.1)") }
        }
        print(
            "AppleVersionHashTests: cached models: \(matching.count) stores all equal, \(entities.0) of \(entities.1) entities; not all: \(others)"
        )
        #expect(matching.count >= Self.matchingCached, "fewer stores than before: \(matching)")
    }

    /// How many corpus stores' cached models hash exactly as their stores say.
    static let matchingCached = 26

    /// What Apple documents as part of the hash changes it; what it leaves out (transient and fetched properties,
    /// indexes, delete rules, user info, class names, declaration order) does not.
    @Test func theHashFollowsWhatAffectsStorageOnly() throws {
        struct Shelf {
            let entity = NSEntityDescription(name: "Shelf")
            let name = NSAttributeDescription(name: "name", type: .stringAttributeType, isOptional: false)
            let size = NSAttributeDescription(name: "size", type: .integer32AttributeType)
            let books = NSRelationshipDescription(name: "books", destinationEntityName: "Book", inverseName: "shelf", toMany: true)
        }
        /// The entity's hash after `edit`, its properties declared in `order`.
        func hash(reversed: Bool = false, _ edit: (Shelf) -> Void) throws -> Data {
            let shelf = Shelf()
            let properties: [NSPropertyDescription] = [shelf.name, shelf.size, shelf.books]
            for property in reversed ? properties.reversed() : properties { shelf.entity.addProperty(property) }
            edit(shelf)
            let book = NSEntityDescription(name: "Book")
            book.addProperty(NSAttributeDescription(name: "title", type: .stringAttributeType))
            book.addProperty(NSRelationshipDescription(name: "shelf", destinationEntityName: shelf.entity.name, inverseName: "books"))
            let model = NSManagedObjectModel()
            model.addEntity(shelf.entity)
            model.addEntity(book)
            try model.validate()
            return shelf.entity.versionHash
        }
        let plain = try hash { _ in }
        let changing: [(String, (Shelf) -> Void)] = [
            ("entity name", { $0.entity.name = "Case" }), ("abstract", { $0.entity.isAbstract = true }),
            ("entity modifier", { $0.entity.versionHashModifier = "2" }),
            ("constraint", { $0.entity.uniquenessConstraints = [["name"]] }), ("attribute name", { $0.size.name = "width" }),
            ("optional", { $0.size.isOptional = false }), ("transient", { $0.size.isTransient = true }),
            ("type", { $0.size.attributeType = .integer64AttributeType }), ("property modifier", { $0.size.versionHashModifier = "2" }),
            ("preserve after deletion", { $0.size.preservesValueInHistoryOnDeletion = true }),
            ("maximum", { $0.books.maxCount = 5 }), ("minimum", { $0.books.minCount = 1 }), ("ordered", { $0.books.isOrdered = true }),
        ]
        for (what, edit) in changing { #expect(try hash(edit) != plain, "\(what) must change the hash") }
        let keeping: [(String, (Shelf) -> Void)] = [
            ("user info", { $0.entity.userInfo = ["k": "v"] }), ("class name", { $0.entity.managedObjectClassName = "Other" }),
            ("delete rule", { $0.books.deleteRule = .cascadeDeleteRule }), ("default value", { $0.size.defaultValue = .integer(3) }),
            ("renaming identifier", { $0.size.renamingIdentifier = "old" }),
            ("fetch index", { $0.entity.indexes = [NSFetchIndexDescription(name: "bySize", elements: [.init(propertyName: "size")])] }),
        ]
        for (what, edit) in keeping { #expect(try hash(edit) == plain, "\(what) must not change the hash") }
        #expect(try hash(reversed: true) { _ in } == plain, "declaration order must not change the hash")
    }

    /// A store Apple's Core Data wrote opens read-write with the model version that wrote it, found by its recorded
    /// hashes (CoreDataPlus's SampleModel3; DuckDuckGo's bookmarks, whose ordered relationships now hash as Core
    /// Data's, also without the model the store caches); with a newer version a container migrates it.
    @Test func anAppleStoreOpensReadWriteWithTheVersionThatWroteItAndMigratesToANewerOne() throws {
        let dir = TemporaryDirectory()
        let store = try AppleStoreTests.corpusCopy("coredataplus-samplemodel3/SampleModel3_V1.sqlite", into: dir)
        let bookmarks = try AppleStoreTests.corpusCopy("ddg-bookmarks/Bookmarks_V1.sqlite", into: dir)
        let model = try NSManagedObjectModel(
            contentsOf: AppleStoreTests.corpus.appendingPathComponent(
                "coredataplus-samplemodel3/SampleModel3.xcdatamodeld/SampleModel3.xcdatamodel"))
        let before = try Self.storedHashes(store)
        let count = try Self.count("User", in: store, model: model)
        let container = NSPersistentContainer(name: "Sample", managedObjectModel: model)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: store)]
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        try context.performAndWait {
            try context.make("User", ["name": "Written on Linux"])
            try context.save()
        }
        try container.removeStores()
        #expect(try Self.count("User", in: store, model: model) == count + 1)
        #expect(try Self.storedHashes(store) == before)

        // DuckDuckGo's bookmarks (ordered relationships): the version that wrote it opens it read-write.
        let bookmarkModel = try NSManagedObjectModel(
            contentsOf: AppleStoreTests.corpus.appendingPathComponent(
                "ddg-bookmarks/BookmarksModel.xcdatamodeld/BookmarksModel.xcdatamodel"))
        let bookmarkCount = try Self.count("BookmarkEntity", in: bookmarks, model: bookmarkModel)
        let writing = NSPersistentContainer(name: "Bookmarks", managedObjectModel: bookmarkModel)
        writing.persistentStoreDescriptions = [NSPersistentStoreDescription(url: bookmarks)]
        try writing.loadPersistentStores()
        let writer = writing.newBackgroundContext()
        try writer.performAndWait {
            try writer.make("BookmarkEntity", ["uuid": "linux", "title": "Written on Linux", "isFolder": false, "isFavorite": false])
            try writer.save()
        }
        try writing.removeStores()
        #expect(try Self.count("BookmarkEntity", in: bookmarks, model: bookmarkModel) == bookmarkCount + 1)
        // Migrating it to the version that wrote it changes nothing (Core Data's recorded hashes stay).
        let written = try Data(contentsOf: bookmarks)
        #expect(try SQLiteStore.migrateStore(at: bookmarks, to: bookmarkModel).changes.isEmpty)
        #expect(try Data(contentsOf: bookmarks) == written)
        // Without the model cache the hashes alone name the version that wrote it (ordered relationships included):
        // a container given the bundle finds it and migrates the store to the current version.
        let uncached = try AppleStoreTests.corpusCopy("ddg-bookmarks/Bookmarks_V2.sqlite", into: dir)
        try DatabaseQueue(path: uncached.path).write { db in try db.execute(sql: "DROP TABLE Z_MODELCACHE") }
        let bundle = AppleStoreTests.corpus.appendingPathComponent("ddg-bookmarks/BookmarksModel.xcdatamodeld")
        let writtenBy = try #require(
            try NSManagedObjectModel.version(
                inBundleAt: bundle,
                forStoreMetadata: NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: uncached)))
        let uncachedCount = try Self.count("BookmarkEntity", in: uncached, model: writtenBy)
        let finding = NSPersistentContainer(name: "Bookmarks", managedObjectModel: try NSManagedObjectModel(contentsOf: bundle))
        finding.persistentStoreDescriptions = [NSPersistentStoreDescription(url: uncached)]
        try finding.loadPersistentStores()
        let found = finding.newBackgroundContext()
        #expect(
            try found.performAndWait { try found.count(for: NSFetchRequest<NSManagedObject>(entityName: "BookmarkEntity")) }
                == uncachedCount)
        try finding.removeStores()
        // With the bundle's current version, a container migrates it (from the model it caches).
        let current = try NSManagedObjectModel(
            contentsOf: AppleStoreTests.corpus.appendingPathComponent("ddg-bookmarks/BookmarksModel.xcdatamodeld"))
        let migrating = NSPersistentContainer(name: "Bookmarks", managedObjectModel: current)
        migrating.persistentStoreDescriptions = [NSPersistentStoreDescription(url: bookmarks)]
        try migrating.loadPersistentStores()
        let reader = migrating.newBackgroundContext()
        #expect(
            try reader.performAndWait { try reader.count(for: NSFetchRequest<NSManagedObject>(entityName: "BookmarkEntity")) }
                == bookmarkCount + 1)
    }

    static func count(_ entity: String, in store: URL, model: NSManagedObjectModel) throws -> Int {
        let container = AppleStoreTests.readOnlyContainer(store, model)
        try container.loadPersistentStores()
        defer { try? container.removeStores() }
        let context = container.newBackgroundContext()
        return try context.performAndWait { try context.count(for: NSFetchRequest<NSManagedObject>(entityName: entity)) }
    }
}
