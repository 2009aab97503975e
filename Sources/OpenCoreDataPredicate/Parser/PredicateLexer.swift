import Foundation
import OpenCoreDataModel

/// A token of the predicate format language, with its offset (in characters) in the format string.
struct PredicateToken: Equatable {
    enum Kind: Equatable {
        case identifier(String)  // key path component or keyword (keywords are matched case-insensitively)
        case escapedIdentifier(String)  // #keyword: a reserved word used as a key
        case string(String)
        case integer(Int64)
        case double(Double)
        case decimal(Decimal)
        case variable(String)  // $NAME
        case format(String)  // %@, %K, %d, …
        case atKeyword(String)  // @count, @sum, …
        case punct(String)  // operators and punctuation
        case end
    }
    let kind: Kind
    let offset: Int
    let length: Int
}

/// Splits a format string into tokens.
///
/// Works on Unicode scalars, not grapheme clusters, so that a combining mark
/// can never merge with a quote or an escape character; offsets count scalars.
struct PredicateLexer {
    let text: [Unicode.Scalar]
    let source: String

    init(_ source: String) {
        self.source = source
        self.text = Array(source.unicodeScalars)
    }

    func error(_ message: String, at offset: Int, length: Int = 1) -> CoreDataError {
        PredicateSyntax.error(message, source: source, offset: offset, length: length)
    }

    func tokenize() throws -> [PredicateToken] {
        var tokens: [PredicateToken] = []
        var i = 0
        let punctuation = [
            "==", "!=", "<>", "<<", ">>", "<=", "=<", ">=", "=>", "&&", "||", "**", "=", "<", ">", "!", "(", ")", "{", "}",
            "[", "]", ",", ".", "+", "-", "*", "/", "&", "|", "^", "~",
        ]
        while i < text.count {
            let c = text[i]
            if c.properties.isWhitespace { i += 1; continue }
            let start = i
            if c == "\"" || c == "'" {
                let (value, next) = try lexString(from: i, quote: c)
                tokens.append(PredicateToken(kind: .string(value), offset: start, length: next - start))
                i = next
                continue
            }
            if isDigit(c) {
                let (kind, next) = try lexNumber(from: i)
                tokens.append(PredicateToken(kind: kind, offset: start, length: next - start))
                i = next
                continue
            }
            if c == "%" {
                let (spec, next) = try lexFormat(from: i)
                tokens.append(PredicateToken(kind: .format(spec), offset: start, length: next - start))
                i = next
                continue
            }
            if c == "$" || c == "@" || c == "#" {
                var j = i + 1
                while j < text.count, isIdentifierChar(text[j]) { j += 1 }
                guard j > i + 1 else { throw error("expected a name after '\(c)'", at: i) }
                let name = string(text[(i + 1)..<j])
                let kind: PredicateToken.Kind =
                    c == "$" ? .variable(name) : c == "@" ? .atKeyword(name) : .escapedIdentifier(name)
                tokens.append(PredicateToken(kind: kind, offset: start, length: j - start))
                i = j
                continue
            }
            if isIdentifierStart(c) {
                var j = i + 1
                while j < text.count, isIdentifierChar(text[j]) { j += 1 }
                // A function's selector-style name: `modulus:by:` in `modulus:by:(age, 2)`.
                while j < text.count, text[j] == ":" {
                    j += 1
                    while j < text.count, isIdentifierChar(text[j]) { j += 1 }
                }
                tokens.append(PredicateToken(kind: .identifier(string(text[i..<j])), offset: start, length: j - start))
                i = j
                continue
            }
            if let p = punctuation.first(where: { matches($0, at: i) }) {
                tokens.append(PredicateToken(kind: .punct(p), offset: start, length: p.count))
                i += p.count
                continue
            }
            throw error("unexpected character '\(c)'", at: i)
        }
        tokens.append(PredicateToken(kind: .end, offset: text.count, length: 1))
        return tokens
    }

    private func matches(_ p: String, at i: Int) -> Bool {
        let scalars = Array(p.unicodeScalars)
        guard i + scalars.count <= text.count else { return false }
        return Array(text[i..<(i + scalars.count)]) == scalars
    }

    private func string(_ scalars: ArraySlice<Unicode.Scalar>) -> String {
        var s = String.UnicodeScalarView()
        s.append(contentsOf: scalars)
        return String(s)
    }

    private func isDigit(_ c: Unicode.Scalar) -> Bool { c >= "0" && c <= "9" }
    private func isHexDigit(_ c: Unicode.Scalar) -> Bool { isDigit(c) || (c >= "a" && c <= "f") || (c >= "A" && c <= "F") }
    private func isIdentifierStart(_ c: Unicode.Scalar) -> Bool { c.properties.isAlphabetic || c == "_" }
    private func isIdentifierChar(_ c: Unicode.Scalar) -> Bool {
        c.properties.isAlphabetic || isDigit(c) || c == "_" || c.properties.generalCategory == .nonspacingMark
            || c.properties.generalCategory == .decimalNumber
    }

    private func lexString(from start: Int, quote: Unicode.Scalar) throws -> (String, Int) {
        var out = String.UnicodeScalarView()
        var i = start + 1
        while i < text.count {
            let c = text[i]
            if c == quote { return (String(out), i + 1) }
            if c == "\\" {
                guard i + 1 < text.count else { break }
                let e = text[i + 1]
                switch e {
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                case "0": out.append("\0")
                case "\\", "\"", "'": out.append(e)
                case "u":
                    let hex = string(text[min(i + 2, text.count)..<min(i + 6, text.count)])
                    guard hex.unicodeScalars.count == 4, let v = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(v) else {
                        throw error("invalid \\u escape: expected four hex digits", at: i, length: 2)
                    }
                    out.append(scalar)
                    i += 6
                    continue
                // Any other escaped character is itself, the backslash dropped, as Apple's parser reads it: the
                // format text `x MATCHES '\d+'` compares with `d+` there too (`'\\d+'` keeps the backslash).
                default: out.append(e)
                }
                i += 2
                continue
            }
            out.append(c)
            i += 1
        }
        throw error("unterminated string: expected a closing \(quote)", at: start, length: max(1, text.count - start))
    }

    private func lexNumber(from start: Int) throws -> (PredicateToken.Kind, Int) {
        var i = start
        let radixes: [Unicode.Scalar: Int] = ["x": 16, "X": 16, "o": 8, "O": 8, "b": 2, "B": 2]
        if text[i] == "0", i + 1 < text.count, let radix = radixes[text[i + 1]] {
            var j = i + 2
            while j < text.count, isHexDigit(text[j]) || text[j] == "_" { j += 1 }
            let digits = string(text[(i + 2)..<j]).replacingOccurrences(of: "_", with: "")
            guard let value = Int64(digits, radix: radix) else {
                throw error("'\(string(text[i..<j]))' is not a valid base-\(radix) integer", at: start, length: j - start)
            }
            return (.integer(value), j)
        }
        while i < text.count, isDigit(text[i]) { i += 1 }
        var isDouble = false
        if i + 1 < text.count, text[i] == ".", isDigit(text[i + 1]) {
            isDouble = true
            i += 1
            while i < text.count, isDigit(text[i]) { i += 1 }
        }
        if i < text.count, text[i] == "e" || text[i] == "E" {
            var j = i + 1
            if j < text.count, text[j] == "+" || text[j] == "-" { j += 1 }
            if j < text.count, isDigit(text[j]) {
                isDouble = true
                i = j
                while i < text.count, isDigit(text[i]) { i += 1 }
            }
        }
        if i < text.count, isIdentifierChar(text[i]) {
            throw error("malformed number", at: start, length: i - start + 1)
        }
        let literal = string(text[start..<i])
        if !isDouble, let v = Int64(literal) { return (.integer(v), i) }
        // A number too large for a double (`1e400`) is an error: infinity has no literal to print it back as.
        guard let d = Double(literal), d.isFinite else {
            throw error("'\(literal)' is not a valid number", at: start, length: i - start)
        }
        return (.double(d), i)
    }

    private func lexFormat(from start: Int) throws -> (String, Int) {
        let specs = [
            "%@", "%K", "%d", "%i", "%u", "%ld", "%li", "%lu", "%lld", "%lli", "%llu", "%f", "%lf", "%g", "%%",
            "%hd", "%hi", "%hu", "%c", "%s", "%x", "%lx", "%X", "%o", "%e",
        ]
        if let spec = specs.sorted(by: { $0.count > $1.count }).first(where: { matches($0, at: start) }) {
            return (spec, start + spec.count)
        }
        throw error("unknown format specifier; expected %@, %K, %d, %i, %u, %ld, %lld, %f, %lf or %%", at: start, length: 2)
    }
}

/// Renders syntax errors: the message, the format string, and a caret under the offending token.
enum PredicateSyntax {
    static func error(_ message: String, source: String, offset: Int, length: Int) -> CoreDataError {
        let chars = Array(source.unicodeScalars)
        // Show the line that holds the offset (offsets count Unicode scalars).
        var lineStart = offset
        while lineStart > 0, lineStart - 1 < chars.count, chars[lineStart - 1] != "\n" { lineStart -= 1 }
        var lineEnd = min(offset, chars.count)
        while lineEnd < chars.count, chars[lineEnd] != "\n" { lineEnd += 1 }
        var lineScalars = String.UnicodeScalarView()
        lineScalars.append(contentsOf: chars[min(lineStart, chars.count)..<lineEnd])
        let line = String(lineScalars)
        let column = offset - lineStart
        let caret =
            String(repeating: " ", count: max(0, column)) + String(repeating: "^", count: max(1, min(length, max(1, lineEnd - offset))))
        let text = "Invalid predicate: \(message) (at offset \(offset))\n  \(line)\n  \(caret)"
        return CoreDataError(.predicateSyntax, text)
    }
}
