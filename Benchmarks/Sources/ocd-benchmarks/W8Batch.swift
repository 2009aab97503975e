import Foundation
import GRDB
import OpenCoreData
import RawSQLite

/// W8: batch requests against raw SQLite doing the same job.
///
/// Insert `n` records that arrive as dictionaries (W6's ten
/// attributes, as an import receives them) in one transaction: raw SQLite binds each record's values to a prepared
/// INSERT; OpenCoreData runs an `NSBatchInsertRequest` with the dictionaries (its fastest form here: the
/// dictionary-handler form fills an `NSMutableDictionary` per row, which Foundation on Linux makes several times
/// slower). Delete the
/// tenth of the rows a predicate matches (`score < 100000`) from a table of `n`: raw SQLite runs one DELETE with that
/// condition; OpenCoreData runs an `NSBatchDeleteRequest` with the same predicate.
func w8(_ options: Options) throws {
    let n = options.smoke ? 5_000 : 1_000_000
    let items = makeItems(n, seed: 8)
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ocd-bench-w8-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let model = try makeModel()
    var run = 0
    func fresh(_ name: String) -> URL {
        run += 1
        return directory.appendingPathComponent("\(name)\(run).sqlite")
    }
    func open(_ url: URL) throws -> NSPersistentContainer {
        let container = NSPersistentContainer(name: "W8", managedObjectModel: model)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        try container.loadPersistentStores()
        return container
    }
    func dictionary(_ item: ItemData) -> [String: Any] {
        [
            "section": item.section, "score": item.score, "title": item.title, "flag": item.flag == 1, "amount": item.amount,
            "created": Date(timeIntervalSinceReferenceDate: item.created), "note": item.note, "count": item.count, "rating": item.rating,
            "code": item.code,
        ]
    }
    let create =
        "CREATE TABLE item (id INTEGER PRIMARY KEY, section TEXT, score INTEGER, title TEXT, flag INTEGER, amount REAL, created REAL, note TEXT, count INTEGER, rating REAL, code TEXT)"
    let insert = "INSERT INTO item (section, score, title, flag, amount, created, note, count, rating, code) VALUES (?,?,?,?,?,?,?,?,?,?)"

    // Insert: both from the same dictionaries, made once.
    let typedColumns: [(name: String, type: RawConnection.ColumnType)] = [
        ("section", .text), ("score", .integer), ("title", .text), ("flag", .boolean), ("amount", .real), ("created", .date),
        ("note", .text), ("count", .integer), ("rating", .real), ("code", .text),
    ]
    let dictionaries = items.map(dictionary)
    var raw: RawConnection?
    var container: NSPersistentContainer?
    var contenders: [(String, Contender)] = []
    if options.peers {
        contenders.append(
            (
                "raw SQLite prepared inserts in one transaction",
                Contender(
                    prepare: {
                        raw = try RawConnection(path: fresh("raw").path)
                        try raw!.execute(create)
                    }, body: { try raw!.insert(insert, columns: typedColumns, dictionaries: dictionaries) })
            ))
    }
    contenders.append(
        (
            "OpenCoreData NSBatchInsertRequest (dictionaries)",
            Contender(
                prepare: { container = try open(fresh("dictionaries")) },
                body: { _ = try container!.newBackgroundContext().execute(NSBatchInsertRequest(entityName: "Item", objects: dictionaries)) }
            )
        ))
    let samples = try measureInterleaved(options.repetitions, contenders.map(\.1))
    for (index, (name, _)) in contenders.enumerated() {
        record("W8 batch insert", n, name, samples[index], reference: options.peers && index == 0)
    }
    try w8Delete(options, n: n, items: items, dictionaries: dictionaries, create: create, insert: insert, fresh: fresh, open: open)
}

/// W8's delete: the tenth of `n` rows a predicate matches, from copies of the same rows in a plain table and a store.
func w8Delete(
    _ options: Options, n: Int, items: [ItemData], dictionaries: [[String: Any]], create: String, insert: String,
    fresh: @escaping (String) -> URL, open: @escaping (URL) throws -> NSPersistentContainer
) throws {
    let directory = fresh("base").deletingLastPathComponent()
    var raw: RawConnection?
    var container: NSPersistentContainer?
    // Delete: both start from copies of tables of the same rows.
    let rawBase = directory.appendingPathComponent("raw-base.sqlite")
    do {
        let base = try RawConnection(path: rawBase.path)  // closed at the end of this block
        try base.execute(create)
        try base.insert(insert, rows: items.map(\.values))
        try base.execute("CREATE INDEX item_score ON item (score)")
    }
    let storeBase = directory.appendingPathComponent("store-base.sqlite")
    let seeded = try open(storeBase)
    _ = try seeded.newBackgroundContext().execute(NSBatchInsertRequest(entityName: "Item", objects: dictionaries))
    try seeded.persistentStoreCoordinator.persistentStores.forEach { try seeded.persistentStoreCoordinator.remove($0) }
    try DatabaseQueue(path: storeBase.path).write { db in try db.execute(sql: "CREATE INDEX ZITEM_ZSCORE ON ZITEM (ZSCORE)") }
    func copy(_ from: URL, _ name: String) throws -> URL {
        let target = fresh(name)
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: from.path + suffix) {
            try FileManager.default.copyItem(atPath: from.path + suffix, toPath: target.path + suffix)
        }
        return target
    }
    let threshold = 100_000  // scores run to 1,000,000: a tenth of the rows
    var deleted = 0
    var contenders: [(String, Contender)] = []
    if options.peers {
        contenders.append(
            (
                "raw SQLite DELETE … WHERE in one transaction",
                Contender(
                    prepare: { raw = try RawConnection(path: try copy(rawBase, "rawdelete").path) },
                    body: { try raw!.execute("BEGIN; DELETE FROM item WHERE score < \(threshold); COMMIT") })
            ))
    }
    contenders.append(
        (
            "OpenCoreData NSBatchDeleteRequest (predicate)",
            Contender(
                prepare: { container = try open(try copy(storeBase, "delete")) },
                body: {
                    let fetch = NSFetchRequest<NSManagedObject>(entityName: "Item")
                    fetch.predicate = try FetchPredicate(format: "score < %d", threshold)
                    let request = NSBatchDeleteRequest(fetchRequest: fetch)
                    request.resultType = .resultTypeCount
                    deleted = (try container!.newBackgroundContext().execute(request) as? NSBatchDeleteResult)?.result as? Int ?? -1
                })
        ))
    let samples = try measureInterleaved(options.repetitions, contenders.map(\.1))
    let expected = items.filter { $0.score < Int64(threshold) }.count
    guard deleted == expected else { throw Usage("W8: the batch delete removed \(deleted) rows, not \(expected)") }
    for (index, (name, _)) in contenders.enumerated() {
        record("W8 batch delete", expected, name, samples[index], reference: options.peers && index == 0, note: "of \(n) rows")
    }
}
