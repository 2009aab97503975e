import Foundation

/// A JSON number as it was written, so that it converts exactly to the attribute it is for: `18446744073709551615`
/// is too large for Integer 64 (not -1), `12.30` is the decimal 12.30 (not the double nearest to it).
struct JSONNumber: Equatable, CustomStringConvertible {
    /// The literal, in JSON's number syntax (`-12`, `0.5`, `1e19`).
    let text: String

    var description: String { text }

    /// Whether the literal is written as an integer (no fraction, no exponent).
    var isIntegerLiteral: Bool { !text.contains { $0 == "." || $0 == "e" || $0 == "E" } }
}

/// A JSON syntax error with the line and column (both from 1) where the reader stopped.
struct JSONSyntaxError: Error, CustomStringConvertible {
    let line: Int
    let column: Int
    let reason: String
    var description: String { "line \(line), column \(column): \(reason)" }

    init(at position: JSONPosition, reason: String) {
        (line, column) = (position.line, position.column)
        self.reason = reason
    }

    /// This error, found in a piece of a longer text, placed in the longer text: `origin` is where the piece starts.
    func placed(at origin: JSONPosition) -> JSONSyntaxError {
        let position =
            line == 1
            ? JSONPosition(line: origin.line, column: origin.column + column - 1)
            : JSONPosition(line: origin.line + line - 1, column: column)
        return JSONSyntaxError(at: position, reason: reason)
    }
}

/// A strict JSON reader (RFC 8259): no trailing commas, comments, single quotes, NaN or leading zeros; text must be
/// UTF-8; a key may appear once per object.
///
/// Errors name the line and column.
///
/// Values come out as Foundation-style trees, as the commands use them: `NSNull`, `Bool`, `JSONNumber`, `String`,
/// `[Any]` and `[String: Any]`. Numbers keep their literal text, and strings may contain U+0000 (`\u0000`).
///
/// For example:
/// ```swift
/// let value = try JSONReader.parse(Data(#"{"price": 12.30}"#.utf8))   // ["price": JSONNumber(text: "12.30")]
/// ```
struct JSONReader {
    /// How deeply arrays and objects may nest before the reader refuses the input (it recurses once per level).
    static let maximumDepth = 512

    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Parses one JSON value that fills `data` (white space around it allowed).
    ///
    /// - Throws: `JSONSyntaxError` naming the line, column and what was expected.
    static func parse(_ data: Data) throws -> Any {
        var reader = JSONReader([UInt8](data))
        // A UTF-8 byte order mark is not JSON, but editors write it; skip it.
        if reader.bytes.starts(with: [0xEF, 0xBB, 0xBF]) { reader.index = 3 }
        return try reader.whole()
    }

    /// Parses one JSON value that fills `bytes` (white space around it allowed).
    ///
    /// - Throws: `JSONSyntaxError` naming the line and column in `bytes`.
    static func parse(_ bytes: ArraySlice<UInt8>) throws -> Any {
        var reader = JSONReader(Array(bytes))
        return try reader.whole()
    }

    private mutating func whole() throws -> Any {
        skipWhitespace()
        let value = try value()
        skipWhitespace()
        guard index == bytes.count else { throw failure("unexpected \(describeNext()) after the JSON value") }
        return value
    }

    // MARK: Values

    private mutating func value() throws -> Any {
        guard index < bytes.count else { throw failure("unexpected end of input; expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try nested { try $0.object() }
        case UInt8(ascii: "["): return try nested { try $0.array() }
        case UInt8(ascii: "\""): return try string()
        case UInt8(ascii: "t"): return try literal("true", true)
        case UInt8(ascii: "f"): return try literal("false", false)
        case UInt8(ascii: "n"): return try literal("null", NSNull())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected \(describeNext()); expected a value")
        }
    }

    private mutating func nested<T>(_ read: (inout JSONReader) throws -> T) throws -> T {
        guard depth < Self.maximumDepth else { throw failure("arrays and objects nest more than \(Self.maximumDepth) levels deep") }
        depth += 1
        defer { depth -= 1 }
        return try read(&self)
    }

    private mutating func object() throws -> [String: Any] {
        index += 1  // {
        var result: [String: Any] = [:]
        skipWhitespace()
        if consume(UInt8(ascii: "}")) { return result }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw failure("unexpected \(describeNext()); expected a key in double quotes")
            }
            let keyStart = index
            let key = try string()
            guard result[key] == nil else {
                // The position is counted only for the error: counting it for every key made reading quadratic.
                throw failure("the key \"\(key)\" appears twice in one object", at: keyStart)
            }
            skipWhitespace()
            guard consume(UInt8(ascii: ":")) else { throw failure("unexpected \(describeNext()); expected ':' after the key") }
            skipWhitespace()
            result[key] = try value()
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return result }
            guard consume(UInt8(ascii: ",")) else { throw failure("unexpected \(describeNext()); expected ',' or '}'") }
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { throw failure("a trailing comma before '}'") }
        }
    }

    private mutating func array() throws -> [Any] {
        index += 1  // [
        var result: [Any] = []
        skipWhitespace()
        if consume(UInt8(ascii: "]")) { return result }
        while true {
            skipWhitespace()
            result.append(try value())
            skipWhitespace()
            if consume(UInt8(ascii: "]")) { return result }
            guard consume(UInt8(ascii: ",")) else { throw failure("unexpected \(describeNext()); expected ',' or ']'") }
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { throw failure("a trailing comma before ']'") }
        }
    }

    private mutating func literal(_ word: String, _ value: Any) throws -> Any {
        let utf8 = Array(word.utf8)
        guard bytes.count - index >= utf8.count, Array(bytes[index..<index + utf8.count]) == utf8 else {
            throw failure("unexpected \(describeNext()); expected a value")
        }
        index += utf8.count
        return value
    }

    private mutating func number() throws -> JSONNumber {
        let start = index
        _ = consume(UInt8(ascii: "-"))
        guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a number needs a digit after '-'") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw failure("a number may not start with 0 (leading zeros)") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if consume(UInt8(ascii: ".")) {
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a number needs digits after '.'") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a number needs digits in its exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        return JSONNumber(text: String(decoding: bytes[start..<index], as: UTF8.self))
    }

    private mutating func string() throws -> String {
        index += 1  // opening quote
        var scalars = String.UnicodeScalarView()
        var runStart = index  // a run of plain bytes, validated as UTF-8 when it ends
        func flush(_ reader: JSONReader, upTo end: Int) throws {
            guard runStart < end else { return }
            guard let text = String(validating: reader.bytes[runStart..<end], as: UTF8.self) else {
                throw reader.failure("a string that is not valid UTF-8", at: reader.firstInvalidUTF8(from: runStart, to: end))
            }
            scalars.append(contentsOf: text.unicodeScalars)
        }
        while true {
            guard index < bytes.count else { throw failure("unexpected end of input inside a string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                try flush(self, upTo: index)
                index += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                try flush(self, upTo: index)
                scalars.append(try escape())
                runStart = index
            case 0..<0x20:
                throw failure("a control character (U+\(String(format: "%04X", byte))) inside a string; write it as an escape such as \\n")
            default:
                index += 1
            }
        }
    }

    private mutating func escape() throws -> Unicode.Scalar {
        index += 1  // backslash
        guard index < bytes.count else { throw failure("unexpected end of input in an escape") }
        let letter = bytes[index]
        index += 1
        switch letter {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let first = try hex4()
            if (0xD800...0xDBFF).contains(first) {
                guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw failure("a lone high surrogate \\u\(String(format: "%04X", first)) (it must be followed by a low surrogate)")
                }
                index += 2
                let second = try hex4()
                guard (0xDC00...0xDFFF).contains(second) else {
                    throw failure("\\u\(String(format: "%04X", second)) cannot follow a high surrogate")
                }
                return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))!
            }
            guard let scalar = Unicode.Scalar(first) else {
                throw failure("a lone low surrogate \\u\(String(format: "%04X", first))")
            }
            return scalar
        default:
            index -= 1
            throw failure("unknown escape '\\\(describeByte(letter))'")
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard bytes.count - index >= 4 else { throw failure("\\u needs four hexadecimal digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = hexValue(bytes[index]) else { throw failure("\\u needs four hexadecimal digits") }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    // MARK: Bytes

    private mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    private mutating func consume(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(byte - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    private func describeNext() -> String {
        index < bytes.count ? "'\(describeByte(bytes[index]))'" : "end of input"
    }

    private func describeByte(_ byte: UInt8) -> String {
        (0x21..<0x7F).contains(byte) ? String(UnicodeScalar(byte)) : String(format: "0x%02X", byte)
    }

    /// The offset of the first byte in `start..<end` that does not continue a valid UTF-8 sequence.
    private func firstInvalidUTF8(from start: Int, to end: Int) -> Int {
        var offset = start
        while offset < end {
            let length: Int
            switch bytes[offset] {
            case 0..<0x80: length = 1
            case 0xC2...0xDF: length = 2
            case 0xE0...0xEF: length = 3
            case 0xF0...0xF4: length = 4
            default: return offset
            }
            guard offset + length <= end, String(validating: bytes[offset..<offset + length], as: UTF8.self) != nil else { return offset }
            offset += length
        }
        return start
    }

    private func failure(_ reason: String, at offset: Int? = nil) -> JSONSyntaxError {
        JSONSyntaxError(at: JSONPosition.start.advanced(over: bytes[0..<min(offset ?? index, bytes.count)]), reason: reason)
    }
}

/// A line and column in a text, both counted from 1; columns count characters, not bytes.
struct JSONPosition: Equatable {
    var line: Int
    var column: Int

    /// The first character of a text.
    static let start = JSONPosition(line: 1, column: 1)

    /// The position just after `bytes`, which follow this position.
    ///
    /// - Complexity: O(n) in the length of `bytes`.
    func advanced(over bytes: ArraySlice<UInt8>) -> JSONPosition {
        guard let lastNewline = bytes.lastIndex(of: 0x0A) else {
            return JSONPosition(line: line, column: column + Self.characters(in: bytes))
        }
        let newlines = bytes.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
        return JSONPosition(line: line + newlines, column: 1 + Self.characters(in: bytes[(lastNewline + 1)...]))
    }

    /// The characters in UTF-8 bytes: every byte that is not a continuation byte starts one.
    private static func characters(in bytes: ArraySlice<UInt8>) -> Int {
        bytes.reduce(0) { $0 + ($1 & 0xC0 != 0x80 ? 1 : 0) }
    }
}
