import NIOCore
import OpenCoreDataModel
import PostgresNIO

/// One column's values of a bulk insert, sent as one PostgreSQL array parameter in the binary format.
///
/// postgres-nio encodes arrays of non-optional elements only; a column's values may be NULL, so the array is written
/// here: a one-dimensional header (element type, count, whether NULLs occur) and each element as its length (-1 for
/// NULL) and bytes, appended as the values are bound.
///
/// Each value is converted to the column's declared type the way PostgreSQL's assignment to that column would convert
/// a parameter of the value's own type (an integer into `double precision`, a real rounded to the nearest integer into
/// `bigint`, a number or bytes into text); what PostgreSQL refuses (text or bytes into a number, anything but bytes into
/// `bytea`) throws, naming the column.
struct PostgreSQLColumnArray: PostgresDynamicTypeEncodable {
    /// The element types the store's columns are declared with.
    enum Element {
        case int8, float8, text, bytea
        /// A column the statement writes as a literal: values bound for it are dropped, and it is not sent.
        case literal

        /// The element type of a column declared `type` (as `PostgreSQLDialect.columnType` spells it), or `literal`.
        init(declared type: String?) {
            guard let type else {
                self = .literal
                return
            }
            switch type.lowercased() {
            case "bigint", "integer", "smallint": self = .int8
            case "double precision", "real": self = .float8
            case "bytea": self = .bytea
            default: self = .text
            }
        }
    }

    let column: String
    let element: Element
    /// The elements written so far: each one's length, then its bytes (a plain array: appending to a `ByteBuffer`
    /// costs a dynamic exclusivity check per write, a third of the time of binding a row).
    private var elements: [UInt8] = []
    private(set) var count: Int32 = 0
    private var hasNulls = false

    init(column: String, declared type: String?) {
        self.column = column
        element = Element(declared: type)
    }

    var psqlType: PostgresDataType {
        switch element {
        case .int8: .int8Array
        case .float8: .float8Array
        case .text: .textArray
        case .bytea, .literal: .byteaArray  // a literal column is never sent
        }
    }

    var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        let elementType: PostgresDataType =
            switch element {
            case .int8: .int8
            case .float8: .float8
            case .text: .text
            case .bytea, .literal: .bytea
            }
        buffer.writeInteger(Int32(1))  // dimensions
        buffer.writeInteger(Int32(hasNulls ? 1 : 0))
        buffer.writeInteger(elementType.rawValue)
        buffer.writeInteger(count)  // the dimension's length
        buffer.writeInteger(Int32(1))  // its lower bound
        buffer.writeBytes(elements)
    }

    // MARK: Appending

    /// Appends an integer in network byte order.
    @inline(__always)
    private mutating func write<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { elements.append(contentsOf: $0) }
    }

    mutating func appendNull() {
        guard element != .literal else { return }
        write(Int32(-1))
        hasNulls = true
        count += 1
    }

    mutating func append(_ value: Int64) throws {
        switch element {
        case .int8:
            write(Int32(8))
            write(value)
            count += 1
        case .float8: try append(Double(value))
        case .text: try append(String(value))
        case .bytea: throw refusal("an integer")
        case .literal: break
        }
    }

    mutating func append(_ value: Double) throws {
        switch element {
        case .float8:
            write(Int32(8))
            write(value.bitPattern)
            count += 1
        case .int8:
            // PostgreSQL rounds a double to the nearest integer, ties to even, and refuses one out of range.
            guard let integer = Int64(exactly: value.rounded(.toNearestOrEven)) else {
                throw CoreDataError(.persistentStoreOperation, "Cannot store \(value) in column \(column): it is out of bigint's range.")
            }
            try append(integer)
        case .text:
            // As PostgreSQL writes a double: integers without a fraction (up to 15 digits), others in their shortest form.
            if value == value.rounded(), abs(value) < 1e15 { try append(String(Int64(value))) } else { try append("\(value)") }
        case .bytea: throw refusal("a real number")
        case .literal: break
        }
    }

    mutating func append(_ text: String) throws {
        if element == .literal { return }
        guard element == .text else { throw refusal("text") }
        var text = text
        text.withUTF8 { bytes in
            write(Int32(bytes.count))
            elements.append(contentsOf: bytes)
        }
        count += 1
    }

    mutating func append(_ data: some Collection<UInt8>) throws {
        switch element {
        case .bytea:
            write(Int32(data.count))
            elements.append(contentsOf: data)
            count += 1
        case .text:
            // bytea's text form, as PostgreSQL assigns bytes to a text column.
            let digits = Array("0123456789abcdef")
            try append("\\x" + String(data.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }))
        case .int8, .float8: throw refusal("binary data")
        case .literal: break
        }
    }

    private func refusal(_ what: String) -> CoreDataError {
        let declared: String =
            switch element {
            case .int8: "bigint"
            case .float8: "double precision"
            case .text: "text"
            case .bytea, .literal: "bytea"
            }
        return CoreDataError(.persistentStoreOperation, "Cannot store \(what) in column \(column), which is \(declared).")
    }
}
