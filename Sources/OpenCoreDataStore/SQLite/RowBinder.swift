import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Binds one row's values, in parameter order, onto a statement GRDB prepared for the save being written.
///
/// A save binds every parameter of every row it writes, so the values go straight from `AttributeValue` to SQLite's
/// bind functions (GRDB's own `GRDBSQLite` module): no `DatabaseValue` or `StatementArguments` per row, and text is
/// bound by its UTF-8 length (no C string made, no `strlen`). Each result is checked; a failed bind throws a
/// `DatabaseError` naming the parameter.
struct RowBinder {
    private let statement: Statement
    private let handle: SQLiteStatement
    /// The 1-based index of the next parameter.
    private var position: CInt = 1

    fileprivate init(_ statement: Statement) {
        self.statement = statement
        self.handle = statement.sqliteStatement
    }

    mutating func bindNull() throws { try check(sqlite3_bind_null(handle, position)) }
    mutating func bind(_ value: Int64) throws { try check(sqlite3_bind_int64(handle, position, value)) }
    mutating func bind(_ value: Double) throws { try check(sqlite3_bind_double(handle, position, value)) }

    mutating func bind(_ text: String) throws {
        // A native string lends its UTF-8 storage as is; only a bridged or small one is copied out first.
        let code =
            text.utf8.withContiguousStorageIfAvailable(bindText)
            ?? {
                var text = text
                return text.withUTF8(bindText)
            }()
        try check(code)
    }

    private func bindText(_ bytes: UnsafeBufferPointer<UInt8>) -> CInt {
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            return sqlite3_bind_text(handle, position, "", 0, sqliteTransient)
        }
        guard bytes.count <= Int(CInt.max) else { return SQLITE_TOOBIG }
        return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
            sqlite3_bind_text(handle, position, $0, CInt(bytes.count), sqliteTransient)
        }
    }

    /// Binds binary data; empty data is an empty blob (not NULL).
    mutating func bind(_ data: Data) throws {
        let code = data.withUnsafeBytes { bytes -> CInt in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(handle, position, 0) }
            guard bytes.count <= Int(CInt.max) else { return SQLITE_TOOBIG }
            return sqlite3_bind_blob(handle, position, base, CInt(bytes.count), sqliteTransient)
        }
        try check(code)
    }

    mutating func bind(_ argument: SQLArgument) throws {
        switch argument {
        case .null: try bindNull()
        case .integer(let i): try bind(i)
        case .real(let d): try bind(d)
        case .text(let s): try bind(s)
        case .blob(let d): try bind(d)
        }
    }

    /// Binds an attribute value as a column of `type` stores it, and returns the value reading the column back gives
    /// when that differs from `value` (a decimal's text form, say), else nil. The values the context hands over
    /// already have their attribute's kind, so the common cases bind directly and need no round trip.
    mutating func bind(_ value: AttributeValue, as type: NSAttributeType) throws -> AttributeValue? {
        switch (value, type) {
        case (.null, _): try bindNull()
        case (.string(let s), .stringAttributeType): try bind(s)
        case (.integer(let i), .integer64AttributeType), (.integer(let i), .integer32AttributeType),
            (.integer(let i), .integer16AttributeType):
            try bind(i)
        case (.double(let d), .doubleAttributeType), (.double(let d), .floatAttributeType): try bind(d)
        case (.bool(let b), .booleanAttributeType): try bind(Int64(b ? 1 : 0))
        case (.date(let d), .dateAttributeType): try bind(d.timeIntervalSinceReferenceDate)
        case (.data(let d), .binaryDataAttributeType): try bind(d)
        default:
            let encoded = SQLStorage.encode(value, as: type)
            try bind(encoded)
            let read = SQLStorage.decode(encoded, as: type) ?? value
            return read == value ? nil : read
        }
        return nil
    }

    private mutating func check(_ code: CInt) throws {
        guard code == SQLITE_OK else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code),
                message: "cannot bind parameter \(position) (\(String(cString: sqlite3_errstr(code))))",
                sql: statement.sql)
        }
        position += 1
    }
}

/// SQLite copies the bytes during the bind call (the `SQLITE_TRANSIENT` destructor).
private let sqliteTransient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

extension Statement {
    /// Marks the statement as having its arguments bound, once after it is prepared: from then on GRDB's `execute()`
    /// resets it and steps it with whatever `run(binding:)` bound (a reset keeps bindings).
    func prepareForRowBinding() {
        setUncheckedArguments(StatementArguments())
    }

    /// Resets the statement (checking the result: it fails when the previous step failed), binds one row with
    /// `body`, which must bind every parameter, and runs it. Only for statements prepared for the save being written
    /// and passed through `prepareForRowBinding()`, never cached ones: GRDB does not know the values bound here.
    func run(binding body: (inout RowBinder) throws -> Void) throws {
        let reset = sqlite3_reset(sqliteStatement)
        guard reset == SQLITE_OK else {
            throw DatabaseError(resultCode: ResultCode(rawValue: reset), message: "cannot reset the statement", sql: sql)
        }
        var binder = RowBinder(self)
        try body(&binder)
        try execute()
    }
}
