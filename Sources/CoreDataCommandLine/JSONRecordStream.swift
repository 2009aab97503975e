import Foundation

/// Reads an import file's records one at a time, so that memory holds one record and a read buffer, not the file.
///
/// The file is either a JSON array of records or a JSON object whose keys are entity names and whose values are
/// arrays of records. The stream walks that outer structure itself and hands each record to `JSONReader`, which
/// parses it with the same strict rules; errors name the line and column in the file.
///
/// For example:
/// ```swift
/// var stream = try JSONRecordStream(path: "products.json")
/// if try stream.begin() == .array {
///     while let record = try stream.nextRecord() { print(record) }
/// }
/// try stream.finish()
/// ```
struct JSONRecordStream {
    /// What the file holds at its top level.
    enum Shape: Equatable {
        /// An array of records.
        case array
        /// An object whose values are arrays of records; read each with `nextEntity()`, then `nextRecord()`.
        case object
    }

    /// Thrown when the top level is valid JSON but neither an array nor an object.
    struct NotAnArrayOrObject: Error {}

    /// Thrown when a key of the top-level object has a value (valid JSON) that is not an array.
    struct NotAnArray: Error {
        let key: String
    }

    private let handle: FileHandle
    private let chunkSize: Int
    private var buffer: [UInt8] = []
    /// The next unread byte of `buffer`.
    private var index = 0
    /// The line and column of `buffer[0]` in the file.
    private var origin = JSONPosition.start
    private var atEnd = false
    /// Whether the next item of the array or object being read is its first (no comma before it).
    private var first = true
    private var inArray = false
    private var shape: Shape?
    private var keys: Set<String> = []

    /// Opens the file at `path` for reading.
    ///
    /// - Throws: `ToolFailure` when the file cannot be opened.
    init(path: String, chunkSize: Int = 1 << 20) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw ToolFailure("Cannot read \(path).") }
        self.handle = handle
        self.chunkSize = chunkSize
    }

    /// Reads the start of the top-level value.
    ///
    /// - Throws: `JSONSyntaxError`, or `NotAnArrayOrObject` for valid JSON of another kind.
    mutating func begin() throws -> Shape {
        try fill(3)
        // A UTF-8 byte order mark is not JSON, but editors write it; skip it.
        if buffer.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        try skipWhitespace()
        switch try peek() {
        case UInt8(ascii: "["):
            index += 1
            (shape, inArray, first) = (.array, true, true)
            return .array
        case UInt8(ascii: "{"):
            index += 1
            (shape, first) = (.object, true)
            return .object
        default:
            _ = try value()
            try finish()
            throw NotAnArrayOrObject()
        }
    }

    /// The next entity name of a top-level object, with the stream placed at the first record of its array; nil at
    /// the end of the object.
    ///
    /// - Throws: `JSONSyntaxError` (also for a key that appears twice), or `NotAnArray` naming a key whose value is
    ///   not an array.
    mutating func nextEntity() throws -> String? {
        precondition(shape == .object && !inArray, "nextEntity() reads the keys of a top-level object")
        guard let key = try nextKey() else { return nil }
        guard try peek() == UInt8(ascii: "[") else {
            // Reported once the rest of the file is known to be JSON: a syntax error is the first thing to mend.
            _ = try value()
            while try nextKey() != nil { _ = try value() }
            try finish()
            throw NotAnArray(key: key)
        }
        index += 1
        (inArray, first) = (true, true)
        return key
    }

    /// The next key of the top-level object and its colon; nil at the end of the object.
    private mutating func nextKey() throws -> String? {
        guard try nextItem(closing: "}") else { return nil }
        guard try peek() == UInt8(ascii: "\"") else { throw failure("unexpected \(try describeNext()); expected a key in double quotes") }
        let keyPosition = origin.advanced(over: buffer[0..<index])  // reading the key may drop the bytes before it
        let key = try value() as? String ?? ""  // a value that starts with '"' is a string
        guard keys.insert(key).inserted else {
            throw JSONSyntaxError(at: keyPosition, reason: "the key \"\(key)\" appears twice in one object")
        }
        try skipWhitespace()
        guard try consume(UInt8(ascii: ":")) else { throw failure("unexpected \(try describeNext()); expected ':' after the key") }
        try skipWhitespace()
        return key
    }

    /// The next record of the array being read, parsed; nil at the end of the array.
    ///
    /// - Throws: `JSONSyntaxError`.
    mutating func nextRecord() throws -> Any? {
        precondition(inArray, "nextRecord() reads the records of an array")
        guard try nextItem(closing: "]") else {
            inArray = false
            first = false  // the next key of a top-level object follows a comma
            return nil
        }
        return try value()
    }

    /// Checks that nothing but white space follows the top-level value.
    ///
    /// - Throws: `JSONSyntaxError`.
    mutating func finish() throws {
        try skipWhitespace()
        guard try peek() == nil else { throw failure("unexpected \(try describeNext()) after the JSON value") }
    }

    // MARK: Structure

    /// Moves past the comma before the next item, or past `closing`; returns whether an item follows.
    private mutating func nextItem(closing: Character) throws -> Bool {
        let close = closing.asciiValue!
        try skipWhitespace()
        if try consume(close) { return false }
        if !first {
            guard try consume(UInt8(ascii: ",")) else {
                throw failure("unexpected \(try describeNext()); expected ',' or '\(closing)'")
            }
            try skipWhitespace()
            if try peek() == close { throw failure("a trailing comma before '\(closing)'") }
        }
        first = false
        return true
    }

    /// Parses the JSON value that starts at the next byte.
    private mutating func value() throws -> Any {
        let end = try endOfValue()
        do {
            let value = try JSONReader.parse(buffer[index..<end])
            index = end
            return value
        } catch let error as JSONSyntaxError {
            // Counted only for the error: counting the position of every record would read the buffer again each time.
            throw error.placed(at: origin.advanced(over: buffer[0..<index]))
        }
    }

    /// The end of the value that starts at `index`, reading more of the file as needed.
    ///
    /// Only brackets and strings are followed here, so that the value is cut where it ends; `JSONReader` then checks
    /// everything else. Input that never closes runs to the end of the file, where the reader reports it.
    private mutating func endOfValue() throws -> Int {
        var offset = 0  // from `index`, which a refill may move
        var depth = 0
        var inString = false
        var escaped = false
        while true {
            if index + offset == buffer.count {
                guard try readMore() else { return buffer.count }
            }
            let byte = buffer[index + offset]
            offset += 1
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 0 { return index + offset }
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return index + offset - 1 }  // closes the enclosing array: a scalar ended before it
                depth -= 1
                if depth == 0 { return index + offset }
            case UInt8(ascii: ","), 0x20, 0x09, 0x0A, 0x0D:
                if depth == 0 { return index + offset - 1 }
            default: break
            }
        }
    }

    // MARK: Bytes

    private mutating func peek() throws -> UInt8? {
        if index == buffer.count, try !readMore() { return nil }
        return buffer[index]
    }

    private mutating func consume(_ byte: UInt8) throws -> Bool {
        guard try peek() == byte else { return false }
        index += 1
        return true
    }

    private mutating func skipWhitespace() throws {
        while let byte = try peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    /// Reads until `count` bytes are buffered past `index`, or the file ends.
    private mutating func fill(_ count: Int) throws {
        while buffer.count - index < count, try readMore() {}
    }

    /// Appends the next chunk of the file to the buffer, first dropping the bytes already read; false at the end.
    private mutating func readMore() throws -> Bool {
        guard !atEnd else { return false }
        if index > 0 {
            origin = origin.advanced(over: buffer[0..<index])
            buffer.removeSubrange(0..<index)
            index = 0
        }
        let chunk: Data?
        do {
            chunk = try handle.read(upToCount: chunkSize)
        } catch {
            throw ToolFailure("Cannot read the import file: \(error.localizedDescription)")
        }
        guard let chunk, !chunk.isEmpty else {
            atEnd = true
            return false
        }
        buffer.append(contentsOf: chunk)
        return true
    }

    private mutating func describeNext() throws -> String {
        guard let byte = try peek() else { return "end of input" }
        return (0x21..<0x7F).contains(byte) ? "'\(String(UnicodeScalar(byte)))'" : String(format: "0x%02X", byte)
    }

    private func failure(_ reason: String) -> JSONSyntaxError {
        JSONSyntaxError(at: origin.advanced(over: buffer[0..<index]), reason: reason)
    }
}
