import Foundation
import OpenCoreDataModel
import Synchronization

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
        get {
            // A property the entity has remembered, read by index as `value(forKey:)` reads it; the rest (the first
            // read, a key path being translated into keys) takes the general path.
            if let index = object.accessorIndex(storageKeyPath), !object.isRecordingKeys {
                if let attribute = object.attributeValueAsAccessor(at: index), let value = Value.fromManagedAttribute(attribute) {
                    return value
                }
                return Value.fromManaged(object.valueAsAccessor(at: index))
            }
            return value(of: object, storage: storageKeyPath)
        }
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
        object.setAttributeValueAsAccessor(consume value, at: index, original: original)
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
