import Dispatch
import Foundation
import Logging
import OpenCoreData
import OpenCoreDataBrowserTesting
import PostgresNIO

// MARK: W10 — the PostgreSQL store

/// W10: the PostgreSQL store against postgres-nio used directly, on the same server in the same run.
///
/// - W1 on PostgreSQL: `performFetch` of the sectioned request (batch size 20) against postgres-nio's streamed rows of
///   the same keys (`SELECT id, section … ORDER BY section, score, id`, decoded into tuples).
/// - W6 on PostgreSQL: 50,000 objects of ten attributes made and saved against one multi-row
///   `INSERT … SELECT * FROM unnest($1, …, $10)` of ten arrays, as a good postgres-nio user inserts in bulk.
/// - W3 and W4 on PostgreSQL (`W10Changes.swift`): one change of each kind and a batch of 100, saved and merged,
///   against the same statements through postgres-nio followed by a re-fetch and a diff.
/// - One remote change: another process saves an update; timed from its commit to the watching controller's
///   `controllerDidChangeContent`, with `NOTIFY` and with polling only.
///
/// Needs a server: `OCD_POSTGRES_URL` (`postgresql://postgres@127.0.0.1:5432/postgres`, as `.ci/run` exports it); each
/// run makes databases of its own there and drops them. Without it W10 records that it was skipped.
func w10(_ options: Options) throws {
    guard let server = ProcessInfo.processInfo.environment["OCD_POSTGRES_URL"].flatMap(URL.init(string:)) else {
        print("W10: skipped: set OCD_POSTGRES_URL to a PostgreSQL server (postgresql://postgres@127.0.0.1:5432/postgres)")
        record("W10", 0, "PostgreSQL (skipped: no OCD_POSTGRES_URL)", [])
        return
    }
    let admin = try RawPostgres(server)
    defer { admin.close() }
    try w10Fetch(server, admin: admin, options)
    try w10Insert(server, admin: admin, options)
    try w10Changes(server, admin: admin, options)
    try w10RemoteChange(server, admin: admin, options)
}

/// W1 on PostgreSQL, at 10,000 and 100,000 rows (300 for a smoke run).
private func w10Fetch(_ server: URL, admin: RawPostgres, _ options: Options) throws {
    for n in options.smoke ? [300] : [10_000, 100_000] {
        print("== W10: preparing \(n) rows on PostgreSQL")
        let data = try W10Data(server, admin: admin, items: makeItems(n))
        defer { data.close() }
        let (raw, container) = (data.raw, data.container)
        let request = { () -> NSFetchRequest<NSManagedObject> in
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.sortDescriptors = [FetchSortDescriptor(key: "section"), FetchSortDescriptor(key: "score")]
            request.fetchBatchSize = 20
            return request
        }
        var controller: NSFetchedResultsController<NSManagedObject>?
        let contenders = [
            Contender {
                let rows = try raw.idsAndSections("SELECT id, section FROM item ORDER BY section, score, id")
                precondition(rows == n)
            },
            Contender {
                let rows = try raw.idsAndSectionsOnEventLoop("SELECT id, section FROM item ORDER BY section, score, id")
                precondition(rows == n)
            },
            Contender(
                prepare: {
                    controller = NSFetchedResultsController(
                        fetchRequest: request(), managedObjectContext: container.newBackgroundContext(), sectionNameKeyPath: "section",
                        cacheName: nil)
                },
                body: {
                    try controller!.performFetch()
                    // Counted by sections: `fetchedObjects` would make an object for every row, which W1 never asks for.
                    precondition(controller!.sections?.reduce(0) { $0 + $1.numberOfObjects } == n)
                }),
        ]
        let samples = try measureInterleaved(options.repetitions * 2, warmUps: 1, contenders)
        controller = nil
        // The reference is postgres-nio's fastest way (its callback API); the async sequence is what its README shows.
        record("W10 performFetch (PostgreSQL)", n, "postgres-nio (ids + section keys, async sequence)", samples[0])
        record("W10 performFetch (PostgreSQL)", n, "postgres-nio (ids + section keys, onRow callback)", samples[1], reference: true)
        record("W10 performFetch (PostgreSQL)", n, "OpenCoreData controller on PostgreSQL", samples[2])
    }
}

/// W6 on PostgreSQL: 50,000 objects (500 for a smoke run) into a fresh database per run.
private func w10Insert(_ server: URL, admin: RawPostgres, _ options: Options) throws {
    let n = options.smoke ? 500 : 50_000
    let items = makeItems(n, seed: 7)
    var databases: [String] = []
    defer { for database in databases { admin.dropDatabase(database) } }
    func fresh() throws -> URL {
        let database = try admin.makeDatabase()
        databases.append(database)
        return RawPostgres.url(server, database: database)
    }
    var raw: RawPostgres?
    var container: NSPersistentContainer?
    var phases: [(objects: Double, save: Double)] = []
    func rawContender(_ body: @escaping (RawPostgres) throws -> Void) -> Contender {
        Contender(
            prepare: {
                raw?.close()
                raw = try RawPostgres(try fresh())
                try raw!.createPlainTable()
            },
            body: { try body(raw!) })
    }
    let contenders = [
        rawContender { try $0.insert(items) },
        rawContender { try $0.insertValues(items, rows: 5000) },
        Contender(
            prepare: {
                if let old = container {
                    for store in old.persistentStoreCoordinator.persistentStores { try old.persistentStoreCoordinator.remove(store) }
                }
                let made = NSPersistentContainer(name: "W10", managedObjectModel: try makeModel())
                made.persistentStoreDescriptions = [NSPersistentStoreDescription(url: try fresh())]
                try made.loadPersistentStores()
                container = made
            },
            body: {
                let context = container!.newBackgroundContext()
                let start = nanoseconds()
                var made = start
                try context.performAndWait {
                    let entity = try context.entity(named: "Item")
                    for item in items { fillByKey(NSManagedObject(entity: entity, insertInto: context), item) }
                    made = nanoseconds()
                    try context.save()
                }
                phases.append((Double(made - start) / 1e6, Double(nanoseconds() - made) / 1e6))
            }),
    ]
    let samples = try measureInterleaved(options.repetitions, contenders)
    raw?.close()
    if let old = container {
        for store in old.persistentStoreCoordinator.persistentStores { try? old.persistentStoreCoordinator.remove(store) }
    }
    record("W10 insert and save (PostgreSQL)", n, "postgres-nio (one INSERT … SELECT FROM unnest)", samples[0], reference: true)
    record("W10 insert and save (PostgreSQL)", n, "postgres-nio (INSERT … VALUES, 5,000 rows a statement)", samples[1])
    record(
        "W10 insert and save (PostgreSQL)", n, "OpenCoreData (setValue + save) on PostgreSQL", samples[2],
        note: String(
            format: "median phases: make objects + set values %.0f ms, save %.0f ms", median(phases.map(\.objects)),
            median(phases.map(\.save))))
}

/// One remote change: from a commit in another process to the watching controller's `controllerDidChangeContent`.
///
/// The writer is this program again (`--w10-writer`), a process of its own with its own connections: it saves an
/// update every 250 ms and prints the monotonic clock (shared by every process of the machine) just before and just
/// after each `save()`. A change is timed from the writer's `save()` returning to the controller's delegate call (never
/// below zero: the notification can overtake the writer's own return).
private func w10RemoteChange(_ server: URL, admin: RawPostgres, _ options: Options) throws {
    let changes = options.smoke ? 3 : 40
    for notify in [true, false] {
        let database = try admin.makeDatabase()
        defer { admin.dropDatabase(database) }
        let url = URL(string: RawPostgres.url(server, database: database).absoluteString + (notify ? "" : "?notify=off"))!
        let watched = NSPersistentContainer(name: "W10", managedObjectModel: try makeModel())
        let description = NSPersistentStoreDescription(url: url)
        description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey)
        description.setOption(true as NSNumber, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey)
        watched.persistentStoreDescriptions = [description]
        try watched.loadPersistentStores()
        defer { for store in watched.persistentStoreCoordinator.persistentStores { try? watched.persistentStoreCoordinator.remove(store) } }
        let context = watched.newBackgroundContext()
        try context.performAndWait {
            let entity = try context.entity(named: "Item")
            for item in makeItems(1000) { fillByKey(NSManagedObject(entity: entity, insertInto: context), item) }
            try context.save()
        }
        context.automaticallyMergesChangesFromParent = true
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "section"), FetchSortDescriptor(key: "score")]
        let controller = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "section", cacheName: nil)
        let arrivals = Arrivals()
        controller.delegate = arrivals
        try context.performAndWait { try controller.performFetch() }
        let writer = try ChildProcess(
            CommandLine.arguments[0], ["--w10-writer", url.absoluteString, String(changes)], captureOutput: true)
        let output = writer.readOutput(timeout: 60 + Double(changes)) { $0.contains("done") }
        _ = writer.wait(timeout: 10)
        Thread.sleep(forTimeInterval: notify ? 0.1 : 0.5)
        controller.delegate = nil
        let saves = output.split(separator: "\n").compactMap { line -> (before: UInt64, after: UInt64)? in
            let parts = line.split(separator: " ").compactMap { UInt64($0) }
            return parts.count == 2 ? (parts[0], parts[1]) : nil
        }
        let seen = arrivals.all
        var samples: [Double] = []
        for save in saves {
            guard let arrival = seen.first(where: { $0 > save.before }) else { continue }
            samples.append(Double(arrival > save.after ? arrival - save.after : 0) / 1e9)
        }
        if samples.count < saves.count || saves.count < changes {
            print("W10: \(saves.count) of \(changes) remote saves made, \(samples.count) reached the controller")
        }
        record(
            "W10 one remote change: commit → controllerDidChangeContent (PostgreSQL)", 1000,
            notify ? "OpenCoreData, LISTEN/NOTIFY" : "OpenCoreData, polling (notify=off)", samples, reference: notify,
            note: "another process saves an update every 250 ms; history on")
    }
}

/// The writer process of the remote-change measurement (`ocd-benchmarks --w10-writer URL COUNT`): `COUNT` updates,
/// one every 250 ms, each printed as the monotonic clock before and after its `save()`, then `done`.
func w10Writer(_ arguments: [String]) throws {
    guard arguments.count == 2, let url = URL(string: arguments[0]), let count = Int(arguments[1]) else {
        throw Usage("--w10-writer needs a store URL and a count")
    }
    let container = NSPersistentContainer(name: "W10", managedObjectModel: try makeModel())
    container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
    try container.loadPersistentStores()
    let context = container.newBackgroundContext()
    let objects = try context.performAndWait { try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item")) }
    for change in 0..<count {
        Thread.sleep(forTimeInterval: 0.25)
        try context.performAndWait {
            objects[change % objects.count].setValue(Int64(2_000_000 + change), forKey: "score")
            let before = nanoseconds()
            try context.save()
            let after = nanoseconds()
            FileHandle.standardOutput.write(Data("\(before) \(after)\n".utf8))
        }
    }
    FileHandle.standardOutput.write(Data("done\n".utf8))
}

/// Records when the controller finished reporting each change.
private final class Arrivals: NSObject, NSFetchedResultsControllerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var times: [UInt64] = []

    func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        let now = nanoseconds()
        lock.withLock { times.append(now) }
    }

    var all: [UInt64] { lock.withLock { times } }
}

/// A database of its own holding the same items twice: in a plain table that postgres-nio reads, and in a store of
/// the benchmark's model; `close()` drops it.
final class W10Data {
    let admin: RawPostgres
    let database: String
    let url: URL
    let raw: RawPostgres
    let container: NSPersistentContainer

    init(_ server: URL, admin: RawPostgres, items: [ItemData]) throws {
        self.admin = admin
        database = try admin.makeDatabase()
        url = RawPostgres.url(server, database: database)
        do {
            raw = try RawPostgres(url)
            try raw.createPlainTable()
            try raw.insert(items)
            container = NSPersistentContainer(name: "W10", managedObjectModel: try makeModel())
            container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
            try container.loadPersistentStores()
            let loader = container.newBackgroundContext()
            try loader.performAndWait {
                let entity = try loader.entity(named: "Item")
                for item in items { fillByKey(NSManagedObject(entity: entity, insertInto: loader), item) }
                try loader.save()
            }
        } catch {
            admin.dropDatabase(database)
            throw error
        }
    }

    func close() {
        for store in container.persistentStoreCoordinator.persistentStores { try? container.persistentStoreCoordinator.remove(store) }
        raw.close()
        admin.dropDatabase(database)
    }
}

/// postgres-nio used directly, as a good user of it writes.
///
/// One connection, the async API, rows streamed and decoded into tuples, bulk inserts as one statement of arrays. Each
/// call blocks the (non-async) benchmark thread until done.
final class RawPostgres: @unchecked Sendable {
    let connection: PostgresConnection
    let logger = Logger(label: "W10")

    init(_ url: URL) throws {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        let configuration = PostgresConnection.Configuration(
            host: components?.host ?? "127.0.0.1", port: components?.port ?? 5432, username: components?.user ?? "postgres",
            password: components?.password, database: String((components?.path ?? "/postgres").dropFirst()), tls: .disable)
        let logger = self.logger
        connection = try Self.blocking {
            try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        }
    }

    /// `url` with another database.
    static func url(_ server: URL, database: String) -> URL {
        var components = URLComponents(url: server, resolvingAgainstBaseURL: false)!
        components.path = "/" + database
        components.query = nil
        return components.url!
    }

    /// Runs async work to its end from a synchronous caller.
    static func blocking<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let box = Box<T>()
        Task {
            do { box.result = .success(try await work()) } catch { box.result = .failure(error) }
            done.signal()
        }
        done.wait()
        return try box.result!.get()
    }

    private final class Box<T>: @unchecked Sendable {
        var result: Swift.Result<T, any Error>?
    }

    func close() { try? Self.blocking { [connection] in try await connection.close() } }

    func run(_ sql: String) throws {
        let (connection, logger) = (connection, logger)
        try Self.blocking { _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect() }
    }

    /// A new empty database's name.
    func makeDatabase() throws -> String {
        let name = "ocd_bench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        try run("CREATE DATABASE \(name)")
        return name
    }

    func dropDatabase(_ name: String) { try? run("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }

    /// The plain table the peers read and write: the same columns as the model's entity.
    func createPlainTable() throws {
        try run(
            "CREATE TABLE item (id bigserial PRIMARY KEY, section text COLLATE \"C\", score bigint, title text, flag bigint, amount double precision, created double precision, note text, count bigint, rating double precision, code text)"
        )
    }

    /// Inserts `items` in one statement: ten arrays, unnested into rows.
    func insert(_ items: [ItemData]) throws {
        let (connection, logger) = (connection, logger)
        let query: PostgresQuery = """
            INSERT INTO item (section, score, title, flag, amount, created, note, count, rating, code)
            SELECT * FROM unnest(\(items.map(\.section)), \(items.map(\.score)), \(items.map(\.title)), \(items.map(\.flag)), \
            \(items.map(\.amount)), \(items.map(\.created)), \(items.map(\.note)), \(items.map(\.count)), \(items.map(\.rating)), \
            \(items.map(\.code)))
            """
        try Self.blocking { _ = try await connection.query(query, logger: logger).collect() }
    }

    /// Inserts `items` in a transaction of multi-row `INSERT … VALUES` statements of `rows` rows each (bound
    /// parameters): the statement shape the store's saves use.
    func insertValues(_ items: [ItemData], rows: Int) throws {
        let (connection, logger) = (connection, logger)
        try Self.blocking {
            _ = try await connection.query("BEGIN", logger: logger).collect()
            for start in stride(from: 0, to: items.count, by: rows) {
                let chunk = items[start..<min(start + rows, items.count)]
                var bindings = PostgresBindings(capacity: chunk.count * 10)
                var tuples: [String] = []
                for item in chunk {
                    let first = bindings.count + 1
                    tuples.append("(" + (first..<first + 10).map { "$\($0)" }.joined(separator: ", ") + ")")
                    bindings.append(item.section)
                    bindings.append(item.score)
                    bindings.append(item.title)
                    bindings.append(item.flag)
                    bindings.append(item.amount)
                    bindings.append(item.created)
                    bindings.append(item.note)
                    bindings.append(item.count)
                    bindings.append(item.rating)
                    bindings.append(item.code)
                }
                let sql =
                    "INSERT INTO item (section, score, title, flag, amount, created, note, count, rating, code) VALUES "
                    + tuples.joined(separator: ", ")
                _ = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger).collect()
            }
            _ = try await connection.query("COMMIT", logger: logger).collect()
        }
    }

    /// The rows of `sql` (an ID and a section key each) decoded as tuples on the event loop as they arrive, through
    /// postgres-nio's callback API (no back-pressure, no task hops); returns how many.
    func idsAndSectionsOnEventLoop(_ sql: String) throws -> Int {
        final class Lists: @unchecked Sendable {
            var ids: [Int64] = []
            var sections: [String] = []
        }
        let lists = Lists()
        let future = connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) { row in
            let (id, section) = try row.decode((Int64, String).self)
            lists.ids.append(id)
            lists.sections.append(section)
        }
        _ = try future.wait()
        return min(lists.ids.count, lists.sections.count)
    }

    /// Streams the rows of `sql` (an ID and a section key each), decoded as tuples into the arrays a list keeps (as
    /// the raw SQLite contender of W1 does); returns how many.
    func idsAndSections(_ sql: String) throws -> Int {
        let (connection, logger) = (connection, logger)
        return try Self.blocking {
            var ids: [Int64] = []
            var sections: [String] = []
            for try await (id, section) in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode(
                (Int64, String).self)
            {
                ids.append(id)
                sections.append(section)
            }
            return min(ids.count, sections.count)
        }
    }
}
