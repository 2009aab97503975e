// OpenCoreData benchmarks: each workload measured side by side with the peers a user would pick instead, in the
// same run, reported as medians, spreads and ratios (this machine is noisy: compare ratios, not absolute times).
//
//   swift run -c release --package-path Benchmarks ocd-benchmarks [--smoke] [--large] [--repetitions N] [--only W1,W3] [--output DIR]
//
// Writes BENCHMARKS.md and benchmarks.json to DIR (default: the repository root).
import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

#if os(Linux)
    import CHeap
#endif

// MARK: Options

struct Options {
    var smoke = false
    var large = false
    var repetitions = 5
    /// Workload prefixes to run (`--only W1,W3`); empty runs them all.
    var only: [String] = []
    /// Sizes to run instead of the defaults (`--sizes 1000000`), for profiling one size.
    var customSizes: [Int] = []
    /// Skip the peers (`--no-peers`), for profiling OpenCoreData alone.
    var peers = true
    var output = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)

    init(_ arguments: [String]) throws {
        var i = 0
        while i < arguments.count {
            switch arguments[i] {
            case "--smoke": smoke = true
            case "--large": large = true
            case "--repetitions":
                i += 1
                guard i < arguments.count, let n = Int(arguments[i]), n > 0 else { throw Usage("--repetitions needs a positive number") }
                repetitions = n
            case "--only":
                i += 1
                guard i < arguments.count else { throw Usage("--only needs workloads, e.g. W1,W3") }
                only = arguments[i].split(separator: ",").map { String($0).uppercased() }
            case "--sizes":
                i += 1
                guard i < arguments.count else { throw Usage("--sizes needs sizes, e.g. 10000,1000000") }
                customSizes = try arguments[i].split(separator: ",").map {
                    guard let n = Int($0), n > 0 else { throw Usage("bad size \($0)") }
                    return n
                }
            case "--no-peers": peers = false
            case "--output":
                i += 1
                guard i < arguments.count else { throw Usage("--output needs a folder") }
                output = URL(fileURLWithPath: arguments[i])
            default: throw Usage("unknown option \(arguments[i])")
            }
            i += 1
        }
        if smoke { repetitions = 1 }
    }

    func runs(_ workload: String) -> Bool { only.isEmpty || only.contains(workload) }

    var sizes: [Int] {
        if !customSizes.isEmpty { return customSizes }
        return smoke ? [300] : (large ? [10_000, 100_000, 1_000_000] : [10_000, 100_000])
    }
}

struct Usage: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) {
        description =
            message
            + "\nusage: ocd-benchmarks [--smoke] [--large] [--repetitions N] [--only W1,W3,…] [--sizes N,…] [--no-peers] [--output DIR]"
    }
}

// MARK: Measuring

struct Result: Codable {
    var workload: String
    var size: Int
    var contender: String
    var seconds: [Double]
    var isReference: Bool
    var note: String?

    var median: Double { seconds.isEmpty ? 0 : seconds.sorted()[seconds.count / 2] }
    var spread: (Double, Double) { (seconds.min() ?? 0, seconds.max() ?? 0) }
}

// Single-threaded runner: results are only touched from the main flow.
nonisolated(unsafe) var results: [Result] = []

func nanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Bytes the process's heap holds now: glibc's count of allocated bytes (`mallinfo2`), which, unlike resident memory,
/// does not hide allocations that reuse memory freed earlier. Falls back to resident memory elsewhere.
func heapBytes() -> Int {
    #if os(Linux)
        let info = mallinfo2()
        return Int(info.uordblks + info.hblkhd)
    #else
        return 0
    #endif
}

/// Heap memory per row that `body`'s result holds (measured once, untimed, while the result is alive).
func bytesPerRow<T>(_ rows: Int, _ body: () throws -> T) rethrows -> String {
    let before = heapBytes()
    let result = try body()
    let after = heapBytes()
    withExtendedLifetime(result) {}
    return "memory held: \(max(0, after - before) / max(1, rows)) B/row"
}

/// Times `body` `repetitions` times, calling `prepare` untimed before each, after `warmUps` untimed runs (each
/// prepared too) that bring the contender's connection, caches and heap to the state of its later runs.
func measure(_ repetitions: Int, warmUps: Int = 0, prepare: () throws -> Void = {}, _ body: () throws -> Void) rethrows -> [Double] {
    for _ in 0..<warmUps {
        try prepare()
        try body()
    }
    var samples: [Double] = []
    for _ in 0..<repetitions {
        try prepare()
        let start = nanoseconds()
        try body()
        samples.append(Double(nanoseconds() - start) / 1e9)
    }
    return samples
}

/// One contender of an interleaved measurement: what to prepare untimed before each run, and what to time.
struct Contender {
    var prepare: () throws -> Void = {}
    let body: () throws -> Void
}

/// Times each contender `repetitions` times, round-robin (one run of each in turn), after `warmUps` untimed rounds.
/// This machine has slow spells lasting seconds; run one contender after another and a spell falls on whichever ran
/// during it, which skews the ratios of that run. Interleaved, a spell costs every contender alike. Each round starts
/// one contender later than the one before, so that each follows every other equally often: a contender that fills
/// the caches with its own data (GRDB's rows) slows whichever runs next.
func measureInterleaved(_ repetitions: Int, warmUps: Int = 0, _ contenders: [Contender]) throws -> [[Double]] {
    var samples = Array(repeating: [Double](), count: contenders.count)
    for round in 0..<(warmUps + repetitions) {
        for turn in contenders.indices {
            let index = (round + turn) % contenders.count
            let contender = contenders[index]
            try contender.prepare()
            let start = nanoseconds()
            try contender.body()
            let elapsed = Double(nanoseconds() - start) / 1e9
            if round >= warmUps { samples[index].append(elapsed) }
        }
    }
    return samples
}

func median(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.sorted()[values.count / 2] }

func record(_ workload: String, _ size: Int, _ contender: String, _ seconds: [Double], reference: Bool = false, note: String? = nil) {
    results.append(Result(workload: workload, size: size, contender: contender, seconds: seconds, isReference: reference, note: note))
    let r = results.last!
    // Unbuffered, so progress shows when the output is a file.
    FileHandle.standardOutput.write(
        Data(
            (String(format: "%@ n=%d %@: median %.3f ms", workload, size, contender, r.median * 1000) + (note.map { " (\($0))" } ?? "")
                + "\n").utf8))
}

// MARK: Data

let letters = (65...90).map { String(UnicodeScalar($0)!) }

struct ItemData {
    var section: String
    var score: Int64
    var title: String
    var flag: Int64
    var amount: Double
    var created: Double
    var note: String
    var count: Int64
    var rating: Double
    var code: String

    var values: [Any] { [section, score, title, flag, amount, created, note, count, rating, code] }
}

func makeItems(_ n: Int, seed: UInt64 = 42) -> [ItemData] {
    var state = seed
    func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    return (0..<n).map { i in
        ItemData(
            section: letters[Int(next() % 26)], score: Int64(next() % 1_000_000), title: "Item \(i)", flag: Int64(next() % 2),
            amount: Double(next() % 10_000) / 100, created: 700_000_000 + Double(i), note: "note \(next() % 1000)",
            count: Int64(next() % 100), rating: Double(next() % 50) / 10, code: "C\(next() % 100_000)")
    }
}

let columns = ["section", "score", "title", "flag", "amount", "created", "note", "count", "rating", "code"]

func makeModel(itemClass: NSManagedObject.Type = NSManagedObject.self) throws -> NSManagedObjectModel {
    try NSManagedObjectModel {
        Entity("Item", managedObjectClass: itemClass) {
            Attribute("section", .string)
            Attribute("score", .integer64)
            Attribute("title", .string)
            Attribute("flag", .boolean)
            Attribute("amount", .double)
            Attribute("created", .date)
            Attribute("note", .string)
            Attribute("count", .integer32)
            Attribute("rating", .double)
            Attribute("code", .string)
        }
    }
}

/// Stores with the same rows: OpenCoreData's, and a plain table that GRDB and raw SQLite read.
final class Fixture {
    let directory: URL
    let model: NSManagedObjectModel
    let container: NSPersistentContainer
    let plainPath: String
    let size: Int

    init(size: Int, items: [ItemData]) throws {
        self.size = size
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ocd-bench-\(size)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        model = try makeModel()
        container = NSPersistentContainer(name: "Bench", managedObjectModel: model)
        let storeURL = directory.appendingPathComponent("ocd.sqlite")
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: storeURL)]
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let entity = try context.entity(named: "Item")
            for (i, item) in items.enumerated() {
                let object = NSManagedObject(entity: entity, insertInto: context)
                for (key, value) in zip(columns, Fixture.ocdValues(item)) { object.setValue(value, forKey: key) }
                if i % 50_000 == 49_999 {
                    try context.save()
                    context.reset()
                }
            }
            try context.save()
            context.reset()
        }
        // The covering index a Core Data model would declare as a fetch index (the store does not create indexes
        // from the model yet).
        let ocdQueue = try DatabaseQueue(path: storeURL.path)
        try ocdQueue.write { db in try db.execute(sql: "CREATE INDEX IF NOT EXISTS ZITEM_SECTION_SCORE ON ZITEM (ZSECTION, ZSCORE, Z_PK)") }
        try ocdQueue.close()

        plainPath = directory.appendingPathComponent("plain.sqlite").path
        let raw = try RawConnection(path: plainPath)
        try raw.execute(
            "CREATE TABLE item (id INTEGER PRIMARY KEY, section TEXT, score INTEGER, title TEXT, flag INTEGER, amount REAL, created REAL, note TEXT, count INTEGER, rating REAL, code TEXT)"
        )
        try raw.execute("CREATE INDEX item_section_score ON item (section, score, id)")
        try raw.insert(
            "INSERT INTO item (section, score, title, flag, amount, created, note, count, rating, code) VALUES (?,?,?,?,?,?,?,?,?,?)",
            rows: items.map(\.values))
    }

    static func ocdValues(_ item: ItemData) -> [Any] {
        [
            item.section, item.score, item.title, item.flag == 1, item.amount, Date(timeIntervalSinceReferenceDate: item.created),
            item.note,
            Int32(item.count), item.rating, item.code,
        ]
    }

    func sectionedRequest(batch: Int = 20) -> NSFetchRequest<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "section"), FetchSortDescriptor(key: "score")]
        request.fetchBatchSize = batch
        return request
    }

    /// A new context and a fetched, tracking controller of the sectioned request, with a delegate that counts batches.
    func trackedController() throws -> (NSManagedObjectContext, NSFetchedResultsController<NSManagedObject>, CountingDelegate) {
        let context = container.newBackgroundContext()
        let controller = NSFetchedResultsController(
            fetchRequest: sectionedRequest(), managedObjectContext: context, sectionNameKeyPath: "section", cacheName: nil)
        let delegate = CountingDelegate()
        controller.delegate = delegate
        try controller.performFetch()
        return (context, controller, delegate)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

final class CountingDelegate: NSFetchedResultsControllerDelegate {
    var batches = 0
    func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) { batches += 1 }
}

// MARK: Workloads

/// W1: performFetch of the sectioned, sorted request with fetchBatchSize 20.
///
/// Below a million rows a fetch takes milliseconds, so each contender runs six times the repetitions, interleaved
/// with the others and after one untimed warm-up round (the first fetch through a connection pays for opening it and
/// for the heap's first growth, which is not what is compared), then as many runs alone. At a million rows GRDB's
/// contender takes seconds and leaves the heap holding hundreds of megabytes it freed, which slowed the workloads
/// after it: there each contender runs the repetitions once, interleaved only.
func w1(_ fixture: Fixture, _ options: Options) throws {
    let n = fixture.size
    let repetitions = n < 1_000_000 ? options.repetitions * 6 : options.repetitions
    let raw = try RawConnection(path: fixture.plainPath)
    let rawSQL = "SELECT id, section FROM item ORDER BY section, score, id"
    let pool = try DatabasePool(path: fixture.plainPath)
    // The columns a sectioned list needs (as raw SQLite reads them), decoded by index into a record: GRDB's fastest
    // way to fetch rows into values.
    let grdbSQL = "SELECT id, section FROM item ORDER BY section, score, id"
    var controller: NSFetchedResultsController<NSManagedObject>?
    var context: NSManagedObjectContext?
    let contenders = [
        Contender {
            let result = try raw.idsAndKeys(rawSQL)
            precondition(result.ids.count == n)
        },
        Contender {
            let rows = try pool.read { db in try ItemKey.fetchAll(db, sql: grdbSQL) }
            precondition(rows.count == n)
        },
        Contender(
            prepare: {
                controller = nil
                context = fixture.container.newBackgroundContext()
                controller = NSFetchedResultsController(
                    fetchRequest: fixture.sectionedRequest(), managedObjectContext: context!, sectionNameKeyPath: "section", cacheName: nil)
            },
            body: {
                try controller!.performFetch()
                precondition(controller!.sections?.count == 26 || n < 1000)
            }),
    ]
    let names = ["raw SQLite (ids + section keys)", "GRDB (ids + section keys, records)", "OpenCoreData controller"]
    // The headline: contenders interleaved, so that each runs after the others' work (as a fetch in an app runs after
    // other work) and a slow spell of the machine falls on all of them.
    let interleaved = try measureInterleaved(repetitions, warmUps: 1, contenders)
    controller = nil
    // Memory held per row, measured once each, untimed.
    let notes = [
        try bytesPerRow(n) { try raw.idsAndKeys(rawSQL) },
        try bytesPerRow(n) { try pool.read { db in try ItemKey.fetchAll(db, sql: grdbSQL) } },
        try bytesPerRow(n) { () throws -> (NSManagedObjectContext, NSFetchedResultsController<NSManagedObject>) in
            let context = fixture.container.newBackgroundContext()
            let fresh = NSFetchedResultsController(
                fetchRequest: fixture.sectionedRequest(), managedObjectContext: context, sectionNameKeyPath: "section", cacheName: nil)
            try fresh.performFetch()
            return (context, fresh)
        },
    ]
    for index in contenders.indices {
        record("W1 performFetch", n, names[index], interleaved[index], reference: index == 0, note: notes[index])
    }
    // Each contender alone, one run after another with the caches warm from its own previous run.
    for (index, contender) in contenders.enumerated() where n < 1_000_000 {
        record(
            "W1 performFetch, each contender alone (warm caches)", n, names[index],
            try measure(repetitions, warmUps: 1, prepare: contender.prepare, contender.body), reference: index == 0)
    }
    controller = nil
}

/// W3: one change, timed from the change until the delegate's controllerDidChangeContent.
func w3(_ fixture: Fixture, _ options: Options) throws {
    let n = fixture.size
    let (context, controller, delegate) = try fixture.trackedController()
    var counter = 0
    func pick() -> NSManagedObject {
        counter += 1
        let sections = controller.sections ?? []
        let s = counter % sections.count
        return controller.object(at: IndexPath(row: (counter * 7919) % sections[s].numberOfObjects, section: s))
    }
    let changes: [(String, (NSManagedObject) throws -> Void)] = [
        ("edit", { $0.setValue("edited \(counter)", forKey: "title") }),
        (
            "move within section",
            { object in
                let score = (object.value(forKey: "score") as? Int64) ?? 0
                object.setValue((score + 1 + Int64(counter) * 7919) % 1_000_000, forKey: "score")
            }
        ),
        (
            "move across sections",
            { object in
                let current = letters.firstIndex(of: (object.value(forKey: "section") as? String) ?? "A") ?? 0
                object.setValue(letters[(current + 1 + counter % 25) % 26], forKey: "section")
            }
        ),
    ]
    for (name, change) in changes {
        var object: NSManagedObject?
        record(
            "W3 one change: \(name)", n, "OpenCoreData, same context",
            try measure(options.repetitions, prepare: { object = pick() }) {
                let before = delegate.batches
                try change(object!)
                context.processPendingChanges()
                precondition(delegate.batches == before + 1)
            })
    }
    record(
        "W3 one change: insert", n, "OpenCoreData, same context",
        try measure(options.repetitions) {
            let before = delegate.batches
            let object = NSManagedObject(entity: try context.entity(named: "Item"), insertInto: context)
            object.setValue("M", forKey: "section")
            object.setValue(Int64(counter), forKey: "score")
            context.processPendingChanges()
            precondition(delegate.batches == before + 1)
        })
    var victim: NSManagedObject?
    record(
        "W3 one change: delete", n, "OpenCoreData, same context",
        measure(options.repetitions, prepare: { victim = pick() }) {
            let before = delegate.batches
            context.delete(victim!)
            context.processPendingChanges()
            precondition(delegate.batches == before + 1)
        })
    try context.save()

    // Saved by a background context and merged: the same five changes, timed from the edit in the background
    // context, through its save, to the controller's controllerDidChangeContent after the merge.
    let background = fixture.container.newBackgroundContext()
    func savedAndMerged(_ edit: () throws -> Void) throws {
        let before = delegate.batches
        let note = SavedNote()
        let observer = NotificationCenter.default.addObserver(forName: .NSManagedObjectContextDidSave, object: background, queue: nil) {
            note.value = $0
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try edit()
        try background.save()
        context.mergeChanges(fromContextDidSave: note.value!)
        precondition(delegate.batches == before + 1)
    }
    for (name, change) in changes {
        record(
            "W3 one change: \(name)", n, "OpenCoreData, background save merged",
            try measure(options.repetitions, prepare: { victim = pick() }) {
                try savedAndMerged { try change(try background.existingObject(with: victim!.objectID)) }
            })
    }
    record(
        "W3 one change: insert", n, "OpenCoreData, background save merged",
        try measure(options.repetitions) {
            try savedAndMerged {
                let object = NSManagedObject(entity: try background.entity(named: "Item"), insertInto: background)
                object.setValue("M", forKey: "section")
                object.setValue(Int64(counter), forKey: "score")
            }
        })
    record(
        "W3 one change: delete", n, "OpenCoreData, background save merged",
        try measure(options.repetitions, prepare: { victim = pick() }) {
            try savedAndMerged { background.delete(try background.existingObject(with: victim!.objectID)) }
        })

    guard options.peers else { return }
    // The naive approach: GRDB ValueObservation, a full re-fetch, and a CollectionDifference with moves.
    let naive = try NaiveObserver(path: fixture.plainPath)
    defer { naive.cancel() }
    let pool = naive.pool
    var k = 0
    let naiveChanges: [(String, String)] = [
        ("edit", "UPDATE item SET title = 'edited' || ? WHERE id = ?"),
        ("move within section", "UPDATE item SET score = (? * 7919) % 1000000 WHERE id = ?"),
        ("move across sections", "UPDATE item SET section = char(65 + (? % 26)) WHERE id = ?"),
    ]
    for (name, sql) in naiveChanges {
        record(
            "W3 one change: \(name)", n, "GRDB observation + re-fetch + diff",
            try measure(options.repetitions) {
                k += 1
                try pool.write { db in try db.execute(sql: sql, arguments: [k, Int64(1 + (k * 31) % n)]) }
                try naive.waitForDiff()
            }, reference: true)
    }
    record(
        "W3 one change: insert", n, "GRDB observation + re-fetch + diff",
        try measure(options.repetitions) {
            try pool.write { db in try db.execute(sql: "INSERT INTO item (section, score, title) VALUES ('M', ?, 'new')", arguments: [k]) }
            try naive.waitForDiff()
        }, reference: true)
    record(
        "W3 one change: delete", n, "GRDB observation + re-fetch + diff",
        try measure(options.repetitions) {
            k += 1
            try pool.write { db in try db.execute(sql: "DELETE FROM item WHERE id = (SELECT MAX(id) FROM item) - ?", arguments: [k]) }
            try naive.waitForDiff()
        }, reference: true)
    withExtendedLifetime(controller) {}
}

/// W2: performFetch with a cache name, cold (no cache file) and warm (the file from the previous run).
func w2(_ fixture: Fixture, _ options: Options) throws {
    let n = fixture.size
    let store = fixture.container.persistentStoreCoordinator.persistentStores.first as! SQLiteStore
    let cacheName = "ocd-bench-w2-\(n)-\(UUID().uuidString)"
    defer { NSFetchedResultsController<NSManagedObject>.deleteCache(withName: cacheName) }
    var controller: NSFetchedResultsController<NSManagedObject>?
    var rowsRead = 0
    func prepare(cold: Bool) {
        controller?.flushCache()  // the previous run's cache file is on disk (untimed)
        if cold { NSFetchedResultsController<NSManagedObject>.deleteCache(withName: cacheName) }
        controller = NSFetchedResultsController(
            fetchRequest: fixture.sectionedRequest(), managedObjectContext: fixture.container.newBackgroundContext(),
            sectionNameKeyPath: "section", cacheName: cacheName)
        rowsRead = store.rowsRead
    }
    for cold in [true, false] {
        var values: [Int] = []
        var sections = 0
        let samples = try measure(options.repetitions, prepare: { prepare(cold: cold) }) {
            try controller!.performFetch()
            values.append(store.rowsRead - rowsRead)
            sections = controller!.sections?.count ?? 0
        }
        record(
            "W2 performFetch with cache", n, cold ? "OpenCoreData, cold (no cache file)" : "OpenCoreData, warm (cache file)", samples,
            reference: cold, note: "whole rows read: \(values.max() ?? 0); sections: \(sections)")
    }
}

/// W4: batches of k mixed changes (edits, moves within and across sections, inserts, deletes), timed from the
/// first change to the delegate's controllerDidChangeContent; against the naive observer.
func w4(_ fixture: Fixture, _ options: Options) throws {
    let n = fixture.size
    let ks = Array(Set(options.smoke ? [10, n / 10] : [10, 100, 1_000, n / 10])).sorted()  // 10% of 10k is 1,000
    let (context, controller, delegate) = try fixture.trackedController()
    let entity = try context.entity(named: "Item")
    var counter = 0
    /// k distinct objects spread over the results (chosen before the clock starts).
    func victims(_ k: Int) -> [NSManagedObject] {
        let count = controller.fetchedObjects?.count ?? 0
        var seen = Set<ObjectIdentifier>()
        var list: [NSManagedObject] = []
        let sections = controller.sections ?? []
        while list.count < min(k, count) {
            counter += 1
            let s = counter % sections.count
            guard sections[s].numberOfObjects > 0 else { continue }
            let object = controller.object(at: IndexPath(row: (counter * 7919) % sections[s].numberOfObjects, section: s))
            if seen.insert(ObjectIdentifier(object)).inserted { list.append(object) }
        }
        return list
    }
    /// The i-th change of a mixed batch: 40% edits, 20% moves within, 20% moves across, 10% inserts, 10% deletes.
    func mixedChange(_ i: Int, _ object: NSManagedObject, in context: NSManagedObjectContext) throws {
        switch i % 10 {
        case 0, 1, 2, 3: object.setValue("batch \(counter) \(i)", forKey: "title")
        case 4, 5: object.setValue(Int64((i * 7919 + counter) % 1_000_000), forKey: "score")
        case 6, 7: object.setValue(letters[(i + counter) % 26], forKey: "section")
        case 8:
            let fresh = NSManagedObject(entity: entity, insertInto: context)
            fresh.setValue(letters[i % 26], forKey: "section")
            fresh.setValue(Int64(i), forKey: "score")
        default: context.delete(object)
        }
    }
    for k in ks {
        var batch: [NSManagedObject] = []
        record(
            "W4 batch of \(k) mixed changes", n, "OpenCoreData, same context",
            try measure(options.repetitions, prepare: { batch = victims(k) }) {
                let before = delegate.batches
                for (i, object) in batch.enumerated() { try mixedChange(i, object, in: context) }
                context.processPendingChanges()
                precondition(delegate.batches == before + 1)
            })
        try context.save()
    }
    let background = fixture.container.newBackgroundContext()
    for k in ks {
        var ids: [NSManagedObjectID] = []
        var phases: [(edit: Double, save: Double, merge: Double)] = []
        let samples = try measure(options.repetitions, prepare: { ids = victims(k).map(\.objectID) }) {
            let start = nanoseconds()
            let before = delegate.batches
            let note = SavedNote()
            let observer = NotificationCenter.default.addObserver(
                forName: .NSManagedObjectContextDidSave, object: background, queue: nil
            ) { note.value = $0 }
            defer { NotificationCenter.default.removeObserver(observer) }
            // One fetch for the k objects, as a background job would do it.
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.predicate = try FetchPredicate(format: "SELF IN %@", ids)
            let byID = Dictionary(uniqueKeysWithValues: try background.fetch(request).map { ($0.objectID, $0) })
            for (i, id) in ids.enumerated() { try mixedChange(i, byID[id]!, in: background) }
            let edited = nanoseconds()
            try background.save()
            let saved = nanoseconds()
            context.mergeChanges(fromContextDidSave: note.value!)
            precondition(delegate.batches == before + 1)
            let end = nanoseconds()
            phases.append((Double(edited - start) / 1e6, Double(saved - edited) / 1e6, Double(end - saved) / 1e6))
        }
        record(
            "W4 batch of \(k) mixed changes", n, "OpenCoreData, background save merged", samples,
            note: String(
                format: "median phases: fetch + edit %.1f ms, save %.1f ms, merge + controller %.1f ms", median(phases.map(\.edit)),
                median(phases.map(\.save)), median(phases.map(\.merge))))
        background.reset()
    }
    guard options.peers else { return }
    let naive = try NaiveObserver(path: fixture.plainPath)
    defer { naive.cancel() }
    var round = 0
    for k in ks {
        if n >= 1_000_000, k >= n / 10 {
            // Myers' diff costs O(N·D): with D ≈ 2k it runs for hours here. Said, not measured.
            results.append(
                Result(
                    workload: "W4 batch of \(k) mixed changes", size: n, contender: "GRDB observation + re-fetch + diff", seconds: [],
                    isReference: false, note: "not run: CollectionDifference is O(N·D), hours at this size"))
            continue
        }
        record(
            "W4 batch of \(k) mixed changes", n, "GRDB observation + re-fetch + diff",
            try measure(options.repetitions) {
                round += 1
                try naive.pool.write { db in
                    let maxID = try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM item") ?? 1
                    for i in 0..<k {
                        let id = 1 + Int64((i * 7919 + round * 31) % Int(maxID))
                        switch i % 10 {
                        case 0, 1, 2, 3:
                            try db.execute(sql: "UPDATE item SET title = ? WHERE id = ?", arguments: ["batch \(round) \(i)", id])
                        case 4, 5:
                            try db.execute(sql: "UPDATE item SET score = ? WHERE id = ?", arguments: [(i * 7919 + round) % 1_000_000, id])
                        case 6, 7:
                            try db.execute(sql: "UPDATE item SET section = ? WHERE id = ?", arguments: [letters[(i + round) % 26], id])
                        case 8:
                            try db.execute(
                                sql: "INSERT INTO item (section, score, title) VALUES (?, ?, 'new')", arguments: [letters[i % 26], i])
                        default: try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [id])
                        }
                    }
                }
                try naive.waitForDiff()
            }, reference: true)
    }
}

/// An item class that counts its live instances, for W5's "objects alive".
final class CountedItem: NSManagedObject {
    nonisolated(unsafe) static var alive = 0
    nonisolated(unsafe) static var peak = 0

    required init(entity: NSEntityDescription, insertInto context: NSManagedObjectContext?) {
        super.init(entity: entity, insertInto: context)
        Self.alive += 1
        Self.peak = max(Self.peak, Self.alive)
    }

    deinit { Self.alive -= 1 }
}

/// W5: scroll through every result of the sorted request with batch size 20 (objects load a batch at a time and
/// older batches are released), reading each object's title; against raw SQLite stepping the same rows.
func w5(_ fixture: Fixture, _ options: Options) throws {
    let n = fixture.size
    let raw = try RawConnection(path: fixture.plainPath)
    record(
        "W5 scroll every row (batch 20)", n, "raw SQLite stepping the rows",
        try measure(options.repetitions) {
            let count = try raw.stepAll("SELECT id, section, score, title FROM item ORDER BY section, score, id", columns: 4)
            precondition(count > 0)
        }, reference: true, note: "SQL statements: 1")
    // The same store opened with a model whose Item class counts live instances (same version hash).
    let model = try makeModel(itemClass: CountedItem.self)
    let container = NSPersistentContainer(name: "Bench", managedObjectModel: model)
    container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: fixture.directory.appendingPathComponent("ocd.sqlite"))]
    try container.loadPersistentStores()
    var statements = 0
    var peak = 0
    record(
        "W5 scroll every row (batch 20)", n, "OpenCoreData fetchInBatches",
        try measure(options.repetitions) {
            let context = container.newBackgroundContext()
            let request = NSFetchRequest<CountedItem>(entityName: "Item")
            request.sortDescriptors = [FetchSortDescriptor(key: "section"), FetchSortDescriptor(key: "score")]
            request.fetchBatchSize = 20
            let baseline = CountedItem.alive
            CountedItem.peak = baseline
            let results = try context.fetchInBatches(request)
            var visited = 0
            for object in results {
                _ = object.value(forKey: "title")
                visited += 1
            }
            precondition(visited == results.count && visited > 0)
            statements = 1 + results.batchesLoaded
            peak = CountedItem.peak - baseline
        }, note: "SQL statements: \(statements); peak objects alive: \(peak) (three batches = 60)")
}

/// W6: insert 50,000 objects × 10 attributes and save, each contender in one transaction.
func w6(_ options: Options) throws {
    let n = options.smoke ? 500 : 50_000
    let items = makeItems(n, seed: 7)
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ocd-bench-w6-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let create =
        "CREATE TABLE item (id INTEGER PRIMARY KEY, section TEXT, score INTEGER, title TEXT, flag INTEGER, amount REAL, created REAL, note TEXT, count INTEGER, rating REAL, code TEXT)"
    let insert = "INSERT INTO item (section, score, title, flag, amount, created, note, count, rating, code) VALUES (?,?,?,?,?,?,?,?,?,?)"
    var run = 0
    /// A new database file for a contender's next run.
    func freshFile(_ name: String) -> URL {
        run += 1
        return directory.appendingPathComponent("\(name)\(run).sqlite")
    }
    var raw: RawConnection?
    var queue: DatabaseQueue?
    var contenders: [(name: String, contender: Contender)] = []
    if options.peers {
        contenders.append(
            (
                "raw SQLite prepared statement",
                Contender(
                    prepare: {
                        raw = try RawConnection(path: freshFile("raw").path)
                        try raw!.execute(create)
                    },
                    body: { try raw!.insert(insert, rows: items.map(\.values)) })
            ))
        contenders.append(
            (
                "GRDB",
                Contender(
                    prepare: {
                        queue = try DatabaseQueue(path: freshFile("grdb").path)
                        try queue!.write { db in try db.execute(sql: create) }
                    },
                    body: {
                        try queue!.write { db in
                            let statement = try db.makeStatement(sql: insert)
                            for item in items {
                                try statement.execute(arguments: [
                                    item.section, item.score, item.title, item.flag, item.amount, item.created, item.note, item.count,
                                    item.rating, item.code,
                                ])
                            }
                        }
                    })
            ))
    }
    /// The phases of each OpenCoreData contender's runs, by name.
    var phases: [String: [(objects: Double, save: Double, release: Double)]] = [:]
    /// An OpenCoreData contender: make `n` objects in one context, fill each with `fill`, save.
    func openCoreData(_ name: String, itemClass: NSManagedObject.Type, fill: @escaping (NSManagedObject, ItemData) throws -> Void) throws
        -> (String, Contender)
    {
        let model = try makeModel(itemClass: itemClass)
        var container: NSPersistentContainer?
        return (
            name,
            Contender(
                prepare: {
                    let made = NSPersistentContainer(name: "W6", managedObjectModel: model)
                    made.persistentStoreDescriptions = [NSPersistentStoreDescription(url: freshFile("ocd"))]
                    try made.loadPersistentStores()
                    container = made
                },
                body: {
                    let start = nanoseconds()
                    var (objectsDone, saveDone) = (start, start)
                    do {
                        let context = container!.newBackgroundContext()
                        try context.performAndWait {
                            let entity = try context.entity(named: "Item")
                            for item in items { try fill(itemClass.init(entity: entity, insertInto: context), item) }
                            objectsDone = nanoseconds()
                            try context.save()
                            saveDone = nanoseconds()
                        }
                    }  // the context and its 50,000 objects are released here
                    let end = nanoseconds()
                    phases[name, default: []].append(
                        (Double(objectsDone - start) / 1e6, Double(saveDone - objectsDone) / 1e6, Double(end - saveDone) / 1e6))
                })
        )
    }
    contenders.append(
        try openCoreData("OpenCoreData (setValue + save)", itemClass: NSManagedObject.self) { object, item in
            object.setValue(item.section, forKey: "section")
            object.setValue(item.score, forKey: "score")
            object.setValue(item.title, forKey: "title")
            object.setValue(item.flag == 1, forKey: "flag")
            object.setValue(item.amount, forKey: "amount")
            object.setValue(Date(timeIntervalSinceReferenceDate: item.created), forKey: "created")
            object.setValue(item.note, forKey: "note")
            object.setValue(Int32(item.count), forKey: "count")
            object.setValue(item.rating, forKey: "rating")
            object.setValue(item.code, forKey: "code")
        })
    contenders.append(
        try openCoreData("OpenCoreData (@Managed subclass + save)", itemClass: TypedItem.self) { object, item in
            let typed = object as! TypedItem
            typed.section = item.section
            typed.score = item.score
            typed.title = item.title
            typed.flag = item.flag == 1
            typed.amount = item.amount
            typed.created = Date(timeIntervalSinceReferenceDate: item.created)
            typed.note = item.note
            typed.count = Int32(item.count)
            typed.rating = item.rating
            typed.code = item.code
        })
    // Interleaved, like W1: each round runs every contender once.
    let samples = try measureInterleaved(options.repetitions, contenders.map(\.contender))
    for (index, (name, _)) in contenders.enumerated() {
        let note = phases[name].map {
            String(
                format: "median phases: make objects + set values %.0f ms, save %.0f ms, release the context %.0f ms",
                median($0.map(\.objects)), median($0.map(\.save)), median($0.map(\.release)))
        }
        record("W6 insert and save", n, name, samples[index], reference: options.peers && index == 0, note: note)
    }
}

/// W6's typed contender: the same ten attributes as `@Managed` properties, as an app would declare them.
final class TypedItem: NSManagedObject {
    @Managed var section: String?
    @Managed var score: Int64
    @Managed var title: String?
    @Managed var flag: Bool
    @Managed var amount: Double
    @Managed var created: Date?
    @Managed var note: String?
    @Managed var count: Int32
    @Managed var rating: Double
    @Managed var code: String?
}

final class SavedNote: @unchecked Sendable { var value: Notification? }

/// What a user writes today without this package: GRDB's ValueObservation re-fetches every row in order after each
/// write, and the new ID list is diffed against the old one (`CollectionDifference` with moves).
final class NaiveObserver {
    let pool: DatabasePool
    private let semaphore = DispatchSemaphore(value: 0)
    private let state = NaiveState()
    private var cancellable: AnyDatabaseCancellable?

    init(path: String) throws {
        pool = try DatabasePool(path: path)
        let observation = ValueObservation.tracking { db in
            try ItemKey.fetchAll(db, sql: "SELECT id, section FROM item ORDER BY section, score, id")
        }
        let (semaphore, state) = (self.semaphore, self.state)
        cancellable = observation.start(
            in: pool, scheduling: .async(onQueue: DispatchQueue(label: "observation")),
            onError: { error in
                state.error = error
                semaphore.signal()
            }
        ) { rows in
            let ids = rows.map(\.id)
            // The first value is the initial list, not a change (and a diff from nothing costs O(n²)).
            let diff = state.ids.isEmpty ? CollectionDifference<Int64>([])! : ids.difference(from: state.ids).inferringMoves()
            state.ids = ids
            state.lastDiffCount = diff.count
            semaphore.signal()
        }
        try waitForDiff()  // the initial value
    }

    /// Waits for the diff that follows a write; throws the observation's error if it failed (it then stops).
    func waitForDiff() throws {
        semaphore.wait()
        if let error = state.error { throw error }
    }

    func cancel() { cancellable?.cancel() }
}

/// What a sectioned list needs of a row (its ID and section), as a GRDB user decodes it: by column index, the
/// fastest `FetchableRecord` initializer.
struct ItemKey: FetchableRecord, Sendable {
    let id: Int64
    let section: String
    init(row: Row) {
        id = row[0]
        section = row[1]
    }
}
final class NaiveState: @unchecked Sendable {
    var ids: [Int64] = []
    var lastDiffCount = 0
    var error: (any Error)?
}

// MARK: Report

func report(_ options: Options) throws {
    var lines = [
        "# Benchmarks", "",
        "Generated by `swift run -c release --package-path Benchmarks ocd-benchmarks\(options.smoke ? " --smoke" : "")\(options.large ? " --large" : "")`"
            + " on \(ProcessInfo.processInfo.hostName), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(options.repetitions) repetitions each"
            + " (W1: \(options.repetitions * 6) below a million rows, after one untimed warm-up round)."
            + " W1 and W6 run their contenders interleaved, one run of each in turn, so that a slow spell of the machine falls on all of them"
            + " (W1 also runs each contender alone, its caches warm from its own previous run).",
        "The machine is noisy: read the ratios (each to the workload's reference, measured in the same run), not absolute times.", "",
        "| Workload | N | Contender | Median (ms) | Spread (ms) | Ratio to reference | Notes |", "|---|---:|---|---:|---:|---:|---|",
    ]
    var groups: [String] = []
    for r in results where !groups.contains("\(r.workload)|\(r.size)") { groups.append("\(r.workload)|\(r.size)") }
    for group in groups {
        let members = results.filter { "\($0.workload)|\($0.size)" == group }
        let reference = members.first { $0.isReference }?.median
        for r in members {
            if r.seconds.isEmpty {
                lines.append("| \(r.workload) | \(r.size) | \(r.contender) | — | — | — | \(r.note ?? "") |")
                continue
            }
            let ratio = reference.map { String(format: "%.2f×", r.median / $0) } ?? "—"
            lines.append(
                String(
                    format: "| %@ | %d | %@%@ | %.3f | %.3f–%.3f | %@ | %@ |", r.workload, r.size, r.contender,
                    r.isReference ? " (reference)" : "",
                    r.median * 1000, r.spread.0 * 1000, r.spread.1 * 1000, ratio, r.note ?? ""))
        }
    }
    try (lines.joined(separator: "\n") + "\n").write(
        to: options.output.appendingPathComponent("BENCHMARKS.md"), atomically: true, encoding: .utf8)
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(results).write(to: options.output.appendingPathComponent("benchmarks.json"))
}

// MARK: Main

do {
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    try FileManager.default.createDirectory(at: options.output, withIntermediateDirectories: true)
    for size in options.sizes where ["W1", "W2", "W3", "W4", "W5"].contains(where: options.runs) {
        print("== preparing \(size) rows")
        let fixture = try Fixture(size: size, items: makeItems(size))
        // The report is rewritten after every workload, so a long run that is stopped keeps what it measured.
        if options.runs("W1") { try w1(fixture, options); try report(options) }
        if options.runs("W2") { try w2(fixture, options); try report(options) }
        if options.runs("W3") { try w3(fixture, options); try report(options) }
        if options.runs("W4") { try w4(fixture, options); try report(options) }
        if options.runs("W5") { try w5(fixture, options); try report(options) }
    }
    if options.runs("W6") { try w6(options) }
    try report(options)
    print("wrote BENCHMARKS.md and benchmarks.json to \(options.output.path)")
} catch let usage as Usage {
    FileHandle.standardError.write(Data((usage.description + "\n").utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("benchmarks failed: \(error)\n".utf8))
    exit(1)
}
