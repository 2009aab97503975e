import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel
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

    /// Column `index` as a value of an attribute of `type`: what `SQLStorage.decode` gives for the stored value
    /// (nil if it cannot be one). Numbers and dates are read with SQLite's accessor for their storage class, with no
    /// `DatabaseValue` or `SQLArgument` between; other values go through `decode`.
    func attributeValue(_ index: Int, type: NSAttributeType) -> AttributeValue? {
        let column = CInt(index)
        switch sqlite3_column_type(statement, column) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER:
            let i = sqlite3_column_int64(statement, column)
            switch type {
            case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType: return .integer(i)
            case .booleanAttributeType: return .bool(i != 0)
            case .doubleAttributeType, .floatAttributeType: return .double(Double(i))
            case .dateAttributeType: return .date(Date(timeIntervalSinceReferenceDate: Double(i)))
            default: break
            }
        case SQLITE_FLOAT:
            let d = sqlite3_column_double(statement, column)
            switch type {
            case .doubleAttributeType, .floatAttributeType: return .double(d)
            case .dateAttributeType: return .date(Date(timeIntervalSinceReferenceDate: d))
            default: break
            }
        default: break
        }
        return SQLStorage.decode(value(index), as: type)
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
