import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Binds one row's values, in parameter order, onto a statement GRDB prepared for the save being written.
///
/// A save binds every parameter of every row it writes, so the values go straight from `AttributeValue` to SQLite's
/// bind functions (GRDB's own `GRDBSQLite` module): no `DatabaseValue` or `StatementArguments` per row, and text is
/// bound by its UTF-8 length (no C string made, no `strlen`). Text and blobs are copied into the save's `BindArena`
/// and bound in place (`SQLITE_STATIC`), so SQLite neither allocates nor frees a copy per value. Each result is
/// checked; a failed bind throws a `DatabaseError` naming the parameter.
package struct RowBinder: RelationalBinder {
    // Unretained: a binder lives only inside `Statement.run(arena:binding:)`, which holds both (retaining them cost
    // four atomic reference counts per row).
    private unowned(unsafe) let statement: Statement
    private let handle: SQLiteStatement
    private unowned(unsafe) let arena: BindArena
    /// The 1-based index of the next parameter.
    private var position: CInt = 1

    fileprivate init(_ statement: Statement, arena: BindArena) {
        self.statement = statement
        self.handle = statement.sqliteStatement
        self.arena = arena
    }

    package mutating func bindNull() throws { try check(sqlite3_bind_null(handle, position)) }
    package mutating func bind(_ value: Int64) throws { try check(sqlite3_bind_int64(handle, position, value)) }
    package mutating func bind(_ value: Double) throws { try check(sqlite3_bind_double(handle, position, value)) }

    package mutating func bind(_ text: String) throws {
        // The closures capture plain values, not `self`: capturing the binder would retain and release its statement
        // and arena on every value. `run` keeps the arena alive, so the closure may hold it unretained.
        let handle = handle, position = position
        unowned(unsafe) let arena = arena
        // A native string lends its UTF-8 storage as is; only a bridged or small one is copied out first.
        let code =
            text.utf8.withContiguousStorageIfAvailable { Self.bindText($0, handle, position, arena) }
            ?? {
                var text = text
                return text.withUTF8 { Self.bindText($0, handle, position, arena) }
            }()
        try check(code)
    }

    /// Binds text by its UTF-8 length: from `arena` when it has room (`SQLITE_STATIC`), else copied by SQLite.
    static func bindText(_ bytes: UnsafeBufferPointer<UInt8>, _ handle: SQLiteStatement, _ position: CInt, _ arena: BindArena?)
        -> CInt
    {
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            return sqlite3_bind_text(handle, position, "", 0, sqliteTransient)
        }
        guard bytes.count <= Int(CInt.max) else { return SQLITE_TOOBIG }
        if let kept = arena?.keep(UnsafeRawBufferPointer(bytes)) {
            return sqlite3_bind_text(handle, position, kept.assumingMemoryBound(to: CChar.self), CInt(bytes.count), sqliteStatic)
        }
        return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
            sqlite3_bind_text(handle, position, $0, CInt(bytes.count), sqliteTransient)
        }
    }

    /// Binds binary data; empty data is an empty blob (not NULL).
    package mutating func bind(_ data: Data) throws {
        let handle = handle, position = position
        unowned(unsafe) let arena = arena
        try check(data.withUnsafeBytes { Self.bindBlob($0, handle, position, arena) })
    }

    /// Binds binary data (empty data as an empty blob, not NULL): from `arena` when it has room (`SQLITE_STATIC`),
    /// else copied by SQLite.
    static func bindBlob(_ bytes: UnsafeRawBufferPointer, _ handle: SQLiteStatement, _ position: CInt, _ arena: BindArena?) -> CInt {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(handle, position, 0) }
        guard bytes.count <= Int(CInt.max) else { return SQLITE_TOOBIG }
        if let kept = arena?.keep(bytes) { return sqlite3_bind_blob(handle, position, kept, CInt(bytes.count), sqliteStatic) }
        return sqlite3_bind_blob(handle, position, base, CInt(bytes.count), sqliteTransient)
    }

    @inline(__always)
    private mutating func check(_ code: CInt) throws {
        guard code == SQLITE_OK else { throw bindError(code) }
        position += 1
    }

    private func bindError(_ code: CInt) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code),
            message: "cannot bind parameter \(position) (\(String(cString: sqlite3_errstr(code))))",
            sql: statement.sql)
    }
}

/// SQLite copies the bytes during the bind call (the `SQLITE_TRANSIENT` destructor).
let sqliteTransient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
/// SQLite uses the bytes where they are until the parameter is bound again (the `SQLITE_STATIC` destructor).
private let sqliteStatic: sqlite3_destructor_type? = nil

/// Bytes a save binds in place: the text and blobs of the rows being bound for one execution of a statement (one
/// row, or a multi-row insert's rows), copied one after another into a buffer that lives as long as the save's
/// statements (so a statement never holds a pointer to freed memory) and is reused from the start for each execution
/// (every parameter is bound again before a statement runs).
///
/// A value that does not fit in what is left is bound the
/// usual way, copied by SQLite.
final class BindArena {
    static let capacity = 64 * 1024
    private let base = UnsafeMutableRawPointer.allocate(byteCount: BindArena.capacity, alignment: 16)
    private var used = 0

    deinit { base.deallocate() }

    /// Starts binding for a new execution: the previous one's bytes may be overwritten.
    func startExecution() { used = 0 }

    /// Copies `bytes` in and returns where they are, or nil when they do not fit.
    func keep(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawPointer? {
        guard let source = bytes.baseAddress, bytes.count <= Self.capacity - used else { return nil }
        let target = base + used
        target.copyMemory(from: source, byteCount: bytes.count)
        used += (bytes.count + 7) & ~7
        return UnsafeRawPointer(target)
    }
}

extension Statement {
    /// Marks the statement as having its arguments bound, once after it is prepared: from then on GRDB's `execute()`
    /// resets it and steps it with whatever `run(binding:)` bound (a reset keeps bindings).
    func prepareForRowBinding() {
        setUncheckedArguments(StatementArguments())
    }

    /// Resets the statement (checking the result: it fails when the previous step failed), binds its parameters (one
    /// row, or several for a multi-row insert) with `body`, which must bind every parameter, and runs it.
    ///
    /// Only for
    /// statements prepared for the save being written and passed through `prepareForRowBinding()`, never cached ones:
    /// GRDB does not know the values bound here. Text and blobs are bound from `arena`, which must outlive the
    /// statement's use (the save).
    func run(arena: BindArena, binding body: (inout RowBinder) throws -> Void) throws {
        let reset = sqlite3_reset(sqliteStatement)
        guard reset == SQLITE_OK else {
            throw DatabaseError(resultCode: ResultCode(rawValue: reset), message: "cannot reset the statement", sql: sql)
        }
        arena.startExecution()
        var binder = RowBinder(self, arena: arena)
        try body(&binder)
        try withExtendedLifetime(arena) { try execute() }  // the statement reads the arena's bytes as it runs
    }
}

/// A SQLite connection inside a writing transaction, with the arena its statements bind text and blobs from: what the
/// relational core's saves and batch requests write through.
package struct SQLiteWriteConnection: RelationalWriteConnection {
    let db: Database
    let arena: BindArena

    init(_ db: Database, arena: BindArena = BindArena()) {
        self.db = db
        self.arena = arena
    }

    package var dialect: any SQLDialect { SQLiteDialect() }

    package func forEachRow(sql: String, arguments: [SQLArgument], _ body: (StatementColumns) throws -> Void) throws {
        try db.forEachRow(sql: sql, arguments: arguments, body)
    }

    package func forEachRow(reusing sql: String, arguments: [SQLArgument], _ body: (StatementColumns) throws -> Void) throws {
        try db.forEachRow(reusing: sql, arguments: arguments, body)
    }

    @discardableResult
    package func run(sql: String, arguments: [SQLArgument]) throws -> Int { try db.run(sql: sql, arguments: arguments) }

    /// A statement for this transaction only (not GRDB's cache: GRDB does not know the values `RowBinder` binds).
    package func prepare(sql: String) throws -> SQLiteSaveStatement {
        let statement = try db.makeStatement(sql: sql)
        statement.prepareForRowBinding()
        return SQLiteSaveStatement(statement: statement, arena: arena)
    }

    package var parameterLimit: Int { Int(sqlite3_limit(db.sqliteConnection, SQLITE_LIMIT_VARIABLE_NUMBER, -1)) }
}

/// A statement a save prepared, bound by `RowBinder` from the save's arena.
package struct SQLiteSaveStatement: RelationalStatement {
    let statement: Statement
    let arena: BindArena

    @discardableResult
    package func run(_ body: (inout RowBinder) throws -> Void) throws -> Int {
        try statement.run(arena: arena, binding: body)
        return Int(sqlite3_changes(sqlite3_db_handle(statement.sqliteStatement)))
    }
}
