import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import Testing
import _TestSupport

@testable import OpenCoreDataStore

/// A connection that runs nothing: it records every statement with the values bound to it, answers queries from a
/// script, and says each write changed one row, or none where the script says so — enough to see the statements a
/// save plans, in order, per dialect, and what optimistic locking does with the counts.
final class RecordingConnection: RelationalWriteConnection {
    struct Row: RelationalRow {
        let values: [SQLArgument]
        func value(_ index: Int) -> SQLArgument { values[index] }
    }

    struct Binder: RelationalBinder {
        var values: [SQLArgument] = []
        mutating func bindNull() throws { values.append(.null) }
        mutating func bind(_ value: Int64) throws { values.append(.integer(value)) }
        mutating func bind(_ value: Double) throws { values.append(.real(value)) }
        mutating func bind(_ text: String) throws { values.append(.text(text)) }
        mutating func bind(_ data: Data) throws { values.append(.blob(data)) }
    }

    struct Statement: RelationalStatement {
        let sql: String
        let connection: RecordingConnection
        func run(_ body: (inout Binder) throws -> Void) throws -> Int {
            var binder = Binder()
            try body(&binder)
            return connection.record(sql, binder.values)
        }
    }

    let dialect: any SQLDialect
    let parameterLimit: Int
    /// Every statement run, as `SQL ← values`.
    private(set) var log: [String] = []
    /// Rows a query whose SQL starts with a key answers.
    var answers: [String: [[SQLArgument]]] = [:]
    /// Writes whose SQL starts with one of these change no row.
    var changingNothing: [String] = []

    init(_ dialect: any SQLDialect, parameterLimit: Int = 999) {
        self.dialect = dialect
        self.parameterLimit = parameterLimit
    }

    func record(_ sql: String, _ values: [SQLArgument]) -> Int {
        log.append(sql + (values.isEmpty ? "" : " ← " + values.map(Self.describe).joined(separator: ", ")))
        return changingNothing.contains { sql.hasPrefix($0) } ? 0 : 1
    }

    static func describe(_ value: SQLArgument) -> String {
        switch value {
        case .null: return "NULL"
        case .integer(let i): return String(i)
        case .real(let d): return String(d)
        case .text(let s): return "'\(s)'"
        case .blob(let d): return "<\(d.count) bytes>"
        }
    }

    func forEachRow(sql: String, arguments: [SQLArgument], _ body: (Row) throws -> Void) throws {
        _ = record(sql, arguments)
        for (prefix, rows) in answers where sql.hasPrefix(prefix) {
            for row in rows { try body(Row(values: row)) }
        }
    }

    func run(sql: String, arguments: [SQLArgument]) throws -> Int { record(sql, arguments) }

    func prepare(sql: String) throws -> Statement { Statement(sql: sql, connection: self) }

    /// Whether the connection offers the dialect's bulk statement (as PostgreSQL's does); the columns it was asked
    /// for, as `name type`.
    var offersBulk = false
    private(set) var bulkColumns: [String] = []

    func prepareBulk(sql: String, columns: [(name: String, type: String?)]) throws -> Statement? {
        guard offersBulk else { return nil }
        bulkColumns = columns.map { "\($0.name) \($0.type ?? "literal")" }
        return Statement(sql: sql, connection: self)
    }
}

/// The statements a save writes, in order, with what it binds, per dialect: a save plan is the same steps on every
/// back end, spelled in each one's dialect.
@Suite struct SavePlanTests {
    let model: NSManagedObjectModel
    let schema: RelationalSchema

    init() throws {
        model = try GoldenSQLTests.model()
        schema = RelationalSchema(appleLayoutFor: model)
    }

    func entity(_ name: String) throws -> NSEntityDescription { try #require(model.entity(named: name)) }

    /// Values for every property of `entity`, from `given` by name (nil and no destination otherwise).
    func values(_ entity: NSEntityDescription, _ given: [String: SnapshotValue]) -> [SnapshotValue] {
        entity.allProperties.map { property in
            if let value = given[property.name] { return value }
            if let relationship = property as? NSRelationshipDescription { return relationship.isToMany ? .toMany : .toOne(nil) }
            return .attribute(.null)
        }
    }

    /// A save inserting a shelf and two items on it, updating one stored item, linking a tag and deleting another item.
    func save() throws -> StoreSaveRequest {
        let (shelf, item, tag) = (try entity("Shelf"), try entity("Item"), try entity("Tag"))
        let newShelf = NSManagedObjectID(temporaryFor: shelf)
        var save = StoreSaveRequest()
        save.inserts.append(.init(objectID: newShelf, values: values(shelf, ["title": .attribute(.string("Top"))])))
        for name in ["a", "b"] {
            save.inserts.append(
                .init(
                    objectID: NSManagedObjectID(temporaryFor: item),
                    values: values(item, ["name": .attribute(.string(name)), "shelf": .toOne(newShelf)])))
        }
        let stored = NSManagedObjectID(entity: item, storeIdentifier: "S", primaryKey: 7)
        save.updates.append(
            .init(objectID: stored, expectedVersion: 3, changes: [item.propertyIndex(named: "score")!: .attribute(.integer(9))]))
        let storedTag = NSManagedObjectID(entity: tag, storeIdentifier: "S", primaryKey: 2)
        save.linkChanges.append(
            .init(relationship: shelf.relationshipsByName["tags"]!, source: newShelf, destination: storedTag, isInsert: true))
        save.deletes.append(.init(objectID: NSManagedObjectID(entity: item, storeIdentifier: "S", primaryKey: 8), expectedVersion: 1))
        return save
    }

    func written(_ dialect: any SQLDialect) throws -> [String] {
        let core = RelationalCore(identifier: "S", schema: schema, dialect: dialect, externalData: nil)
        let connection = RecordingConnection(dialect)
        connection.answers = ["SELECT MAX(Z_PK) FROM": [[.integer(10)]], "SELECT Z_MAX": [[.integer(12)]]]
        _ = try core.write(try save(), on: connection)
        return connection.log
    }

    /// One line per statement: the keys first (tables in order of their root entity's number, each `Z_MAX` read
    /// before the table's largest key), the rows, then updates, links and deletes; updates and deletes check the
    /// version they were read at.
    @Test func aSaveInSQLite() throws {
        let log = try written(SQLiteDialect())
        let expected = [
            #"SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ? ← 1"#,
            #"SELECT MAX(Z_PK) FROM "ZITEM""#,
            #"SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ? ← 5"#,
            #"SELECT MAX(Z_PK) FROM "ZSHELF""#,
            #"UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ? ← 14, 1"#,
            #"UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ? ← 13, 5"#,
            #"INSERT INTO "ZSHELF" ("Z_PK", "Z_ENT", "Z_OPT", "ZTITLE") VALUES (?, ?, ?, ?) ← 13, 5, 1, 'Top'"#,
            #"INSERT INTO "ZITEM" ("Z_PK", "Z_ENT", "Z_OPT", "ZNAME", "ZSCORE", "ZPRICE", "ZSHELF") VALUES (?, ?, ?, ?, ?, ?, ?) ← 13, 1, 1, 'a', NULL, NULL, 13"#,
            #"INSERT INTO "ZITEM" ("Z_PK", "Z_ENT", "Z_OPT", "ZNAME", "ZSCORE", "ZPRICE", "ZSHELF") VALUES (?, ?, ?, ?, ?, ?, ?) ← 14, 1, 1, 'b', NULL, NULL, 13"#,
            #"UPDATE "ZITEM" SET "ZSCORE" = ?, Z_OPT = Z_OPT + 1 WHERE Z_PK = ? AND Z_OPT = ? ← 9, 7, 3"#,
            #"INSERT OR IGNORE INTO "Z_5TAGS" ("Z_5SHELVES", "Z_6TAGS") VALUES (?, ?) ← 13, 2"#,
            #"DELETE FROM "ZITEM" WHERE Z_PK = ? AND Z_OPT = ? ← 8, 1"#,
        ]
        #expect(log == expected, "written:\n\(log.joined(separator: "\n"))")
    }

    /// The same steps in PostgreSQL's spelling: numbered placeholders, `Z_MAX` locked as it is read (two servers'
    /// writers never take the same keys), `ON CONFLICT DO NOTHING`.
    @Test func aSaveInPostgreSQL() throws {
        let log = try written(PostgreSQLDialect())
        let expected = [
            #"SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = $1 FOR UPDATE ← 1"#,
            #"SELECT MAX(Z_PK) FROM "zitem""#,
            #"SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = $1 FOR UPDATE ← 5"#,
            #"SELECT MAX(Z_PK) FROM "zshelf""#,
            #"UPDATE Z_PRIMARYKEY SET Z_MAX = $1 WHERE Z_ENT = $2 ← 14, 1"#,
            #"UPDATE Z_PRIMARYKEY SET Z_MAX = $1 WHERE Z_ENT = $2 ← 13, 5"#,
            #"INSERT INTO "zshelf" ("z_pk", "z_ent", "z_opt", "ztitle") VALUES ($1, $2, $3, $4) ← 13, 5, 1, 'Top'"#,
            #"INSERT INTO "zitem" ("z_pk", "z_ent", "z_opt", "zname", "zscore", "zprice", "zshelf") VALUES ($1, $2, $3, $4, $5, $6, $7) ← 13, 1, 1, 'a', NULL, NULL, 13"#,
            #"INSERT INTO "zitem" ("z_pk", "z_ent", "z_opt", "zname", "zscore", "zprice", "zshelf") VALUES ($1, $2, $3, $4, $5, $6, $7) ← 14, 1, 1, 'b', NULL, NULL, 13"#,
            #"UPDATE "zitem" SET "zscore" = $1, Z_OPT = Z_OPT + 1 WHERE Z_PK = $2 AND Z_OPT = $3 ← 9, 7, 3"#,
            #"INSERT INTO "z_5tags" ("z_5shelves", "z_6tags") VALUES ($1, $2) ON CONFLICT DO NOTHING ← 13, 2"#,
            #"DELETE FROM "zitem" WHERE Z_PK = $1 AND Z_OPT = $2 ← 8, 1"#,
        ]
        #expect(log == expected, "written:\n\(log.joined(separator: "\n"))")
    }

    /// A run of inserts of one entity goes through one multi-row statement, as many rows at a time as the parameter
    /// limit allows.
    @Test func insertsGoInMultiRowStatementsWithinTheParameterLimit() throws {
        let item = try entity("Item")
        var save = StoreSaveRequest()
        for n in 0..<5 {
            save.inserts.append(
                .init(objectID: NSManagedObjectID(temporaryFor: item), values: values(item, ["score": .attribute(.integer(Int64(n)))])))
        }
        let core = RelationalCore(identifier: "S", schema: schema, dialect: PostgreSQLDialect(), externalData: nil)
        // 7 columns a row, 14 parameters: two rows a statement, then one.
        let connection = RecordingConnection(PostgreSQLDialect(), parameterLimit: 14)
        let result = try core.write(save, on: connection)
        let inserts = connection.log.filter { $0.hasPrefix("INSERT") }
        #expect(inserts.count == 3, "\(inserts)")
        #expect(
            inserts[0].contains("($8, $9, $10, $11, $12, $13, $14) ← 1, 1, 1, NULL, 0, NULL, NULL, 2, 1, 1, NULL, 1, NULL, NULL"),
            "\(inserts[0])")
        #expect(result.insertedRows.map(\.objectID.primaryKey) == [1, 2, 3, 4, 5])
    }

    /// Where the connection has a bulk statement, a run of inserts goes through it whole (one array per column, each
    /// typed as its column is declared); a single insert still takes `INSERT … VALUES`.
    @Test func aRunOfInsertsGoesInOneBulkStatementWhereTheBackEndHasOne() throws {
        let item = try entity("Item")
        let core = RelationalCore(identifier: "S", schema: schema, dialect: PostgreSQLDialect(), externalData: nil)
        let connection = RecordingConnection(PostgreSQLDialect(), parameterLimit: 14)
        connection.offersBulk = true
        var save = StoreSaveRequest()
        for n in 0..<5 {
            save.inserts.append(
                .init(objectID: NSManagedObjectID(temporaryFor: item), values: values(item, ["score": .attribute(.integer(Int64(n)))])))
        }
        let result = try core.write(save, on: connection)
        let inserts = connection.log.filter { $0.hasPrefix("INSERT") }
        #expect(inserts.count == 1, "\(inserts)")
        let parts = try #require(inserts.first?.components(separatedBy: " ← "))
        #expect(parts.first?.hasPrefix(#"INSERT INTO "zitem" ("z_pk", "z_ent", "z_opt", "#) == true, "\(inserts)")
        // The entity number and the version are the same for every row: literals, no arrays.
        #expect(
            parts.first?.hasSuffix(") SELECT a0, 1, 1, a3, a4, a5, a6 FROM unnest($1, $2, $3, $4, $5) AS u(a0, a3, a4, a5, a6)") == true,
            "\(inserts)")
        #expect(parts.last?.components(separatedBy: ", ").count == 5 * 7, "every row's values, row after row")
        #expect(
            connection.bulkColumns.prefix(3) == ["Z_PK bigint", "Z_ENT literal", "Z_OPT literal"]
                && connection.bulkColumns.contains("ZSCORE bigint") && connection.bulkColumns.contains(#"ZNAME text COLLATE "C""#),
            "\(connection.bulkColumns)")
        #expect(result.insertedRows.map(\.objectID.primaryKey) == [1, 2, 3, 4, 5])
        var one = StoreSaveRequest()
        one.inserts.append(.init(objectID: NSManagedObjectID(temporaryFor: item), values: values(item, [:])))
        _ = try core.write(one, on: connection)
        #expect(connection.log.last { $0.hasPrefix("INSERT") }?.contains("VALUES ($1") == true)
    }

    /// An update or delete that changes no row (someone else changed or deleted it since it was read) is a merge
    /// conflict naming the object, and the save goes no further.
    @Test func aVersionMismatchIsAConflictThatStopsTheSave() throws {
        let core = RelationalCore(identifier: "S", schema: schema, dialect: SQLiteDialect(), externalData: nil)
        let connection = RecordingConnection(SQLiteDialect())
        connection.answers = ["SELECT Z_PK FROM": [[.integer(7)]]]
        connection.changingNothing = [#"UPDATE "ZITEM""#]
        #expect {
            _ = try core.write(try save(), on: connection)
        } throws: { error in
            let message = (error as? CoreDataError)?.message ?? ""
            return message.contains("Could not update Item") && message.contains("changed by another context or process")
        }
        #expect(!connection.log.contains { $0.hasPrefix("DELETE") || $0.hasPrefix("INSERT OR IGNORE") }, "\(connection.log)")
        #expect(connection.log.last == #"SELECT Z_PK FROM "ZITEM" WHERE Z_PK = ? ← 7"#, "the conflict asks whether the row still exists")
    }
}
