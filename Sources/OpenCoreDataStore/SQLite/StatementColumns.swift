import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataPredicate

/// The columns of the row a statement is on, read through GRDB's column initializers for concrete types
/// (`DatabaseValue(sqliteStatement:index:)`, `Int64(sqliteStatement:index:)`).
///
/// `Row`'s typed subscripts are generic, and GRDB's generic decoding is not specialized across the module boundary: each
/// value read through them went through value witnesses and type-metadata lookups, which was a third of fetching
/// 100,000 IDs with their sort keys. These initializers are concrete and cost what SQLite's column functions cost.
struct StatementColumns {
    let statement: SQLiteStatement

    /// The stored value of column `index`.
    func value(_ index: Int) -> SQLArgument {
        SQLArgument(DatabaseValue(sqliteStatement: statement, index: CInt(index)))
    }

    /// Column `index` as an integer, for columns that are never NULL (primary keys, entity numbers, versions).
    func integer(_ index: Int) -> Int64 {
        Int64(sqliteStatement: statement, index: CInt(index))
    }

    /// Whether column `index` holds text whose UTF-8 bytes are `bytes`, read in place (no `String` made): rows in
    /// sort order repeat their section key, and comparing bytes costs a fraction of decoding a string.
    func textEquals(_ index: Int, _ bytes: [UInt8]) -> Bool {
        let column = CInt(index)
        guard sqlite3_column_type(statement, column) == SQLITE_TEXT, let text = sqlite3_column_text(statement, column) else {
            return false
        }
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count == bytes.count else { return false }
        return count == 0 || bytes.withUnsafeBufferPointer { memcmp($0.baseAddress!, text, count) == 0 }
    }

    /// The UTF-8 bytes of column `index` when it holds text, else nil.
    func textBytes(_ index: Int) -> [UInt8]? {
        let column = CInt(index)
        guard sqlite3_column_type(statement, column) == SQLITE_TEXT, let text = sqlite3_column_text(statement, column) else {
            return nil
        }
        return Array(UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, column))))
    }

    /// Column `index` as an integer, or nil when it is NULL or not an integer.
    func optionalInteger(_ index: Int) -> Int64? {
        if case .integer(let i) = value(index) { return i }
        return nil
    }
}

extension Database {
    /// Runs `sql` and hands each row's columns to `body`, in order.
    func forEachRow(sql: String, arguments: StatementArguments = [], _ body: (StatementColumns) throws -> Void) throws {
        let statement = try makeStatement(sql: sql)
        let cursor = try Row.fetchCursor(statement, arguments: arguments)
        let columns = StatementColumns(statement: statement.sqliteStatement)
        while try cursor.next() != nil { try body(columns) }
    }
}
