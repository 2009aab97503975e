import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// The columns of the row a query is on, as the relational core reads them; each back end's connection hands out its
/// own (SQLite's reads the statement's columns in place, with no copy of the row).
///
/// A row is valid only inside the closure it is handed to: the next step of the query reuses it.
package protocol RelationalRow {
    /// The stored value of column `index`.
    func value(_ index: Int) -> SQLArgument
    /// Column `index` as an integer, for columns that are never NULL (primary keys, entity numbers, versions).
    func integer(_ index: Int) -> Int64
    /// Column `index` as an integer, or nil when it is NULL or not an integer.
    func optionalInteger(_ index: Int) -> Int64?
    /// Column `index` as a value of an attribute of `type`: what `SQLStorage.decode` gives for the stored value (nil if
    /// it cannot be one).
    func attributeValue(_ index: Int, type: NSAttributeType) -> AttributeValue?
    /// Whether column `index` holds text whose UTF-8 bytes are `bytes`, compared in place where the back end can.
    func textEquals(_ index: Int, _ bytes: [UInt8]) -> Bool
    /// The UTF-8 bytes of column `index` when it holds text, else nil.
    func textBytes(_ index: Int) -> [UInt8]?
}

extension RelationalRow {
    /// Reads through `value` (a back end with faster readers overrides these).
    package func integer(_ index: Int) -> Int64 {
        if case .integer(let i) = value(index) { return i }
        return 0
    }

    package func optionalInteger(_ index: Int) -> Int64? {
        if case .integer(let i) = value(index) { return i }
        return nil
    }

    package func attributeValue(_ index: Int, type: NSAttributeType) -> AttributeValue? {
        SQLStorage.decode(value(index), as: type)
    }

    package func textEquals(_ index: Int, _ bytes: [UInt8]) -> Bool {
        if case .text(let text) = value(index) { return text.utf8.elementsEqual(bytes) }
        return false
    }

    package func textBytes(_ index: Int) -> [UInt8]? {
        if case .text(let text) = value(index) { return Array(text.utf8) }
        return nil
    }
}

/// What the relational core asks of a back end's connection: run a statement and hand over its rows, run one that
/// writes and say how many rows it changed.
///
/// The core's functions are generic over the connection, so that a back end's row type is read without dynamic
/// dispatch (SQLite's fetches are specialized to its statement reader). SQL reaches the connection in the back end's
/// dialect, with `?` placeholders already rewritten by `SQLDialect.finalize`.
package protocol RelationalConnection {
    associatedtype Row: RelationalRow
    /// The dialect the connection's SQL is written in.
    var dialect: any SQLDialect { get }
    /// Runs a query and hands each row's columns to `body`, in order.
    func forEachRow(sql: String, arguments: [SQLArgument], _ body: (Row) throws -> Void) throws
    /// The same, for SQL the caller runs again and again (batch faulting's reads by key): a connection may keep the
    /// statement prepared. `body` must not run the same SQL again on this connection.
    func forEachRow(reusing sql: String, arguments: [SQLArgument], _ body: (Row) throws -> Void) throws
    /// Runs a statement that returns no rows and returns how many rows it changed.
    @discardableResult
    func run(sql: String, arguments: [SQLArgument]) throws -> Int
}

extension RelationalConnection {
    /// Prepares the statement each time.
    package func forEachRow(reusing sql: String, arguments: [SQLArgument], _ body: (Row) throws -> Void) throws {
        try forEachRow(sql: sql, arguments: arguments, body)
    }

    /// Runs a statement without parameters that returns no rows, and returns how many rows it changed.
    @discardableResult
    package func run(sql: String) throws -> Int { try run(sql: sql, arguments: []) }

    /// Runs a statement written with `?` placeholders (finalized here) and returns how many rows it changed.
    @discardableResult
    package func execute(_ sql: String, _ arguments: [SQLArgument] = []) throws -> Int {
        try run(sql: dialect.finalize(sql), arguments: arguments)
    }

    /// The first column of a query's first row as an integer (placeholders finalized here); nil without a row or
    /// for NULL.
    package func integer(_ sql: String, _ arguments: [SQLArgument] = []) throws -> Int64? {
        var result: Int64?
        var first = true
        try forEachRow(sql: dialect.finalize(sql), arguments: arguments) { row in
            if first { result = row.optionalInteger(0) }
            first = false
        }
        return result
    }
}

/// Binds one row's values, in parameter order, onto a statement a save prepared; each back end binds its own way
/// (SQLite's straight into the statement, with no value boxed per row).
package protocol RelationalBinder {
    mutating func bindNull() throws
    mutating func bind(_ value: Int64) throws
    mutating func bind(_ value: Double) throws
    mutating func bind(_ text: String) throws
    /// Binary data; empty data is an empty blob, not NULL.
    mutating func bind(_ data: Data) throws
}

extension RelationalBinder {
    mutating func bind(_ argument: SQLArgument) throws {
        switch argument {
        case .null: try bindNull()
        case .integer(let i): try bind(i)
        case .real(let d): try bind(d)
        case .text(let s): try bind(s)
        case .blob(let d): try bind(d)
        }
    }

    /// Binds an attribute value as a column of `type` stores it (in Core Data's layout, `coreDataLayout`: a UUID as its
    /// 16 bytes, a decimal refused when its column would round it), and returns the value reading the column back
    /// gives when that differs from `value` (a decimal's text form, say), else nil.
    ///
    /// The values the context hands over already have their attribute's kind, so the common cases bind directly and
    /// need no round trip.
    @inline(__always)
    mutating func bind(_ value: AttributeValue, as type: NSAttributeType, coreDataLayout: Bool) throws -> AttributeValue? {
        // A switch on the value alone, not on a (value, type) tuple: making the tuple copied the value (a reference
        // count for every string bound).
        switch value {
        case .null:
            try bindNull()
            return nil
        case .string(let s) where type == .stringAttributeType:
            try bind(s)
            return nil
        case .integer(let i) where type == .integer64AttributeType || type == .integer32AttributeType || type == .integer16AttributeType:
            try bind(i)
            return nil
        case .double(let d) where type == .doubleAttributeType || type == .floatAttributeType:
            try bind(d)
            return nil
        case .bool(let b) where type == .booleanAttributeType:
            try bind(Int64(b ? 1 : 0))
            return nil
        case .date(let d) where type == .dateAttributeType:
            try bind(d.timeIntervalSinceReferenceDate)
            return nil
        case .data(let d) where type == .binaryDataAttributeType || type == .transformableAttributeType || type == .compositeAttributeType:
            try bind(d)
            return nil
        default:
            let encoded = SQLStorage.encode(value, as: type, uuidBytes: coreDataLayout)
            try bind(encoded)
            if coreDataLayout, type == .decimalAttributeType, case .text(let text) = encoded {
                // Core Data's DECIMAL column turns a number written as text into a REAL, keeping 15 digits: refuse a
                // value that would not survive it rather than store another.
                let read = Double(text).flatMap { $0.isFinite ? SQLStorage.decode(.real($0), as: type) : nil } ?? .decimal(.nan)
                if read != value, text != "NaN" { throw DecimalPrecisionLoss(text: text) }
                return nil
            }
            let read = SQLStorage.decode(encoded, as: type) ?? value
            return read == value ? nil : read
        }
    }
}

/// A statement a save prepared for its own use (dropped with it), run once per row or group of rows.
package protocol RelationalStatement {
    associatedtype Binder: RelationalBinder
    /// Binds every parameter with `body` (which must bind them all, in order), runs the statement and returns how many
    /// rows it changed.
    @discardableResult
    func run(_ body: (inout Binder) throws -> Void) throws -> Int
    /// Binds every parameter with `body` and sends the statement, without waiting for it where the back end can
    /// queue it (its error, if any, is thrown by the connection's next statement); for writes whose row count does not
    /// matter, such as inserts.
    func send(_ body: (inout Binder) throws -> Void) throws
}

extension RelationalStatement {
    package func send(_ body: (inout Binder) throws -> Void) throws { try run(body) }
}

/// A connection inside a writing transaction: what a save and a batch request need beyond reads.
package protocol RelationalWriteConnection: RelationalConnection {
    associatedtype Statement: RelationalStatement
    /// Prepares a statement for this transaction's use.
    func prepare(sql: String) throws -> Statement
    /// How many parameters one statement may have.
    var parameterLimit: Int { get }
    /// Prepares the dialect's `bulkInsert` statement, whose binder takes any number of rows (every column's value in
    /// row order, as for any statement) and sends each column's as one array; `columns` are the (unquoted) names and
    /// the engine's declared type of each column — nil for a column the statement writes as a literal, whose bound
    /// values are dropped. Nil where the back end binds rows one parameter each.
    func prepareBulk(sql: String, columns: [(name: String, type: String?)]) throws -> Statement?
}

extension RelationalWriteConnection {
    package func prepareBulk(sql: String, columns: [(name: String, type: String?)]) throws -> Statement? { nil }
}

/// A decimal that a DECIMAL column of Core Data's layout would not keep exactly (more than 15 significant digits).
struct DecimalPrecisionLoss: Error {
    let text: String

    /// The error a save reports, naming the attribute.
    func error(_ property: NSPropertyDescription) -> CoreDataError {
        CoreDataError(
            .managedObjectValidation,
            "\(property.entity?.name ?? "?").\(property.name) is \(text), which has more significant digits than a Core Data store keeps for a decimal (15); it was not saved.",
            entityName: property.entity?.name, key: property.name)
    }
}
