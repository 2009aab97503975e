import Foundation
import NIOCore
import OpenCoreDataModel
import OpenCoreDataPredicate
import PostgresNIO

/// A row of a PostgreSQL result, its columns read as SQLite's storage classes: integers of any width and booleans as
/// integers, reals, text (and decimals, which the store keeps as text), `bytea` as blobs.
///
/// The common binary forms (integers, `double precision`, text, `bytea`) are read straight from the cell's bytes;
/// others go through postgres-nio's decoding.
package struct PostgreSQLRow: RelationalRow {
    /// What the row keeps of a cell: its bytes and how to read them (not its column's name).
    struct Cell {
        let bytes: ByteBuffer?
        let dataType: PostgresDataType
        let format: PostgresFormat

        init(_ cell: PostgresCell) {
            bytes = cell.bytes
            dataType = cell.dataType
            format = cell.format
        }

        /// The cell again, for postgres-nio's decoding.
        var postgresCell: PostgresCell {
            PostgresCell(bytes: bytes, dataType: dataType, format: format, columnName: "", columnIndex: 0)
        }
    }

    let cells: [Cell]

    /// How many columns the row has.
    package var count: Int { cells.count }

    package func value(_ index: Int) -> SQLArgument {
        let cell = cells[index]
        guard let bytes = cell.bytes else { return .null }
        if cell.format == .binary {
            switch cell.dataType {
            case .int8 where bytes.readableBytes == 8: return .integer(bytes.getInteger(at: bytes.readerIndex, as: Int64.self)!)
            case .float8 where bytes.readableBytes == 8:
                return .real(Double(bitPattern: bytes.getInteger(at: bytes.readerIndex, as: UInt64.self)!))
            case .text, .varchar, .name: return .text(bytes.getString(at: bytes.readerIndex, length: bytes.readableBytes) ?? "")
            case .bytea: return .blob(bytes.getData(at: bytes.readerIndex, length: bytes.readableBytes) ?? Data())
            default: break
            }
        }
        let slow = cell.postgresCell
        do {
            switch cell.dataType {
            case .int8: return .integer(try slow.decode(Int64.self))
            case .int4: return .integer(Int64(try slow.decode(Int32.self)))
            case .int2: return .integer(Int64(try slow.decode(Int16.self)))
            case .bool: return .integer(try slow.decode(Bool.self) ? 1 : 0)
            case .float8: return .real(try slow.decode(Double.self))
            case .float4: return .real(Double(try slow.decode(Float.self)))
            case .bytea:
                var buffer = try slow.decode(ByteBuffer.self)
                return .blob(buffer.readData(length: buffer.readableBytes) ?? Data())
            default: return .text(try slow.decode(String.self))
            }
        } catch {
            return .null
        }
    }

    package func integer(_ index: Int) -> Int64 {
        optionalInteger(index) ?? 0
    }

    package func optionalInteger(_ index: Int) -> Int64? {
        let cell = cells[index]
        if cell.format == .binary, cell.dataType == .int8, let bytes = cell.bytes, bytes.readableBytes == 8 {
            return bytes.getInteger(at: bytes.readerIndex, as: Int64.self)
        }
        if case .integer(let i) = value(index) { return i }
        return nil
    }

    package func textEquals(_ index: Int, _ other: [UInt8]) -> Bool {
        let cell = cells[index]
        guard cell.format == .binary, cell.dataType == .text, let bytes = cell.bytes else {
            if case .text(let text) = value(index) { return text.utf8.elementsEqual(other) }
            return false
        }
        return bytes.readableBytes == other.count && bytes.withUnsafeReadableBytes { $0.elementsEqual(other) }
    }

    package func textBytes(_ index: Int) -> [UInt8]? {
        let cell = cells[index]
        guard cell.format == .binary, cell.dataType == .text, let bytes = cell.bytes else {
            if case .text(let text) = value(index) { return Array(text.utf8) }
            return nil
        }
        return bytes.getBytes(at: bytes.readerIndex, length: bytes.readableBytes)
    }
}

/// The rows of a streamed query, handed from the event loop that parses them to the thread that reads them.
///
/// The event loop wakes the reader once a batch has gathered (or the statement ended), not for each row: a wake-up
/// costs more than decoding a row.
final class RowHandoff: @unchecked Sendable {
    private let condition = NSCondition()
    private var rows: [PostgresRow] = []
    private var outcome: Result<PostgresQueryMetadata, any Error>?
    private var dropping = false
    /// Rows gathered before the reader is woken.
    private static let batch = 256

    /// Called on the event loop for each row.
    func add(_ row: PostgresRow) {
        condition.lock()
        defer { condition.unlock() }
        guard !dropping else { return }
        rows.append(row)
        if rows.count == Self.batch { condition.signal() }
    }

    /// Called on the event loop when the statement has ended.
    func finish(_ result: Result<PostgresQueryMetadata, any Error>) {
        condition.lock()
        outcome = result
        condition.signal()
        condition.unlock()
    }

    /// From now on, rows are dropped as they arrive (the reader gave up on them).
    func drop() {
        condition.lock()
        dropping = true
        rows.removeAll()
        condition.unlock()
    }

    /// Waits for a batch of rows and swaps it into `taken` (whose old rows are dropped).
    ///
    /// Returns false once the statement ended and every row was taken. Throws the statement's error, or a timeout
    /// when no row came within `timeout` seconds.
    func take(into taken: inout [PostgresRow], timeout: TimeInterval) throws -> Bool {
        taken.removeAll(keepingCapacity: true)
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while rows.count < Self.batch, outcome == nil {
            if !condition.wait(until: deadline) {
                // Rows that trickled in are progress; none at all within the timeout is not.
                guard !rows.isEmpty else { throw PostgreSQLHandoffFailure(underlying: nil) }
                break
            }
        }
        if !rows.isEmpty {
            swap(&rows, &taken)
            return true
        }
        switch outcome {
        case .failure(let error): throw PostgreSQLHandoffFailure(underlying: error)
        default: return false
        }
    }
}

/// Why a streamed query stopped: its error, or (no error) no rows within the timeout.
struct PostgreSQLHandoffFailure: Error {
    let underlying: (any Error)?
    var timedOut: Bool { underlying == nil }
}
