import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel
import OpenCoreDataPredicate
import Testing

@testable import OpenCoreDataStore

/// Reads bind their arguments with SQLite's own functions (`Statement.bind(_:)`), not GRDB's `StatementArguments`.
@Suite struct StatementBindingTests {
    /// Every kind of argument reads back as it went in; text whole, U+0000 included; empty data as an empty blob.
    @Test func argumentsOfEveryKindReadBackAsBound() throws {
        let db = try DatabaseQueue()
        let arguments: [SQLArgument] = [
            .null, .integer(-42), .real(2.5), .text("a\u{0}b"), .text(""), .blob(Data([0, 1, 2])), .blob(Data()),
        ]
        try db.read { db in
            var read: [SQLArgument] = []
            try db.forEachRow(sql: "SELECT ?, ?, ?, ?, ?, ?, ?", arguments: arguments) { row in
                read = (0..<arguments.count).map { row.value($0) }
            }
            #expect(read == arguments, "\(read)")
        }
    }

    /// A count of arguments other than the statement's parameters is a thrown error that says so.
    @Test func theWrongNumberOfArgumentsThrows() throws {
        let db = try DatabaseQueue()
        try db.read { db in
            let error = #expect(throws: DatabaseError.self) {
                try db.forEachRow(sql: "SELECT ?, ?", arguments: [.integer(1)]) { _ in }
            }
            #expect(error?.message?.contains("wrong number of statement arguments: 1, expected 2") == true, "\(String(describing: error))")
        }
    }

    /// A statement whose last step failed is reset before it is bound again: the failure is thrown, not a crash, and the
    /// statement works afterwards.
    @Test func aStatementWhoseLastStepFailedThrowsThenWorksAgain() throws {
        let db = try DatabaseQueue()
        try db.write { db in
            try db.execute(sql: "CREATE TABLE t (v INTEGER CHECK (v > 0))")
            let statement = try db.makeStatement(sql: "INSERT INTO t (v) VALUES (?)")
            try statement.bind([.integer(-1)])
            #expect(throws: DatabaseError.self) { try statement.execute() }
            let reset = #expect(throws: DatabaseError.self) { try statement.bind([.integer(1)]) }
            #expect(reset?.resultCode == .SQLITE_CONSTRAINT, "\(String(describing: reset))")
            try statement.bind([.integer(2)])
            try statement.execute()
            #expect(try Int.fetchOne(db, sql: "SELECT v FROM t") == 2)
        }
    }

    /// A read whose body throws on its first row leaves its (cached) statement reset, not busy on that row (which would
    /// keep the read's snapshot open), and the same read runs again from the start.
    @Test func aReadStoppedByItsBodyLeavesTheStatementReset() throws {
        struct Stop: Error {}
        let db = try DatabaseQueue()
        try db.read { db in
            let sql = "SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT ?"
            #expect(throws: Stop.self) {
                try db.forEachRow(reusing: sql, arguments: [.integer(3)]) { _ in throw Stop() }
            }
            #expect(sqlite3_stmt_busy(try db.cachedStatement(sql: sql).sqliteStatement) == 0)
            var read: [Int64] = []
            try db.forEachRow(reusing: sql, arguments: [.integer(4)]) { row in read.append(row.integer(0)) }
            #expect(read == [1, 2, 4], "\(read)")
        }
    }
}
