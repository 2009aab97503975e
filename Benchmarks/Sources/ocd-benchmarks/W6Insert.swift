import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite
import SwiftDataContenders

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
    var contenders = options.peers ? w6Peers(items, create: create, insert: insert, freshFile: freshFile) : []
    /// The phases of each OpenCoreData contender's runs, by name.
    var phases: [String: [(objects: Double, save: Double, release: Double)]] = [:]
    /// An OpenCoreData contender: make `n` objects in one context, fill each with `fill`, save.
    func openCoreData(
        _ name: String, itemClass: NSManagedObject.Type, history: Bool = false,
        fill: @escaping (NSManagedObject, ItemData) throws -> Void
    ) throws -> (String, Contender) {
        let model = try makeModel(itemClass: itemClass)
        var container: NSPersistentContainer?
        return (
            name,
            Contender(
                prepare: {
                    let made = NSPersistentContainer(name: "W6", managedObjectModel: model)
                    let description = NSPersistentStoreDescription(url: freshFile("ocd"))
                    if history { description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey) }
                    made.persistentStoreDescriptions = [description]
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
    contenders.append(try openCoreData("OpenCoreData (setValue + save)", itemClass: NSManagedObject.self, fill: fillByKey))
    contenders.append(try openCoreData("OpenCoreData (@Managed subclass + save)", itemClass: TypedItem.self, fill: fillTyped))
    // The same with persistent history on, as SwiftData's stores keep it: the save to compare the @Model contender's with.
    contenders.append(
        try openCoreData("OpenCoreData (@Managed subclass + save, with history)", itemClass: TypedItem.self, history: true, fill: fillTyped)
    )
    // SwiftData's form: @Model objects made with their initializer, inserted into a ModelContext, saved. Its store keeps
    // persistent history, as SwiftData's stores do (a history change row per inserted object): compare its save phase with
    // the @Managed contender's with history, and the "make objects + set values" phases for the accessors' cost.
    let modelRows = items.map {
        ModelRow(
            section: $0.section, score: $0.score, title: $0.title, flag: $0.flag == 1, amount: $0.amount, created: $0.created,
            note: $0.note, count: $0.count, rating: $0.rating, code: $0.code)
    }
    var swiftData: SwiftDataInsert?
    let modelName = "OpenSwiftData (@Model + ModelContext.insert + save, with history)"
    contenders.append(
        (
            modelName,
            Contender(
                prepare: { swiftData = try SwiftDataInsert(url: freshFile("swiftdata")) },
                body: {
                    let start = nanoseconds()
                    let (objectsDone, saveDone) = try swiftData!.run(modelRows, now: nanoseconds)
                    let end = nanoseconds()
                    phases[modelName, default: []].append(
                        (Double(objectsDone - start) / 1e6, Double(saveDone - objectsDone) / 1e6, Double(end - saveDone) / 1e6))
                })
        ))
    if let only = options.contender { contenders = contenders.filter { $0.0.contains(only) } }
    // Interleaved, like W1: each round runs every contender once.
    let samples = try measureInterleaved(options.repetitions, contenders.map(\.contender))
    for (index, (name, _)) in contenders.enumerated() {
        let note = phases[name].map {
            String(
                format: "median phases: make objects + set values %.0f ms, save %.0f ms, release the context %.0f ms",
                median($0.map(\.objects)), median($0.map(\.save)), median($0.map(\.release)))
        }
        record(
            "W6 insert and save", n, name, samples[index], reference: options.peers && options.contender == nil && index == 0, note: note)
    }
    try w6Accessors(options, items: items, modelRows: modelRows, freshFile: freshFile)
}

/// W6's accessors on objects that have rows, `@Managed` and `@Model` properties interleaved.
///
/// Every attribute of each of `items.count` saved objects is read, then set to the next item's value (no save). The
/// objects are made, inserted and saved in `prepare` (untimed): only the accessors are timed.
func w6Accessors(_ options: Options, items: [ItemData], modelRows: [ModelRow], freshFile: @escaping (String) -> URL) throws {
    let n = items.count
    let model = try makeModel(itemClass: TypedItem.self)
    var managed: (container: NSPersistentContainer, context: NSManagedObjectContext, objects: [TypedItem])?
    var swiftData: SwiftDataAccessors?
    var observed: ObservationAccessors?
    var checksums: [String: Int] = [:]
    var contenders: [(String, Contender)] = [
        (
            "OpenCoreData (@Managed subclass)",
            Contender(
                prepare: {
                    managed = nil
                    let container = NSPersistentContainer(name: "W6Accessors", managedObjectModel: model)
                    container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: freshFile("accessors"))]
                    try container.loadPersistentStores()
                    let context = container.newBackgroundContext()
                    let objects = try context.performAndWait {
                        let entity = try context.entity(named: "Item")
                        let made = items.map { item -> TypedItem in
                            let object = TypedItem(entity: entity, insertInto: context)
                            fillTyped(object, item)
                            return object
                        }
                        try context.save()
                        return made
                    }
                    managed = (container, context, objects)
                },
                body: {
                    let (_, context, objects) = managed!
                    let checksum = context.performAndWait { readAndSetTyped(objects, items) }
                    checksums["@Managed"] = checksum
                })
        ),
        (
            "OpenSwiftData (@Model)",
            Contender(
                prepare: {
                    swiftData = nil
                    swiftData = try SwiftDataAccessors(url: freshFile("accessors-model"), rows: modelRows)
                },
                body: { checksums["@Model"] = swiftData!.readAndSet(modelRows) })
        ),
        (
            "Observation alone (@Observable class, no store)",
            Contender(
                prepare: {
                    observed = nil
                    observed = ObservationAccessors(rows: modelRows)
                },
                body: { checksums["@Observable"] = observed!.readAndSet(modelRows) })
        ),
    ]
    if let only = options.contender { contenders = contenders.filter { $0.0.contains(only) } }
    guard !contenders.isEmpty else { return }
    let samples = try measureInterleaved(options.repetitions, contenders.map(\.1))
    managed = nil
    swiftData = nil
    observed = nil
    // All read the same values: a difference means one of them read something else.
    precondition(Set(checksums.values).count <= 1, "W6 accessors read different values: \(checksums)")
    for (index, (name, _)) in contenders.enumerated() {
        let note: String? =
            if name.hasPrefix("Observation") {
                "what @Model's observation adds to @Managed: @Model's floor is @Managed's time plus this"
            } else {
                index == 0 ? "20 accessor calls an object, no save" : nil
            }
        record(
            "W6 accessors: read and set 10 attributes of each saved object", n, name, samples[index], reference: index == 0,
            note: note)
    }
}

/// Reads every attribute of each object, then sets each to the next item's value; returns a sum of what it read.
func readAndSetTyped(_ objects: [TypedItem], _ items: [ItemData]) -> Int {
    var checksum = 0
    for (index, object) in objects.enumerated() {
        checksum &+= (object.section?.utf8.count ?? 0) &+ Int(object.score) &+ (object.title?.utf8.count ?? 0)
        checksum &+= (object.flag ? 1 : 0) &+ Int(object.amount) &+ Int(object.created?.timeIntervalSinceReferenceDate ?? 0)
        checksum &+= (object.note?.utf8.count ?? 0) &+ Int(object.count) &+ Int(object.rating) &+ (object.code?.utf8.count ?? 0)
        fillTyped(object, items[(index + 1) % items.count])
    }
    return checksum
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

/// W6's peers: raw SQLite's prepared statement and GRDB's, each inserting into a fresh file in one transaction.
func w6Peers(_ items: [ItemData], create: String, insert: String, freshFile: @escaping (String) -> URL) -> [(
    name: String, contender: Contender
)] {
    var raw: RawConnection?
    var queue: DatabaseQueue?
    var contenders: [(name: String, contender: Contender)] = []
    contenders.append(
        (
            "raw SQLite prepared statement",
            Contender(
                prepare: {
                    raw = try RawConnection(path: freshFile("raw").path)
                    try raw!.execute(create)
                },
                body: {
                    // Each field bound by its type, as code written for this table would (not through `[Any]`).
                    try raw!.insert(insert, count: items.count) { binder, row in
                        let item = items[row]
                        binder.bind(1, item.section)
                        binder.bind(2, item.score)
                        binder.bind(3, item.title)
                        binder.bind(4, item.flag)
                        binder.bind(5, item.amount)
                        binder.bind(6, item.created)
                        binder.bind(7, item.note)
                        binder.bind(8, item.count)
                        binder.bind(9, item.rating)
                        binder.bind(10, item.code)
                    }
                })
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
    return contenders
}

/// W6's key-value contender: an object's ten attributes set by key, as generic `NSManagedObject` code does.
func fillByKey(_ object: NSManagedObject, _ item: ItemData) {
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
}

/// W6's typed contender: the same ten attributes through `@Managed` properties.
func fillTyped(_ object: NSManagedObject, _ item: ItemData) {
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
}
