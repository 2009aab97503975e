import Foundation
import GRDB
import OpenCoreData
import OpenCoreDataModel
import OpenCoreDataPredicate
import Testing
import _TestSupport

@testable import OpenCoreDataStore

/// The SQL the relational core writes for a request, per dialect, word for word: a change to what a back end is sent
/// shows here first, and SQLite's statements are also run to show they mean what they should.
@Suite struct GoldenSQLTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Shelf") {
                Attribute("title", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "shelf", ordered: true)
                Relationship("tags", to: "Tag", toMany: true, inverse: "shelves")
            }
            Entity("Item") {
                Attribute("name", .string)
                Attribute("score", .integer64)
                Attribute("price", .decimal)
                Relationship("shelf", to: "Shelf", inverse: "items")
            }
            Entity("Tag") {
                Attribute("label", .string)
                Relationship("shelves", to: "Shelf", toMany: true, inverse: "tags")
            }
            Entity("Shape", abstract: true) { Attribute("area", .double) }
            Entity("Circle", parent: "Shape") { Attribute("radius", .double) }
            Entity("Square", parent: "Shape") { Attribute("side", .double) }
        }
    }

    let model: NSManagedObjectModel
    let schema: RelationalSchema

    init() throws {
        model = try Self.model()
        schema = RelationalSchema(appleLayoutFor: model)
    }

    func request(
        _ entity: String, _ format: String? = nil, _ arguments: [Any] = [], sorts: [FetchSortDescriptor] = [], limit: Int = 0,
        offset: Int = 0
    ) throws -> StoreFetchRequest {
        var request = StoreFetchRequest(entity: try #require(model.entity(named: entity)))
        if let format { request.predicate = try FetchPredicate(format: format, argumentArray: arguments) }
        request.sortDescriptors = sorts
        request.fetchLimit = limit
        request.fetchOffset = offset
        return request
    }

    func plan(_ request: StoreFetchRequest, _ dialect: any SQLDialect) throws -> FetchPlan {
        try FetchPlan(request, schema: schema, dialect: dialect)
    }

    /// One statement per dialect: `#expect` with the statement written out when it differs.
    func check(_ actual: String, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(actual == expected, "written:\n\(actual)", sourceLocation: sourceLocation)
    }

    /// A sorted, filtered, windowed fetch of IDs: SQLite leaves NULLs' order to its default (first ascending, last
    /// descending, as Core Data sorts), PostgreSQL spells it out; PostgreSQL numbers its placeholders and folds quoted
    /// names as it folds bare ones.
    @Test func objectIDsOfASortedFilteredWindow() throws {
        let request = try request(
            "Item", "score > %@ AND name BEGINSWITH[c] %@", [5, "a"],
            sorts: [FetchSortDescriptor(key: "name", ascending: false), FetchSortDescriptor(key: "score")], limit: 10, offset: 20)
        check(
            try plan(request, SQLiteDialect()).objectIDsSQL,
            #"SELECT t0.Z_PK FROM "ZITEM" t0 WHERE ((t0."ZSCORE" > ?) AND ocd_strop('BEGINSWITH', t0."ZNAME", ?, 1)) ORDER BY t0."ZNAME" DESC, t0."ZSCORE" ASC, t0.Z_PK ASC LIMIT 10 OFFSET 20"#
        )
        check(
            try plan(request, PostgreSQLDialect()).objectIDsSQL,
            #"SELECT t0.Z_PK FROM "zitem" t0 WHERE ((t0."zscore" > $1) AND ocd_strop('BEGINSWITH', t0."zname", $2, 1)) ORDER BY t0."zname" DESC NULLS LAST, t0."zscore" ASC NULLS FIRST, t0.Z_PK ASC NULLS FIRST LIMIT 10 OFFSET 20"#
        )
    }

    /// Equality is null-safe (`nil` equals `nil`, never "unknown"), a NOT keeps comparisons two-valued, and booleans
    /// are each engine's; an offset alone is SQLite's `LIMIT -1` and PostgreSQL's bare `OFFSET`.
    @Test func nullSafeEqualityAndTwoValuedNegation() throws {
        let request = try request("Item", "name == nil OR NOT (score < 3) OR FALSEPREDICATE", offset: 5)
        check(
            try plan(request, SQLiteDialect()).objectIDsSQL,
            #"SELECT t0.Z_PK FROM "ZITEM" t0 WHERE ((t0."ZNAME" IS ?) OR (NOT COALESCE((t0."ZSCORE" < ?), 0)) OR 0) ORDER BY t0.Z_PK ASC LIMIT -1 OFFSET 5"#
        )
        check(
            try plan(request, PostgreSQLDialect()).objectIDsSQL,
            #"SELECT t0.Z_PK FROM "zitem" t0 WHERE ((t0."zname" IS NOT DISTINCT FROM $1) OR (NOT COALESCE((t0."zscore" < $2), FALSE)) OR FALSE) ORDER BY t0.Z_PK ASC NULLS FIRST OFFSET 5"#
        )
    }

    /// A count keeps the window inside and names its derived table (PostgreSQL requires the name).
    @Test func countWithinAWindow() throws {
        let request = try request("Circle", "radius > 1", limit: 3)
        check(
            try plan(request, SQLiteDialect()).countSQL,
            #"SELECT COUNT(*) FROM (SELECT t0.Z_PK FROM "ZSHAPE" t0 WHERE t0.Z_ENT IN (3) AND (t0."ZRADIUS" > ?) LIMIT 3 OFFSET 0) AS matched"#
        )
        check(
            try plan(request, PostgreSQLDialect()).countSQL,
            #"SELECT COUNT(*) FROM (SELECT t0.Z_PK FROM "zshape" t0 WHERE t0.Z_ENT IN (3) AND (t0."zradius" > $1) LIMIT 3) AS matched"#
        )
    }

    /// Dictionaries through a to-one (a `LEFT JOIN`) with a sort under a comparison of its own: a collation in SQLite,
    /// a sort key the store computes in PostgreSQL.
    @Test func dictionariesThroughAToOneWithACaseInsensitiveSort() throws {
        var request = try request(
            "Item", "shelf.title != %@", ["Z"], sorts: [FetchSortDescriptor(key: "shelf.title", comparison: .caseInsensitive)])
        request.resultKind = .dictionaries(["name", "shelf.title", "shelf"])
        var sqlite = try plan(request, SQLiteDialect())
        check(
            try sqlite.dictionariesSQL(["name", "shelf.title", "shelf"], distinct: false).sql,
            #"SELECT t0."ZNAME", t1."ZTITLE", t0."ZSHELF" FROM "ZITEM" t0 LEFT JOIN "ZSHELF" t1 ON t1.Z_PK = t0."ZSHELF" WHERE (t1."ZTITLE" IS NOT ?) ORDER BY t1."ZTITLE" COLLATE OCD_CI ASC, t0.Z_PK ASC"#
        )
        var postgres = try plan(request, PostgreSQLDialect())
        check(
            try postgres.dictionariesSQL(["name", "shelf.title", "shelf"], distinct: true).sql,
            #"SELECT DISTINCT t0."zname", t1."ztitle", t0."zshelf" FROM "zitem" t0 LEFT JOIN "zshelf" t1 ON t1.Z_PK = t0."zshelf" WHERE (t1."ztitle" IS DISTINCT FROM $1)"#
        )
        check(
            postgres.order,
            #"ocd_sort_key(t1."ztitle", 'OCD_CI') ASC NULLS FIRST, t0.Z_PK ASC NULLS FIRST"#)
    }

    /// A to-many quantifier is an `EXISTS` over the join table; the placeholders inside it are numbered in text order.
    @Test func aToManyQuantifierThroughAJoinTable() throws {
        let request = try request("Shelf", "ANY tags.label == %@ AND title BEGINSWITH %@", ["x", "y"])
        let written = try plan(request, PostgreSQLDialect()).objectIDsSQL
        check(
            written,
            #"SELECT t0.Z_PK FROM "zshelf" t0 WHERE ((EXISTS (SELECT 1 FROM "z_5tags" t2 JOIN "ztag" t1 ON t1.Z_PK = t2."z_6tags" WHERE t2."z_5shelves" = t0.Z_PK AND (t1."zlabel" IS NOT DISTINCT FROM $1))) AND ocd_strop('BEGINSWITH', t0."ztitle", $2, 0)) ORDER BY t0.Z_PK ASC NULLS FIRST"#
        )
    }

    /// Rows by key and an ordered to-many's destinations (positioned ones first, in order).
    @Test func keyedReads() throws {
        let core = RelationalCore(identifier: "S", schema: schema, dialect: PostgreSQLDialect(), externalData: nil)
        check(
            KeyedReadSQL.rows(table: "ZITEM", selectColumns: core.selectColumns["ZITEM"]!, parameters: 2, dialect: PostgreSQLDialect()),
            #"SELECT t0."z_pk", t0."z_ent", t0."z_opt", t0."zname", t0."zprice", t0."zscore", t0."zshelf", t0."z_fok_shelf" FROM "zitem" t0 WHERE t0.Z_PK IN ($1,$2)"#
        )
        // Statements a connection keeps prepared: one per count up to 32 (batch sizes), then powers of two to 500.
        let counts = [1, 20, 32, 33, 64, 65, 300, 500].map { KeyedReadSQL.parameterCount(for: $0, maximum: 500) }
        #expect(counts == [1, 20, 32, 64, 64, 128, 500, 500])
        let items = try #require(model.entity(named: "Shelf")?.relationshipsByName["items"])
        check(
            try #require(KeyedReadSQL.destinations(of: items, schema: schema, dialect: SQLiteDialect())),
            #"SELECT Z_PK, Z_ENT FROM "ZITEM" WHERE "ZSHELF" = ? ORDER BY "Z_FOK_SHELF" IS NULL, "Z_FOK_SHELF", Z_PK"#)
        check(
            try #require(KeyedReadSQL.destinations(of: items, schema: schema, dialect: PostgreSQLDialect())),
            #"SELECT Z_PK, Z_ENT FROM "zitem" WHERE "zshelf" = $1 ORDER BY "z_fok_shelf" IS NULL, "z_fok_shelf", Z_PK"#)
    }

    /// The destinations of many sources at once (prefetching): by source, then in the relationship's order; through
    /// the inverse's foreign key, or a many-to-many's join table.
    @Test func destinationsOfEachSource() throws {
        let shelf = try #require(model.entity(named: "Shelf"))
        let items = try #require(shelf.relationshipsByName["items"]), tags = try #require(shelf.relationshipsByName["tags"])
        check(
            try #require(KeyedReadSQL.destinations(ofEach: items, parameters: 2, schema: schema, dialect: SQLiteDialect())),
            #"SELECT "ZSHELF", Z_PK, Z_ENT FROM "ZITEM" WHERE "ZSHELF" IN (?,?) ORDER BY "ZSHELF", "Z_FOK_SHELF" IS NULL, "Z_FOK_SHELF", Z_PK"#
        )
        check(
            try #require(KeyedReadSQL.destinations(ofEach: tags, parameters: 2, schema: schema, dialect: PostgreSQLDialect())),
            #"SELECT j."z_5shelves", d.Z_PK, d.Z_ENT FROM "z_5tags" j JOIN "ztag" d ON d.Z_PK = j."z_6tags" WHERE j."z_5shelves" IN ($1,$2) ORDER BY j."z_5shelves", d.Z_PK"#
        )
    }

    /// A `?` inside a quoted literal or name is text, not a placeholder.
    @Test func placeholdersOutsideQuotesOnly() {
        check(
            PostgreSQLDialect().finalize(#"SELECT '?', "a?" FROM t WHERE x = ? AND y = 'it''s ?' AND z = ?"#),
            #"SELECT '?', "a?" FROM t WHERE x = $1 AND y = 'it''s ?' AND z = $2"#)
        check(SQLiteDialect().finalize("x = ?"), "x = ?")
    }

    /// SQLite's statements run on a real store and mean what they say: the golden shapes above are not only text.
    @Test func sqliteStatementsRunOnAStore() throws {
        let folder = TemporaryDirectory()
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: model)
        _ = try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, at: folder.file("golden.sqlite"))
        let context = NSManagedObjectContext(concurrencyType: .mainQueueConcurrencyType)
        context.persistentStoreCoordinator = coordinator
        for (n, name) in ["b", "A", nil, "c"].enumerated() {
            let item = NSEntityDescription.insertNewObject(forEntityName: "Item", into: context)
            item.setValue(name, forKey: "name")
            item.setValue(n, forKey: "score")
        }
        try context.save()
        let store = try SQLiteStore(url: folder.file("golden.sqlite"), model: model, readOnly: true)
        defer { try? store.close() }
        var byName = try request("Item", "score < 3 OR name == nil", sorts: [FetchSortDescriptor(key: "name")], offset: 1)
        byName.resultKind = .dictionaries(["name"])
        guard case .dictionaries(let rows) = try store.execute(byName) else { throw Failure("expected dictionaries") }
        // nil first, then binary order ("A" < "b"); the offset skips nil.
        #expect(rows.map { $0["name"] } == [.string("A"), .string("b")])
        var count = try request("Item", "name != nil", limit: 2)
        count.resultKind = .count
        guard case .count(let n) = try store.execute(count) else { throw Failure("expected a count") }
        #expect(n == 2)
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension GoldenSQLTests {
    /// A list of keys goes to SQLite as one JSON array, its numbers written as Swift prints them (the extremes, zero and
    /// negatives too), and SQLite reads back the same keys.
    @Test func aListOfKeysIsOneJSONArray() throws {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<200).map { _ in Int64.random(in: Int64.min...Int64.max, using: &generator) }
        let db = try DatabaseQueue()
        for values in [[], [0], [3, 1], [-7, 10, 1_000_000], [Int64.min, Int64.max, -1], random] {
            let (sql, argument) = try #require(SQLiteDialect().inIntegerList("v", values))
            #expect(sql == "v IN (SELECT value FROM json_each(?))")
            let expected = "[" + values.map(String.init).joined(separator: ",") + "]"
            #expect(argument == .text(expected), "\(argument) for \(values)")
            let read = try db.read { db in
                try Int64.fetchAll(db, sql: "SELECT value FROM json_each(?)", arguments: [expected])
            }
            #expect(read == values)
        }
    }
}
