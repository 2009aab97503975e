import Foundation
import OpenCoreDataModel

/// The comparison rules shared by the in-memory evaluator and the SQL functions the SQLite store registers, so that
/// both back ends give the same answer by running the same code.
///
/// Rules (documented in the README's predicate section):
/// - Numbers of every kind (integer, double, decimal, boolean) compare by value.
/// - Strings compare by Unicode scalar values, which is SQLite's BINARY order on UTF-8; `[c]` and `[d]` fold both
///   sides with `String.folding(options:locale: nil)` before comparing.
/// - Dates compare as instants; UUIDs by their string; URIs by their absolute string; data bytewise.
/// - `nil` equals only `nil`; any ordering comparison involving `nil` is false.
/// - Values of different kinds are never equal and never ordered.
///
/// For example:
/// ```swift
/// PredicateSemantics.compare(.integer(2), .double(2.5))   // -1: numbers compare by value
/// ```
public enum PredicateSemantics {
    /// Folds a string for `[c]`, `[d]` and `[cd]` comparisons.
    public static func fold(_ s: String, _ options: PredicateComparison.Options) -> String {
        var fold: String.CompareOptions = []
        if options.contains(.caseInsensitive) { fold.insert(.caseInsensitive) }
        if options.contains(.diacriticInsensitive) { fold.insert(.diacriticInsensitive) }
        if fold.isEmpty { return s }
        return s.folding(options: fold, locale: nil)
    }

    /// Compares strings by Unicode scalar values (= UTF-8 byte order).
    public static func compareStrings(_ a: String, _ b: String) -> Int {
        // Native strings (the store's, small ones included) are read in place; only another kind is copied into a
        // contiguous one first.
        if let c = a.utf8.withContiguousStorageIfAvailable({ x in b.utf8.withContiguousStorageIfAvailable { y in compareBytes(x, y) } }),
            let c
        {
            return c
        }
        var (a, b) = (a, b)
        return a.withUTF8 { x in b.withUTF8 { y in compareBytes(x, y) } }
    }

    /// The order of two UTF-8 byte strings: unsigned bytes, so code point order.
    @inline(__always)
    private static func compareBytes(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Int {
        let common = min(x.count, y.count)
        if common > 0, let p = x.baseAddress, let q = y.baseAddress {
            let c = memcmp(p, q, common)
            if c != 0 { return c < 0 ? -1 : 1 }
        }
        return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
    }

    /// Compares two values; `nil` when they cannot be ordered (a `nil` side or different kinds).
    public static func compare(_ a: AttributeValue, _ b: AttributeValue, options: PredicateComparison.Options = []) -> Int? {
        switch (a, b) {
        case (.null, _), (_, .null): return nil
        case (.integer(let x), .integer(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.string(let x), .string(let y)):
            return compareStrings(fold(x, options), fold(y, options))
        case (.date(let x), .date(let y)):
            let (s, t) = (x.timeIntervalSinceReferenceDate, y.timeIntervalSinceReferenceDate)
            return s == t ? 0 : (s < t ? -1 : 1)
        case (.data(let x), .data(let y)):
            for (p, q) in zip(x, y) where p != q { return p < q ? -1 : 1 }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        case (.uuid(let x), .uuid(let y)): return compareStrings(x.uuidString, y.uuidString)
        case (.uri(let x), .uri(let y)): return compareStrings(x.absoluteString, y.absoluteString)
        default:
            guard let x = a.numericValue, let y = b.numericValue else { return nil }
            return x == y ? 0 : (x < y ? -1 : 1)
        }
    }

    /// Whether two values are equal (`nil` equals `nil`).
    public static func equal(_ a: AttributeValue, _ b: AttributeValue, options: PredicateComparison.Options = []) -> Bool {
        if a.isNull || b.isNull { return a.isNull && b.isNull }
        return compare(a, b, options: options) == 0
    }

    /// Evaluates a string operator (`BEGINSWITH`, `ENDSWITH`, `CONTAINS`, `LIKE`, `MATCHES`); false for `nil`.
    public static func stringOperator(
        _ op: PredicateComparison.Operator, _ value: String, _ pattern: String, options: PredicateComparison.Options
    ) -> Bool {
        switch op {
        case .like: return like(value, pattern, options: options)
        case .matches: return matches(value, pattern, options: options)
        default: break
        }
        let v = Array(fold(value, options).utf8)
        let p = Array(fold(pattern, options).utf8)
        switch op {
        case .beginsWith: return v.count >= p.count && v[0..<p.count].elementsEqual(p)
        case .endsWith: return v.count >= p.count && v[(v.count - p.count)...].elementsEqual(p)
        case .contains, .in: return p.isEmpty || contains(v, p)
        default: return false
        }
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        let first = needle[0]
        var i = 0
        let last = haystack.count - needle.count
        while i <= last {
            if haystack[i] == first, haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }

    /// `LIKE`: `*` matches any run of characters, `?` one character; the whole string must match.
    public static func like(_ value: String, _ pattern: String, options: PredicateComparison.Options) -> Bool {
        let v = Array(fold(value, options).unicodeScalars)
        let p = Array(fold(pattern, options).unicodeScalars)
        // Iterative wildcard matching with backtracking to the last '*'.
        var i = 0, j = 0
        var star = -1, mark = 0
        while i < v.count {
            if j < p.count, p[j] == "\\", j + 1 < p.count, p[j + 1] == v[i] {
                i += 1; j += 2
            } else if j < p.count, p[j] == "?" || (p[j] != "*" && p[j] != "\\" && p[j] == v[i]) {
                i += 1; j += 1
            } else if j < p.count, p[j] == "*" {
                star = j; mark = i; j += 1
            } else if star >= 0 {
                j = star + 1; mark += 1; i = mark
            } else {
                return false
            }
        }
        while j < p.count, p[j] == "*" { j += 1 }
        return j == p.count
    }

    /// The collection operators `@min`, `@max`, `@sum` and `@avg` over non-nil values.
    public static func aggregate(_ op: String, _ values: [AttributeValue]) throws -> AttributeValue {
        switch op {
        case "@min", "@max":
            var best: AttributeValue = .null
            for v in values {
                if best.isNull { best = v; continue }
                guard let c = PredicateSemantics.compare(v, best) else { continue }
                if (op == "@min" && c < 0) || (op == "@max" && c > 0) { best = v }
            }
            return best
        default:
            var allIntegers = true
            var intSum: Int64 = 0
            var sum = 0.0
            for v in values {
                guard let d = v.numericValue else { throw CoreDataError(.predicateEvaluation, "\(op) needs numbers, got \(v.kindName)") }
                sum += d
                if case .integer(let i) = v, allIntegers {
                    let (s, overflow) = intSum.addingReportingOverflow(i)
                    if overflow { allIntegers = false } else { intSum = s }
                } else {
                    allIntegers = false
                }
            }
            if op == "@sum" { return allIntegers ? .integer(intSum) : .double(sum) }
            return values.isEmpty ? .null : .double(sum / Double(values.count))
        }
    }

    private static let regexCache = RegexCache()

    /// `MATCHES`: an ICU regular expression that must match the whole string.
    ///
    /// As on Apple's platforms, `^` and `$` also match at the start and end of each line, and `.` matches a line
    /// break too (the match is still of the whole string).
    public static func matches(_ value: String, _ pattern: String, options: PredicateComparison.Options) -> Bool {
        guard let regex = regexCache.regex(pattern, caseInsensitive: options.contains(.caseInsensitive)) else { return false }
        let subject = options.contains(.diacriticInsensitive) ? fold(value, [.diacriticInsensitive]) : value
        let range = NSRange(subject.startIndex..., in: subject)
        guard let match = regex.firstMatch(in: subject, options: [.anchored], range: range) else { return false }
        return match.range.location == 0 && match.range.length == range.length
    }

    /// Whether a regular expression compiles, for up-front validation.
    public static func isValidRegex(_ pattern: String) -> Bool {
        regexCache.regex(pattern, caseInsensitive: false) != nil
    }
}

/// Compiled regular expressions by pattern, shared across threads (SQLite calls `MATCHES` from reader threads).
final class RegexCache: @unchecked Sendable {
    private let lock = NSLock()
    private var cache: [String: NSRegularExpression?] = [:]

    func regex(_ pattern: String, caseInsensitive: Bool) -> NSRegularExpression? {
        let key = (caseInsensitive ? "i:" : "s:") + pattern
        lock.lock()
        defer { lock.unlock() }
        if let cached = cache[key] { return cached }
        var options: NSRegularExpression.Options = [.anchorsMatchLines, .dotMatchesLineSeparators]
        if caseInsensitive { options.insert(.caseInsensitive) }
        let compiled = try? NSRegularExpression(pattern: pattern, options: options)
        if cache.count > 256 { cache.removeAll() }
        cache[key] = compiled
        return compiled
    }
}
