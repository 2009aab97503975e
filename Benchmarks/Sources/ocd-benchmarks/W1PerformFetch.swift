import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

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
    // Not a contender but the floor of the controller's read: the same rows with the sort value after the section, the
    // columns the controller keeps to place a change without reading its neighbours.
    let floorSQL = "SELECT id, section, score FROM item ORDER BY section, score, id"
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
            let result = try raw.idsKeysAndSortValues(floorSQL)
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
    let names = [
        "raw SQLite (ids + section keys)", "raw SQLite (ids + section keys + sort values: the controller's columns)",
        "GRDB (ids + section keys, records)", "OpenCoreData controller",
    ]
    // The headline: contenders interleaved, so that each runs after the others' work (as a fetch in an app runs after
    // other work) and a slow spell of the machine falls on all of them.
    let interleaved = try measureInterleaved(repetitions, warmUps: 1, contenders)
    controller = nil
    // Memory held per row, measured once each, untimed.
    let notes = [
        try bytesPerRow(n) { try raw.idsAndKeys(rawSQL) },
        try bytesPerRow(n) { try raw.idsKeysAndSortValues(floorSQL) },
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
