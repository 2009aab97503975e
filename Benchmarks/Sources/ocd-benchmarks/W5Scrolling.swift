import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

func w5(_ fixture: Fixture, _ options: Options) throws {
    let n = fixture.size
    let raw = try RawConnection(path: fixture.plainPath)
    record(
        "W5 scroll every row (batch 20)", n, "raw SQLite stepping the rows",
        try measure(options.repetitions) {
            let count = try raw.stepAll("SELECT id, section, score, title FROM item ORDER BY section, score, id", columns: 4)
            precondition(count > 0)
        }, reference: true, note: "SQL statements: 1")
    // The floor of scrolling by batch faulting (Core Data's way, and the controller's): SQLite itself reading the rows
    // by key in the statements the batches read — 20 rows, then twice as many each time up to 500 — every column made
    // a value, each statement prepared once, after reading the IDs in order. What any object API that loads rows in
    // batches pays before it makes an object.
    var floorStatements = 0
    record(
        "W5 scroll every row (batch 20)", n,
        "raw SQLite: the same rows read by key in the batches' statements (the floor of batch faulting)",
        try measure(options.repetitions) {
            let ids = try raw.integers("SELECT id FROM item ORDER BY section, score, id")
            var (start, span, made) = (0, 20, 0)
            floorStatements = 1
            while start < ids.count {
                let keys = Array(ids[start..<min(start + span, ids.count)])
                made += try raw.readRows(
                    "SELECT * FROM item WHERE id IN (\(Array(repeating: "?", count: span).joined(separator: ", ")))", keys: keys)
                (start, span) = (start + span, min(span * 2, 500))
                floorStatements += 1
            }
            precondition(made >= ids.count)
        }, note: "SQL statements: \(floorStatements)")
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
