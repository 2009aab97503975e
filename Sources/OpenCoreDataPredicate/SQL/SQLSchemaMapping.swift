import Foundation
import OpenCoreDataModel

/// A value bound to a SQL statement, in SQLite's storage classes.
package enum SQLArgument: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

/// How attribute values are stored in SQL columns, shared by the compiler (to bind constants) and the store (to
/// write and read rows).
///
/// Integers and booleans are INTEGER; doubles and floats REAL; dates REAL seconds since 2001-01-01 (Core Data's
/// reference date); strings TEXT; decimals TEXT (exact), compared as REAL; UUIDs and URIs TEXT; binary data BLOB.
package enum SQLStorage {
    /// Encodes a value for a column of the given attribute type.
    package static func encode(_ value: AttributeValue, as type: NSAttributeType, uuidBytes: Bool = false) -> SQLArgument {
        switch (value, type) {
        case (.null, _): return .null
        case (.decimal(let d), _): return .text(NSDecimalNumber(decimal: d).stringValue)
        case (_, .decimalAttributeType): return value.numericValue.map { .text(NSDecimalNumber(value: $0).stringValue) } ?? .null
        default: return encode(value, uuidBytes: uuidBytes)
        }
    }

    /// Encodes a value by its own kind; a UUID as its 16 bytes when `uuidBytes` (Core Data's layout), else as text.
    package static func encode(_ value: AttributeValue, uuidBytes: Bool = false) -> SQLArgument {
        if uuidBytes, case .uuid(let u) = value { return .blob(withUnsafeBytes(of: u.uuid) { Data($0) }) }
        switch value {
        case .null: return .null
        case .integer(let i): return .integer(i)
        case .double(let d): return .real(d)
        case .decimal(let d): return .real(d.nearestDouble)
        case .bool(let b): return .integer(b ? 1 : 0)
        case .string(let s): return .text(s)
        case .date(let d): return .real(d.timeIntervalSinceReferenceDate)
        case .data(let d): return .blob(d)
        case .uuid(let u): return .text(u.uuidString)
        case .uri(let u): return .text(u.absoluteString)
        // Only transient attributes of undefined type hold one, and no column stores them.
        case .object: return .null
        }
    }

    /// A finite number written as text, or nil.
    private static func numberText(_ text: String) -> Double? {
        Double(text.trimmingCharacters(in: .whitespaces)).flatMap { $0.isFinite ? $0 : nil }
    }

    /// Decodes a column value into an attribute value of the given type; `nil` if the stored value cannot be one.
    package static func decode(_ stored: SQLArgument, as type: NSAttributeType) -> AttributeValue? {
        if case .null = stored { return .null }
        switch type {
        case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType:
            switch stored {
            case .integer(let i): return .integer(i)
            case .real(let d): return Int64(exactly: d).map { .integer($0) }  // nil past Int64's range, never a trap
            // Numbers written as text by another program (some Apple-written stores hold them): read exactly or not at all.
            case .text(let t): return numberText(t).flatMap { Int64(exactly: $0) }.map { .integer($0) }
            default: return nil
            }
        case .doubleAttributeType, .floatAttributeType:
            switch stored {
            case .real(let d): return .double(d)
            case .integer(let i): return .double(Double(i))
            case .text(let t): return numberText(t).map { .double($0) }
            default: return nil
            }
        case .booleanAttributeType:
            switch stored {
            case .integer(let i): return .bool(i != 0)
            case .text(let t): return numberText(t).map { .bool($0 != 0) }
            default: return nil
            }
        case .decimalAttributeType:
            switch stored {
            case .text(let s) where s == "NaN": return .decimal(.nan)  // NSDecimalNumber.notANumber, as Apple writes it
            case .text(let s): return Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")).map { .decimal($0) }
            case .integer(let i): return .decimal(Decimal(i))
            // The shortest text that reads back as the double (0.1, not 0.1000000000000000055…).
            case .real(let d):
                return d.isFinite ? Decimal(string: "\(d)", locale: Locale(identifier: "en_US_POSIX")).map { .decimal($0) } : nil
            default: return nil
            }
        case .stringAttributeType:
            switch stored {
            case .text(let s): return .string(s)
            // A number in a text column (another program wrote it): its text, as SQLite's text accessor gives it.
            case .integer(let i): return .string(String(i))
            case .real(let d): return .string(String(d))
            default: return nil
            }
        case .dateAttributeType:
            switch stored {
            case .real(let d): return .date(Date(timeIntervalSinceReferenceDate: d))
            case .integer(let i): return .date(Date(timeIntervalSinceReferenceDate: Double(i)))
            // Another program's number written as text (as in some Apple-written stores): read as Core Data reads it.
            case .text(let t): return numberText(t).map { .date(Date(timeIntervalSinceReferenceDate: $0)) }
            default: return nil
            }
        case .binaryDataAttributeType, .transformableAttributeType, .compositeAttributeType:
            if case .blob(let d) = stored { return .data(d) }
            return nil
        case .UUIDAttributeType:
            if case .text(let s) = stored, let u = UUID(uuidString: s) { return .uuid(u) }
            // Apple's stores keep a UUID as its 16 bytes.
            if case .blob(let d) = stored, d.count == 16 {
                let b = [UInt8](d)
                return .uuid(
                    UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])))
            }
            return nil
        case .URIAttributeType:
            if case .text(let s) = stored, let u = URL(string: s) { return .uri(u) }
            return nil
        default: return nil
        }
    }

    /// The SQL column type declared for an attribute type.
    package static func columnType(for type: NSAttributeType) -> String {
        switch type {
        case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType, .booleanAttributeType: return "INTEGER"
        case .doubleAttributeType, .floatAttributeType, .dateAttributeType: return "REAL"
        case .binaryDataAttributeType, .transformableAttributeType, .compositeAttributeType: return "BLOB"
        default: return "TEXT"
        }
    }
}

/// How a to-many relationship is stored.
package enum SQLToManyLink: Sendable, Hashable {
    /// The destination table has a foreign-key column pointing at the source row (the inverse is to-one).
    case inverseForeignKey(column: String)
    /// A join table links source and destination rows (many-to-many, or a to-many with no inverse).
    case joinTable(name: String, sourceColumn: String, destinationColumn: String)
}

/// What the SQL compiler needs to know about a store's tables; the SQLite store implements it.
package protocol SQLSchemaMapping: Sendable {
    /// The table holding the rows of an entity (its root entity's table).
    func tableName(for entity: NSEntityDescription) -> String
    /// The column of an attribute, or the foreign-key column of a to-one relationship.
    func columnName(for property: NSPropertyDescription) -> String
    /// How a to-many relationship is stored.
    func toManyLink(for relationship: NSRelationshipDescription) -> SQLToManyLink
    /// Whether UUID values are stored as their 16 bytes (Core Data's layout) rather than as text.
    var storesUUIDsAsBytes: Bool { get }
    /// The column of a composite's element (`path` inside the composite's value), or nil when the store keeps no
    /// column for it (a nested composite, or a composite kept whole).
    func columnName(forElementAt path: [String], of composite: NSAttributeDescription) -> String?
    /// Every element column of a composite kept a column per element, or nil when the store keeps it whole.
    func elementColumnNames(of composite: NSAttributeDescription) -> [String]?
}

extension SQLSchemaMapping {
    /// UUIDs as text, unless a mapping says otherwise.
    package var storesUUIDsAsBytes: Bool { false }
    /// No element columns, unless a mapping says otherwise.
    package func columnName(forElementAt path: [String], of composite: NSAttributeDescription) -> String? { nil }
    /// No element columns, unless a mapping says otherwise.
    package func elementColumnNames(of composite: NSAttributeDescription) -> [String]? { nil }
}

/// Names of the fixed columns every entity table has.
package enum SQLColumns {
    /// The primary key (`Z_PK`).
    package static let primaryKey = "Z_PK"
    /// The concrete entity's number (`Z_ENT`).
    package static let entity = "Z_ENT"
    /// The optimistic-locking version (`Z_OPT`).
    package static let version = "Z_OPT"
}

/// The names of the SQL functions and collations the store registers and the compiler emits.
package enum SQLFunctionNames {
    /// `ocd_fold(text, flags)`: `PredicateSemantics.fold`.
    package static let fold = "ocd_fold"
    /// `ocd_strop(op, value, pattern, flags)`: `PredicateSemantics.stringOperator`, 0 or 1.
    package static let stringOperator = "ocd_strop"
    /// `ocd_pow(x, y)`: `pow(x, y)`.
    package static let power = "ocd_pow"
    /// `ocd_function(name, arguments…)`: `FetchFunction(rawValue: name).apply(arguments)` (SQLite).
    package static let function = "ocd_function"
    /// `ocd_sort_key(text, collation)`: the key a comparison other than `.default` sorts by, where the engine cannot
    /// define a collation by a function (PostgreSQL).
    package static let sortKey = "ocd_sort_key"
    /// Collation names per sort comparison.
    package static func collation(_ c: FetchSortDescriptor.Comparison) -> String? {
        switch c {
        case .default: return nil
        case .caseInsensitive: return "OCD_CI"
        case .localized: return "OCD_LOCALIZED"
        case .localizedCaseInsensitive: return "OCD_LOCALIZED_CI"
        case .localizedStandard: return "OCD_LOCALIZED_STANDARD"
        }
    }
}

/// Quotes an SQL identifier.
package func sqlQuote(_ identifier: String) -> String {
    // Identifiers rarely hold a quote; Foundation's replacing is slow enough to show in saves that build SQL per row.
    guard identifier.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + identifier + "\"" }
    return "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}
