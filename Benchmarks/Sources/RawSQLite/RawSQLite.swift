// The "raw SQLite" contender: the C API with prepared statements, nothing else. Kept in its own module so that its
// SQLite import never meets GRDB's.
import CSQLite
import Foundation

/// A SQLite error with its message.
public struct RawSQLiteError: Error, CustomStringConvertible {
    /// SQLite's message.
    public let description: String
}

/// A minimal connection for benchmarks.
public final class RawConnection {
    private var db: OpaquePointer?
    /// Statements kept prepared, by SQL text.
    private var prepared: [String: OpaquePointer?] = [:]

    /// Opens the database at `path`.
    ///
    /// In SQLite's multi-thread mode (`SQLITE_OPEN_NOMUTEX`), as GRDB opens its connections: each benchmark uses a
    /// connection from one thread at a time, so the serialized mode's mutex around every `sqlite3_step` and
    /// `sqlite3_column_*` call (a fifth of a plain read's instructions) is work a careful user does not pay for.
    public init(path: String) throws {
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &db, flags, nil) == SQLITE_OK else {
            throw RawSQLiteError(description: "cannot open \(path)")
        }
        sqlite3_busy_timeout(db, 10_000)  // another contender's connection may still be finishing a checkpoint
        try execute("PRAGMA journal_mode=WAL")
    }

    deinit {
        for statement in prepared.values { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    private func error() -> RawSQLiteError { RawSQLiteError(description: String(cString: sqlite3_errmsg(db))) }

    /// Runs SQL statements that return no rows.
    public func execute(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw error() }
    }

    /// Inserts rows with one prepared statement in one transaction.
    ///
    /// Each row is (text, text, int, double, int, …):
    /// values are bound by their Swift type (String, Int64, Double).
    public func insert(_ sql: String, rows: [[Any]]) throws {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw error() }
        defer { sqlite3_finalize(statement) }
        try execute("BEGIN")
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for row in rows {
            for (i, value) in row.enumerated() {
                let index = Int32(i + 1)
                switch value {
                case let s as String: sqlite3_bind_text(statement, index, s, -1, transient)
                case let n as Int64: sqlite3_bind_int64(statement, index, n)
                case let d as Double: sqlite3_bind_double(statement, index, d)
                default: sqlite3_bind_null(statement, index)
                }
            }
            guard sqlite3_step(statement) == SQLITE_DONE else { throw error() }
            sqlite3_reset(statement)
        }
        try execute("COMMIT")
    }

    /// Inserts `count` rows with one prepared statement in one transaction, `bind` binding row `i`'s values to the
    /// statement by their static types: how code written for one table binds its model's fields (no `Any` between).
    public func insert(_ sql: String, count: Int, bind: (RawBinder, Int) -> Void) throws {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else { throw error() }
        defer { sqlite3_finalize(statement) }
        try execute("BEGIN")
        let binder = RawBinder(statement: statement)
        for row in 0..<count {
            bind(binder, row)
            guard sqlite3_step(statement) == SQLITE_DONE else { throw error() }
            sqlite3_reset(statement)
        }
        try execute("COMMIT")
    }

    /// A column's type, for binding a dictionary's value with one cast.
    public enum ColumnType: Sendable {
        case text, integer, real, boolean, date
    }

    /// Inserts rows given as dictionaries (records as an import receives them) with one prepared statement in one
    /// transaction: each row's value for each of `columns`, cast once to the column's known type (Date as seconds
    /// since 2001), as code written for this table would.
    public func insert(_ sql: String, columns: [(name: String, type: ColumnType)], dictionaries: [[String: Any]]) throws {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw error() }
        defer { sqlite3_finalize(statement) }
        try execute("BEGIN")
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for row in dictionaries {
            for (i, column) in columns.enumerated() {
                let index = Int32(i + 1)
                guard let value = row[column.name] else {
                    sqlite3_bind_null(statement, index)
                    continue
                }
                switch column.type {
                case .text: sqlite3_bind_text(statement, index, value as! String, -1, transient)
                case .integer: sqlite3_bind_int64(statement, index, value as! Int64)
                case .real: sqlite3_bind_double(statement, index, value as! Double)
                case .boolean: sqlite3_bind_int64(statement, index, (value as! Bool) ? 1 : 0)
                case .date: sqlite3_bind_double(statement, index, (value as! Date).timeIntervalSinceReferenceDate)
                }
            }
            guard sqlite3_step(statement) == SQLITE_DONE else { throw error() }
            sqlite3_reset(statement)
        }
        try execute("COMMIT")
    }

    /// Runs one statement that returns no rows, bound to `arguments` (strings and 64-bit integers), in a
    /// transaction of its own; the statement is prepared once per connection and SQL text.
    public func executeInTransaction(_ sql: String, _ arguments: [Any]) throws {
        try executeInTransaction([(sql, arguments)])
    }

    /// Runs statements that return no rows, each bound to its arguments (strings and 64-bit integers), in one
    /// transaction; each SQL text is prepared once per connection.
    public func executeInTransaction(_ statements: [(sql: String, arguments: [Any])]) throws {
        try execute("BEGIN IMMEDIATE")
        do {
            for (sql, arguments) in statements { try run(sql, arguments) }
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        try execute("COMMIT")
    }

    /// The statement of `sql`, prepared once per connection.
    private func preparedStatement(_ sql: String) throws -> OpaquePointer? {
        if let statement = prepared[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw error() }
        prepared[sql] = statement
        return statement
    }

    private func run(_ sql: String, _ arguments: [Any]) throws {
        let statement = try preparedStatement(sql)
        defer { sqlite3_reset(statement) }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (i, value) in arguments.enumerated() {
            switch value {
            case let s as String: sqlite3_bind_text(statement, Int32(i + 1), s, -1, transient)
            case let n as Int64: sqlite3_bind_int64(statement, Int32(i + 1), n)
            default: sqlite3_bind_null(statement, Int32(i + 1))
            }
        }
        guard sqlite3_step(statement) == SQLITE_DONE else { throw error() }
    }

    /// The rows a query selects with `keys` bound to its parameters, each column made a value as a program reading
    /// them would (integers, doubles, strings; blobs and NULLs skipped), with the statement prepared once per
    /// connection: returns how many values were made.
    public func readRows(_ sql: String, keys: [Int64]) throws -> Int {
        let statement = try preparedStatement(sql)
        defer { sqlite3_reset(statement) }
        for (i, key) in keys.enumerated() { sqlite3_bind_int64(statement, Int32(i + 1), key) }
        var values: [Any] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw error() }
            for column in 0..<sqlite3_column_count(statement) {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: values.append(sqlite3_column_int64(statement, column))
                case SQLITE_FLOAT: values.append(sqlite3_column_double(statement, column))
                case SQLITE_TEXT: values.append(String(cString: sqlite3_column_text(statement, column)))
                default: break
                }
            }
        }
        return values.count
    }

    /// Steps a query whose first column is an integer: returns that column.
    public func integers(_ sql: String) throws -> [Int64] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw error() }
        defer { sqlite3_finalize(statement) }
        var values: [Int64] = []
        while sqlite3_step(statement) == SQLITE_ROW { values.append(sqlite3_column_int64(statement, 0)) }
        return values
    }

    /// Steps a query whose first column is an integer ID and second a text key: returns both columns.
    public func idsAndKeys(_ sql: String) throws -> (ids: [Int64], keys: [String]) {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw error() }
        defer { sqlite3_finalize(statement) }
        var ids: [Int64] = []
        var keys: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            ids.append(sqlite3_column_int64(statement, 0))
            keys.append(String(cString: sqlite3_column_text(statement, 1)))
        }
        return (ids, keys)
    }

    /// Reads an integer, a text and an integer column into arrays: a list's keys, its section names and the sort value
    /// that follows the section (what a list that places changes by their sort values keeps).
    public func idsKeysAndSortValues(_ sql: String) throws -> (ids: [Int64], keys: [String], sortValues: [Int64]) {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw error() }
        defer { sqlite3_finalize(statement) }
        var ids: [Int64] = []
        var keys: [String] = []
        var sortValues: [Int64] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            ids.append(sqlite3_column_int64(statement, 0))
            keys.append(String(cString: sqlite3_column_text(statement, 1)))
            sortValues.append(sqlite3_column_int64(statement, 2))
        }
        return (ids, keys, sortValues)
    }

    /// Steps every row of a query, reading `columns` columns as text, and returns the row count (for scrolling).
    public func stepAll(_ sql: String, columns: Int32) throws -> Int {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw error() }
        defer { sqlite3_finalize(statement) }
        var count = 0
        var bytes = 0
        while sqlite3_step(statement) == SQLITE_ROW {
            for c in 0..<columns { bytes &+= Int(sqlite3_column_bytes(statement, c)) }
            count += 1
        }
        return count + (bytes == -1 ? 1 : 0)
    }
}

/// Binds values to a prepared statement's parameters (1-based), each by its type's bind function.
public struct RawBinder {
    let statement: OpaquePointer

    /// Binds text, copied by SQLite, by its UTF-8 length.
    public func bind(_ index: Int32, _ value: String) {
        var text = value
        text.withUTF8 { bytes in
            _ = sqlite3_bind_text(
                statement, index, bytes.baseAddress, Int32(bytes.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
        }
    }

    /// Binds an integer.
    public func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(statement, index, value) }

    /// Binds a double.
    public func bind(_ index: Int32, _ value: Double) { sqlite3_bind_double(statement, index, value) }
}
