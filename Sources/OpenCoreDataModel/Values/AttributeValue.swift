import Foundation

/// A single attribute value as the store keeps it: one case per storage class Core Data's attribute types map to.
///
/// `AttributeValue` is the currency between layers: the predicate evaluator compares it, the SQL store binds it, and
/// the context converts it to and from the `Any` values a Core Data user passes to `setValue(_:forKey:)`.
/// Integer widths and `Float` are normalised to `Int64` and `Double`; the attribute's type restores them on the way out.
///
/// For example:
/// ```swift
/// let price = AttributeValue.integer(185)
/// let nothing = AttributeValue.null
/// ```
public enum AttributeValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case double(Double)
    case decimal(Decimal)
    case bool(Bool)
    case string(String)
    case date(Date)
    case data(Data)
    case uuid(UUID)
    case uri(URL)
    /// Any other value, which only a transient attribute of undefined type holds (the store never sees it).
    case object(OpaqueValue)

    /// Whether this is `.null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The numeric value as a `Double`, for numbers of every kind (integer, double, decimal, boolean).
    public var numericValue: Double? {
        switch self {
        case .integer(let v): return Double(v)
        case .double(let v): return v
        case .decimal(let v): return v.nearestDouble
        case .bool(let v): return v ? 1 : 0
        default: return nil
        }
    }

    /// Whether the value is a number of any kind (integer, double, decimal or boolean).
    public var isNumeric: Bool { numericValue != nil }

    /// A short name of the value's kind, for error messages.
    public var kindName: String {
        switch self {
        case .null: return "nil"
        case .integer: return "integer"
        case .double: return "double"
        case .decimal: return "decimal"
        case .bool: return "boolean"
        case .string: return "string"
        case .date: return "date"
        case .data: return "binary data"
        case .uuid: return "UUID"
        case .uri: return "URI"
        case .object: return "object"
        }
    }
}

/// A value of any type, held by a transient attribute of undefined type: equal to another when both are equal
/// `NSObject`s or equal `Hashable` values, else only to itself.
///
/// For example:
/// ```swift
/// let value = AttributeValue.object(OpaqueValue(["a", "b"] as NSArray))
/// ```
public final class OpaqueValue: Hashable, @unchecked Sendable {
    /// The value.
    ///
    /// It need not be `Sendable`: like a managed object's other values, it is used on its context's queue.
    public let value: Any

    /// Wraps `value`.
    public init(_ value: Any) { self.value = value }

    /// Whether the two values are equal (`isEqual` for objects, `==` for `Hashable` values) or the same box.
    public static func == (lhs: OpaqueValue, rhs: OpaqueValue) -> Bool {
        if lhs === rhs { return true }
        if let a = lhs.value as? NSObject, let b = rhs.value as? NSObject { return a.isEqual(b) }
        if let a = lhs.value as? AnyHashable, let b = rhs.value as? AnyHashable { return a == b }
        return false
    }

    /// Hashes the value when it is `Hashable` (an `NSObject` hashes as `hash`), else the box's identity.
    public func hash(into hasher: inout Hasher) {
        if let object = value as? NSObject {
            hasher.combine(object.hash)
        } else if let hashable = value as? AnyHashable {
            hasher.combine(hashable)
        } else {
            hasher.combine(ObjectIdentifier(self))
        }
    }
}

extension AttributeValue: CustomStringConvertible {
    /// The value as text: strings quoted, nil as `nil`.
    public var description: String {
        switch self {
        case .null: return "nil"
        case .integer(let v): return String(v)
        case .double(let v): return String(v)
        case .decimal(let v): return "\(v)"
        case .bool(let v): return v ? "YES" : "NO"
        case .string(let v): return v
        case .date(let v): return ISO8601DateFormatter().string(from: v)
        case .data(let v): return "<\(v.count) bytes>"
        case .uuid(let v): return v.uuidString
        case .uri(let v): return v.absoluteString
        case .object(let v): return String(describing: v.value)
        }
    }
}

extension AttributeValue {
    /// The value when its dynamic type `type` is exactly one of the types attributes hold (no optional, no subclass):
    /// comparing metatypes is a pointer comparison, and `reader` then reads the value as that type without a runtime
    /// cast (a `Date` would otherwise fail twenty `as?` below).
    ///
    /// Nil for any other type, or when `reader` cannot read it.
    private static func exactly(_ type: Any.Type, _ reader: some ExactValueReader) -> AttributeValue? {
        if type == String.self { return reader.read(String.self).map { .string($0) } }
        if type == Int.self { return reader.read(Int.self).map { .integer(Int64($0)) } }
        if type == Double.self { return reader.read(Double.self).map { .double($0) } }
        if type == Bool.self { return reader.read(Bool.self).map { .bool($0) } }
        if type == Date.self { return reader.read(Date.self).map { .date($0) } }
        if type == Int64.self { return reader.read(Int64.self).map { .integer($0) } }
        if type == Int32.self { return reader.read(Int32.self).map { .integer(Int64($0)) } }
        if type == Int16.self { return reader.read(Int16.self).map { .integer(Int64($0)) } }
        if type == Float.self { return reader.read(Float.self).map { .double(Double($0)) } }
        if type == Data.self { return reader.read(Data.self).map { .data($0) } }
        if type == UUID.self { return reader.read(UUID.self).map { .uuid($0) } }
        if type == Decimal.self { return reader.read(Decimal.self).map { .decimal($0) } }
        if type == URL.self { return reader.read(URL.self).map { .uri($0) } }
        return nil
    }

    /// Converts a value a Swift caller hands over (`String`, any integer, `Double`, `NSNumber`, `Date`, …) into an
    /// attribute value, without reference to any attribute type.
    ///
    /// Returns `nil` for values of no supported kind.
    ///
    /// `nil`, `NSNull` and `Optional.none` become `.null`.
    public init?(any value: __shared Any?) {
        guard let converted = Self.converting(value) else { return nil }
        self = converted
    }

    /// `init(any:)`'s work, on a borrowed value.
    ///
    /// A Swift initializer takes its argument owned, so calling one with a
    /// value the caller keeps costs a copy of the `Any` and its release, and unwrapping the optional costs another
    /// pair. This reads the common types straight out of the existential container instead (see
    /// `ExistentialContainer`), and copies only values of other types.
    public static func converting(_ value: Any?) -> AttributeValue? {
        guard ExistentialContainer.layoutIsKnown else {
            guard let value else { return .null }
            return converting(wrapped: value)
        }
        return withUnsafePointer(to: value) { converting(container: UnsafeRawPointer($0)) }
    }

    private static func converting(container: UnsafeRawPointer) -> AttributeValue? {
        guard let type = ExistentialContainer.type(in: container) else { return .null }
        return exactly(type, ContainerReader(container: container)) ?? converting(wrapped: container.load(as: Any.self))
    }

    /// The conversion of a value already unwrapped (and copied) out of its optional.
    static func converting(wrapped value: Any) -> AttributeValue? {
        // Exact value types first, by opening the existential: comparing metatypes is a pointer comparison and the
        // value is then read as that type without a runtime cast (a `Date` would otherwise fail twenty `as?` below).
        if let exact = Self.exactly(value) { return exact }  // the opened type: see `exactly(_:_:)`
        // Then the common concrete types: a cast to an existential (the optional check below) costs far more, and
        // these casts also see through an optional that is not nil.
        switch value {
        case let v as AttributeValue: return v
        case is NSNull: return .null
        // Before the numbers: an `NSDecimalNumber` (how Apple's code sets a decimal attribute) also casts to `Bool`,
        // `Int` or `Double`, which would lose its digits (19.99 read back as 19.990000000000002).
        case let v as NSDecimalNumber: return .decimal(v.decimalValue)
        case let v as String: return .string(v)
        case let v as Substring: return .string(String(v))
        case let v as Bool: return .bool(v)
        case let v as Int: return .integer(Int64(v))
        case let v as Int64: return .integer(v)
        case let v as Int32: return .integer(Int64(v))
        case let v as Int16: return .integer(Int64(v))
        case let v as Int8: return .integer(Int64(v))
        case let v as UInt8: return .integer(Int64(v))
        case let v as UInt16: return .integer(Int64(v))
        case let v as UInt32: return .integer(Int64(v))
        case let v as UInt: return Int64(exactly: v).map { .integer($0) }
        case let v as UInt64: return Int64(exactly: v).map { .integer($0) }
        case let v as Double: return .double(v)
        case let v as Float: return .double(Double(v))
        case let v as Decimal: return .decimal(v)
        case let v as NSNumber: return AttributeValue(number: v)
        case let v as Date: return .date(v)
        case let v as Data: return .data(v)
        case let v as UUID: return .uuid(v)
        case let v as URL: return .uri(v)
        case let v as NSString: return .string(v as String)
        default:
            // A nil optional inside the `Any` (for example `String?.none` passed as `Any?`).
            guard let optional = value as? any _OptionalProtocol else { return nil }
            return converting(optional._wrapped)
        }
    }

    /// Converts an `NSNumber`, keeping integers as integers and booleans as booleans.
    public init(number: NSNumber) {
        let type = String(cString: number.objCType)
        switch type {
        case "c", "B":
            // Foundation on Linux reports Bool NSNumbers as "c"; a char that is 0 or 1 reads as boolean.
            let v = number.int64Value
            self = (v == 0 || v == 1) ? .bool(v == 1) : .integer(v)
        case "f", "d": self = .double(number.doubleValue)
        case "Q", "L", "I", "S", "C":
            let u = number.uint64Value
            self = u <= UInt64(Int64.max) ? .integer(Int64(u)) : .double(number.doubleValue)
        default: self = .integer(number.int64Value)
        }
    }
}

/// Reads an `Any?` in place.
///
/// An `Any` is a container of three words of inline value buffer and a pointer to the
/// value's type metadata; a value of at most three words (with at most word alignment) is stored in the buffer itself,
/// a larger one in a box the buffer points to. `Optional<Any>` adds no tag: `nil` is a null type pointer. The layout is
/// Swift's stable ABI; `layoutIsKnown` checks it once at run time, and without it the readers are not used.
enum ExistentialContainer {
    private static let typeOffset = 3 * MemoryLayout<UInt>.stride

    static let layoutIsKnown: Bool = {
        guard MemoryLayout<Any?>.size == MemoryLayout<Any>.size, MemoryLayout<Any>.size == typeOffset + MemoryLayout<UInt>.size
        else { return false }
        let none: Any? = nil, text: Any? = "a string of more than fifteen bytes", number: Any? = 42
        return withUnsafePointer(to: none) { type(in: UnsafeRawPointer($0)) == nil }
            && withUnsafePointer(to: text) {
                type(in: UnsafeRawPointer($0)) == String.self
                    && inline(String.self, in: UnsafeRawPointer($0)) == "a string of more than fifteen bytes"
            }
            && withUnsafePointer(to: number) {
                type(in: UnsafeRawPointer($0)) == Int.self && inline(Int.self, in: UnsafeRawPointer($0)) == 42
            }
    }()

    /// The dynamic type of the value in the `Any?` at `container`, or nil for `nil`.
    static func type(in container: UnsafeRawPointer) -> Any.Type? {
        let word = container.load(fromByteOffset: typeOffset, as: UInt.self)
        return word == 0 ? nil : unsafeBitCast(word, to: Any.Type.self)
    }

    /// A copy of the value in the container, which must hold a `T`; nil if a `T` would not be stored inline. (Swift
    /// also boxes types that cannot be moved bit by bit, such as those holding weak references; no attribute value
    /// type is one.)
    @inline(__always)
    static func inline<T>(_: T.Type, in container: UnsafeRawPointer) -> T? {
        guard MemoryLayout<T>.size <= typeOffset, MemoryLayout<T>.alignment <= MemoryLayout<UInt>.alignment else { return nil }
        return container.load(as: T.self)
    }
}

extension AttributeValue {
    /// `exactly(_:_:)` of a value whose type is opened as `T`.
    fileprivate static func exactly<T>(_ value: T) -> AttributeValue? { exactly(T.self, OpenedValueReader(value: value)) }
}

/// Reads the value `AttributeValue.exactly(_:_:)` has identified as a `T`.
private protocol ExactValueReader {
    func read<T>(_: T.Type) -> T?
}

/// A value of an opened type, read as the type it was found to be (the types are equal, so the bit cast is exact).
private struct OpenedValueReader<Value>: ExactValueReader {
    let value: Value
    func read<T>(_: T.Type) -> T? { unsafeBitCast(value, to: T.self) }
}

/// A value in an `Any?` container, read in place when stored inline (see `ExistentialContainer`).
private struct ContainerReader: ExactValueReader {
    let container: UnsafeRawPointer
    func read<T>(_: T.Type) -> T? { ExistentialContainer.inline(T.self, in: container) }
}

/// Lets `AttributeValue(any:)` see through optionals nested inside `Any`.
package protocol _OptionalProtocol {
    var _wrapped: Any? { get }
}

extension Optional: _OptionalProtocol {
    package var _wrapped: Any? {
        switch self {
        case .some(let v): return v
        case .none: return nil
        }
    }
}

extension AttributeValue {
    /// The value as Core Data hands it out for an attribute of `type`: numbers and booleans as `NSNumber` (of the
    /// attribute's width), decimals as `NSDecimalNumber` (so that `as? Decimal`, `as? NSDecimalNumber` and
    /// `as? Double` all work, as on Apple's platforms), `String`, `Date`, `Data`, `UUID`, `URL`; nil for null.
    package func foundationValue(as type: NSAttributeType) -> Any? {
        switch self {
        case .null: return nil
        case .integer(let i):
            switch type {
            case .decimalAttributeType: return NSDecimalNumber(decimal: Decimal(i))
            case .booleanAttributeType: return NSNumber(value: i != 0)
            case .doubleAttributeType: return NSNumber(value: Double(i))
            case .floatAttributeType: return NSNumber(value: Float(i))
            case .integer16AttributeType: return NSNumber(value: Int16(truncatingIfNeeded: i))
            case .integer32AttributeType: return NSNumber(value: Int32(truncatingIfNeeded: i))
            default: return NSNumber(value: i)
            }
        case .double(let d):
            switch type {
            // (An average or a sum computed as a double, asked for as a decimal: an expression's result type.)
            case .decimalAttributeType where d.isFinite: return NSDecimalNumber(decimal: Decimal(d))
            case .floatAttributeType: return NSNumber(value: Float(d))
            default: return NSNumber(value: d)
            }
        case .bool(let b): return NSNumber(value: b)
        case .decimal(let d): return NSDecimalNumber(decimal: d)
        case .string(let s): return s
        case .date(let d): return d
        case .data(let d): return d
        case .uuid(let u): return u
        case .uri(let u): return u
        case .object(let o): return o.value
        }
    }
}

extension Decimal {
    /// The `Double` nearest to the decimal, rounded once.
    ///
    /// Foundation's `NSDecimalNumber.doubleValue` on Linux is not correctly rounded (19.99 gives 19.990000000000002):
    /// a decimal compared with a double, or bound as a REAL, then missed its own stored value. Reading the decimal's
    /// digits as a `Double` literal rounds once, as the store's text-to-number conversion does.
    package var nearestDouble: Double {
        Double(description) ?? NSDecimalNumber(decimal: self).doubleValue
    }
}
