import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataStore

/// Inserts on PostgreSQL go in bulk — one `INSERT … SELECT * FROM unnest(…)` of one array per column for a run of
/// rows — and every value, NULL or not, arrives as a row-by-row insert would write it.
@Suite(
    .enabled(
        if: Requirement.postgresIsPresent,
        "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLBulkInsertTests {
    /// More rows than one bulk statement takes, with NULLs scattered through every nullable column: counts, sums and
    /// every value of sampled objects read back as written, keys 1…n, and the entity's recorded maximum key.
    @Test func aRunLongerThanOneStatementKeepsEveryValue() throws {
        let database = try PostgreSQLTestDatabase()
        let model = try PostgreSQLStoreTests.model()
        let count = InsertPlan<PostgreSQLConnection>.maximumBulkRows + 3
        let base = Date(timeIntervalSinceReferenceDate: 700_000_000.5)
        func token(_ n: Int) -> UUID { UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", n))! }
        func expected(_ n: Int) -> [String: Any?] {
            [
                "name": n % 7 == 0 ? nil : "née \(n) 🍐", "code": "c\(n)", "score": n % 11 == 0 ? nil : Int64(n) - 5000,
                "price": n % 5 == 0 ? nil : Decimal(n) / 4, "weight": n % 3 == 0 ? nil : Double(n) / 3,
                "added": n % 13 == 0 ? nil : base.addingTimeInterval(Double(n)), "fresh": n % 2 == 0,
                "token": n % 4 == 0 ? nil : token(n), "photo": n % 6 == 0 ? nil : Data((0..<(n % 9)).map { UInt8(($0 * 37 + n) % 256) }),
            ]
        }
        do {
            let container = NSPersistentContainer(name: "Bulk", managedObjectModel: model)
            container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: database.url)]
            try container.loadPersistentStores()
            let context = container.newBackgroundContext()
            try context.performAndWait {
                for n in 0..<count { try context.make("Item", expected(n)) }
                try context.save()
            }
        }
        let keys = try database.execute("SELECT count(*), min(z_pk), max(z_pk), count(DISTINCT z_pk) FROM zitem")
        #expect(keys == [["\(count)", "1", "\(count)", "\(count)"]])
        #expect(try database.execute("SELECT z_max FROM z_primarykey WHERE z_name = 'Item'") == [["\(count)"]])
        let nulls = try database.execute(
            "SELECT count(zname), count(zscore), count(zprice), count(zweight), count(zadded), count(ztoken), count(zphoto) FROM zitem")
        func present(_ skip: Int) -> String? { String((0..<count).filter { $0 % skip != 0 }.count) }
        let presentCounts: [String?] = [7, 11, 5, 3, 13, 4, 6].map(present)
        #expect(nulls == [presentCounts])
        var sum: Int64 = 0
        for n in 0..<count where n % 11 != 0 { sum += Int64(n) - 5000 }
        #expect(try database.execute("SELECT sum(zscore)::bigint FROM zitem") == [["\(sum)"]])
        // Row order follows the arrays' order: key k holds the (k-1)th insert.
        #expect(try database.execute("SELECT zcode FROM zitem WHERE z_pk IN (1, \(count)) ORDER BY z_pk") == [["c0"], ["c\(count - 1)"]])

        let container = NSPersistentContainer(name: "Bulk", managedObjectModel: model)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: database.url)]
        try container.loadPersistentStores()
        let context = container.viewContext
        for n in [0, 1, 2, 3, 4, 5, 6, 77, 143, count - 4, count - 3, count - 1] {  // the first statement's last row, the next one's first
            let object = try #require(try context.objects("Item", "code == %@", "c\(n)").first, "c\(n)")
            for (key, value) in expected(n) {
                let read = object.value(forKey: key)
                switch value {
                case nil: #expect(read == nil, "c\(n).\(key)")
                case let string as String: #expect(read as? String == string, "c\(n).\(key)")
                case let integer as Int64: #expect(read as? Int64 == integer, "c\(n).\(key)")
                case let decimal as Decimal: #expect(read as? Decimal == decimal, "c\(n).\(key)")
                case let double as Double: #expect(read as? Double == double, "c\(n).\(key)")
                case let date as Date: #expect(read as? Date == date, "c\(n).\(key)")
                case let bool as Bool: #expect(read as? Bool == bool, "c\(n).\(key)")
                case let uuid as UUID: #expect(read as? UUID == uuid, "c\(n).\(key)")
                case let data as Data: #expect(read as? Data == data, "c\(n).\(key)")
                default: Issue.record("unexpected value \(String(describing: value)) for \(key)")
                }
            }
        }
    }

    /// The arrays convert each value to its column's declared type as PostgreSQL's assignment of a parameter of the
    /// value's own type would (integers into reals, reals rounded half to even into integers, numbers and bytes into
    /// text), and refuse what it would refuse, naming the column.
    @Test func columnArraysConvertAsAnAssignmentWouldAndRefuseWhatItRefuses() throws {
        let database = try PostgreSQLTestDatabase()
        _ = try database.execute("CREATE TABLE t (k bigint, v bigint, i bigint, d double precision, s text, b bytea)")
        let connection = try PostgreSQLConnection(try PostgreSQLLocation(database.url))
        defer { connection.close() }
        let dialect = PostgreSQLDialect()
        let columns = ["k", "v", "i", "d", "s", "b"]
        // `v` is a literal: what is bound for it is dropped.
        let sql = try #require(dialect.bulkInsert(intoQuoted: "t", columns: columns, literals: [1: "42"]))
        let types: [String?] = ["bigint", nil, "bigint", "double precision", #"text COLLATE "C""#, "bytea"]
        let described = Array(zip(columns, types)).map { (name: $0.0, type: $0.1) }
        let statement = try #require(try connection.prepareBulk(sql: sql, columns: described))
        let changed = try statement.run { row in
            for k in 1...4 {
                try row.bind(Int64(k))
                try row.bind("dropped")
                try values(k, &row)
            }
        }
        /// Row k's values for i, d, s and b.
        func values(_ k: Int, _ row: inout PostgreSQLBinder) throws {
            switch k {
            case 1:
                try row.bind(Int64.max)
                try row.bind(2 as Int64)
                try row.bind(-7 as Int64)
                try row.bind(Data([0, 255]))
            case 2:
                try row.bind(2.5)
                try row.bind(0.1)
                try row.bind(3.0)
                try row.bind(Data())
            case 3:
                try row.bind(3.5)
                try row.bindNull()
                try row.bind("ünï ✓")
                try row.bindNull()
            default:
                try row.bindNull()
                try row.bind(-0.0)
                try row.bind(Data([1, 171]))
                try row.bind(Data([7]))
            }
        }
        #expect(changed == 4)
        let rows = try database.execute("SELECT v, i, d, s, encode(b, 'hex') FROM t ORDER BY k")
        #expect(
            rows == [
                ["42", String(Int64.max), "2.0", "-7", "00ff"],
                ["42", "2", "0.1", "3", ""],
                ["42", "4", nil, "ünï ✓", nil],
                ["42", nil, "-0.0", "\\x01ab", "07"],
            ])
        for (column, bind) in [
            ("i", { (row: inout PostgreSQLBinder) in try row.bind("12") }),
            ("d", { (row: inout PostgreSQLBinder) in try row.bind(Data([1])) }),
            ("b", { (row: inout PostgreSQLBinder) in try row.bind("x") }),
            ("i", { (row: inout PostgreSQLBinder) in try row.bind(1e19) }),
        ] {
            let one = try #require(try connection.prepareBulk(sql: sql, columns: described))
            #expect {
                try one.run { row in
                    for name in columns { if name == column { try bind(&row) } else { try row.bindNull() } }
                }
            } throws: { error in
                (error as? CoreDataError)?.message.contains("column \(column)") == true
            }
        }
        #expect(try database.execute("SELECT count(*) FROM t") == [["4"]], "a refused row writes nothing")
    }
}
