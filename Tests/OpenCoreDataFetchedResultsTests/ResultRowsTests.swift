import Foundation
import OpenCoreData
@_spi(Engine) import OpenCoreDataStore
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// The controller keeps rows, not objects: a fetch with a batch size makes no object, objects are made when asked for
/// and then kept by their rows, and changes to rows no object stands for (merged from another context) still arrive.
@Suite struct ResultRowsTests {
    let stack: TestStack
    let context: NSManagedObjectContext
    let recorder = DelegateRecorder()

    init() throws {
        stack = try TestStack(model: try SectionCacheTests.model())
        let writer = stack.context()
        for i in 0..<100 { try writer.make("Item", ["name": "item \(i)", "group": "g\(i % 4)", "score": i]) }
        try writer.save()
        context = stack.context()
    }

    func controller(batchSize: Int = 10) -> NSFetchedResultsController<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "score")]
        request.fetchBatchSize = batchSize
        let frc = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group", cacheName: nil)
        frc.delegate = recorder
        return frc
    }

    /// Saves `edit`'s changes in another context and merges them into the controller's context.
    ///
    /// Items 100..<`count` saved besides the first hundred, and a tracking controller fetched over all of them.
    func trackingControllerOver(itemsUpTo count: Int) throws -> NSFetchedResultsController<NSManagedObject> {
        let writer = stack.context()
        for i in 100..<count { try writer.make("Item", ["name": "item \(i)", "group": "g\(i % 4)", "score": i]) }
        try writer.save()
        let frc = controller()
        try context.performAndWait { try frc.performFetch() }
        return frc
    }

    func mergeFromElsewhere(_ edit: (NSManagedObjectContext) throws -> Void) throws {
        context.mergeChanges(fromContextDidSave: try stack.saveElsewhere(edit))
    }

    func item(_ context: NSManagedObjectContext, score: Int) throws -> NSManagedObject {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.predicate = try FetchPredicate(format: "score == %@", score)
        return try #require(try context.fetch(request).first)
    }

    @Test func aBatchedFetchMakesNoObjectAndARowKeepsTheObjectItGave() throws {
        let frc = controller()
        try frc.performFetch()
        #expect(context.registeredObjects.isEmpty, "the fetch made \(context.registeredObjects.count) objects")
        #expect(frc.sections?.map(\.numberOfObjects) == [25, 25, 25, 25])
        let path = IndexPath(row: 3, section: 2)
        let first = ObjectIdentifier(frc.object(at: path))
        // Nothing here holds the object, yet the row gives the same one again (and its page was made with it).
        #expect(ObjectIdentifier(frc.object(at: path)) == first)
        #expect(context.registeredObjects.count == 10, "one page of \(context.registeredObjects.count)")
        #expect(frc.object(at: path).string("name") == "item 14")  // g2 holds 2, 6, 10, 14, …
        #expect(frc.indexPath(forObject: frc.object(at: path)) == path)
    }

    @Test func mergedDeletesAndMovesOfRowsWithoutObjectsAreReported() throws {
        let frc = controller()
        try frc.performFetch()
        try mergeFromElsewhere { other in
            other.delete(try item(other, score: 5))  // g1, row 1
            try item(other, score: 8).setValue("g3", forKey: "group")  // g0, row 2 → g3
        }
        let lines = recorder.lines.filter { $0.hasPrefix("object") }.map { $0.components(separatedBy: ":").first! }
        #expect(lines.sorted() == ["object delete at [1, 1]", "object move at [0, 2] → [3, 2]"].sorted(), "\(recorder.lines)")
        #expect(frc.sections?.map(\.numberOfObjects) == [24, 24, 25, 26])
        #expect(frc.object(at: IndexPath(row: 2, section: 3)).string("name") == "item 8")
        #expect(frc.engine.diagnostics.fullRefetches == 0)
        // The saving context's values placed both rows: no table of every row was built.
        #expect(!frc.engine.hasLookup)
        // A merged delete of an object this context loaded (its values are gone from it once the merge deletes it).
        let loaded = frc.object(at: IndexPath(row: 0, section: 0))
        #expect(loaded.string("name") == "item 0")
        recorder.lines = []
        try mergeFromElsewhere { other in other.delete(try item(other, score: 0)) }
        #expect(
            recorder.lines.filter { $0.hasPrefix("object") }.map { $0.components(separatedBy: ":").first! } == ["object delete at [0, 0]"],
            "\(recorder.lines)")
        #expect(!frc.engine.hasLookup)
    }

    @Test func anObjectSavedWhileInTheResultsIsFollowedUnderItsNewID() throws {
        let frc = controller()
        try frc.performFetch()
        let made = try context.make("Item", ["name": "new", "group": "g0", "score": 1000])
        context.processPendingChanges()
        #expect(frc.indexPath(forObject: made) == IndexPath(row: 25, section: 0))
        try context.save()
        #expect(!made.objectID.isTemporaryID)
        recorder.lines = []
        made.setValue(-1, forKey: "score")
        context.processPendingChanges()
        #expect(recorder.lines.contains("object move at [0, 25] → [0, 0]: \(made)"), "\(recorder.lines)")
        #expect(frc.indexPath(forObject: made) == IndexPath(row: 0, section: 0))
        #expect(frc.object(at: IndexPath(row: 0, section: 0)) === made)
        #expect(frc.engine.diagnostics.fullRefetches == 0)
    }

    @Test func fetchedObjectsAreTheObjectsTheRowsGive() throws {
        let frc = controller(batchSize: 7)
        try frc.performFetch()
        let all = try #require(frc.fetchedObjects)
        #expect(all.count == 100)
        #expect(all.map { $0.string("name") } == (0..<100).sorted { ($0 % 4, $0) < ($1 % 4, $1) }.map { "item \($0)" })
        for (i, object) in all.enumerated() where i % 13 == 0 {
            #expect(frc.object(at: try #require(frc.indexPath(forObject: object))) === object)
        }
    }

    @Test func aTrackingFetchOfManyRowsBuildsItsLookupInTheBackground() throws {
        let frc = try trackingControllerOver(itemsUpTo: 3000)
        #expect(context.registeredObjects.isEmpty)
        let deadline = Date().addingTimeInterval(10)
        while !context.performAndWait({ frc.engine.hasLookup }), Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(context.performAndWait { frc.engine.hasLookup }, "no lookup table after 10 s")
        // The table is the one the changes use: a merged move of a row no object stands for is placed by it.
        try mergeFromElsewhere { other in try item(other, score: 2999).setValue(-1, forKey: "score") }
        #expect(recorder.lines.contains { $0.hasPrefix("object move at [3, 749] → [3, 0]") }, "\(recorder.lines)")
        #expect(frc.engine.diagnostics.fullRefetches == 0)
    }

    /// The background table is installed on the context's queue without processing the context's pending changes:
    /// edits the app has not processed yet reach the delegate when the app processes them, in one batch, not when the
    /// framework's housekeeping happens to run (that split a batch in two when the table arrived between two edits).
    @Test func installingTheBackgroundTableLeavesPendingChangesAlone() throws {
        let frc = try trackingControllerOver(itemsUpTo: 20_000)
        // (Building the table of 20,000 rows takes milliseconds; making this edit, microseconds.)
        let edited = frc.object(at: IndexPath(row: 0, section: 0))
        edited.setValue("edited", forKey: "name")
        let deadline = Date().addingTimeInterval(10)
        while !context.performAndWait({ frc.engine.hasLookup }), Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(context.performAndWait { frc.engine.hasLookup }, "no lookup table after 10 s")
        #expect(recorder.lines.isEmpty, "reported before the app processed its edit: \(recorder.lines)")
        context.processPendingChanges()
        #expect(recorder.lines.filter { $0.hasPrefix("object update") }.count == 1, "\(recorder.lines)")
    }

    /// A change that needs the lookup table before the background build is done (a merged insert must know whether
    /// the fetch already saw its row) waits for that build: one table is built, never two.
    @Test func aChangeRightAfterATrackingFetchWaitsForTheBackgroundTable() throws {
        let frc = try trackingControllerOver(itemsUpTo: 20_000)
        try mergeFromElsewhere { other in try other.make("Item", ["name": "new", "group": "g0", "score": -5]) }
        #expect(recorder.lines.contains { $0.hasPrefix("object insert at [0, 0]") }, "\(recorder.lines.suffix(3))")
        context.performAndWait {
            #expect(frc.engine.hasLookup)
            #expect(frc.engine.diagnostics.lookupBuilds == 1)
        }
        #expect(frc.sections?[0].numberOfObjects == 5_001)
        #expect(frc.engine.diagnostics.fullRefetches == 0)
    }

    /// Local edits carry the values they replaced, so the controller finds each edited row where it was by binary
    /// search: edits, moves within and across sections, inserts and deletes never build the table of every row.
    @Test func localEditsFindTheirRowsWithoutTheLookupTable() throws {
        let frc = controller()
        try frc.performFetch()
        func step(_ expected: String, _ edit: () throws -> Void) throws {
            recorder.lines = []
            try edit()
            context.processPendingChanges()
            let lines = recorder.lines.filter { $0.hasPrefix("object") }.map { $0.components(separatedBy: ":").first! }
            #expect(lines == [expected], "\(recorder.lines)")
            #expect(!frc.engine.hasLookup, "\(expected): the lookup table was built")
        }
        try step("object update at [2, 3]") { try item(context, score: 14).setValue("renamed", forKey: "name") }
        try step("object move at [2, 3] → [2, 0]") { try item(context, score: 14).setValue(-5, forKey: "score") }
        try step("object move at [2, 0] → [0, 0]") { try item(context, score: -5).setValue("g0", forKey: "group") }
        try step("object insert at [1, 0]") { try context.make("Item", ["name": "new", "group": "g1", "score": -1]) }
        try step("object delete at [3, 24]") { context.delete(try item(context, score: 99)) }
        #expect(frc.engine.diagnostics.fullRefetches == 0)
        #expect(frc.sections?.map(\.numberOfObjects) == [26, 26, 24, 24])
        // A merged save reports the values it replaced for objects the context has loaded.
        let loaded = frc.object(at: IndexPath(row: 1, section: 3))  // score 7
        #expect(loaded.string("name") == "item 7")
        try context.save()
        recorder.lines = []
        try mergeFromElsewhere { other in try item(other, score: 7).setValue(1_000, forKey: "score") }
        #expect(recorder.lines.contains("object move at [3, 1] → [3, 23]: \(loaded)"), "\(recorder.lines)")
        #expect(!frc.engine.hasLookup, "the merge built the lookup table")
        // Another object of the loaded page, then a row no object here stands for (the saving context says what it held).
        recorder.lines = []
        try mergeFromElsewhere { other in try item(other, score: 11).setValue(-3, forKey: "score") }
        #expect(
            recorder.lines.filter { $0.hasPrefix("object") }.map { $0.components(separatedBy: ":").first! } == [
                "object move at [3, 1] → [3, 0]"
            ], "\(recorder.lines)")
        #expect(!frc.engine.hasLookup, "the merge built the lookup table")
        recorder.lines = []
        try mergeFromElsewhere { other in try item(other, score: 95).setValue(-10, forKey: "score") }  // no object here
        #expect(
            recorder.lines.filter { $0.hasPrefix("object") }.map { $0.components(separatedBy: ":").first! } == [
                "object move at [3, 22] → [3, 0]"
            ], "\(recorder.lines)")
        #expect(!frc.engine.hasLookup, "the merge of a row without an object built the lookup table")
        // A merged delete of a row no object here stands for: found by the values the deleting context held.
        recorder.lines = []
        try mergeFromElsewhere { other in other.delete(try item(other, score: 50)) }
        #expect(recorder.lines.filter { $0.hasPrefix("object delete at") }.count == 1, "\(recorder.lines)")
        #expect(!frc.engine.hasLookup, "the merge of a deleted row without an object built the lookup table")
        #expect(frc.engine.diagnostics.fullRefetches == 0)
    }

    @Test func afterAResetRowsGiveTheContextsNewObjects() throws {
        let frc = controller()
        try frc.performFetch()
        let path = IndexPath(row: 5, section: 1)
        let before = frc.object(at: path)
        context.reset()
        let after = frc.object(at: path)
        #expect(after !== before, "a row kept an object the reset invalidated")
        #expect(after.string("name") == "item 21")  // g1 holds 1, 5, 9, 13, 17, 21, …
        #expect(frc.sections?.map(\.numberOfObjects) == [25, 25, 25, 25])
    }

    @Test func sectionNamesReadInPlaceMatchThoseOfObjects() throws {
        // Same-length names that differ in one byte, empty text, nil, and non-ASCII text, each three times: the row
        // query compares a text column's bytes with the previous row's and keeps the decoded value when they match.
        let writer = stack.context()
        let groups: [String?] = ["ab", "ac", "", nil, "ad", "é"]
        for (i, group) in groups.enumerated() {
            for j in 0..<3 { try writer.make("Item", ["name": "x\(i)-\(j)", "group": group, "score": 1000 + j]) }
        }
        try writer.save()
        func sections(batchSize: Int) throws -> [String] {
            let frc = controller(batchSize: batchSize)
            try frc.performFetch()
            return (frc.sections ?? []).map { "\($0.name):\($0.numberOfObjects)" }
        }
        let plain = try sections(batchSize: 0)
        #expect(try sections(batchSize: 10) == plain)
        #expect(plain == [":6", "ab:3", "ac:3", "ad:3", "g0:25", "g1:25", "g2:25", "g3:25", "é:3"])  // nil and "" both name ""
    }
}

/// A load's list of rows: the chunk being filled and the section being counted are kept apart from the finished
/// ones, so reading it at any point must give every row and count so far.
@Suite struct LoadedRowsTests {
    @Test func rowsAndSectionCountsAreRightAcrossChunksAndAtEveryPoint() {
        var loaded = LoadedRows()
        // Sections a (700 rows), b (1), c (600), then a again (3): more than a chunk's worth, and a repeat.
        let plan: [(String, Int)] = [("a", 700), ("b", 1), ("c", 600), ("a", 3)]
        var names: [String] = []
        var pk: Int64 = 0
        for (section, count) in plan {
            for i in 0..<count {
                pk += 1
                // The first row of each run is reported as possibly new; later ones as the same section.
                loaded.appendStored(entity: 0, primaryKey: pk, [.string(section), .integer(pk)], section: section, sameSection: i > 0)
                names.append(section)
                if pk % 97 == 0 || pk == 512 || pk == 513 {
                    // Read midway: every row so far, in order, and the counts so far.
                    let rows = loaded.rows
                    #expect(rows.count == Int(pk))
                    #expect(rows.map(\.values[0]) == names.map { AttributeValue.string($0) })
                    #expect(zip(loaded.sectionNames, loaded.sectionCounts).flatMap { Array(repeating: $0, count: $1) } == names)
                }
            }
        }
        let rows = loaded.rows
        #expect(rows.map(\.key) == (1...pk).map { RowKey.stored(entity: 0, primaryKey: $0) })
        #expect(rows.map(\.values[1]) == (1...pk).map { AttributeValue.integer($0) })
        #expect(loaded.sectionNames == ["a", "b", "c", "a"])
        #expect(loaded.sectionCounts == [700, 1, 600, 3])
        #expect(loaded.firstRepeat?.row == 1301 && loaded.firstRepeat?.section == "a")
        // Replacing the rows keeps no old tail.
        loaded.rows = ChunkedArray(rows.prefix(10))
        #expect(loaded.rows.count == 10)
    }

    /// A controller keeps one row per result: its size is the memory a fetch holds per row.
    ///
    /// How many sort values there
    /// are takes no byte of its own (the enum's case sits in bits the inline values leave unused).
    /// A row's key takes one word when it packs, and every key comes back as it went in: packed, an unsaved object,
    /// and keys too large to pack (kept in a box with the row's object).
    @Test func everyKeyComesBackFromItsRowWithTheRowsObject() throws {
        let context = try TestStack(model: try SectionCacheTests.model()).context()
        let object = try context.performAndWait { try context.make("Item", ["name": "x", "group": "g", "score": 1]) }
        let other = try context.performAndWait { try context.make("Item", ["name": "y", "group": "g", "score": 2]) }
        let values = SortValues([.integer(1)], count: 1)
        let packable: [(Int32, Int64)] = [(0, 0), (5, 123), (0xFFFE, (1 << 48) - 1)]
        let wide: [(Int32, Int64)] = [(0xFFFF, 1), (1, 1 << 48), (1, -1), (3, .max), (-1, 7)]
        for (entity, primaryKey) in packable + wide {
            let key = RowKey.stored(entity: entity, primaryKey: primaryKey)
            var row = ResultRow(key: key, values: values)
            let packs = packable.contains { $0 == (entity, primaryKey) }
            #expect((row.packedKey < ResultRow.wideTag) == packs, "\(key)")
            #expect(row.key == key && row.object == nil && row.storeOrder == key.storeOrder, "\(key)")
            row.object = object
            #expect(row.key == key && row.object === object, "\(key)")
            let copy = row
            row.object = other
            #expect(copy.object === object && row.object === other && row.key == key, "a copy keeps its own object: \(key)")
            row.key = .unsaved(object)
            #expect(row.key == .unsaved(object) && row.object === object)
        }
        var unsaved = ResultRow(key: .unsaved(object), values: values)
        #expect(unsaved.object === object && unsaved.storeOrder == RowKey.unsaved(object).storeOrder)
        unsaved.object = other  // an unsaved row's object is its key
        #expect(unsaved.key == .unsaved(object) && unsaved.object === object)
        unsaved.key = .stored(entity: 2, primaryKey: 9)  // saved: the row keeps its object
        #expect(unsaved.key == .stored(entity: 2, primaryKey: 9) && unsaved.object === object)
    }

    @Test func aRowStaysSmallAndItsSortValuesKeepTheirCount() {
        #expect(MemoryLayout<SortValues>.size <= 48, "SortValues is \(MemoryLayout<SortValues>.size) bytes")
        #expect(MemoryLayout<RowBody>.size <= 40, "RowBody is \(MemoryLayout<RowBody>.size) bytes")
        #expect(MemoryLayout<ResultRow>.stride <= 48, "ResultRow is \(MemoryLayout<ResultRow>.stride) bytes")
        for count in 0...4 {
            let values = (0..<count).map { AttributeValue.integer(Int64($0)) }
            let sortValues = SortValues(values, count: count)
            #expect(sortValues.count == count)
            #expect(sortValues.array == values)
        }
    }

    /// A row keeps pairs of values by kind (two strings, a string and a scalar, two scalars; anything else in an
    /// array): every pair comes back as it went in, orders as `SortValues` orders it, and keeps the row's object.
    @Test func aRowsSortValuesComeBackAndOrderAsTheyWentIn() throws {
        let context = try TestStack(model: try SectionCacheTests.model()).context()
        let object = try context.performAndWait { try context.make("Item", ["name": "x", "group": "g", "score": 1]) }
        let date = Date(timeIntervalSinceReferenceDate: 12_345.5)
        let samples: [AttributeValue] = [
            .null, .string(""), .string("b"), .string("a long string that is not kept inline"), .integer(-3), .integer(.max),
            .double(-0.5), .double(.infinity), .date(date), .bool(true), .bool(false), .decimal(Decimal(string: "1.25")!),
            .uuid(UUID(uuidString: "00000000-0000-0000-0000-000000000001")!), .string("B"), .integer(4),
        ]
        let orders = [
            [FetchSortDescriptor(key: "a"), FetchSortDescriptor(key: "b", ascending: false)],
            [FetchSortDescriptor(key: "a", ascending: false, comparison: .caseInsensitive), FetchSortDescriptor(key: "b")],
        ]
        var rows: [(ResultRow, SortValues)] = []
        for a in samples {
            for b in samples {
                let values = SortValues([a, b], count: 2)
                var row = ResultRow(key: .stored(entity: 1, primaryKey: 7), values: values)
                #expect(row.values == values && row.body.count == 2, "\(a), \(b)")
                #expect(row.body[0] == a && row.body[1] == b, "\(a), \(b)")
                row.object = object
                #expect(row.values == values && row.object === object, "\(a), \(b)")
                rows.append((row, values))
            }
        }
        for sorts in orders {
            for (row, values) in rows {
                for (other, otherValues) in rows {
                    let expected = values.order(otherValues, sorts).signum()
                    #expect(row.body.order(other.body, sorts).signum() == expected, "\(values.array) against \(otherValues.array)")
                    let kept = RowBody(otherValues, slot: RowBody.empty)  // as a search keeps the values it looks for
                    #expect(row.body.order(kept, sorts).signum() == expected, "\(values.array) against \(otherValues.array)")
                    // Compared in place, as a binary search over the results compares them.
                    let inPlace = withUnsafePointer(to: row.body) { a in
                        withUnsafePointer(to: kept) { b in RowBody.order(a, b, kept.comparedValues, sorts) }
                    }
                    #expect(inPlace.signum() == expected, "in place: \(values.array) against \(otherValues.array)")
                }
            }
        }
        // One sort key (a row's `.one` case), every pair of values, in place as by value.
        for sorts in orders.map({ [$0[0]] }) {
            for a in samples {
                for b in samples {
                    let (x, y) = (RowBody(SortValues(one: a), slot: object), RowBody(SortValues(one: b), slot: RowBody.empty))
                    let expected = SortValues(one: a).order(SortValues(one: b), sorts).signum()
                    let inPlace = withUnsafePointer(to: x) { p in
                        withUnsafePointer(to: y) { q in RowBody.order(p, q, y.comparedValues, sorts) }
                    }
                    #expect(inPlace.signum() == expected, "one value in place: \(a) against \(b)")
                }
            }
        }
        for count in [0, 1, 3] {
            let values = SortValues((0..<count).map { .string("v\($0)") }, count: count)
            let row = ResultRow(key: .unsaved(object), values: values)
            #expect(row.values == values && row.object === object)
        }
    }

    /// Row keys hash one word through `_IdentityHash`: equal keys must hash alike, keys of different entities or
    /// kinds must not collide, and consecutive primary keys must spread over a table's buckets.
    @Test func rowKeysHashAlikeWhenEqualAndSpreadWhenNot() throws {
        var keys: Set<RowKey> = []
        for entity in Int32(0)..<3 {
            for pk in Int64(1)...1000 { keys.insert(.stored(entity: entity, primaryKey: pk)) }
        }
        #expect(keys.count == 3000)
        #expect(keys.contains(.stored(entity: 2, primaryKey: 1000)))
        #expect(!keys.contains(.stored(entity: 3, primaryKey: 1)))
        let stack = try TestStack(model: try SectionCacheTests.model(), inMemory: true)
        let object = try stack.context().make("Item", ["name": "x", "group": "g", "score": 1])
        #expect(!keys.contains(.unsaved(object)))
        keys.insert(.unsaved(object))
        #expect(keys.contains(.unsaved(object)) && keys.count == 3001)
        // 1,024 consecutive primary keys of one entity over 1,024 buckets (random placement fills about 630).
        let buckets = Set((Int64(1)...1024).map { RowKey.stored(entity: 1, primaryKey: $0)._rawHashValue(seed: 0) & 1023 })
        #expect(buckets.count > 560, "\(buckets.count) buckets")
        #expect(
            RowKey.stored(entity: 1, primaryKey: 5)._rawHashValue(seed: 0) != RowKey.stored(entity: 1, primaryKey: 5)._rawHashValue(seed: 1)
        )
    }

    @Test func aRowWhoseSectionIsNotFlaggedSameIsComparedByName() {
        var loaded = LoadedRows()
        for (pk, section) in ["x", "x", "y", "y", "x"].enumerated() {
            loaded.appendStored(entity: 0, primaryKey: Int64(pk), [.string(section)], section: section, sameSection: false)
        }
        #expect(loaded.sectionNames == ["x", "y", "x"])
        #expect(loaded.sectionCounts == [2, 2, 1])
        #expect(loaded.firstRepeat?.row == 4)
    }
}

/// A batched fetch reads sort values from the row query's columns, not from objects: for every attribute type they
/// must equal the values an object gives, or a change to an object would be placed against the wrong neighbours.
@Suite struct RowSortValuesTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Reading") {
                Attribute("group", .string)
                Attribute("flag", .boolean)
                Attribute("small", .integer16)
                Attribute("big", .integer64)
                Attribute("ratio", .double)
                Attribute("weight", .float)
                Attribute("price", .decimal)
                Attribute("taken", .date)
                Attribute("label", .string)
            }
        }
    }

    @Test func sortValuesReadFromRowsEqualThoseOfObjects() throws {
        let stack = try TestStack(model: try Self.model())
        let writer = stack.context()
        let keys = ["flag", "small", "big", "ratio", "weight", "price", "taken", "label"]
        for i in 0..<40 {
            // Every fifth row leaves its values nil; whole-number doubles and dates are stored as well as fractions.
            let empty = i % 5 == 4
            let values: [String: Any?] = [
                "group": i % 3 == 0 ? nil : "g\(i % 3)",
                "flag": empty ? nil : i % 2 == 0,
                "small": empty ? nil : Int16(i * 7 % 13),
                "big": empty ? nil : Int64(i) * 1_000_000_007,
                "ratio": empty ? nil : Double(i % 4) + (i % 2 == 0 ? 0 : 0.25),
                "weight": empty ? nil : Float(i % 6) / 4,
                "price": empty ? nil : Decimal(string: "\(i % 9).\(i % 10)")!,
                "taken": empty ? nil : Date(timeIntervalSinceReferenceDate: Double(i % 8) * (i % 2 == 0 ? 1 : 1.5)),
                "label": empty ? nil : (i % 2 == 0 ? "l\(i % 4)" : ""),
            ]
            try writer.make("Reading", values)
        }
        try writer.save()
        let context = stack.context()
        for key in keys {
            let request = NSFetchRequest<NSManagedObject>(entityName: "Reading")
            request.sortDescriptors = [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: key)]
            request.fetchBatchSize = 7
            let frc = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group", cacheName: nil)
            try frc.performFetch()
            let rows = frc.engine.rows
            #expect(rows.count == 40)
            for (index, row) in rows.enumerated() {
                let fromObject = try frc.engine.placement(of: frc.engine.object(at: index))
                let read = Placement(values: row.values, section: frc.engine.sections.sectionName(ofRowAt: index))
                #expect(read == fromObject, "sorting by \(key), row \(index): \(read) read, \(fromObject) from its object")
            }
        }
    }
}

extension LoadedRows {
    /// Appends a stored row whose sort values are `values`, as a batched fetch does.
    mutating func appendStored(entity: Int32, primaryKey: Int64, _ values: [AttributeValue], section: String, sameSection: Bool) {
        values.withUnsafeBufferPointer { buffer in
            let read = ResultKeyValues(base: buffer.baseAddress!, count: values.count, changedBits: ~0)
            appendStored(
                entity: entity, primaryKey: primaryKey, values: read, sortCount: values.count, empty: RowBody.empty, section: section,
                sameSection: sameSection)
        }
    }
}
