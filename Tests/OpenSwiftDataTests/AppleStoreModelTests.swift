// Stores Apple's Core Data wrote on iOS and macOS (the corpus beside the checkout), opened with `@Model` classes
// written from their Xcode models (AppleStoreModels.swift): the classes map to the entities' recorded version hashes,
// so a container opens each store as it is (no migration), reads what Apple wrote, and writes rows Core Data reads.
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenSwiftData

@Suite(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout"))
struct AppleStoreModelTests {
    /// A copy of the corpus's store `relative` (with its -wal and -shm) in `directory`.
    static func copy(_ relative: String, into directory: TemporaryDirectory) throws -> URL {
        let store = Requirement.corpus.appendingPathComponent("apple-stores").appendingPathComponent(relative)
        try #require(FileManager.default.fileExists(atPath: store.path), "\(store.path) is in the corpus")
        return try directory.copy(ofStore: store)
    }

    /// Opens `url` with `types`, after checking that the schema's entities hash as the store records (so the store
    /// opens without a migration), and runs `body` on a context of it.
    static func withStore<Result>(
        _ url: URL, _ types: [any PersistentModel.Type], _ body: (ModelContext) throws -> Result
    ) throws -> Result {
        let stored = try Requirement.recordedVersionHashes(url)
        try #require(!stored.isEmpty, "the store records its version hashes")
        let container = try ModelContainer(for: Schema(types), configurations: ModelConfiguration(url: url))
        let computed = container.persistentContainer.managedObjectModel.entityVersionHashesByName
        #expect(Set(computed.keys) == Set(stored.keys))
        for (entity, hash) in stored {
            #expect(computed[entity] == hash, "\(entity): the @Model class hashes as Core Data recorded")
        }
        let result = try body(ModelContext(container))
        #expect(try Requirement.recordedVersionHashes(url) == stored, "the store was not migrated")
        return result
    }

    @Test func aUserStoreReadsAndTakesNewModels() throws {
        let directory = TemporaryDirectory()
        let url = try Self.copy("coredataplus-samplemodel3/SampleModel3_V1.sqlite", into: directory)
        let before = try Self.withStore(url, [User.self]) { context in
            let users = try context.fetch(FetchDescriptor<User>(sortBy: [SortDescriptor(\.petName)]))
            #expect(users.count == 12)
            #expect(users.allSatisfy { $0.name.hasPrefix("User_") && ($0.petName?.hasPrefix("Dog_") ?? false) })
            let first = try context.fetch(FetchDescriptor<User>(predicate: #Predicate { $0.name == "User_1" }))
            #expect(!first.isEmpty && first.allSatisfy { $0.petName?.hasPrefix("Dog_1_") == true })
            context.insert(User(name: "Written on Linux"))
            try context.save()
            return users.count
        }
        try Self.withStore(url, [User.self]) { context in
            #expect(try context.fetchCount(FetchDescriptor<User>()) == before + 1)
            let written = try context.fetch(FetchDescriptor<User>(predicate: #Predicate { $0.petName == nil }))
            #expect(written.map(\.name) == ["Written on Linux"])
        }
    }

    /// A store this project makes for the same classes has the tables Apple's Core Data made, and records the same hashes.
    @Test func aNewStoreForTheClassesHasAppleLayout() throws {
        let directory = TemporaryDirectory()
        let apple = try Self.copy("bnr-coredatastack/TestModel.sqlite", into: directory)
        let fresh = directory.file("fresh.store")
        do {
            let context = ModelContext(try ModelContainer(for: Author.self, configurations: ModelConfiguration(url: fresh)))
            context.insert(Author(firstName: "Grace", lastName: "Hopper"))
            try context.save()
        }
        let tables = { (url: URL) in
            try storeFile(url).read { db in
                try String.fetchAll(
                    db,
                    sql:
                        "SELECT sql FROM sqlite_master WHERE tbl_name IN ('ZAUTHOR', 'ZBOOK', 'Z_1BOOKS') AND sql IS NOT NULL ORDER BY name"
                )
            }
        }
        let appleTables = try tables(apple)
        #expect(appleTables.count == 4, "\(appleTables)")
        #expect(try tables(fresh) == appleTables)
        #expect(try Requirement.recordedVersionHashes(fresh) == Requirement.recordedVersionHashes(apple))
    }

    /// Many to many: the join table Core Data made (`Z_1BOOKS`) takes the links the arrays hold.
    @Test func authorsAndBooksLinkThroughCoreDatasJoinTable() throws {
        let directory = TemporaryDirectory()
        let url = try Self.copy("bnr-coredatastack/TestModel.sqlite", into: directory)
        try Self.withStore(url, [Author.self, Book.self]) { context in
            let author = Author(firstName: "Ada", lastName: "Lovelace")
            let book = Book(title: "Notes")
            author.books = [book, Book(title: "Sketch")]
            context.insert(author)
            try context.save()
        }
        let links = try storeFile(url).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Z_1BOOKS") }
        #expect(links == 2)
        try Self.withStore(url, [Author.self, Book.self]) { context in
            let books = try context.fetch(FetchDescriptor<Book>(sortBy: [SortDescriptor(\.title)]))
            #expect(
                books.map { "\($0.title ?? "-") \($0.authors.map { $0.lastName ?? "-" })" } == [
                    "Notes [\"Lovelace\"]", "Sketch [\"Lovelace\"]",
                ])
        }
    }

    /// An attribute renamed in the Xcode model (`elementID`) is `@Attribute(originalName:)`; the value Apple wrote reads.
    @Test func aRenamedAttributeReadsItsValue() throws {
        let directory = TemporaryDirectory()
        let url = try Self.copy("jbergier-migration/Example_v2.0.0.sqlite", into: directory)
        try Self.withStore(url, [BasicEntity.self]) { context in
            let names = try context.fetch(FetchDescriptor<BasicEntity>()).map(\.v2_0_0_name)
            #expect(names == ["A Known Value"])
        }
    }

    /// A WAL store with dates, uniqueness constraints and fetch indexes: `#Unique` makes an insert of a stored key an
    /// update of the row Apple wrote (SwiftData's upsert), and the date reads as Core Data stored it.
    @Test func uniqueModelsUpsertIntoAppleWrittenRows() throws {
        let directory = TemporaryDirectory()
        let url = try Self.copy("ddg-syncmetadata/SyncMetadata_V3.sqlite", into: directory)
        let types: [any PersistentModel.Type] = [SyncableSettingsMetadata.self, SyncFeatureEntity.self]
        try Self.withStore(url, types) { context in
            let settings = try context.fetch(FetchDescriptor<SyncableSettingsMetadata>(sortBy: [SortDescriptor(\.key)]))
            #expect(settings.map(\.key) == ["TestSetting-01", "TestSetting-02"])
            #expect(settings.map(\.lastModified) == [nil, Date(timeIntervalSinceReferenceDate: 733_068_222.001259)])
            context.insert(SyncFeatureEntity(name: "TestFeature-01", state: "readyToSync", lastModified: "99"))
            context.insert(SyncFeatureEntity(name: "TestFeature-03"))
            try context.save()
        }
        try Self.withStore(url, types) { context in
            let features = try context.fetch(FetchDescriptor<SyncFeatureEntity>(sortBy: [SortDescriptor(\.name)]))
            #expect(
                features.map { "\($0.name) \($0.state ?? "-") \($0.lastModified ?? "-")" } == [
                    "TestFeature-01 readyToSync 99", "TestFeature-02 readyToSync 1234", "TestFeature-03 - -",
                ])
        }
    }
}
