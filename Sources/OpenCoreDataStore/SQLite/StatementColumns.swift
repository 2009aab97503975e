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
///
/// The per-row readers of a batched fetch (`textEquals`, `textBytes`, `attributeValue`) look a column up once with
/// `sqlite3_column_value` and read it with the `sqlite3_value_*` functions: each `sqlite3_column_*` call looks the
/// column up again and enters and leaves the connection's mutex, and a row's section key took three of them. The value
/// is SQLite's own, valid until the statement steps; GRDB serializes every use of the connection, which is what
/// SQLite asks of such (unprotected) values.
package struct StatementColumns: RelationalRow {
    let statement: SQLiteStatement

    /// The stored value of column `index`.
    package func value(_ index: Int) -> SQLArgument {
        // Text is read with its length: GRDB's reader stops at the first NUL, and a string may contain U+0000.
        if let text = text(index) { return .text(String(decoding: text, as: UTF8.self)) }
        return SQLArgument(DatabaseValue(sqliteStatement: statement, index: CInt(index)))
    }

    /// Column `index` as an integer, for columns that are never NULL (primary keys, entity numbers, versions).
    package func integer(_ index: Int) -> Int64 {
        Int64(sqliteStatement: statement, index: CInt(index))
    }

    /// Whether column `index` holds text whose UTF-8 bytes are `bytes`, read in place (no `String` made): rows in
    /// sort order repeat their section key, and comparing bytes costs a fraction of decoding a string.
    package func textEquals(_ index: Int, _ bytes: [UInt8]) -> Bool {
        guard let text = text(index), text.count == bytes.count else { return false }
        return text.isEmpty || bytes.withUnsafeBufferPointer { memcmp($0.baseAddress!, text.baseAddress!, text.count) == 0 }
    }

    /// The UTF-8 bytes of column `index` when it holds text, else nil.
    package func textBytes(_ index: Int) -> [UInt8]? {
        text(index).map(Array.init)
    }

    /// Column `index`'s text in place (SQLite's buffer, valid until the statement steps) when it holds text, else nil:
    /// one column lookup, then the value's type, bytes and length.
    private func text(_ index: Int) -> UnsafeBufferPointer<UInt8>? {
        guard let value = sqlite3_column_value(statement, CInt(index)), sqlite3_value_type(value) == SQLITE_TEXT,
            let text = sqlite3_value_text(value)
        else { return nil }
        return UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(value)))
    }

    /// Column `index` as a value of an attribute of `type`: what `SQLStorage.decode` gives for the stored value
    /// (nil if it cannot be one).
    ///
    /// Numbers and dates are read with SQLite's accessor for their storage class, with no
    /// `DatabaseValue` or `SQLArgument` between; other values go through `decode`.
    package func attributeValue(_ index: Int, type: NSAttributeType) -> AttributeValue? {
        guard let stored = sqlite3_column_value(statement, CInt(index)) else { return .null }
        switch sqlite3_value_type(stored) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER:
            let i = sqlite3_value_int64(stored)
            switch type {
            case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType: return .integer(i)
            case .booleanAttributeType: return .bool(i != 0)
            case .doubleAttributeType, .floatAttributeType: return .double(Double(i))
            case .dateAttributeType: return .date(Date(timeIntervalSinceReferenceDate: Double(i)))
            default: break
            }
        case SQLITE_FLOAT:
            let d = sqlite3_value_double(stored)
            switch type {
            case .doubleAttributeType, .floatAttributeType: return .double(d)
            case .dateAttributeType: return .date(Date(timeIntervalSinceReferenceDate: d))
            default: break
            }
        case SQLITE_TEXT where type == .stringAttributeType:
            // Text for a string attribute, read with its length from the value already looked up.
            guard let text = sqlite3_value_text(stored) else { return .string("") }
            return .string(String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(stored))), as: UTF8.self))
        default: break
        }
        return SQLStorage.decode(value(index), as: type)
    }

    /// Column `index` as an integer, or nil when it is NULL or not an integer.
    package func optionalInteger(_ index: Int) -> Int64? {
        guard let stored = sqlite3_column_value(statement, CInt(index)), sqlite3_value_type(stored) == SQLITE_INTEGER else { return nil }
        return sqlite3_value_int64(stored)
    }
}

extension Database: RelationalConnection {
    package var dialect: any SQLDialect { SQLiteDialect() }

    @discardableResult
    package func run(sql: String, arguments: [SQLArgument]) throws -> Int {
        let statement = try makeStatement(sql: sql)
        try statement.bind(arguments)
        try statement.execute()
        return changesCount
    }

    /// Runs `sql` and hands each row's columns to `body`, in order.
    package func forEachRow(sql: String, arguments: [SQLArgument] = [], _ body: (StatementColumns) throws -> Void) throws {
        try forEachRow(of: try makeStatement(sql: sql), arguments: arguments, body)
    }

    /// The same with the statement from GRDB's cache of this connection: prepared once (SQLite's parser and GRDB's
    /// authorizer were three quarters of batch faulting's time when every read was prepared anew).
    package func forEachRow(reusing sql: String, arguments: [SQLArgument], _ body: (StatementColumns) throws -> Void) throws {
        try forEachRow(of: try cachedStatement(sql: sql), arguments: arguments, body)
    }

    private func forEachRow(of statement: Statement, arguments: [SQLArgument], _ body: (StatementColumns) throws -> Void) throws {
        try statement.bind(arguments)
        let columns = StatementColumns(statement: statement.sqliteStatement)
        // `forEach` steps the statement in one loop (one busy check, nothing handed out per step).
        try StepCursor(statement).forEach { try body(columns) }
    }
}

/// Steps a statement through GRDB (its checks before and after a statement runs) and hands out nothing: the row is
/// read from the statement itself, through `StatementColumns`.
///
/// Rather than `Row.fetchCursor`: a `Row` over a statement maps every column's lowercased name to its index when it is
/// made, a dictionary per read that was a twentieth of a batch fault's instructions, for names nothing here looks up.
/// The statement has been reset and bound (`Statement.bind`); like GRDB's cursors, this one resets it when it goes
/// (a statement left on a row would keep its read transaction open).
private final class StepCursor: DatabaseCursor {
    typealias Element = Void

    let _statement: Statement
    var _isDone = false

    init(_ statement: Statement) { _statement = statement }

    deinit { sqlite3_reset(_statement.sqliteStatement) }

    func _element(sqliteStatement: SQLiteStatement) {}
}

extension Statement {
    /// Resets the statement and binds `arguments` to its parameters, in order, with SQLite's bind functions.
    ///
    /// Text is bound by its UTF-8 length (a string containing U+0000 is bound whole; GRDB binds text up to its first
    /// NUL); SQLite copies text and blobs. GRDB is told the parameters are bound, so its cursors and `execute()` step
    /// the statement as it is.
    ///
    /// Rather than `StatementArguments`: GRDB's conversion of the arguments goes through existentials and generic
    /// code that is not specialized here (a third of a fault's instructions outside SQLite, with a batch of 20 keys).
    ///
    /// - Throws: a `DatabaseError` when the statement's previous step failed (its error, as the reset reports it), the
    ///   count of arguments is not the statement's count of parameters, or a bind fails.
    func bind(_ arguments: [SQLArgument]) throws {
        let expected = Int(sqlite3_bind_parameter_count(sqliteStatement))
        guard arguments.count == expected else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE, message: "wrong number of statement arguments: \(arguments.count), expected \(expected)",
                sql: sql)
        }
        // Reset first, throwing what a failed previous step left (as GRDB's `setArguments` does): GRDB's unchecked
        // reset below would stop the program on it.
        let reset = sqlite3_reset(sqliteStatement)
        guard reset == SQLITE_OK else {
            throw DatabaseError(resultCode: ResultCode(rawValue: reset), message: "cannot reset the statement", sql: sql)
        }
        setUncheckedArguments(StatementArguments())  // clears the bindings and marks them as set
        for (offset, argument) in arguments.enumerated() {
            let position = CInt(offset + 1)
            let code: CInt
            switch argument {
            case .null: code = sqlite3_bind_null(sqliteStatement, position)
            case .integer(let value): code = sqlite3_bind_int64(sqliteStatement, position, value)
            case .real(let value): code = sqlite3_bind_double(sqliteStatement, position, value)
            case .text(var text): code = text.withUTF8 { RowBinder.bindText($0, sqliteStatement, position, nil) }
            case .blob(let data): code = data.withUnsafeBytes { RowBinder.bindBlob($0, sqliteStatement, position, nil) }
            }
            guard code == SQLITE_OK else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code),
                    message: "cannot bind parameter \(position) (\(String(cString: sqlite3_errstr(code))))", sql: sql)
            }
        }
    }
}
