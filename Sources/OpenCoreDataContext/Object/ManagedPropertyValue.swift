import Foundation
import OpenCoreDataModel

/// A Swift value a typed `@Managed` property can hold.
///
/// For example:
/// ```swift
/// @Managed var price: Int32   // Int32 is a ManagedPropertyValue
/// ```
public protocol ManagedPropertyValue {
    /// Converts what `value(forKey:)` returns (nil when the property is nil).
    static func fromManaged(_ value: Any?) -> Self
    /// The value to pass to `setValue(_:forKey:)`.
    var managedValue: Any? { get }
    /// The value as an attribute value, when it has a direct one: a typed setter then skips the round trip through
    /// `Any`. Nil (the default) sends `managedValue` through `setValue(_:forKey:)`; either way the value is checked
    /// against the attribute's type.
    var managedAttributeValue: AttributeValue? { get }
    /// The value an attribute value reads as, when the type makes it directly (a typed getter then skips the round
    /// trip through `Any`); nil (the default) reads `fromManaged` of what `value(forKey:)` returns.
    static func fromManagedAttribute(_ value: AttributeValue) -> Self?
}

extension ManagedPropertyValue {
    /// No direct attribute value: the value goes through `setValue(_:forKey:)`.
    public var managedAttributeValue: AttributeValue? { nil }
    /// No direct reading: the value comes from `fromManaged`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Self? { nil }
}

extension Optional: ManagedPropertyValue where Wrapped: ManagedPropertyValue {
    /// nil for `.null`, else the wrapped type's direct reading (nil when it has none).
    @inlinable
    public static func fromManagedAttribute(_ value: AttributeValue) -> Wrapped?? {
        if case .null = value { return .some(nil) }
        return Wrapped.fromManagedAttribute(value).map { .some($0) }
    }

    /// `value` as the wrapped type, or nil when `value` is nil or `NSNull`.
    ///
    /// Inlinable, so that a typed getter of an optional property is specialized for it (unspecialized, this took about
    /// 1.7k instructions a read through the wrapped type's witnesses, in W6's accessor workload).
    @inlinable
    public static func fromManaged(_ value: Any?) -> Wrapped? {
        guard let value else { return nil }
        if value is NSNull { return nil }
        return Wrapped.fromManaged(value)
    }
    /// The wrapped value's managed value, or nil.
    public var managedValue: Any? { self.flatMap { $0.managedValue } }
    /// The wrapped value's attribute value, or `.null` for nil.
    @inlinable
    public var managedAttributeValue: AttributeValue? {
        guard let wrapped = self else { return .null }
        return wrapped.managedAttributeValue
    }
}

extension String: ManagedPropertyValue {
    /// The string of `.string`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> String? {
        if case .string(let text) = value { return text }
        return nil
    }

    /// `value` as a `String`; nil reads as "", as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> String { value as? String ?? "" }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.string`).
    @inlinable public var managedAttributeValue: AttributeValue? { .string(self) }
}

extension Bool: ManagedPropertyValue {
    /// The boolean of `.bool`, or whether `.integer` is not 0.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Bool? {
        switch value {
        case .bool(let flag): return flag
        case .integer(let number): return number != 0
        default: return nil
        }
    }

    /// `value` as a `Bool`; nil reads as false, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Bool { (value as? NSNumber)?.boolValue ?? false }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.bool`).
    @inlinable public var managedAttributeValue: AttributeValue? { .bool(self) }
}

extension Int: ManagedPropertyValue {
    /// The number of `.integer`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Int? {
        if case .integer(let number) = value { return Int(truncatingIfNeeded: number) }
        return nil
    }

    /// `value` as an `Int`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Int { (value as? NSNumber)?.intValue ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.integer`).
    @inlinable public var managedAttributeValue: AttributeValue? { .integer(Int64(self)) }
}

extension Int16: ManagedPropertyValue {
    /// The number of `.integer` (in range: the attribute checked it when it was set).
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Int16? {
        if case .integer(let number) = value { return Int16(truncatingIfNeeded: number) }
        return nil
    }

    /// `value` as an `Int16`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Int16 { (value as? NSNumber)?.int16Value ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.integer`).
    @inlinable public var managedAttributeValue: AttributeValue? { .integer(Int64(self)) }
}

extension Int32: ManagedPropertyValue {
    /// The number of `.integer` (in range: the attribute checked it when it was set).
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Int32? {
        if case .integer(let number) = value { return Int32(truncatingIfNeeded: number) }
        return nil
    }

    /// `value` as an `Int32`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Int32 { (value as? NSNumber)?.int32Value ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.integer`).
    @inlinable public var managedAttributeValue: AttributeValue? { .integer(Int64(self)) }
}

extension Int64: ManagedPropertyValue {
    /// The number of `.integer`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Int64? {
        if case .integer(let number) = value { return number }
        return nil
    }

    /// `value` as an `Int64`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Int64 { (value as? NSNumber)?.int64Value ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.integer`).
    @inlinable public var managedAttributeValue: AttributeValue? { .integer(self) }
}

extension Double: ManagedPropertyValue {
    /// The number of `.double`, or of `.integer` as a `Double`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Double? {
        switch value {
        case .double(let number): return number
        case .integer(let number): return Double(number)
        default: return nil
        }
    }

    /// `value` as a `Double`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Double { (value as? NSNumber)?.doubleValue ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.double`).
    @inlinable public var managedAttributeValue: AttributeValue? { .double(self) }
}

extension Float: ManagedPropertyValue {
    /// The number of `.double` as a `Float`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Float? {
        if case .double(let number) = value { return Float(number) }
        return nil
    }

    /// `value` as a `Float`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Float { (value as? NSNumber)?.floatValue ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.double`).
    @inlinable public var managedAttributeValue: AttributeValue? { .double(Double(self)) }
}

extension Decimal: ManagedPropertyValue {
    /// The number of `.decimal`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Decimal? {
        if case .decimal(let number) = value { return number }
        return nil
    }

    /// `value` as a `Decimal`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Decimal { value as? Decimal ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.decimal`).
    @inlinable public var managedAttributeValue: AttributeValue? { .decimal(self) }
}

extension Date: ManagedPropertyValue {
    /// The date of `.date`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Date? {
        if case .date(let date) = value { return date }
        return nil
    }

    /// `value` as a `Date`; nil reads as the reference date (2001-01-01), as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Date { value as? Date ?? Date(timeIntervalSinceReferenceDate: 0) }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.date`).
    @inlinable public var managedAttributeValue: AttributeValue? { .date(self) }
}

extension Data: ManagedPropertyValue {
    /// The bytes of `.data`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> Data? {
        if case .data(let bytes) = value { return bytes }
        return nil
    }

    /// `value` as a `Data`; nil reads as empty data, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Data { value as? Data ?? Data() }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.data`).
    @inlinable public var managedAttributeValue: AttributeValue? { .data(self) }
}

extension UUID: ManagedPropertyValue {
    /// The UUID of `.uuid`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> UUID? {
        if case .uuid(let uuid) = value { return uuid }
        return nil
    }

    /// `value` as a `UUID`; nil reads as the all-zero UUID, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> UUID { value as? UUID ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.uuid`).
    @inlinable public var managedAttributeValue: AttributeValue? { .uuid(self) }
}

extension URL: ManagedPropertyValue {
    /// The URL of `.uri`.
    @inlinable public static func fromManagedAttribute(_ value: AttributeValue) -> URL? {
        if case .uri(let url) = value { return url }
        return nil
    }

    /// `value` as a `URL`; nil reads as `/`, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> URL { value as? URL ?? URL(fileURLWithPath: "/") }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.uri`).
    @inlinable public var managedAttributeValue: AttributeValue? { .uri(self) }
}

/// `NSNumber`, as Xcode declares number attributes that do not use scalar types (`@NSManaged var miles: NSNumber?`).
extension NSNumber: ManagedPropertyValue {
    /// `value` as a number (a decimal as an `NSDecimalNumber`); nil reads as 0.
    public static func fromManaged(_ value: Any?) -> Self {
        // A number attribute reads as an NSNumber; a decimal one as a Decimal, which NSDecimalNumber carries.
        if let number = value as? Self { return number }
        if let decimal = value as? Decimal, let number = NSDecimalNumber(decimal: decimal) as? Self { return number }
        guard let zero = NSNumber(value: 0) as? Self else {
            preconditionFailure("A @Managed property of type \(Self.self) cannot be read; declare it NSNumber.")
        }
        return zero
    }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
}

extension Set: ManagedPropertyValue where Element: NSManagedObject {
    /// The objects of a to-many relationship that are of the set's element type.
    public static func fromManaged(_ value: Any?) -> Set<Element> {
        guard let objects = value as? Set<NSManagedObject> else { return [] }
        return Set(objects.compactMap { $0 as? Element })
    }
    /// The objects, as the array `setValue(_:forKey:)` takes for a to-many relationship.
    public var managedValue: Any? { Array(self) as [NSManagedObject] }
}

extension NSManagedObject: ManagedPropertyValue {
    /// The destination of a non-optional to-one relationship; a nil one stops with a message to declare it optional.
    public static func fromManaged(_ value: Any?) -> Self {
        guard let object = value as? Self else {
            preconditionFailure("A non-optional to-one @Managed property of type \(Self.self) is nil; declare it optional.")
        }
        return object
    }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
}
