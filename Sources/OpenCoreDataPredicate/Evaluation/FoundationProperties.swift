import Foundation
import OpenCoreDataModel

extension PredicateSemantics {
    /// The value key-value coding reads for `key` from a Foundation value, or nil when the value has no such property.
    ///
    /// On Apple's platforms a predicate's key path may go on past an attribute into the attribute's own object:
    /// `name.length` (NSString), `total.intValue` (NSNumber), `born.timeIntervalSince1970` (NSDate),
    /// `@sum.doubleValue`. The evaluator reports a key this does not know.
    ///
    /// In-memory evaluation only: Core Data's SQL store does not take these key paths either.
    static func foundationProperty(_ key: String, of value: AttributeValue) -> AttributeValue? {
        switch value {
        case .null: return .null
        case .integer, .double, .decimal, .bool: return numberProperty(key, of: value)
        case .string(let string): return stringProperty(key, of: string)
        case .date(let date):
            switch key {
            case "timeIntervalSinceReferenceDate": return .double(date.timeIntervalSinceReferenceDate)
            case "timeIntervalSince1970": return .double(date.timeIntervalSince1970)
            default: return nil
            }
        case .data(let data): return key == "length" ? .integer(Int64(data.count)) : nil
        case .uuid(let uuid): return key == "uuidString" || key == "description" ? .string(uuid.uuidString) : nil
        case .uri(let url):
            switch key {
            case "absoluteString", "description": return .string(url.absoluteString)
            case "lastPathComponent": return .string(url.lastPathComponent)
            case "path": return .string(url.path)
            case "host": return url.host.map(AttributeValue.string) ?? .null
            case "scheme": return url.scheme.map(AttributeValue.string) ?? .null
            default: return nil
            }
        case .object: return nil
        }
    }

    /// NSNumber's accessors: the integer ones truncate toward zero, as NSNumber's do.
    private static func numberProperty(_ key: String, of value: AttributeValue) -> AttributeValue? {
        guard let double = value.numericValue else { return nil }
        switch key {
        case "intValue", "integerValue", "longValue", "longLongValue", "shortValue", "charValue", "unsignedIntValue",
            "unsignedIntegerValue", "unsignedLongValue", "unsignedLongLongValue", "unsignedShortValue":
            if case .integer = value { return value }
            guard double.isFinite, let truncated = Int64(exactly: double.rounded(.towardZero)) else { return nil }
            return .integer(truncated)
        case "doubleValue", "floatValue": return .double(double)
        case "boolValue": return .bool(double != 0)
        case "decimalValue":
            if case .decimal = value { return value }
            if case .integer(let i) = value { return .decimal(Decimal(i)) }
            return .decimal(Decimal(double))
        case "stringValue", "description":
            switch value {
            case .integer(let i): return .string(String(i))
            case .bool(let b): return .string(b ? "1" : "0")
            case .decimal(let d): return .string(NSDecimalNumber(decimal: d).stringValue)
            default: return .string(String(double))
            }
        default: return nil
        }
    }

    /// NSString's properties, with its numeric readings: leading spaces skipped, the longest number prefix read, 0
    /// when there is none.
    private static func stringProperty(_ key: String, of string: String) -> AttributeValue? {
        switch key {
        case "length": return .integer(Int64(string.utf16.count))
        case "lowercaseString": return .string(string.lowercased())
        case "uppercaseString": return .string(string.uppercased())
        case "capitalizedString": return .string(string.capitalized)
        case "description", "stringValue": return .string(string)
        case "intValue", "integerValue", "longLongValue": return .integer(leadingNumber(of: string) { $0.scanInt64() } ?? 0)
        case "doubleValue", "floatValue": return .double(leadingNumber(of: string) { $0.scanDouble() } ?? 0)
        case "boolValue":
            // NSString: true when the first non-space character is Y, y, T, t or a digit 1–9 (after signs and zeros).
            let trimmed = string.drop { $0 == " " || $0 == "\t" || $0 == "\n" }
            guard let first = trimmed.first else { return .bool(false) }
            if "YyTt".contains(first) { return .bool(true) }
            let digits = trimmed.drop { $0 == "+" || $0 == "-" || $0 == "0" }
            return .bool(digits.first.map { "123456789".contains($0) } ?? false)
        default: return nil
        }
    }

    /// The number `scan` reads at the start of `string` after white space, as NSString reads it; nil when there is none.
    private static func leadingNumber<T>(of string: String, _ scan: (Scanner) -> T?) -> T? {
        let scanner = Scanner(string: string)
        scanner.charactersToBeSkipped = .whitespacesAndNewlines
        return scan(scanner)
    }
}
