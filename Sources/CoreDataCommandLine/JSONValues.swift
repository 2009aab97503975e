import Foundation
import OpenCoreData
import OpenCoreDataLiveTable

/// Conversions between JSON values (as `JSONReader` gives them and `JSONSerialization` takes them) and attribute values.
enum JSONValues {
    static func describe(_ value: Any) -> String {
        switch value {
        case let s as String: return "string \"\(s)\""
        case let n as JSONNumber: return "number \(n.text)"
        case let b as Bool: return "boolean \(b)"
        case let n as NSNumber: return isBoolean(n) ? "boolean \(n.boolValue)" : "number \(n)"
        case is [Any]: return "an array"
        case is [String: Any]: return "an object"
        default: return "\(type(of: value))"
        }
    }

    static func isBoolean(_ n: NSNumber) -> Bool {
        let type = String(cString: n.objCType)
        return type == "c" || type == "B"
    }

    /// The text of a number in JSON syntax: `-12`, `0.5`, `1e19` (no sign `+`, no leading zeros, no hexadecimal).
    static func isNumberLiteral(_ text: String) -> Bool {
        // JSON allows whitespace around a value; a number written in a string has none (" 7" is not "7").
        guard let first = text.utf8.first, let last = text.utf8.last, ![0x20, 0x09, 0x0A, 0x0D].contains(first),
            ![0x20, 0x09, 0x0A, 0x0D].contains(last)
        else { return false }
        return (try? JSONReader.parse(Data(text.utf8))) is JSONNumber
    }

    /// The value to set for an attribute from a JSON value; nil for JSON null.
    ///
    /// Throws a message (without the record
    /// prefix) when the value does not fit the attribute: numbers convert exactly or not at all (an integer out of the
    /// attribute's range, a fraction for an integer, a decimal or double beyond its type's range are refused).
    static func attributeValue(_ json: Any, for attribute: NSAttributeDescription) throws -> Any? {
        if json is NSNull { return nil }
        let type = attribute.attributeType
        let expected = "expects \(type.xcodeName), got \(describe(json))"
        switch type {
        case .stringAttributeType:
            guard let s = json as? String else { throw ToolFailure(expected) }
            return s
        case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType:
            guard let number = json as? JSONNumber else { throw ToolFailure(expected) }
            let range: ClosedRange<Int64> =
                switch type {
                case .integer16AttributeType: Int64(Int16.min)...Int64(Int16.max)
                case .integer32AttributeType: Int64(Int32.min)...Int64(Int32.max)
                default: Int64.min...Int64.max
                }
            let outside = "\(expected), which is outside its range \(range.lowerBound)…\(range.upperBound)"
            if number.isIntegerLiteral {
                guard let value = Int64(number.text), range.contains(value) else { throw ToolFailure(outside) }
                return value
            }
            // 1e3 or 2.0 is an integer written another way; 2.5 is not.
            guard let exact = Decimal(string: number.text, locale: posix), !exact.isNaN else { throw ToolFailure(expected) }
            var whole = Decimal()
            var copy = exact
            NSDecimalRound(&whole, &copy, 0, .plain)
            guard exact == whole else { throw ToolFailure(expected + ", which is not a whole number") }
            guard exact >= Decimal(range.lowerBound), exact <= Decimal(range.upperBound) else { throw ToolFailure(outside) }
            return NSDecimalNumber(decimal: exact).int64Value
        case .doubleAttributeType, .floatAttributeType:
            // What `fetch` prints for a value JSON cannot write as a number.
            if let text = json as? String, let value = nonFiniteValue(text) { return value }
            guard let number = json as? JSONNumber, let value = Double(number.text) else {
                throw ToolFailure(expected + " (use a number, or \"NaN\", \"Infinity\" or \"-Infinity\")")
            }
            let finite = type == .floatAttributeType ? Float(value).isFinite : value.isFinite
            guard finite else { throw ToolFailure(expected + ", which is beyond the range of \(type.xcodeName)") }
            return value
        case .decimalAttributeType:
            let text: String
            if let number = json as? JSONNumber {
                text = number.text
            } else if let s = json as? String, isNumberLiteral(s) {
                text = s
            } else {
                throw ToolFailure(expected + " (use a number, or a string holding exactly one, such as \"12.50\")")
            }
            guard let value = Decimal(string: text, locale: posix), !value.isNaN else {
                throw ToolFailure(expected + ", which is beyond the range of Decimal")
            }
            return value
        case .booleanAttributeType:
            guard let b = json as? Bool else { throw ToolFailure(expected + " (use true or false)") }
            return b
        case .dateAttributeType:
            guard let s = json as? String, let date = ISO8601Dates.date(from: s) else {
                throw ToolFailure(expected + " (use an ISO 8601 date such as 2024-05-01T12:00:00Z)")
            }
            return date
        case .binaryDataAttributeType:
            guard let s = json as? String, let data = Data(base64Encoded: s) else { throw ToolFailure(expected + " (use base64)") }
            return data
        case .UUIDAttributeType:
            guard let s = json as? String, let uuid = UUID(uuidString: s) else { throw ToolFailure(expected) }
            return uuid
        case .URIAttributeType:
            guard let s = json as? String, let url = URL(string: s) else { throw ToolFailure(expected) }
            return url
        case .transformableAttributeType:
            // Any JSON value: its transformer (the attribute's, registered in the tool) archives it at the save.
            return foundationValue(json)
        case .compositeAttributeType:
            guard let object = json as? [String: Any] else { throw ToolFailure(expected + " (use an object of its elements)") }
            return try compositeValue(object, for: attribute)
        default:
            throw ToolFailure("has type \(type.xcodeName), which the tool cannot import")
        }
    }

    /// A JSON object as a composite attribute's value: each key one of its elements, each value converted for it.
    private static func compositeValue(_ object: [String: Any], for attribute: NSAttributeDescription) throws -> [String: Any] {
        var values: [String: Any] = [:]
        for (key, value) in object {
            guard let element = attribute.elements.first(where: { $0.name == key }) else {
                throw ToolFailure("has no element '\(key)' (its elements: \(attribute.elements.map(\.name).joined(separator: ", ")))")
            }
            if let converted = try attributeValue(value, for: element) { values[key] = converted }
        }
        return values
    }

    private static let posix = Locale(identifier: "en_US_POSIX")

    /// A JSON-ready value for what `value(forKey:)` returned.
    static func jsonValue(_ value: Any?, type: NSAttributeType?) -> Any {
        guard let value else { return NSNull() }
        switch value {
        case let s as String: return s
        case let d as Date: return ISO8601Dates.string(from: d)
        case let d as Data: return d.base64EncodedString()
        case let u as UUID: return u.uuidString
        case let u as URL: return u.absoluteString
        case let d as Decimal: return d.isNaN ? nonFinite(.nan) : NSDecimalNumber(decimal: d)
        case let id as NSManagedObjectID: return id.uriRepresentation().absoluteString
        case let n as NSNumber:
            if type == .booleanAttributeType { return n.boolValue }
            if type == .doubleAttributeType || type == .floatAttributeType {
                return n.doubleValue.isFinite ? n.doubleValue : nonFinite(n.doubleValue)
            }
            if !isBoolean(n), !n.doubleValue.isFinite { return nonFinite(n.doubleValue) }
            return n
        // A transformable attribute's value: its collections as JSON (a set as a list in a stable order).
        case let a as [Any]: return a.map { jsonValue($0, type: nil) }
        case let d as [String: Any]: return d.mapValues { jsonValue($0, type: nil) }
        case let d as [AnyHashable: Any]:
            return Dictionary(d.map { ("\($0.key.base)", jsonValue($0.value, type: nil)) }, uniquingKeysWith: { a, _ in a })
        case let s as Set<AnyHashable>: return s.map { jsonValue($0.base, type: nil) }.sorted { "\($0)" < "\($1)" }
        case is NSNull: return NSNull()
        default: return "\(value)"
        }
    }

    /// How a double that JSON cannot write (RFC 8259 has no NaN or infinity) is printed: as the string `"NaN"`,
    /// `"Infinity"` or `"-Infinity"`, which `import` reads back into a Double or Float attribute.
    static func nonFinite(_ value: Double) -> String {
        value.isNaN ? "NaN" : value < 0 ? "-Infinity" : "Infinity"
    }

    /// The double a string written by `nonFinite(_:)` stands for, if it is one.
    static func nonFiniteValue(_ text: String) -> Double? {
        switch text {
        case "NaN": return .nan
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        default: return nil
        }
    }

    /// A JSON value as the Foundation value a transformable attribute archives: numbers as `NSNumber`, lists and
    /// objects as arrays and dictionaries.
    static func foundationValue(_ json: Any) -> Any {
        switch json {
        case let number as JSONNumber:
            if number.isIntegerLiteral, let i = Int64(number.text) { return NSNumber(value: i) }
            return NSNumber(value: Double(number.text) ?? .nan)
        case let list as [Any]: return list.map(foundationValue)
        case let object as [String: Any]: return object.mapValues(foundationValue)
        default: return json
        }
    }

    /// Text for a table cell.
    static func cell(_ json: Any) -> String {
        switch json {
        case is NSNull: return "nil"
        case let s as String: return s
        // NSNumber before Bool: an integer 1 or 0 also casts to Bool, and printed as `true` / `false`.
        case let n as NSNumber: return isBoolean(n) ? (n.boolValue ? "true" : "false") : n.stringValue
        case let b as Bool: return b ? "true" : "false"
        default: return "\(json)"
        }
    }

    /// One line of JSON with sorted keys (for line-per-record output).
    static func line(_ object: Any) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
        return String(decoding: data, as: UTF8.self)
    }

    /// JSON text with sorted keys, so output is stable.
    static func encode(_ object: Any) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .fragmentsAllowed])
        return String(decoding: data, as: UTF8.self)
    }
}
