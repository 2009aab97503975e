import Foundation
import OpenCoreDataModel

/// Converts between the `Any` values Core Data's API passes and `AttributeValue`, by attribute type.
///
/// Reading gives what Core Data gives on Apple platforms: numbers and booleans as `NSNumber` (so `as? Int`,
/// `as? Int16`, `as? Double` and `as? Bool` all work), decimals as `NSDecimalNumber`, `String`, `Date`, `Data`, `UUID`, `URL`.
/// Writing accepts any Swift value of a matching kind and throws `CoreDataError(.wrongValueType)` for anything else.
enum ValueConversion {
    static func toAny(_ value: AttributeValue, type: NSAttributeType) -> Any? {
        value.foundationValue(as: type)
    }

    /// Converts and checks a value for an attribute of `type`; integers must fit the attribute's width.
    ///
    /// The
    /// description and entity name are read only to report an error.
    static func fromAny(
        _ any: Any?, type: NSAttributeType, attribute: @autoclosure () -> NSAttributeDescription, entityName: @autoclosure () -> String
    ) throws -> AttributeValue {
        if type == .compositeAttributeType { return try compositeValue(any, attribute(), entityName()) }
        if type == .transformableAttributeType {
            guard let any, !(any is NSNull) else { return .null }
            return (any as? AttributeValue).map { transformable($0) } ?? .object(OpaqueValue(any))
        }
        guard let value = AttributeValue.converting(any) else {
            // A transient attribute of undefined type holds any value.
            if type == .undefinedAttributeType, let any { return .object(OpaqueValue(any)) }
            throw wrongType(any, attribute(), entityName())
        }
        guard let converted = coerce(value, to: type) else { throw wrongValue(value, any, attribute(), entityName()) }
        return converted
    }

    /// The value as an attribute of `type` holds it, or nil when it cannot hold it (a wrong kind, or an integer out of
    /// the attribute's range).
    static func coerce(_ value: AttributeValue, to type: NSAttributeType) -> AttributeValue? {
        coerced(value, to: type)
    }

    /// `coerce` for a value the caller hands over: a value the attribute holds as it is moves into the result (no copy,
    /// and so no reference count for a string or data).
    static func coerced(_ value: consuming AttributeValue, to type: NSAttributeType) -> AttributeValue? {
        if type == .compositeAttributeType {
            // A dictionary of the composite's elements (checked when set by key), or nil.
            switch value {
            case .null: return .null
            case .object(let o) where o.value is [String: Any]: return value
            default: return nil
            }
        }
        if type.isArchived { return transformable(value) }
        if holdsAsIs(value, type) || type == .undefinedAttributeType { return consume value }
        return converted(value, to: type)
    }

    /// Whether an attribute of `type` holds `value` unchanged.
    private static func holdsAsIs(_ value: AttributeValue, _ type: NSAttributeType) -> Bool {
        switch value {
        case .null: return true
        case .integer(let i):
            switch type {
            case .integer16AttributeType: return Int16(exactly: i) != nil
            case .integer32AttributeType: return Int32(exactly: i) != nil
            default: return type == .integer64AttributeType
            }
        case .double(let d): return type == .doubleAttributeType && !d.isNaN  // a SQLite store holds no NaN
        case .decimal: return type == .decimalAttributeType
        case .bool: return type == .booleanAttributeType
        case .string: return type == .stringAttributeType
        case .date: return type == .dateAttributeType
        case .data: return type == .binaryDataAttributeType
        case .uuid: return type == .UUIDAttributeType
        case .uri: return type == .URIAttributeType
        case .object: return type == .undefinedAttributeType
        }
    }

    /// `value` converted for an attribute of `type` that does not hold it as it is, or nil if it cannot be.
    private static func converted(_ value: AttributeValue, to type: NSAttributeType) -> AttributeValue? {
        switch (type, value) {
        case (.integer16AttributeType, .bool(let b)), (.integer32AttributeType, .bool(let b)), (.integer64AttributeType, .bool(let b)):
            return .integer(b ? 1 : 0)
        // An NSNumber of 0 or 1 may read as a boolean (Foundation on Linux reports some as chars): as Core Data, which
        // takes any NSNumber for a number attribute, it is the number.
        case (.doubleAttributeType, .bool(let b)), (.floatAttributeType, .bool(let b)): return .double(b ? 1 : 0)
        case (.decimalAttributeType, .bool(let b)): return .decimal(b ? 1 : 0)
        case (.doubleAttributeType, .integer(let i)): return .double(Double(i))
        case (.doubleAttributeType, .decimal(let d)): return .double(d.nearestDouble)
        case (.floatAttributeType, .integer(let i)): return .double(Double(Float(i)))
        case (.floatAttributeType, .double(let d)) where !d.isNaN: return .double(Double(Float(d)))
        case (.floatAttributeType, .decimal(let d)): return .double(Double(Float(d.nearestDouble)))
        case (.decimalAttributeType, .integer(let i)): return .decimal(Decimal(i))
        case (.decimalAttributeType, .double(let d)) where d.isFinite: return .decimal(Decimal(string: "\(d)") ?? Decimal(d))
        case (.booleanAttributeType, .integer(let i)) where i == 0 || i == 1: return .bool(i == 1)
        default: return nil
        }
    }

    /// The error for a value `coerce` refused: out of range for an integer attribute, else of the wrong kind.
    private static func wrongValue(_ value: AttributeValue, _ original: Any?, _ attribute: NSAttributeDescription, _ entityName: String)
        -> CoreDataError
    {
        switch (attribute.attributeType, value) {
        case (.integer16AttributeType, .integer(let i)), (.integer32AttributeType, .integer(let i)):
            return outOfRange(i, attribute, entityName)
        case (_, .double(let d)) where d.isNaN:
            return CoreDataError(
                .wrongValueType,
                "'\(entityName).\(attribute.name)' cannot hold NaN: a SQLite store has no NaN (it would read back as nil); use nil or a number.",
                entityName: entityName, key: attribute.name, value: "nan")
        default: return wrongType(original, attribute, entityName)
        }
    }

    static func wrongType(_ any: Any?, _ attribute: NSAttributeDescription, _ entityName: String) -> CoreDataError {
        let given = any.map { "\(type(of: $0)) \(String(describing: $0).prefix(60))" } ?? "nil"
        return CoreDataError(
            .wrongValueType,
            "'\(entityName).\(attribute.name)' is a \(attribute.attributeType.xcodeName) attribute; it cannot hold \(given).",
            entityName: entityName, key: attribute.name)
    }

    static func outOfRange(_ i: Int64, _ attribute: NSAttributeDescription, _ entityName: String) -> CoreDataError {
        CoreDataError(
            .wrongValueType, "\(i) does not fit '\(entityName).\(attribute.name)', a \(attribute.attributeType.xcodeName) attribute.",
            entityName: entityName, key: attribute.name)
    }
}
