import Foundation
import Logging
import OpenCoreData
import PostgresNIO

// MARK: W10 — W3 and W4 on the PostgreSQL store

/// W3 and W4 on PostgreSQL, at 10,000 rows (300 for a smoke run): one change of each kind, and a batch of 100 mixed
/// changes, saved by a background context and merged into the context of a sectioned controller — against what a
/// postgres-nio user does without this package: the same statements, then the list re-fetched and diffed
/// (`CollectionDifference` with moves), as W3's and W4's naive references do on SQLite.
func w10Changes(_ server: URL, admin: RawPostgres, _ options: Options) throws {
    let n = options.smoke ? 300 : 10_000
    print("== W10: preparing \(n) rows on PostgreSQL for one change and batches")
    let data = try W10Data(server, admin: admin, items: makeItems(n))
    defer { data.close() }
    let (raw, container) = (data.raw, data.container)

    let context = container.newBackgroundContext()
    let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
    request.sortDescriptors = [FetchSortDescriptor(key: "section"), FetchSortDescriptor(key: "score")]
    request.fetchBatchSize = 20
    let controller = NSFetchedResultsController(
        fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "section", cacheName: nil)
    let delegate = CountingDelegate()
    controller.delegate = delegate
    try controller.performFetch()
    let background = container.newBackgroundContext()
    var counter = 0
    func pick() -> NSManagedObjectID {
        counter += 1
        let sections = controller.sections ?? []
        let s = counter % sections.count
        return controller.object(at: IndexPath(row: (counter * 7919) % sections[s].numberOfObjects, section: s)).objectID
    }
    // W3: one change of each kind.
    try w3Merged(
        container, size: n, workload: { "W10 one change: \($0) (PostgreSQL)" }, options, context: context, delegate: delegate,
        changes: w3Changes { counter }, pick: { context.object(with: pick()) })

    // W4: a batch of 100 mixed changes (40% edits, 20% moves within, 20% across, 10% inserts, 10% deletes).
    let k = options.smoke ? 20 : 100
    var batch: [NSManagedObjectID] = []
    var phases: [(edit: Double, save: Double, merge: Double)] = []
    let samples = try measure(
        options.repetitions,
        prepare: {
            var seen = Set<NSManagedObjectID>()
            batch = []
            while batch.count < k {
                let id = pick()
                if seen.insert(id).inserted { batch.append(id) }
            }
        }
    ) {
        let start = nanoseconds()
        let (edited, saved) = try saveAndMerge(background, into: context, delegate: delegate) {
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.predicate = try FetchPredicate(format: "SELF IN %@", batch)
            let byID = Dictionary(uniqueKeysWithValues: try background.fetch(request).map { ($0.objectID, $0) })
            for (i, id) in batch.enumerated() { try w4MixedChange(i, byID[id]!, counter: counter, in: background) }
        }
        let end = nanoseconds()
        phases.append((Double(edited - start) / 1e6, Double(saved - edited) / 1e6, Double(end - saved) / 1e6))
    }
    background.reset()
    record(
        "W10 batch of \(k) mixed changes (PostgreSQL)", n, "OpenCoreData, background save merged", samples,
        note: String(
            format: "median phases: fetch + edit %.1f ms, save %.1f ms, merge + controller %.1f ms", median(phases.map(\.edit)),
            median(phases.map(\.save)), median(phases.map(\.merge))))
    withExtendedLifetime(controller) {}

    try w10NaiveChanges(raw, n: n, k: k, options)
}

/// The postgres-nio user's side: each change as SQL, then the whole list re-fetched and diffed with the previous one.
private func w10NaiveChanges(_ raw: RawPostgres, n: Int, k: Int, _ options: Options) throws {
    let list = "SELECT id FROM item ORDER BY section, score, id"
    var ids = try raw.ids(list)
    /// Re-fetches the list and diffs it against the last one (what an observer without this package does).
    func refetchAndDiff() throws {
        let fresh = try raw.ids(list)
        let difference = fresh.difference(from: ids).inferringMoves()
        precondition(!difference.isEmpty || fresh == ids)
        ids = fresh
    }
    var round = 0
    let naive: [(String, String)] = [
        ("edit", "UPDATE item SET title = 'edited ' || $1 WHERE id = $2"),
        ("move within section", "UPDATE item SET score = ($1 * 7919) % 1000000 WHERE id = $2"),
        ("move across sections", "UPDATE item SET section = chr(65 + ($1 % 26)::int) WHERE id = $2"),
    ]
    for (name, sql) in naive {
        record(
            "W10 one change: \(name) (PostgreSQL)", n, "postgres-nio statement + re-fetch + diff",
            try measure(options.repetitions) {
                round += 1
                try raw.execute(sql, Int64(round), Int64(1 + (round * 31) % n))
                try refetchAndDiff()
            }, reference: true)
    }
    record(
        "W10 one change: insert (PostgreSQL)", n, "postgres-nio statement + re-fetch + diff",
        try measure(options.repetitions) {
            round += 1
            try raw.execute("INSERT INTO item (section, score, title) VALUES ('M', $1, 'new')", Int64(round))
            try refetchAndDiff()
        }, reference: true)
    record(
        "W10 one change: delete (PostgreSQL)", n, "postgres-nio statement + re-fetch + diff",
        try measure(options.repetitions) {
            round += 1
            try raw.execute("DELETE FROM item WHERE id = (SELECT max(id) FROM item) - $1", Int64(round))
            try refetchAndDiff()
        }, reference: true)
    record(
        "W10 batch of \(k) mixed changes (PostgreSQL)", n, "postgres-nio statements in a transaction + re-fetch + diff",
        try measure(options.repetitions) {
            round += 1
            try raw.transaction { statement in
                for i in 0..<k {
                    let id = Int64(1 + (i * 7919 + round * 31) % n)
                    switch i % 10 {
                    case 0, 1, 2, 3: try statement("UPDATE item SET title = $1 WHERE id = $2", ["batch \(round) \(i)", id])
                    case 4, 5: try statement("UPDATE item SET score = $1 WHERE id = $2", [Int64((i * 7919 + round) % 1_000_000), id])
                    case 6, 7: try statement("UPDATE item SET section = $1 WHERE id = $2", [letters[(i + round) % 26], id])
                    case 8: try statement("INSERT INTO item (section, score, title) VALUES ($1, $2, 'new')", [letters[i % 26], Int64(i)])
                    default: try statement("DELETE FROM item WHERE id = $1", [id])
                    }
                }
            }
            try refetchAndDiff()
        }, reference: true)
}

extension RawPostgres {
    /// The first column of every row of `sql`, streamed.
    func ids(_ sql: String) throws -> [Int64] {
        let (connection, logger) = (connection, logger)
        return try Self.blocking {
            var ids: [Int64] = []
            for try await id in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode(Int64.self) {
                ids.append(id)
            }
            return ids
        }
    }

    /// Runs one statement with two or fewer parameters.
    func execute(_ sql: String, _ values: Int64...) throws {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { bindings.append(value) }
        let (connection, logger, query) = (connection, logger, PostgresQuery(unsafeSQL: sql, binds: bindings))
        try Self.blocking { _ = try await connection.query(query, logger: logger).collect() }
    }

    /// Runs the statements `body` sends (each with its text and its values) in one transaction.
    func transaction(_ body: (_ statement: (String, [any PostgresDynamicTypeEncodable & Sendable]) throws -> Void) throws -> Void) throws {
        var queries: [PostgresQuery] = []
        try body { sql, values in
            var bindings = PostgresBindings(capacity: values.count)
            for value in values { bindings.append(value) }
            queries.append(PostgresQuery(unsafeSQL: sql, binds: bindings))
        }
        let (connection, logger, all) = (connection, logger, queries)
        try Self.blocking {
            _ = try await connection.query("BEGIN", logger: logger).collect()
            for query in all { _ = try await connection.query(query, logger: logger).collect() }
            _ = try await connection.query("COMMIT", logger: logger).collect()
        }
    }
}
