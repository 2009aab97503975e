import Foundation
import NIOCore
import OpenCoreDataModel
import OpenCoreDataPredicate
import PostgresNIO

/// A statement a save prepared: its text, run with the values each row binds.
package struct PostgreSQLStatement: RelationalStatement {
    let sql: String
    let connection: PostgreSQLConnection
    /// For a bulk insert, the columns (name, declared type) whose values are sent as one array each (no type: a
    /// literal of the statement).
    var arrayColumns: [(name: String, type: String?)]?

    @discardableResult
    package func run(_ body: (inout PostgreSQLBinder) throws -> Void) throws -> Int {
        var binder = PostgreSQLBinder(arrayColumns: arrayColumns)
        try body(&binder)
        return try connection.query(sql, try binder.finishedBindings()).metadata.rows ?? 0
    }

    /// Sends the statement without waiting: the connection's next statement waits for it and throws its error.
    package func send(_ body: (inout PostgreSQLBinder) throws -> Void) throws {
        var binder = PostgreSQLBinder(arrayColumns: arrayColumns)
        try body(&binder)
        connection.send(sql, try binder.finishedBindings())
    }
}

/// Binds a row's values for PostgreSQL: 64-bit integers, `double precision`, text, `bytea` — one parameter each, or,
/// for a bulk insert, each appended to its column's array (columns in turn, row after row).
package struct PostgreSQLBinder: RelationalBinder {
    private var bindings = PostgresBindings()
    private var arrays: [PostgreSQLColumnArray]
    /// The array the next value goes to.
    private var next = 0

    init(arrayColumns: [(name: String, type: String?)]? = nil) {
        arrays = arrayColumns?.map { PostgreSQLColumnArray(column: $0.name, declared: $0.type) } ?? []
    }

    /// The parameters to send: the values bound, or the column arrays (which must hold as many values each).
    func finishedBindings() throws -> PostgresBindings {
        guard !arrays.isEmpty else { return bindings }
        let sent = arrays.filter { $0.element != .literal }
        guard next == 0, sent.allSatisfy({ $0.count == sent[0].count }) else {
            throw CoreDataError(.persistentStoreOperation, "A bulk insert was given a partial row (\(arrays.count) columns).")
        }
        var bindings = PostgresBindings(capacity: sent.count)
        for array in sent { bindings.append(array) }
        return bindings
    }

    /// The index of the array the next value goes to, advancing to the following one.
    private mutating func nextArray() -> Int {
        let index = next
        next = next + 1 == arrays.count ? 0 : next + 1
        return index
    }

    package mutating func bindNull() throws {
        if arrays.isEmpty { bindings.appendNull() } else { arrays[nextArray()].appendNull() }
    }
    package mutating func bind(_ value: Int64) throws {
        if arrays.isEmpty { bindings.append(value) } else { try arrays[nextArray()].append(value) }
    }
    package mutating func bind(_ value: Double) throws {
        if arrays.isEmpty { bindings.append(value) } else { try arrays[nextArray()].append(value) }
    }
    package mutating func bind(_ text: String) throws {
        if arrays.isEmpty { bindings.append(text) } else { try arrays[nextArray()].append(text) }
    }
    package mutating func bind(_ data: Data) throws {
        if arrays.isEmpty { bindings.append(ByteBuffer(bytes: data)) } else { try arrays[nextArray()].append(data) }
    }
}
