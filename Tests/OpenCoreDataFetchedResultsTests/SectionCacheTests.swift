import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

@Suite struct SectionCacheTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("group", .string)
                Attribute("score", .integer32, default: 0)
            }
        }
    }

    func makeStack(rows: Int = 200) throws -> TestStack {
        let stack = try TestStack(model: try Self.model())
        let context = stack.context()
        for i in 0..<rows { try context.make("Item", ["name": "item \(i)", "group": "g\(i % 7)", "score": (i * 37) % 101]) }
        try context.save()
        return stack
    }

    func controller(_ stack: TestStack, cache: String, predicate: String? = nil) throws -> (
        NSFetchedResultsController<NSManagedObject>, NSManagedObjectContext
    ) {
        let context = stack.context()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "score")]
        request.predicate = try predicate.map { try FetchPredicate(format: $0) }
        return (
            NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group", cacheName: cache),
            context
        )
    }

    var store: (TestStack) -> SQLiteStore = { $0.container.persistentStoreCoordinator.persistentStores.first as! SQLiteStore }

    func names(_ frc: NSFetchedResultsController<NSManagedObject>) -> [String] {
        (frc.fetchedObjects ?? []).compactMap { $0.string("name") }
    }

    @Test func warmStartReadsNoRowsAndGivesTheSameResults() throws {
        let stack = try makeStack()
        let cache = "warm-\(UUID().uuidString)"
        defer { NSFetchedResultsController<NSManagedObject>.deleteCache(withName: cache) }
        let (cold, _) = try controller(stack, cache: cache)
        let before = store(stack).rowsRead
        try cold.performFetch()
        let coldRows = store(stack).rowsRead - before
        #expect(coldRows == 200)

        let (warm, _) = try controller(stack, cache: cache)
        let beforeWarm = store(stack).rowsRead
        try warm.performFetch()
        #expect(store(stack).rowsRead - beforeWarm == 0, "a warm start reads no rows")
        #expect(warm.sections?.map(\.name) == cold.sections?.map(\.name))
        #expect(warm.sections?.map(\.numberOfObjects) == cold.sections?.map(\.numberOfObjects))
        #expect(names(warm) == names(cold), "objects load lazily, in the cached order")
    }

    @Test func anyMismatchOrDamageMeansSilentRecomputation() throws {
        let stack = try makeStack(rows: 50)
        let cache = "damage-\(UUID().uuidString)"
        defer { NSFetchedResultsController<NSManagedObject>.deleteCache(withName: cache) }
        let (first, _) = try controller(stack, cache: cache)
        try first.performFetch()
        let expected = names(first)
        let file = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0]
            .appendingPathComponent("OpenCoreData/FetchedResultsCaches/\(cache).cache")
        SectionCache.waitForWrites()  // files are written off the caller's thread
        #expect(FileManager.default.fileExists(atPath: file.path))
        let good = try Data(contentsOf: file)

        for damage in [Data("garbage".utf8), good.prefix(good.count / 2), Data()] {
            try damage.write(to: file)
            let (again, _) = try controller(stack, cache: cache)
            let before = store(stack).rowsRead
            try again.performFetch()
            #expect(store(stack).rowsRead - before == 50, "recomputed")
            #expect(names(again) == expected)
            SectionCache.waitForWrites()
            #expect(try Data(contentsOf: file) != damage, "the cache was rewritten")
        }

        // Another predicate under the same cache name: not used.
        let (other, _) = try controller(stack, cache: cache, predicate: "score > 50")
        try other.performFetch()
        #expect((other.fetchedObjects ?? []).allSatisfy { ($0.value(forKey: "score") as? Int ?? 0) > 50 })

        // A save elsewhere changes the store: the cache is stale and not used.
        let (third, _) = try controller(stack, cache: cache)
        try third.performFetch()
        let writer = stack.context()
        try writer.make("Item", ["name": "new", "group": "g0", "score": 1])
        try writer.save()
        let (fourth, _) = try controller(stack, cache: cache)
        try fourth.performFetch()
        #expect(names(fourth).contains("new"))
    }

    @Test func theCacheFollowsTrackedChanges() throws {
        let stack = try makeStack(rows: 30)
        let cache = "tracked-\(UUID().uuidString)"
        defer { NSFetchedResultsController<NSManagedObject>.deleteCache(withName: cache) }
        let (frc, context) = try controller(stack, cache: cache)
        let recorder = DelegateRecorder()
        frc.delegate = recorder
        try frc.performFetch()
        try context.make("Item", ["name": "fresh", "group": "g3", "score": 5])
        frc.fetchedObjects?.first?.setValue("g9", forKey: "group")
        try context.save()
        // A burst of saves: the cache is written once, shortly after, not once per save.
        let writesBefore = SectionCache.writeCount(named: cache)
        for i in 0..<5 {
            frc.fetchedObjects?.last?.setValue(i, forKey: "score")
            try context.save()
        }
        #expect(SectionCache.writeCount(named: cache) == writesBefore, "no write on the saving thread's path")
        let token = try store(stack).changeToken
        let deadline = Date().addingTimeInterval(20)
        while SectionCache.load(named: cache)?.key.changeToken != token, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(SectionCache.load(named: cache)?.key.changeToken == token, "the scheduled write happened")
        #expect(SectionCache.writeCount(named: cache) == writesBefore + 1, "one write for the burst")
        let (warm, _) = try controller(stack, cache: cache)
        let before = store(stack).rowsRead
        try warm.performFetch()
        #expect(store(stack).rowsRead - before == 0, "the cache written after the save is valid")
        #expect(warm.sections?.map(\.name) == frc.sections?.map(\.name))
        #expect(names(warm) == names(frc))
    }

    /// Every kind of sort value survives the file format, and every truncation or flipped byte of a file is either
    /// rejected or decodes to well-formed results: never a crash.
    @Test func cacheFileFormatRoundTripsAndRejectsDamage() throws {
        let values: [AttributeValue] = [
            .null, .integer(-42), .double(2.5), .decimal(Decimal(string: "12.345")!), .bool(true), .bool(false), .string("Crème brûlée"),
            .date(Date(timeIntervalSinceReferenceDate: 12345.5)), .data(Data([0, 1, 255])), .uuid(UUID()),
            .uri(URL(string: "https://example.com/a?b=c")!),
        ]
        let key = CachedResults.Key(
            storeIdentifier: "S", changeToken: 7, modelVersionHash: "H", entity: "Item", predicate: "score > 1", sorts: ["a"],
            sectionKeyPath: "group", includesSubentities: true, fetchLimit: 0, fetchOffset: 0)
        // A third column of text that repeats from row to row (written once per run), including two spellings of "é"
        // that are equal as Swift strings but not byte for byte: each must read back as written.
        let texts = ["a", "a", "a", "é", "e\u{301}", "e\u{301}", "", "", "b", "a", "a"]
        let rows = values.enumerated().map { i, v in
            CachedResults.Row(
                entity: i % 2 == 0 ? "Item" : "Special", primaryKey: Int64(i + 1), values: [v, .integer(Int64(i)), .string(texts[i])],
                section: i % 3)
        }
        let results = CachedResults(key: key, count: rows.count, sectionNames: ["x", "y", "z"], rows: rows)
        let data = try CacheFileFormat.encode(results)
        let decoded = try #require(CacheFileFormat.decode(data))
        #expect(decoded == results)
        for (row, text) in zip(decoded.rows, texts) {
            guard case .string(let read) = row.values[2] else {
                Issue.record("row \(row.primaryKey): not text")
                continue
            }
            #expect(Array(read.utf8) == Array(text.utf8), "row \(row.primaryKey)")
        }
        // A text that repeats is written once per run.
        let long = String(repeating: "x", count: 100)
        let same = (1...20).map { CachedResults.Row(entity: "Item", primaryKey: Int64($0), values: [.string(long)], section: 0) }
        let runData = try CacheFileFormat.encode(CachedResults(key: key, count: same.count, sectionNames: ["x"], rows: same))
        #expect(runData.count < 20 * long.utf8.count, "\(runData.count) bytes")
        #expect(CacheFileFormat.decode(runData)?.rows == same)
        for cut in 0..<data.count { #expect(CacheFileFormat.decode(data.prefix(cut)) == nil, "truncated at \(cut)") }
        var rng = SeededGenerator(seed: 5)
        for _ in 0..<2_000 {
            var damaged = data
            let i = Int.random(in: 0..<damaged.count, using: &rng)
            damaged[i] ^= UInt8.random(in: 1...255, using: &rng)
            _ = CacheFileFormat.decode(damaged)  // must return, whatever it returns
        }
        #expect(CacheFileFormat.decode(data + Data([0])) == nil, "trailing bytes")
    }

    @Test func deleteCacheRemovesOneOrAll() throws {
        let stack = try makeStack(rows: 5)
        let a = "del-a-\(UUID().uuidString)", b = "del-b-\(UUID().uuidString)"
        for name in [a, b] { try controller(stack, cache: name).0.performFetch() }
        let dir = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0].appendingPathComponent(
            "OpenCoreData/FetchedResultsCaches")
        SectionCache.waitForWrites()
        NSFetchedResultsController<NSManagedObject>.deleteCache(withName: a)
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent(a + ".cache").path))
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent(b + ".cache").path))
        NSFetchedResultsController<NSManagedObject>.deleteCache(withName: b)
    }
}

@Suite struct BatchedControllerTests {
    @Test func withABatchSizeSectionsComeFromSQLAndObjectsStayFaults() throws {
        let stack = try TestStack(model: try SectionCacheTests.model())
        let writer = stack.context()
        for i in 0..<500 { try writer.make("Item", ["name": "item \(i)", "group": "g\(i % 9)", "score": (i * 37) % 101]) }
        try writer.save()
        let store = stack.container.persistentStoreCoordinator.persistentStores.first as! SQLiteStore
        let recorder = DelegateRecorder()
        func make(batch: Int) throws -> NSFetchedResultsController<NSManagedObject> {
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.sortDescriptors = [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "score", ascending: false)]
            request.fetchBatchSize = batch
            let frc = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: stack.context(), sectionNameKeyPath: "group", cacheName: nil)
            frc.delegate = recorder
            return frc
        }
        let plain = try make(batch: 0)
        try plain.performFetch()
        let batched = try make(batch: 20)
        let before = store.rowsRead
        try batched.performFetch()
        #expect(store.rowsRead == before, "no rows read to build the sections")
        #expect(batched.sections?.map(\.name) == plain.sections?.map(\.name))
        #expect(batched.sections?.map(\.numberOfObjects) == plain.sections?.map(\.numberOfObjects))
        #expect((batched.fetchedObjects ?? []).allSatisfy { $0.isFault })
        let object = batched.object(at: IndexPath(row: 3, section: 4))
        #expect(object.string("name") == plain.object(at: IndexPath(row: 3, section: 4)).string("name"))
        #expect(store.rowsRead - before == 20, "touching one object read its batch")
    }
}
