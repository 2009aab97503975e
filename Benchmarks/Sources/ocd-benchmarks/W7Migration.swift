import Foundation
import GRDB
import OpenCoreData
import RawSQLite

/// W7: migrate a store of `n` items (and `n / 10` archived records) for one model change, against raw SQLite doing
/// the same rebuild (every table copied into a new file with `INSERT … SELECT`, in one transaction, then renamed over
/// the old one: the crash-safe way both take).
func w7(_ options: Options) throws {
    let n = options.smoke ? 2_000 : 1_000_000
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ocd-bench-w7-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let base = directory.appendingPathComponent("base.sqlite")
    let source = try w7Model(.original)
    try w7Fill(base, model: source, n: n)
    let work = directory.appendingPathComponent("work.sqlite")
    func fresh() throws {
        for suffix in ["", "-wal", "-shm", ".new"] { try? FileManager.default.removeItem(atPath: work.path + suffix) }
        try FileManager.default.copyItem(at: base, to: work)
    }
    for change in [W7Change.addedAttribute, .renamedAttribute, .removedEntity, .intoInheritance] {
        let destination = try w7Model(change)
        var contenders: [Contender] = []
        if options.peers {
            contenders.append(Contender(prepare: fresh) { try w7RawRebuild(work, change) })
        }
        contenders.append(
            Contender(prepare: fresh) {
                try NSMigrationManager(sourceModel: source, destinationModel: destination).migrateStore(
                    from: work, sourceType: NSSQLiteStoreType, with: nil, toDestinationURL: work, destinationType: NSSQLiteStoreType)
            })
        let samples = try measureInterleaved(options.repetitions, contenders)
        let names = (options.peers ? ["raw SQLite rebuild in one transaction"] : []) + ["OpenCoreData lightweight migration"]
        for (index, name) in names.enumerated() {
            record("W7 migrate: \(change.rawValue)", n, name, samples[index], reference: options.peers && index == 0)
        }
    }
}

enum W7Change: String {
    case original = "original"
    case addedAttribute = "added attribute"
    case renamedAttribute = "renamed attribute"
    case removedEntity = "removed entity"
    case intoInheritance = "entity moving into an inheritance tree"
}

/// The benchmark's item (W6's ten attributes) and an archive entity, changed as `change` says.
func w7Model(_ change: W7Change) throws -> NSManagedObjectModel {
    let model = try makeModel()
    let item = model.entitiesByName["Item"]!
    let fresh = NSManagedObjectModel()
    let copy = NSEntityDescription(name: "Item")
    for property in item.properties {
        guard let attribute = property as? NSAttributeDescription else { continue }
        let name = change == .renamedAttribute && attribute.name == "title" ? "heading" : attribute.name
        let made = NSAttributeDescription(name: name, type: attribute.attributeType)
        if name != attribute.name { made.renamingIdentifier = attribute.name }
        copy.addProperty(made)
    }
    if change == .addedAttribute { copy.addProperty(NSAttributeDescription(name: "extra", type: .stringAttributeType)) }
    fresh.addEntity(copy)
    if change != .removedEntity {
        let archive = NSEntityDescription(name: "Archive", superentityName: change == .intoInheritance ? "Item" : nil)
        archive.addProperty(NSAttributeDescription(name: "label", type: .stringAttributeType))
        archive.addProperty(NSAttributeDescription(name: "stamp", type: .dateAttributeType))
        fresh.addEntity(archive)
    }
    try fresh.validate()
    return fresh
}

/// A store of `model` with `n` items and `n / 10` archive records, written with GRDB in one transaction.
func w7Fill(_ url: URL, model: NSManagedObjectModel, n: Int) throws {
    let container = NSPersistentContainer(name: "W7", managedObjectModel: model)
    container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
    try container.loadPersistentStores()
    try container.persistentStoreCoordinator.persistentStores.forEach { try container.persistentStoreCoordinator.remove($0) }
    let items = makeItems(min(n, 100_000), seed: 3)
    let itemEntity = model.entitiesByName["Item"]!.entityID
    let archiveEntity = model.entitiesByName["Archive"]!.entityID
    try DatabaseQueue(path: url.path).write { db in
        let insert = try db.makeStatement(
            sql:
                "INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZSECTION, ZSCORE, ZTITLE, ZFLAG, ZAMOUNT, ZCREATED, ZNOTE, ZCOUNT, ZRATING, ZCODE) VALUES (?, \(itemEntity), 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        for i in 0..<n {
            let item = items[i % items.count]
            try insert.execute(arguments: [
                i + 1, item.section, item.score, item.title, item.flag, item.amount, item.created, item.note, item.count, item.rating,
                item.code,
            ])
        }
        let archive = try db.makeStatement(
            sql: "INSERT INTO ZARCHIVE (Z_PK, Z_ENT, Z_OPT, ZLABEL, ZSTAMP) VALUES (?, \(archiveEntity), 1, ?, ?)")
        for i in 0..<(n / 10) { try archive.execute(arguments: [i + 1, "record \(i)", 700_000_000 + Double(i)]) }
        try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ?", arguments: [n, itemEntity])
        try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ?", arguments: [n / 10, archiveEntity])
    }
}

/// The raw contender: the migrated tables built in a new file from the old one, in one transaction, then renamed
/// over it (as a careful hand-written migration would, so that a crash leaves the old file).
func w7RawRebuild(_ url: URL, _ change: W7Change) throws {
    let target = url.path + ".new"
    let connection = try RawConnection(path: target)
    let columns = ["ZSECTION", "ZSCORE", "ZTITLE", "ZFLAG", "ZAMOUNT", "ZCREATED", "ZNOTE", "ZCOUNT", "ZRATING", "ZCODE"]
    let types = ["VARCHAR", "INTEGER", "VARCHAR", "INTEGER", "FLOAT", "TIMESTAMP", "VARCHAR", "INTEGER", "FLOAT", "VARCHAR"]
    var newColumns = columns
    if change == .renamedAttribute { newColumns[2] = "ZHEADING" }
    var definitions = zip(newColumns, types).map { "\($0) \($1)" }
    if change == .addedAttribute { definitions.append("ZEXTRA VARCHAR") }
    // A file built to be renamed into place needs no WAL (RawConnection opens in WAL mode): the rollback journal
    // writes each page once, as OpenCoreData's build does.
    // Entity numbers in the new model: the archive as a subentity of the item comes after it.
    let itemEntity = change == .intoInheritance ? "1" : "Z_ENT"
    var sql = """
        PRAGMA journal_mode = DELETE;
        ATTACH DATABASE '\(url.path)' AS old;
        BEGIN;
        CREATE TABLE ZITEM (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, \(definitions.joined(separator: ", ")));
        INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, \(newColumns.joined(separator: ", "))) SELECT Z_PK, \(itemEntity), Z_OPT, \(columns.joined(separator: ", ")) FROM old.ZITEM;
        CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
        INSERT INTO Z_PRIMARYKEY SELECT * FROM old.Z_PRIMARYKEY;
        CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
        INSERT INTO Z_METADATA SELECT * FROM old.Z_METADATA;
        """
    if change == .intoInheritance {
        // The archive's rows join the items' table, after their keys.
        sql += """
            ALTER TABLE ZITEM ADD COLUMN ZSTAMP TIMESTAMP;
            ALTER TABLE ZITEM ADD COLUMN ZLABEL VARCHAR;
            INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZSTAMP, ZLABEL) SELECT Z_PK + (SELECT MAX(Z_PK) FROM old.ZITEM), 2, Z_OPT, ZSTAMP, ZLABEL FROM old.ZARCHIVE;
            CREATE INDEX ZITEM_Z_ENT_INDEX ON ZITEM (Z_ENT);
            """
    } else if change != .removedEntity {
        sql += """
            CREATE TABLE ZARCHIVE (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZSTAMP TIMESTAMP, ZLABEL VARCHAR);
            INSERT INTO ZARCHIVE SELECT Z_PK, Z_ENT, Z_OPT, ZSTAMP, ZLABEL FROM old.ZARCHIVE;
            """
    }
    sql += "COMMIT; DETACH DATABASE old; PRAGMA journal_mode = WAL;"
    try connection.execute(sql)
    guard rename(target, url.path) == 0 else { throw W7Failure("cannot rename \(target) over \(url.path)") }
}

struct W7Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
