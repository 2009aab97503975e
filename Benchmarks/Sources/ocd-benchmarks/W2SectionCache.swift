import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

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
