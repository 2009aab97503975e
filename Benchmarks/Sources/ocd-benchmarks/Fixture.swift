import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

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
