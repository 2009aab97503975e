import Foundation
import OpenCoreDataModel
import Synchronization

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
}

extension ManagedPropertyValue {
    /// No direct attribute value: the value goes through `setValue(_:forKey:)`.
    public var managedAttributeValue: AttributeValue? { nil }
}

/// A property of a typed `NSManagedObject` subclass, read and written through the object's key-value API.
///
/// This is OpenCoreData's stand-in for `@NSManaged`, which needs the Objective-C runtime:
/// ```swift
/// final class Product: NSManagedObject {
///     @Managed var name: String?
///     @Managed var price: Int32
///     @Managed var department: Department?
///     @Managed var tags: Set<Tag>
///     @Managed("created_at") var createdAt: Date?   // a model key that differs from the Swift name
/// }
/// ```
/// The model key is the Swift property name unless given (as a string literal). Non-optional scalars read 0, false or
/// "" when the stored value is nil, as Core Data's scalar accessors do. A typed accessor cannot throw: a key missing
/// from the model or a value out of the attribute's range stops with a precondition failure that names the class and
/// key (use `setValue(_:forKey:)` to get a thrown error instead).
@propertyWrapper
public struct Managed<Value: ManagedPropertyValue> {
    // Three words, nothing to release: each object of a typed class holds one per property, so the wrapper's size is
    // the object's size (with a `String?` key it was 40 bytes to copy and release per property; a W6 object grew by
    // 400 bytes, which showed in every pass of a save over its objects).
    /// The explicit model key, encoded by `ManagedKeyNames.word(for:)` (0 when the key is the property's name).
    @usableFromInline let explicitKeyWord: UInt
    /// Where the property is declared: names it among the class's properties, and keys the cache of model keys.
    @usableFromInline let site: ManagedKeyNames.Site

    // Inlinable: every object of a typed class runs it once per property, and inlined it is a few stores of constants.
    /// A property stored under the model key `key`, or under the property's own name.
    ///
    /// - Parameters:
    ///   - key: The model key, when it differs from the Swift property name (a string literal).
    ///   - _file: Where the property is declared (with `_line` and `_column`); leave it to its default.
    ///   - _line: The line of the declaration; leave it to its default.
    ///   - _column: The column of the declaration; leave it to its default.
    @inlinable
    public init(_ key: StaticString? = nil, _file: StaticString = #fileID, _line: UInt = #line, _column: UInt = #column) {
        self.explicitKeyWord = ManagedKeyNames.word(for: key)
        self.site = ManagedKeyNames.Site(file: _file, line: _line, column: _column)
    }

    /// The explicit model key, if one was given.
    var explicitKey: String? { ManagedKeyNames.key(from: explicitKeyWord) }

    /// Not available: `@Managed` reads and writes through the object it is declared in (see the subscript).
    @available(*, unavailable, message: "@Managed works only on properties of NSManagedObject subclasses")
    public var wrappedValue: Value {
        get { preconditionFailure("@Managed works only on properties of NSManagedObject subclasses") }
        // swiftlint:disable:next unused_setter_value
        set { preconditionFailure("@Managed works only on properties of NSManagedObject subclasses") }
    }

    // Inlinable, so that each class's accessors are specialized for their value type: `managedAttributeValue` is then
    // a direct call, not a generic one that copies the value through its type's witnesses.
    /// Reads and writes the property through the enclosing object's key-value API; Swift calls it, not you.
    @inlinable
    public static subscript<Object: NSManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Managed<Value>>
    ) -> Value {
        get { value(of: object, storage: storageKeyPath) }
        // Kept small and inlined into each caller, which then makes no key path for `wrappedKeyPath`.
        @inline(__always) set {
            if let index = object.accessorIndex(storageKeyPath), let value = newValue.managedAttributeValue {
                set(value, of: object, at: index) { newValue.managedValue }
            } else {
                setOtherwise(newValue, of: object, storage: storageKeyPath)
            }
        }
    }

    /// The setter's path for a key path the entity has not remembered yet, and for relationships.
    @usableFromInline @inline(never)
    static func setOtherwise<Object: NSManagedObject>(
        _ newValue: Value, of object: Object, storage: ReferenceWritableKeyPath<Object, Managed<Value>>
    ) {
        guard let index = object.accessorIndex(storage) ?? ManagedKeyNames.index(of: object, storage: storage) else {
            // Not a property of the object's entity: the key-value path reports it.
            set(newValue.managedValue, of: object, key: ManagedKeyNames.key(for: object, storage: storage))
            return
        }
        if let value = newValue.managedAttributeValue {
            set(value, of: object, at: index) { newValue.managedValue }
        } else {
            set(newValue.managedValue, of: object, at: index)
        }
    }

    @usableFromInline
    static func value<Object: NSManagedObject>(of object: Object, storage: ReferenceWritableKeyPath<Object, Managed<Value>>) -> Value {
        if let recorder = object.keyRecorder {
            // Translating a Swift key path into model keys: note the key, and return a stand-in value.
            recorder.keys.append(ManagedKeyNames.key(for: object, storage: storage))
            // A to-one (optional or not) continues the chain with a stand-in of its destination class.
            if let cls = (Value.self as? NSManagedObject.Type) ?? (Value.self as? any _OptionalManagedObject.Type)?.wrappedManagedType {
                return Value.fromManaged(recorder.standIn(cls))
            }
            return Value.fromManaged(nil)
        }
        let index = object.accessorIndex(storage) ?? ManagedKeyNames.index(of: object, storage: storage)
        do {
            if let index { return Value.fromManaged(try object.value(at: index)) }
            // Not a property of the entity: a subclass may answer it in `value(forUndefinedKey:)`.
            return Value.fromManaged(try object.checkedValue(forKey: ManagedKeyNames.key(for: object, storage: storage)))
        } catch let error as CoreDataError where error.code == .objectNotFound {
            return Value.fromManaged(nil)
        } catch {
            preconditionFailure("\(Object.self).\(ManagedKeyNames.key(for: object, storage: storage)): \(error)")
        }
    }

    /// The setter's path for a value with an attribute value at property `index`; `original` is the value for
    /// `setValue(_:forKey:)`.
    @usableFromInline
    static func set<Object: NSManagedObject>(
        _ value: consuming AttributeValue, of object: Object, at index: Int, original: () -> Any?
    ) {
        do {
            try object.setAttributeValue(consume value, at: index, original: original)
        } catch {
            // As `setValue(_:forKey:)`: a value the attribute cannot hold (NaN, an integer out of its range) fails
            // the next save instead of stopping the program.
            object.reject(error, key: object.entity.allProperties[index].name, value: original(), alternative: "setCheckedValue(_:forKey:)")
        }
    }

    /// The setter's path for other values (relationships) at property `index`.
    @usableFromInline
    static func set<Object: NSManagedObject>(_ value: Any?, of object: Object, at index: Int) {
        set(value, of: object, key: object.entity.allProperties[index].name)
    }

    /// The setter's path by key: for a key the entity does not have, whose error the key-value path reports.
    @usableFromInline
    static func set<Object: NSManagedObject>(_ value: Any?, of object: Object, key: String) {
        do {
            try object.setCheckedValue(value, forKey: key)
        } catch {
            object.reject(error, key: key, value: value, alternative: "setCheckedValue(_:forKey:)")
        }
    }
}

/// Records the model keys a Swift key path reads, by applying it to stand-in objects (`#Predicate` and
/// `SortDescriptor` translation).
final class KeyRecorder {
    var keys: [String] = []
    private let entity = NSEntityDescription(name: "_KeyRecorder")

    /// An unattached object of `cls` whose `@Managed` getters record into this recorder.
    func standIn(_ cls: NSManagedObject.Type) -> NSManagedObject {
        let object = cls.init(entity: entity, insertInto: nil)
        object.keyRecorder = self
        return object
    }

    /// The model keys `keyPath` reads from an object of `root`, or nil when it reads no `@Managed` property.
    static func keys(of keyPath: AnyKeyPath, root: NSManagedObject.Type) -> [String]? {
        let recorder = KeyRecorder()
        let object = recorder.standIn(root)
        _ = object[keyPath: keyPath]
        return recorder.keys.isEmpty ? nil : recorder.keys
    }
}

/// Finds the model key of each `@Managed` property: the explicit key, else the property's name, found once by
/// reflection and remembered by the place the property is declared.
///
/// Keys are also cached by the identity of the property's storage key path: Swift usually makes the key path of a
/// stored property once per class (once per specialization of a generic class) and hands out that same instance, so
/// the usual lookup costs no read of the wrapper and no hashing of a key path's components. The cache keeps each key
/// path it lists alive, so an identity it holds can never stand for another key path. Where Swift makes a new key
/// path on each access (seen for generic classes in unoptimized builds), a declaration stops adding identities after
/// `identitiesPerSite` and its key is found by its site; the identity cache also stops growing at `limit` entries.
///
/// This table is behind a mutex; accessors use it only the first time a key path meets an entity. A key path this
/// table lists has its property index remembered in the entity (`NSEntityDescription._accessorIndex(for:)`), which
/// accessors read without a lock from then on.
@usableFromInline
enum ManagedKeyNames {
    /// Where a `@Managed` property is declared: tells it apart from the class's other properties of the same type.
    @usableFromInline
    struct Site: Hashable, Sendable {
        /// The address of the `#fileID` literal (one per compiled file), or a hash of its text if it has none.
        @usableFromInline let file: UInt
        /// The line in the high 32 bits, the column in the low ones.
        @usableFromInline let position: UInt64

        @inlinable
        init(file: StaticString, line: UInt, column: UInt) {
            self.file =
                file.hasPointerRepresentation
                ? UInt(bitPattern: file.utf8Start) : UInt(bitPattern: file.description.hashValue)
            self.position = UInt64(truncatingIfNeeded: line) << 32 | UInt64(truncatingIfNeeded: column) & 0xFFFF_FFFF
        }
    }

    /// Marks a key word holding a Unicode scalar's value (user-space addresses never have the top bit set).
    // Computed, not a stored `static let`: inlined callers then fold the constant instead of calling its accessor.
    @inlinable static var scalarTag: UInt { 1 << (UInt.bitWidth - 1) }

    /// An explicit key as one word: the address of a literal's text (NUL-terminated UTF-8, as every `StaticString`
    /// with a pointer has), or a one-scalar literal's value tagged with `scalarTag`; 0 for none.
    @inlinable
    static func word(for key: StaticString?) -> UInt {
        guard let key else { return 0 }
        return key.hasPointerRepresentation ? UInt(bitPattern: key.utf8Start) : UInt(key.unicodeScalar.value) | scalarTag
    }

    /// The key a word from `word(for:)` stands for.
    static func key(from word: UInt) -> String? {
        if word == 0 { return nil }
        if word & scalarTag != 0 { return Unicode.Scalar(UInt32(truncatingIfNeeded: word & ~scalarTag)).map { String($0) } }
        return UnsafePointer<UInt8>(bitPattern: word).map { String(decodingCString: $0, as: UTF8.self) }
    }

    private struct Entry: @unchecked Sendable {  // key paths are immutable
        let keyPath: AnyKeyPath
        let key: String
    }

    private struct State: @unchecked Sendable {
        var byKeyPath: [_IdentityKey: Entry] = [:]
        /// Per declaration: its key, and how many key path identities have been cached for it.
        var bySite: [Site: (key: String, identities: Int)] = [:]
    }

    static let limit = 4096
    static let identitiesPerSite = 16
    private static let state = Mutex(State())

    @usableFromInline
    static func key<Object: NSManagedObject, Value>(for object: Object, storage: ReferenceWritableKeyPath<Object, Managed<Value>>)
        -> String
    {
        lookUp(for: object, storage: storage).key
    }

    /// The key, and whether `storage`'s identity is listed (so the key path is kept alive and may be remembered by
    /// identity elsewhere).
    private static func lookUp<Object: NSManagedObject, Value>(
        for object: Object, storage: ReferenceWritableKeyPath<Object, Managed<Value>>
    ) -> (key: String, listed: Bool) {
        let id = _IdentityKey(storage)
        if let key = state.withLock({ $0.byKeyPath[id]?.key }) { return (key, true) }
        let wrapper = object[keyPath: storage]
        let known = state.withLock { $0.bySite[wrapper.site]?.key }
        let key = known ?? wrapper.explicitKey ?? name(of: wrapper, in: object)
        let listed = state.withLock { state -> Bool in
            var site = state.bySite[wrapper.site] ?? (key, 0)
            guard site.identities < identitiesPerSite, state.byKeyPath.count < limit else { return false }
            site.identities += 1
            state.bySite[wrapper.site] = site
            state.byKeyPath[id] = Entry(keyPath: storage, key: key)
            return true
        }
        return (key, listed)
    }

    /// The property's index in the object's entity (nil when the entity has no property of its key), remembered in
    /// the entity for the key path when this table lists it.
    @usableFromInline
    static func index<Object: NSManagedObject, Value>(of object: Object, storage: ReferenceWritableKeyPath<Object, Managed<Value>>)
        -> Int?
    {
        let (key, listed) = lookUp(for: object, storage: storage)
        let entity = object.entity
        guard let index = entity.propertyIndex(named: key) else { return nil }
        if listed { entity._rememberAccessorIndex(index, for: storage) }
        return index
    }

    /// How many key path identities have been cached for the declaration at `site` (for tests).
    static func identities(at site: Site) -> Int { state.withLock { $0.bySite[site]?.identities ?? 0 } }

    /// The name of the property `wrapper` is the storage of, found by reflection.
    private static func name<Object: NSManagedObject, Value>(of wrapper: Managed<Value>, in object: Object) -> String {
        var mirror: Mirror? = Mirror(reflecting: object)
        while let m = mirror {
            for child in m.children {
                if let candidate = child.value as? Managed<Value>, candidate.site == wrapper.site, let label = child.label {
                    return label.hasPrefix("_") ? String(label.dropFirst()) : label
                }
            }
            mirror = m.superclassMirror
        }
        preconditionFailure("Cannot find the name of a @Managed property of \(Object.self); give its key: @Managed(\"key\").")
    }
}

/// Lets the key recorder see the class inside `Optional<SomeManagedObject>`.
protocol _OptionalManagedObject {
    static var wrappedManagedType: NSManagedObject.Type { get }
}

extension Optional: _OptionalManagedObject where Wrapped: NSManagedObject {
    static var wrappedManagedType: NSManagedObject.Type { Wrapped.self }
}

// MARK: Conformances

extension Optional: ManagedPropertyValue where Wrapped: ManagedPropertyValue {
    /// `value` as the wrapped type, or nil when `value` is nil or `NSNull`.
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
    /// `value` as a `String`; nil reads as "", as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> String { value as? String ?? "" }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.string`).
    @inlinable public var managedAttributeValue: AttributeValue? { .string(self) }
}

extension Bool: ManagedPropertyValue {
    /// `value` as a `Bool`; nil reads as false, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Bool { (value as? NSNumber)?.boolValue ?? false }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.bool`).
    @inlinable public var managedAttributeValue: AttributeValue? { .bool(self) }
}

extension Int: ManagedPropertyValue {
    /// `value` as an `Int`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Int { (value as? NSNumber)?.intValue ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.integer`).
    @inlinable public var managedAttributeValue: AttributeValue? { .integer(Int64(self)) }
}

extension Int16: ManagedPropertyValue {
    /// `value` as an `Int16`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Int16 { (value as? NSNumber)?.int16Value ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.integer`).
    @inlinable public var managedAttributeValue: AttributeValue? { .integer(Int64(self)) }
}

extension Int32: ManagedPropertyValue {
    /// `value` as an `Int32`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Int32 { (value as? NSNumber)?.int32Value ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.integer`).
    @inlinable public var managedAttributeValue: AttributeValue? { .integer(Int64(self)) }
}

extension Int64: ManagedPropertyValue {
    /// `value` as an `Int64`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Int64 { (value as? NSNumber)?.int64Value ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.integer`).
    @inlinable public var managedAttributeValue: AttributeValue? { .integer(self) }
}

extension Double: ManagedPropertyValue {
    /// `value` as a `Double`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Double { (value as? NSNumber)?.doubleValue ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.double`).
    @inlinable public var managedAttributeValue: AttributeValue? { .double(self) }
}

extension Float: ManagedPropertyValue {
    /// `value` as a `Float`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Float { (value as? NSNumber)?.floatValue ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.double`).
    @inlinable public var managedAttributeValue: AttributeValue? { .double(Double(self)) }
}

extension Decimal: ManagedPropertyValue {
    /// `value` as a `Decimal`; nil reads as 0, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Decimal { value as? Decimal ?? 0 }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.decimal`).
    @inlinable public var managedAttributeValue: AttributeValue? { .decimal(self) }
}

extension Date: ManagedPropertyValue {
    /// `value` as a `Date`; nil reads as the reference date (2001-01-01), as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Date { value as? Date ?? Date(timeIntervalSinceReferenceDate: 0) }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.date`).
    @inlinable public var managedAttributeValue: AttributeValue? { .date(self) }
}

extension Data: ManagedPropertyValue {
    /// `value` as a `Data`; nil reads as empty data, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> Data { value as? Data ?? Data() }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.data`).
    @inlinable public var managedAttributeValue: AttributeValue? { .data(self) }
}

extension UUID: ManagedPropertyValue {
    /// `value` as a `UUID`; nil reads as the all-zero UUID, as Core Data's scalar accessors read it.
    public static func fromManaged(_ value: Any?) -> UUID { value as? UUID ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
    /// The value itself, as `setValue(_:forKey:)` takes it.
    public var managedValue: Any? { self }
    /// The value as the attribute value it is stored as (`.uuid`).
    @inlinable public var managedAttributeValue: AttributeValue? { .uuid(self) }
}

extension URL: ManagedPropertyValue {
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
