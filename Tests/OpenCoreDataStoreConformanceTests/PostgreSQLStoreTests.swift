import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataStore

/// The PostgreSQL store on a real server (`OCD_POSTGRES_URL`; `.ci/run` starts a throwaway cluster): created from the
/// model in an empty database, written and read through contexts as a SQLite store is, and refusing what it must.
@Suite(
    .enabled(
        if: Requirement.postgresIsPresent,
        "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLStoreTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Shelf") {
                Attribute("title", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "shelf", ordered: true)
                Relationship("tags", to: "Tag", toMany: true, inverse: "shelves")
            }
            Entity("Item", unique: [["code"]]) {
                Attribute("name", .string)
                Attribute("code", .string)
                Attribute("score", .integer64)
                Attribute("price", .decimal)
                Attribute("weight", .double)
                Attribute("added", .date)
                Attribute("fresh", .boolean)
                Attribute("token", .uuid)
                Attribute("photo", .binaryData)
                Relationship("shelf", to: "Shelf", inverse: "items")
            }
            Entity("Tag") {
                Attribute("label", .string)
                Relationship("shelves", to: "Shelf", toMany: true, inverse: "tags")
            }
        }
    }

    func container(_ database: PostgreSQLTestDatabase, model: NSManagedObjectModel) throws -> NSPersistentContainer {
        let container = NSPersistentContainer(name: "PG", managedObjectModel: model)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: database.url)]
        try container.loadPersistentStores()
        return container
    }

    @Test func aStoreIsCreatedFromTheModelAndObjectsRoundTripWithEveryAttributeType() throws {
        let database = try PostgreSQLTestDatabase()
        let model = try Self.model()
        let token = UUID()
        let added = Date(timeIntervalSinceReferenceDate: 700_000_000.25)
        do {
            let container = try container(database, model: model)
            #expect(container.persistentStoreCoordinator.persistentStores.first?.type == NSPostgreSQLStoreType)
            let context = container.viewContext
            let shelf = try context.make("Shelf", ["title": "Top"])
            let tag = try context.make("Tag", ["label": "fruit"])
            shelf.mutableSetValue(forKey: "tags").add(tag)
            for (n, name) in ["pear", "Apple", nil, "apple"].enumerated() {
                try context.make(
                    "Item",
                    [
                        "name": name, "code": "c\(n)", "score": n * 10, "price": Decimal(string: "1.25")! * Decimal(n),
                        "weight": 0.1 * Double(n),
                        "added": added, "fresh": n % 2 == 0, "token": token, "photo": Data([0, 1, UInt8(n)]), "shelf": shelf,
                    ])
            }
            try context.save()
        }
        // A second container: everything comes from the server.
        let container = try container(database, model: model)
        let context = container.viewContext
        let items = try context.objects("Item", sort: ["name", "code"])
        // NULL first, then binary order of Unicode scalars: "Apple" < "apple" < "pear".
        #expect(items.map { $0.string("name") } == [nil, "Apple", "apple", "pear"])
        let apple = try #require(items.first { $0.string("code") == "c3" })
        #expect(apple.value(forKey: "score") as? Int64 == 30)
        #expect(apple.value(forKey: "price") as? Decimal == Decimal(string: "3.75"))
        #expect(apple.value(forKey: "weight") as? Double == 0.1 * 3)
        #expect(apple.value(forKey: "added") as? Date == added, "dates keep their fraction of a second")
        #expect(apple.value(forKey: "fresh") as? Bool == false)
        #expect(apple.value(forKey: "token") as? UUID == token)
        #expect(apple.value(forKey: "photo") as? Data == Data([0, 1, 3]))
        let shelf = try #require(apple.value(forKey: "shelf") as? NSManagedObject)
        #expect(shelf.string("title") == "Top")
        #expect((shelf.value(forKey: "items") as? NSOrderedSet)?.count == 4)
        #expect(try context.objects("Item", "name BEGINSWITH[c] %@", "a").count == 2)
        #expect(try context.objects("Item", "score > %@ AND fresh == YES", 5).map { $0.string("code") } == ["c2"])
        #expect(try context.objects("Shelf", "ANY tags.label == %@", "fruit").count == 1)
        #expect(try context.objects("Item", "name == nil").map { $0.string("code") } == ["c2"])
        #expect(try context.objects("Item", "name LIKE[c] %@", "a*e").count == 2)
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.predicate = try FetchPredicate(format: "score >= 10")
        #expect(try context.count(for: request) == 3)
        // The store is Core Data's layout, in PostgreSQL's types.
        let types = try database.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'zitem' ORDER BY column_name")
        let byColumn = Dictionary(uniqueKeysWithValues: types.map { ($0[0]!, $0[1]!) })
        #expect(byColumn["z_pk"] == "bigint" && byColumn["zadded"] == "double precision" && byColumn["zname"] == "text")
        #expect(byColumn["zphoto"] == "bytea" && byColumn["zprice"] == "text" && byColumn["zweight"] == "double precision")
    }

    /// A decimal that has no exact double (19.99) is found by a predicate with the same decimal, or the nearest double:
    /// the bound value is rounded once, as the server reads the stored text (Foundation's `doubleValue` on Linux gave
    /// 19.990000000000002, which matched nothing).
    @Test func decimalsWithoutAnExactDoubleAreFoundByTheirValue() throws {
        let database = try PostgreSQLTestDatabase()
        let container = try container(database, model: try Self.model())
        let context = container.viewContext
        try context.make("Item", ["code": "a", "price": NSDecimalNumber(string: "19.99")])
        try context.make("Item", ["code": "b", "price": Decimal(string: "0.3")!])
        try context.save()
        #expect(try context.objects("Item", "price == %@", Decimal(string: "19.99")!).map { $0.string("code") } == ["a"])
        #expect(try context.objects("Item", "price == %@", NSDecimalNumber(string: "19.99")).map { $0.string("code") } == ["a"])
        #expect(try context.objects("Item", "price == 19.99").map { $0.string("code") } == ["a"])
        #expect(try context.objects("Item", "price < %@", Decimal(string: "0.3")!).isEmpty)
        let read = try #require(try context.objects("Item", "code == 'a'").first?.value(forKey: "price"))
        #expect((read as? NSDecimalNumber)?.stringValue == "19.99")
    }

    /// A distinct dictionary fetch with sorts (by the key returned or another one) on PostgreSQL, which refuses an
    /// ORDER BY on a column a DISTINCT does not select: sorted, made distinct and windowed as on SQLite.
    @Test func distinctDictionariesComeInTheSortsOrder() throws {
        let database = try PostgreSQLTestDatabase()
        let container = try container(database, model: try Self.model())
        let context = container.viewContext
        for (code, name, score) in [("a", "pear", 3), ("b", "fig", 1), ("c", "pear", 2), ("d", nil, 4)] as [(String, String?, Int)] {
            try context.make("Item", ["code": code, "name": name, "score": score])
        }
        try context.save()
        let names = NSFetchRequest<NSDictionary>(entityName: "Item")
        names.resultType = .dictionaryResultType
        names.propertiesToFetch = ["name"]
        names.returnsDistinctResults = true
        func fetched() throws -> [String] { try context.fetch(names).map { $0["name"] as? String ?? "nil" } }
        names.sortDescriptors = [FetchSortDescriptor(key: "name")]
        #expect(try fetched() == ["nil", "fig", "pear"])
        names.sortDescriptors = [FetchSortDescriptor(key: "score", ascending: false)]
        #expect(try fetched() == ["nil", "pear", "fig"])
        names.fetchLimit = 1
        names.fetchOffset = 1
        #expect(try fetched() == ["pear"])
    }

    @Test func aStaleSaveIsAMergeConflictAndWritesNothing() throws {
        let database = try PostgreSQLTestDatabase()
        let model = try Self.model()
        let first = try container(database, model: model)
        try first.viewContext.make("Item", ["name": "one", "code": "x"])
        try first.viewContext.save()
        let second = try container(database, model: model)
        let mine = try #require(try first.viewContext.objects("Item").first)
        let theirs = try #require(try second.viewContext.objects("Item").first)
        theirs.setValue("theirs", forKey: "name")
        try second.viewContext.save()
        mine.setValue("mine", forKey: "name")
        #expect {
            try first.viewContext.save()
        } throws: { error in
            (error as? CoreDataError)?.code == .managedObjectMerge
        }
        #expect(try database.execute("SELECT zname, z_opt FROM zitem") == [["theirs", "2"]])
    }

    @Test func aUniquenessConstraintIsKeptAcrossStoresWithTheStoredObjectNamed() throws {
        let database = try PostgreSQLTestDatabase()
        let model = try Self.model()
        let container = try container(database, model: model)
        try container.viewContext.make("Item", ["name": "one", "code": "same"])
        try container.viewContext.save()
        let other = try self.container(database, model: model)
        try other.viewContext.make("Item", ["name": "two", "code": "same"])
        #expect {
            try other.viewContext.save()
        } throws: { error in
            let error = error as? CoreDataError
            return error?.code == .constraintConflict && error?.conflictingObjectIDs.count == 2
        }
        #expect(try database.execute("SELECT count(*) FROM zitem") == [["1"]])
    }

    @Test func aStoreAnotherModelMadeIsRefusedAndUntouched() throws {
        let database = try PostgreSQLTestDatabase()
        let container = try container(database, model: try Self.model())
        try container.viewContext.make("Item", ["name": "kept", "code": "k"])
        try container.viewContext.save()
        // Another app's model (no entity in common) is no version of the store's: refused, even with migration on.
        let other = try NSManagedObjectModel { Entity("Person") { Attribute("name", .string) } }
        let refused = NSPersistentContainer(name: "Other", managedObjectModel: other)
        refused.persistentStoreDescriptions = [NSPersistentStoreDescription(url: database.url)]
        #expect {
            try refused.loadPersistentStores()
        } throws: { error in
            let message = (error as? CoreDataError)?.message ?? ""
            return message.contains(database.name) && message.contains("not the one that created it, nor a version of it")
        }
        // A version of it, without migration: refused, saying it needs migrating.
        let version = try NSManagedObjectModel { Entity("Item") { Attribute("name", .string) } }
        let unmigrated = NSPersistentContainer(name: "Version", managedObjectModel: version)
        let description = NSPersistentStoreDescription(url: database.url)
        description.shouldMigrateStoreAutomatically = false
        unmigrated.persistentStoreDescriptions = [description]
        #expect {
            try unmigrated.loadPersistentStores()
        } throws: { error in
            let message = (error as? CoreDataError)?.message ?? ""
            return message.contains(database.name) && message.contains("not the one that created it") && message.contains("needs migrating")
        }
        #expect(try database.execute("SELECT zname, zcode FROM zitem") == [["kept", "k"]])
        // A database holding a table of the store's name but no store is refused too, untouched.
        let foreign = try PostgreSQLTestDatabase()
        _ = try foreign.execute("CREATE TABLE zitem (id integer)")
        let stranger = NSPersistentContainer(name: "Stranger", managedObjectModel: try Self.model())
        stranger.persistentStoreDescriptions = [NSPersistentStoreDescription(url: foreign.url)]
        #expect(throws: CoreDataError.self) { try stranger.loadPersistentStores() }
        #expect(try foreign.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [["1"]])
    }

    /// A column changed outside this project (its type altered, or dropped) is refused at open, named, the data left.
    @Test func aStoreWhoseColumnsWereChangedByHandIsRefused() throws {
        let database = try PostgreSQLTestDatabase()
        let model = try Self.model()
        let container = try container(database, model: model)
        try container.viewContext.make("Item", ["name": "kept", "code": "k", "score": 3])
        try container.viewContext.save()
        try container.removeStores()
        _ = try database.execute("ALTER TABLE zitem ALTER COLUMN zscore TYPE integer")
        #expect {
            _ = try self.container(database, model: model)
        } throws: { error in
            let message = (error as? CoreDataError)?.message ?? ""
            return message.contains(database.name) && message.contains("zitem.zscore is integer, not bigint")
        }
        _ = try database.execute("ALTER TABLE zitem DROP COLUMN zscore")
        #expect {
            _ = try self.container(database, model: model)
        } throws: { error in ((error as? CoreDataError)?.message ?? "").contains("has no column zscore") }
        #expect(try database.execute("SELECT zname FROM zitem") == [["kept"]])
    }

    /// `[c]`, `[d]` and `[cd]` fold text in PostgreSQL exactly as the in-memory evaluator does, across scripts: Latin
    /// with every kind of accent, ligatures, Greek, Cyrillic, Vietnamese, full-width forms, combining marks, `ß`, `İ`.
    @Test func foldingAgreesWithTheEvaluatorAcrossScripts() throws {
        let database = try PostgreSQLTestDatabase()
        _ = try container(database, model: try Self.model())
        let samples = [
            "Ærøskøbing", "ΣΊΣΥΦΟΣ σοφός", "Straße STRASSE", "İstanbul ıI", "ǅemal ǄǆǇ", "ﬁne ﬂow", "Ⅻ ⅻ", "ｆｕｌｌ ＷＩＤＴＨ",
            "e\u{301}te\u{300}", "Ёлка ЁЛКА йЙ", "Tiếng Việt ĐƯỜNG", "Çelik ÉLODIE Opérations", "ÅÄÖ åäö Øø Łł Ħħ", "plain ASCII Text 123",
            "Ωmega ΐΰ", "Ĳssel ĳ", "ﬀ ﬃ ﬄ ﬅ", "Ǻǻ Ǽǽ Ǿǿ", "Ṩṩ Ṡẞ", "",
        ]
        var mismatches: [String] = []
        for sample in samples {
            for flags in 1...3 {
                let rows = try database.execute(
                    "SELECT ocd_fold('\(sample.replacingOccurrences(of: "'", with: "''"))', \(flags))")
                let expected = PredicateSemantics.fold(sample, PredicateComparison.Options(rawValue: flags))
                let folded = rows.first?.first ?? nil
                if folded != expected { mismatches.append("\(sample) [\(flags)]: \(folded ?? "nil") ≠ \(expected)") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "\n"))")
    }

    /// `uppercase:`, `lowercase:` and `length:` give in PostgreSQL what the evaluator gives (Swift's case mappings,
    /// UTF-16 lengths) across scripts; a store made before the functions existed gets them when it is opened.
    @Test func stringFunctionsAgreeWithTheEvaluatorAndReachOlderStores() throws {
        let database = try PostgreSQLTestDatabase()
        let model = try Self.model()
        var container = try container(database, model: model)
        try container.viewContext.make("Item", ["name": "Straße 😀", "code": "a", "score": 3])
        try container.viewContext.save()
        let samples = [
            "Ærøskøbing", "ΣΊΣΥΦΟΣ σοφός", "Straße STRASSE ẞ", "İstanbul ıI", "ǅemal ǄǆǇ", "ﬁne ﬂow", "Ⅻ ⅻ", "ｆｕｌｌ ＷＩＤＴＨ",
            "e\u{301}te\u{300}", "Ёлка ЁЛКА йЙ", "Tiếng Việt ĐƯỜNG", "😀 𝔘𝔫𝔦 🇫🇷", "ŉ ǰ ΐ", "plain ASCII Text 123", "",
        ]
        var mismatches: [String] = []
        for sample in samples {
            let literal = "'\(sample.replacingOccurrences(of: "'", with: "''"))'"
            let row = try database.execute("SELECT ocd_upper(\(literal)), ocd_lower(\(literal)), ocd_length(\(literal))::text").first ?? []
            let expected = [sample.uppercased(), sample.lowercased(), String(sample.utf16.count)]
            if row != expected.map(Optional.some) { mismatches.append("\(sample): \(row) ≠ \(expected)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "\n"))")
        try container.removeStores()
        _ = try database.execute("DROP FUNCTION ocd_shift(bigint, bigint, boolean)")
        container = try self.container(database, model: model)
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.predicate = try FetchPredicate(format: "length(name) == 9 AND uppercase(name) == 'STRASSE 😀' AND 1 << score == 8")
        #expect(try container.viewContext.fetch(request).count == 1)
    }

    /// The store waits for the server on the calling thread, never on NIO's event loops: calls from many tasks at once
    /// (more than this machine's cores) all finish, and every save lands under its own key.
    @Test func callsFromManyTasksAtOnceFinishWithoutDeadlock() async throws {
        let database = try PostgreSQLTestDatabase()
        let container = try container(database, model: try Self.model())
        let tasks = 12
        let saved = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    let context = container.newBackgroundContext()
                    return try context.performAndWait {
                        for n in 0..<5 { try context.make("Item", ["name": "t\(task)", "code": "\(task)-\(n)", "score": n]) }
                        try context.save()
                        return try context.objects("Item", "name == %@", "t\(task)").count
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(saved == tasks * 5)
        #expect(try database.execute("SELECT count(DISTINCT z_pk), count(*) FROM zitem") == [["\(tasks * 5)", "\(tasks * 5)"]])
    }

    /// Serialization failures are retried: every save lands, once.
    ///
    /// Under SERIALIZABLE isolation (`isolation=serializable`, CockroachDB's default) concurrent writers conflict and
    /// the server aborts some of their transactions (SQLSTATE 40001); the store runs them again. With history on, every
    /// save is one history transaction, numbered without a gap.
    @Test func serializationFailuresAreRetriedUntilEverySaveLands() throws {
        let database = try PostgreSQLTestDatabase()
        let url = try #require(URL(string: database.url.absoluteString + "?isolation=serializable"))
        let (writers, saves) = (4, 15)
        let (failures, retried) = try Self.saveConcurrently(at: url, model: try Self.model(), writers: writers, saves: saves)
        print("PostgreSQLStoreTests: \(writers) writers × \(saves) saves under SERIALIZABLE, \(retried) transactions retried")
        #expect(failures.isEmpty, "\(failures.prefix(3))")
        #expect(retried > 0, "concurrent writers under SERIALIZABLE conflict; none was retried")
        let total = String(writers * saves)
        let counts = try database.execute("SELECT count(*), count(DISTINCT zcode) FROM zitem")
        #expect(counts == [[total, total]], "\(counts)")
        let numbers = try database.execute("SELECT z_pk FROM atransaction ORDER BY z_pk").compactMap {
            $0.first.flatMap { $0 }.flatMap(Int.init)
        }
        #expect(numbers.count == writers * saves && numbers == numbers.first.map { Array($0..<$0 + numbers.count) }, "\(numbers)")
    }

    /// `writers` coordinators with history on the store at `url`, each saving `saves` new items one by one, all at
    /// once; returns the saves that failed and how many transactions the stores retried.
    static func saveConcurrently(at url: URL, model: NSManagedObjectModel, writers: Int, saves: Int) throws -> ([String], Int) {
        let containers = try (0..<writers).map { _ in
            let container = NSPersistentContainer(name: "PG", managedObjectModel: model)
            let description = NSPersistentStoreDescription(url: url)
            description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey)
            container.persistentStoreDescriptions = [description]
            try container.loadPersistentStores()
            return container
        }
        let failures = Failures()
        let start = DispatchSemaphore(value: 0)
        let threads = containers.enumerated().map { writer, container in
            let context = container.newBackgroundContext()
            let thread = Thread {
                start.wait()
                context.performAndWait {
                    for n in 0..<saves {
                        do {
                            try context.make("Item", ["name": "w\(writer)", "code": "\(writer)-\(n)", "score": n])
                            try context.save()
                        } catch {
                            failures.add("writer \(writer), save \(n): \(error)")
                            context.rollback()
                        }
                    }
                }
                failures.finish()
            }
            thread.start()
            return thread
        }
        for _ in threads { start.signal() }
        failures.waitForFinishes(writers)
        let retried = containers.compactMap { $0.persistentStoreCoordinator.persistentStores.first as? PostgreSQLStore }
            .map(\.retriedTransactions).reduce(0, +)
        for container in containers { try container.removeStores() }
        return (failures.all, retried)
    }

    /// Saves inside `performAsOneTransaction` commit together, or none of them when the body throws; a failed save
    /// inside leaves the earlier ones (each is a savepoint).
    @Test func savesInOneTransactionCommitTogetherOrNotAtAll() throws {
        let database = try PostgreSQLTestDatabase()
        let container = try container(database, model: try Self.model())
        let store = try #require(container.persistentStoreCoordinator.persistentStores.first as? PostgreSQLStore)
        let context = container.newBackgroundContext()
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try store.performAsOneTransaction {
                try context.performAndWait {
                    try context.make("Item", ["name": "first", "code": "a"])
                    try context.save()
                    // Seen on this thread inside the transaction …
                    #expect(try context.objects("Item").count == 1)
                }
                #expect(try database.execute("SELECT count(*) FROM zitem") == [["0"]], "… and by no one else")
                throw Stop()
            }
        }
        #expect(try database.execute("SELECT count(*) FROM zitem") == [["0"]], "rolled back whole")
        let fresh = container.newBackgroundContext()
        try store.performAsOneTransaction {
            try fresh.performAndWait {
                try fresh.make("Item", ["name": "one", "code": "b"])
                try fresh.save()
                try fresh.make("Item", ["name": "clash", "code": "b"])
                #expect(throws: CoreDataError.self) { try fresh.save() }
                fresh.rollback()
                try fresh.make("Item", ["name": "two", "code": "c"])
                try fresh.save()
            }
        }
        #expect(try database.execute("SELECT zname FROM zitem ORDER BY zcode") == [["one"], ["two"]])
    }

    /// Prefetching on the server: an ordered to-many (by its positions) and a many-to-many (through its join table)
    /// read for all the shelves at once, as faults would read them one shelf at a time.
    @Test func prefetchingReadsToManyRelationshipsForEveryShelfAtOnce() throws {
        let database = try PostgreSQLTestDatabase()
        let model = try Self.model()
        let writer = try container(database, model: model).newBackgroundContext()
        try writer.performAndWait {
            let tags = try (0..<3).map { try writer.make("Tag", ["label": "t\($0)"]) }
            for s in 0..<4 {
                let shelf = try writer.make("Shelf", ["title": "S\(s)"])
                // Positions in an order unlike the keys': the last item made first.
                for i in (0..<s).reversed() {
                    try writer.make("Item", ["name": "i\(s)\(i)", "code": "c\(s)\(i)", "shelf": shelf])
                }
                shelf.mutableSetValue(forKey: "tags").addObjects(from: Array(tags.prefix(s)))
            }
            try writer.save()
        }
        let request = NSFetchRequest<NSManagedObject>(entityName: "Shelf")
        request.sortDescriptors = [FetchSortDescriptor(key: "title")]
        func described(_ shelves: [NSManagedObject]) -> [String] {
            shelves.map { shelf in
                let items = (shelf.value(forKey: "items") as? NSOrderedSet)?.array.compactMap { ($0 as? NSManagedObject)?.string("name") }
                let tags = (shelf.value(forKey: "tags") as? Set<NSManagedObject>)?.compactMap { $0.string("label") }.sorted()
                return "\(shelf.string("title") ?? "?") \(items ?? []) \(tags ?? [])"
            }
        }
        let reader = try container(database, model: model).newBackgroundContext()
        let expected = try reader.performAndWait { described(try reader.fetch(request)) }
        #expect(expected.last == "S3 [\"i32\", \"i31\", \"i30\"] [\"t0\", \"t1\", \"t2\"]")
        request.relationshipKeyPathsForPrefetching = ["items", "tags"]
        let prefetching = try container(database, model: model).newBackgroundContext()
        try prefetching.performAndWait {
            let shelves = try prefetching.fetch(request)
            #expect(shelves.allSatisfy { !$0.hasFault(forRelationshipNamed: "items") && !$0.hasFault(forRelationshipNamed: "tags") })
            #expect(described(shelves) == expected)
        }
    }
}

/// Failures recorded from several threads.
final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [String] = []
    private let finished = DispatchSemaphore(value: 0)
    func add(_ failure: String) { lock.withLock { recorded.append(failure) } }
    var all: [String] { lock.withLock { recorded } }
    /// A writer is done.
    func finish() { finished.signal() }
    /// Waits for `count` writers to be done.
    func waitForFinishes(_ count: Int) { for _ in 0..<count { finished.wait() } }
}
