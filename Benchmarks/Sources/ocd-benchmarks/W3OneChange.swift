import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite
import SwiftDataContenders

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
    let changes = w3Changes { counter }
    for (name, change) in changes {
        // Twice: an object picked from the results as it is (a fault, unless an earlier run read it), and an object
        // whose values were read before the change (as a row on screen was, to be shown): the second leaves the fault
        // out, to show what the change and the controller cost without it.
        for alreadyRead in [false, true] {
            var object: NSManagedObject?
            // Where the time goes: the change itself (firing the object's fault when it is one — reading its row, as a
            // Core Data app does at its first access) and the controller's placement and report.
            var phases: [(change: Double, controller: Double)] = []
            var faults = 0
            let prepare = {
                object = pick()
                if alreadyRead { _ = object!.value(forKey: "title") }
            }
            let samples = try measure(options.changeSamples, prepare: prepare) {
                let start = nanoseconds()
                let before = delegate.batches
                if object!.isFault { faults += 1 }
                try change(object!)
                let changed = nanoseconds()
                context.processPendingChanges()
                precondition(delegate.batches == before + 1)
                phases.append((Double(changed - start) / 1e6, Double(nanoseconds() - changed) / 1e6))
            }
            record(
                "W3 one change: \(name)", n, alreadyRead ? "OpenCoreData, same context, object already read" : "OpenCoreData, same context",
                samples,
                note: String(
                    format: "median phases: change %.3f ms (a fault fired in %d of %d runs), controller %.3f ms",
                    median(phases.map(\.change)), faults, phases.count, median(phases.map(\.controller))))
        }
    }
    record(
        "W3 one change: insert", n, "OpenCoreData, same context",
        try measure(options.changeSamples) {
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
        measure(options.changeSamples, prepare: { victim = pick() }) {
            let before = delegate.batches
            context.delete(victim!)
            context.processPendingChanges()
            precondition(delegate.batches == before + 1)
        })
    try w3Query(fixture, options)
    try context.save()

    try w3Merged(
        fixture.container, size: n, workload: { "W3 one change: \($0)" }, options, context: context, delegate: delegate, changes: changes,
        pick: pick)
    // The floor under a saved change: SQLite itself writing one row in a transaction of its own (a prepared
    // statement, the same journal mode as the store), measured beside the rest.
    let raw = try RawConnection(path: fixture.plainPath)
    var rawCounter = 0
    record(
        "W3 one change: edit", n, "raw SQLite: one-row UPDATE + COMMIT (the floor of any save)",
        try measure(options.changeSamples) {
            rawCounter += 1
            let id = Int64(1 + (rawCounter * 7919) % n)
            try raw.executeInTransaction("UPDATE item SET title = ? WHERE id = ?", ["raw \(rawCounter)", id])
        })
    // The floor under a change that fires a fault: SQLite itself reading the fault's batch (20 rows by key, every
    // column made a value) with a statement prepared once, measured beside the rest.
    let batchSQL = "SELECT * FROM item WHERE id IN (\(Array(repeating: "?", count: 20).joined(separator: ", ")))"
    record(
        "W3 one change: edit", n, "raw SQLite: reading a fault's batch, 20 rows by key, prepared (the floor of a fault)",
        try measure(options.changeSamples) {
            rawCounter += 1
            let keys = (0..<20).map { Int64(1 + (rawCounter * 7919 + $0 * 4999) % n) }
            let made = try raw.readRows(batchSQL, keys: keys)
            precondition(made > 0)
        })
    withExtendedLifetime(controller) {}
    if options.peers { try w3Naive(fixture, options) }
}

/// W3 through OpenSwiftData's `ModelQuery` (SwiftData's API): the same five changes made on models of the query's
/// context and processed, on a copy of the fixture's store (the query's schema may migrate it: the section is not
/// optional there).
func w3Query(_ fixture: Fixture, _ options: Options) throws {
    let copy = FileManager.default.temporaryDirectory.appendingPathComponent("ocd-bench-query-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: copy) }
    for suffix in ["", "-wal", "-shm"] {
        let source = fixture.directory.appendingPathComponent("ocd.sqlite" + suffix)
        guard FileManager.default.fileExists(atPath: source.path) else { continue }
        try FileManager.default.copyItem(at: source, to: copy.appendingPathComponent("ocd.sqlite" + suffix))
    }
    let query = try SwiftDataQueryChanges(storeAt: copy.appendingPathComponent("ocd.sqlite"))
    precondition(query.count >= fixture.size - options.changeSamples * 2, "the query holds \(query.count) models")
    for kind in SwiftDataQueryChanges.kinds {
        record(
            "W3 one change: \(kind)", fixture.size, "OpenSwiftData ModelQuery, same context",
            measure(options.changeSamples, prepare: { query.prepare() }) { query.change(kind) })
    }
}

/// W3's changes of an existing object, by name: an edit, a move within its section, a move across sections;
/// `counter` varies the values.
func w3Changes(_ counter: @escaping () -> Int) -> [(String, (NSManagedObject) throws -> Void)] {
    [
        ("edit", { $0.setValue("edited \(counter())", forKey: "title") }),
        (
            "move within section",
            { object in
                let score = (object.value(forKey: "score") as? Int64) ?? 0
                object.setValue((score + 1 + Int64(counter()) * 7919) % 1_000_000, forKey: "score")
            }
        ),
        (
            "move across sections",
            { object in
                let current = letters.firstIndex(of: (object.value(forKey: "section") as? String) ?? "A") ?? 0
                object.setValue(letters[(current + 1 + counter() % 25) % 26], forKey: "section")
            }
        ),
    ]
}

/// Edits in `background`, saves it and merges the save into `context`, whose controller must report one batch;
/// returns when the edit ended and when the save did.
@discardableResult
func saveAndMerge(
    _ background: NSManagedObjectContext, into context: NSManagedObjectContext, delegate: CountingDelegate, _ edit: () throws -> Void
) throws -> (edited: UInt64, saved: UInt64) {
    let before = delegate.batches
    let note = SavedNote()
    let observer = NotificationCenter.default.addObserver(forName: .NSManagedObjectContextDidSave, object: background, queue: nil) {
        note.value = $0
    }
    defer { NotificationCenter.default.removeObserver(observer) }
    try edit()
    let edited = nanoseconds()
    try background.save()
    let saved = nanoseconds()
    context.mergeChanges(fromContextDidSave: note.value!)
    precondition(delegate.batches == before + 1)
    return (edited, saved)
}

/// W3 saved by a background context and merged: the same five changes, timed from the edit in the background
/// context, through its save, to the controller's controllerDidChangeContent after the merge; recorded under
/// `workload(change name)` (W3 on SQLite, W10 on PostgreSQL).
func w3Merged(
    _ container: NSPersistentContainer, size n: Int, workload: (String) -> String, _ options: Options, context: NSManagedObjectContext,
    delegate: CountingDelegate, changes: [(String, (NSManagedObject) throws -> Void)], pick: () -> NSManagedObject
) throws {
    var inserted = 0  // the score of each new row
    var victim: NSManagedObject?
    let background = container.newBackgroundContext()
    // Where the time goes, per run: the edit (reading the object's row into the background context), the save, and
    // the merge with the controller's placement and report.
    var phases: [(edit: Double, save: Double, merge: Double)] = []
    let savedAndMerged = { (edit: () throws -> Void) in
        let start = nanoseconds()
        let (edited, saved) = try saveAndMerge(background, into: context, delegate: delegate, edit)
        let end = nanoseconds()
        phases.append((Double(edited - start) / 1e6, Double(saved - edited) / 1e6, Double(end - saved) / 1e6))
    }
    /// Records the runs of one change kind with their median phases.
    func recordMerged(_ name: String, _ samples: [Double]) {
        record(
            workload(name), n, "OpenCoreData, background save merged", samples,
            note: String(
                format: "median phases: edit %.3f ms, save %.3f ms, merge + controller %.3f ms", median(phases.map(\.edit)),
                median(phases.map(\.save)), median(phases.map(\.merge))))
        phases = []
    }
    for (name, change) in changes {
        recordMerged(
            name,
            try measure(options.changeSamples, prepare: { victim = pick() }) {
                try savedAndMerged { try change(try background.existingObject(with: victim!.objectID)) }
            })
    }
    recordMerged(
        "insert",
        try measure(options.changeSamples) {
            try savedAndMerged {
                let object = NSManagedObject(entity: try background.entity(named: "Item"), insertInto: background)
                object.setValue("M", forKey: "section")
                inserted += 1
                object.setValue(Int64(inserted), forKey: "score")
            }
        })
    recordMerged(
        "delete",
        try measure(options.changeSamples, prepare: { victim = pick() }) {
            try savedAndMerged { background.delete(try background.existingObject(with: victim!.objectID)) }
        })
}

/// W3's reference: the naive approach, GRDB's ValueObservation with a full re-fetch and a CollectionDifference
/// with moves, for the same five changes.
func w3Naive(_ fixture: Fixture, _ options: Options) throws {
    let n = fixture.size
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
}

/// W2: performFetch with a cache name, cold (no cache file) and warm (the file from the previous run).
