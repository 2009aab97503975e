import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate
import Testing
import _TestSupport

@testable import OpenCoreDataStore

/// What SQLite does with the SQL the compiler writes: lookups that an index can answer must reach it.
@Suite struct QueryPlanTests {
    /// The query plan's details for a predicate over the store's own schema.
    func plan(_ format: String, _ arguments: [Any]) throws -> [String] {
        let model = try NSManagedObjectModel { Entity("Row") { Attribute("n", .integer64) } }
        let entity = try #require(model.entity(named: "Row"))
        let schema = RelationalSchema(legacyLayoutFor: model)
        var compiler = SQLPredicateCompiler(entity: entity, mapping: schema)
        let fragment = try compiler.compile(try FetchPredicate(format: format, argumentArray: arguments))
        let db = try DatabaseQueue()
        try db.write { db in for statement in schema.creationStatements { try db.execute(sql: statement) } }
        let sql = "EXPLAIN QUERY PLAN SELECT t0.Z_PK FROM \(sqlQuote(schema.tableName(for: entity))) t0 WHERE \(fragment.sql)"
        let values: [(any DatabaseValueConvertible)?] = fragment.arguments.map { argument -> (any DatabaseValueConvertible)? in
            switch argument {
            case .null: return nil
            case .integer(let i): return i
            case .real(let d): return d
            case .text(let s): return s
            case .blob(let d): return d
            }
        }
        return try db.read { db in try Row.fetchAll(db, sql: sql, arguments: StatementArguments(values)).map { $0["detail"] as String } }
    }

    @Test func fetchingObjectsByIDSearchesThePrimaryKey() throws {
        let model = try NSManagedObjectModel { Entity("Row") { Attribute("n", .integer64) } }
        let entity = try #require(model.entity(named: "Row"))
        let ids = (1...50).map { NSManagedObjectID(entity: entity, storeIdentifier: "S", primaryKey: Int64($0)) }
        let found = try plan("SELF IN %@", [ids])
        #expect(found.contains { $0.contains("USING INTEGER PRIMARY KEY") }, "\(found)")
        // (The list, one argument, is read through json_each: scanning it is reading the list, not the table.)
        #expect(!found.contains { $0.hasPrefix("SCAN") && !$0.contains("json_each") }, "\(found)")
        // Under a NOT the test must stay two-valued (a nil is not IN anything), so it is wrapped and scans.
        let negated = try plan("NOT (n IN %@)", [[1, 2, 3]])
        #expect(negated.contains { $0.hasPrefix("SCAN") }, "\(negated)")
    }

    /// Objects go to SQLite as one argument: the statement's text is the same for every list (so it is prepared once
    /// and cached), and a NOT keeps it two-valued.
    @Test func aListOfObjectsIsOneArgumentAndTheStatementStaysTheSame() throws {
        let model = try NSManagedObjectModel { Entity("Row") { Attribute("n", .integer64) } }
        let entity = try #require(model.entity(named: "Row"))
        let schema = RelationalSchema(legacyLayoutFor: model)
        func compiled(_ format: String, _ keys: [Int64]) throws -> (String, [SQLArgument]) {
            let ids = keys.map { NSManagedObjectID(entity: entity, storeIdentifier: "S", primaryKey: $0) }
            var compiler = SQLPredicateCompiler(entity: entity, mapping: schema)
            let fragment = try compiler.compile(try FetchPredicate(format: format, argumentArray: [ids]))
            return (fragment.sql, fragment.arguments)
        }
        let (few, fewArguments) = try compiled("SELF IN %@", [3, 1])
        let (many, manyArguments) = try compiled("SELF IN %@", Array(1...2_000))
        #expect(few == many, "\(few) / \(many)")
        #expect(fewArguments == [.text("[3,1]")])
        #expect(manyArguments.count == 1)
        let (negated, _) = try compiled("NOT (SELF IN %@)", [3, 1])
        #expect(negated.contains("COALESCE"), "\(negated)")
    }

    /// A fetched results controller's query (IDs and sort values, in sort order) is answered from an index on the sort
    /// columns alone when the table holds one entity: it must not read `Z_ENT`, which the index does not hold.
    @Test func idsAndSortValuesComeFromACoveringIndex() throws {
        let model = try NSManagedObjectModel {
            Entity("Item") {
                Attribute("section", .string)
                Attribute("score", .integer64)
                Attribute("title", .string)
            }
            Entity("Shape", abstract: true) { Attribute("area", .double) }
            Entity("Circle", parent: "Shape") { Attribute("radius", .double) }
            Entity("Square", parent: "Shape") { Attribute("side", .double) }
        }
        let folder = TemporaryDirectory()
        let store = try SQLiteStore(url: folder.file("plan.sqlite"), model: model)
        defer { try? store.close() }
        try store.writer.write { db in
            try db.execute(sql: "CREATE INDEX ITEM_SECTION_SCORE ON ZITEM (ZSECTION, ZSCORE, Z_PK)")
            try db.execute(sql: "CREATE INDEX SHAPE_AREA ON ZSHAPE (ZAREA, Z_PK)")
        }
        func plan(_ entity: String, _ sorts: [String]) throws -> (sql: String, details: [String]) {
            var request = StoreFetchRequest(entity: try #require(model.entity(named: entity)))
            request.sortDescriptors = sorts.map { FetchSortDescriptor(key: $0) }
            var query = try store.core.plan(request)
            let sql = try query.idsAndValuesSQL(sorts).sql
            let details = try store.writer.read { db in
                try Row.fetchAll(
                    db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: StatementArguments(query.arguments.map(\.databaseValue))
                ).map { $0["detail"] as String }
            }
            return (sql, details)
        }
        let items = try plan("Item", ["section", "score"])
        #expect(items.details.contains { $0.contains("COVERING INDEX ITEM_SECTION_SCORE") }, "\(items)")
        #expect(!items.details.contains { $0.contains("TEMP B-TREE") }, "\(items)")
        // Entities that share a table need each row's entity number to make its ID.
        let shapes = try plan("Shape", ["area"])
        #expect(shapes.sql.contains("Z_ENT"), "\(shapes)")
    }
}
