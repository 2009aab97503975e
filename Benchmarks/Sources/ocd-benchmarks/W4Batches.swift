import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

func w4(_ fixture: Fixture, _ options: Options) throws {
    let n = fixture.size
    let ks =
        options.batches.isEmpty
        ? Array(Set(options.smoke ? [10, n / 10] : [10, 100, 1_000, n / 10])).sorted()  // 10% of 10k is 1,000
        : options.batches
    let (context, controller, delegate) = try fixture.trackedController()
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
    func mixedChange(_ i: Int, _ object: NSManagedObject, in context: NSManagedObjectContext) throws {
        try w4MixedChange(i, object, counter: counter, in: context)
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
    // The controller's share of a merge: the same save merged, untimed, into a context without a controller that holds
    // the same k objects (registered, not faults), subtracted from the tracked context's merge.
    let plain = fixture.container.newBackgroundContext()
    // The reference, the naive re-fetch, runs interleaved with the merged batch (one run of each in turn, as W1 and W6
    // run theirs): "never behind the re-fetch" is judged on this ratio, and a slow spell of the machine during one
    // contender's runs would otherwise decide it.
    let naive = options.peers ? try NaiveBatches(fixture) : nil
    defer { naive?.cancel() }
    for k in ks {
        var ids: [NSManagedObjectID] = []
        var phases: [(edit: Double, save: Double, merge: Double)] = []
        var plainMerges: [Double] = []
        var (pending, plainObjects): (Notification?, [NSManagedObject]) = (nil, [])
        func mergePending() {
            guard let note = pending else { return }
            let start = nanoseconds()
            plain.mergeChanges(fromContextDidSave: note)
            plainMerges.append(Double(nanoseconds() - start) / 1e6)
            pending = nil
        }
        func prepare() throws {
            mergePending()
            ids = victims(k).map(\.objectID)
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.predicate = try FetchPredicate(format: "SELF IN %@", ids)
            plainObjects = try plain.fetch(request)
        }
        let merged = Contender(prepare: prepare) {
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
            pending = note.value
        }
        // Myers' diff costs O(N·D): with D ≈ 2k it runs for hours at a million rows and k = 10%. Said, not measured.
        let naiveRuns = naive != nil && !(n >= 1_000_000 && k >= n / 10)
        var contenders = [merged]
        if naiveRuns, let naive { contenders.append(Contender { try naive.batch(k) }) }
        let samples = try measureInterleaved(options.repetitions, contenders)
        mergePending()
        precondition(plainObjects.count == ids.count, "the plain context holds the batch's objects")
        let (merge, mergeAlone) = (median(phases.map(\.merge)), median(plainMerges))
        record(
            "W4 batch of \(k) mixed changes", n, "OpenCoreData, background save merged", samples[0],
            note: String(
                format:
                    "median phases: fetch + edit %.1f ms, save %.1f ms, merge + controller %.1f ms (the merge alone, into a context without a controller: %.1f ms; the controller's share ≈ %.1f µs a change)",
                median(phases.map(\.edit)), median(phases.map(\.save)), merge, mergeAlone, max(0, merge - mergeAlone) * 1000 / Double(k)))
        if naiveRuns {
            record("W4 batch of \(k) mixed changes", n, "GRDB observation + re-fetch + diff", samples[1], reference: true)
        } else if naive != nil {
            results.append(
                Result(
                    workload: "W4 batch of \(k) mixed changes", size: n, contender: "GRDB observation + re-fetch + diff", seconds: [],
                    isReference: false, note: "not run: CollectionDifference is O(N·D), hours at this size"))
        }
        background.reset()
        plain.reset()
    }
    try w4RawWrites(fixture, options, ks: ks)
}

/// The floor under a batch's save: SQLite itself running the batch's writes (one statement per change, as the
/// store's save runs them: an UPDATE of the changed column by primary key, an INSERT, a DELETE), prepared once, in one
/// transaction, on the plain copy of the data (same rows, same index).
func w4RawWrites(_ fixture: Fixture, _ options: Options, ks: [Int]) throws {
    let n = fixture.size
    let raw = try RawConnection(path: fixture.plainPath)
    var round = 1_000
    for k in ks {
        record(
            "W4 batch of \(k) mixed changes", n, "raw SQLite: the batch's writes, prepared, one transaction (the floor of the save)",
            try measure(options.repetitions) {
                round += 1
                var statements: [(sql: String, arguments: [Any])] = []
                statements.reserveCapacity(k)
                for i in 0..<k {
                    let id = Int64(1 + (i * 7919 + round * 31) % n)
                    switch i % 10 {
                    case 0, 1, 2, 3: statements.append(("UPDATE item SET title = ? WHERE id = ?", ["batch \(round) \(i)", id]))
                    case 4, 5: statements.append(("UPDATE item SET score = ? WHERE id = ?", [Int64((i * 7919 + round) % 1_000_000), id]))
                    case 6, 7: statements.append(("UPDATE item SET section = ? WHERE id = ?", [letters[(i + round) % 26], id]))
                    case 8:
                        statements.append(("INSERT INTO item (section, score, title) VALUES (?, ?, 'new')", [letters[i % 26], Int64(i)]))
                    default: statements.append(("DELETE FROM item WHERE id = ?", [id]))
                    }
                }
                try raw.executeInTransaction(statements)
            })
    }
}

/// The i-th change of a mixed batch: 40% edits, 20% moves within, 20% moves across, 10% inserts (beside `object`), 10%
/// deletes; `counter` varies the values.
func w4MixedChange(_ i: Int, _ object: NSManagedObject, counter: Int, in context: NSManagedObjectContext) throws {
    switch i % 10 {
    case 0, 1, 2, 3: object.setValue("batch \(counter) \(i)", forKey: "title")
    case 4, 5: object.setValue(Int64((i * 7919 + counter) % 1_000_000), forKey: "score")
    case 6, 7: object.setValue(letters[(i + counter) % 26], forKey: "section")
    case 8:
        let fresh = NSManagedObject(entity: try context.entity(named: "Item"), insertInto: context)
        fresh.setValue(letters[i % 26], forKey: "section")
        fresh.setValue(Int64(i), forKey: "score")
    default: context.delete(object)
    }
}

/// W4's reference: the naive approach for the same batches, as SQL a GRDB user writes, observed, re-fetched and
/// diffed.
final class NaiveBatches {
    private let naive: NaiveObserver
    private var round = 0

    init(_ fixture: Fixture) throws {
        naive = try NaiveObserver(path: fixture.plainPath)
    }

    /// One batch of `k` mixed changes, written in one transaction; returns once the observer has re-fetched and diffed.
    func batch(_ k: Int) throws {
        round += 1
        let round = self.round
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
                    try db.execute(sql: "INSERT INTO item (section, score, title) VALUES (?, ?, 'new')", arguments: [letters[i % 26], i])
                default: try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [id])
                }
            }
        }
        try naive.waitForDiff()
    }

    func cancel() { naive.cancel() }
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
