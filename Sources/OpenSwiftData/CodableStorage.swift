internal import OpenCoreData
import Synchronization

/// How a `Codable` property that is not a string, number, date, model or raw-value enum is stored.
///
/// SwiftData keeps a `Codable` struct's fields in columns of the model's table (a Core Data composite attribute:
/// `ZSTREET`, `ZCITY` for an `address`), not as encoded bytes. OpenSwiftData does the same for a type whose
/// `init(from:)` reads a keyed container of fields that are themselves strings, numbers, dates, data, UUIDs, URLs,
/// raw-value enums or such structs (nested composites). The fields are found by decoding one value from a decoder that
/// records each key asked for and its type, so they follow the type's coding keys. Any other `Codable` value (an
/// array, a dictionary, a struct holding one) is a transformable attribute whose bytes are the value's binary property
/// list.
enum CodableStorage {
    /// How a type's values are stored.
    enum Shape: @unchecked Sendable {
        /// A composite of these elements.
        case composite([Field])
        /// Bytes a transformer makes; the transformer's registered name.
        case archived(String)
    }

    /// One field of a composite.
    struct Field: @unchecked Sendable {
        let name: String
        let type: Any.Type
        /// The fields of a nested composite.
        let nested: [Field]?
    }

    private static let shapes = Mutex<[ObjectIdentifier: Shape]>([:])

    /// The shape of `type`, worked out on first use (the transformer of an archived type is registered then).
    static func shape(of type: any Codable.Type) -> Shape {
        let key = ObjectIdentifier(type)
        if let known = shapes.withLock({ $0[key] }) { return known }
        let shape = fields(of: type).map(Shape.composite) ?? .archived(registerTransformer(for: type))
        shapes.withLock { $0[key] = shape }
        return shape
    }

    /// The attribute a `Codable` property of `type` is stored as.
    static func attribute(named name: String, type: any Codable.Type, isOptional: Bool) -> NSAttributeDescription {
        switch shape(of: type) {
        case .composite(let fields):
            let attribute = NSAttributeDescription(name: name, type: .compositeAttributeType, isOptional: isOptional)
            attribute.elements = fields.map(element)
            return attribute
        case .archived(let transformer):
            let attribute = NSAttributeDescription(name: name, type: .transformableAttributeType, isOptional: isOptional)
            attribute.valueTransformerName = transformer
            return attribute
        }
    }

    private static func element(_ field: Field) -> NSAttributeDescription {
        if let nested = field.nested {
            let attribute = NSAttributeDescription(name: field.name, type: .compositeAttributeType)
            attribute.elements = nested.map(element)
            return attribute
        }
        return NSAttributeDescription(name: field.name, type: Schema.attributeType(of: field.type) ?? .stringAttributeType)
    }

    /// The fields of `type` when it is a keyed struct of storable fields, else nil.
    private static func fields(of type: any Decodable.Type) -> [Field]? {
        let recorder = ShapeRecorder()
        guard (try? type.init(from: recorder)) != nil, recorder.isKeyed, !recorder.fields.isEmpty else { return nil }
        return recorder.fields
    }

    private static func registerTransformer<Value: Codable>(for type: Value.Type) -> String {
        let name = "OpenSwiftData.PropertyList<\(String(reflecting: Value.self))>"
        ValueTransformer.setValueTransformer(PropertyListTransformer<Value>(), forName: NSValueTransformerName(name))
        return name
    }

    /// A key path as a dictionary key (key paths are immutable values).
    private struct KeyPathKey: Hashable, @unchecked Sendable {
        let keyPath: AnyKeyPath
    }

    private static let fieldNames = Mutex<[KeyPathKey: String]>([:])

    /// The composite element `keyPath` reads on a value of `type` (a struct stored as a composite), or nil when it reads
    /// none, or the fields' placeholders cannot tell which (two fields of one enum type, three `Bool`s).
    static func fieldName(of keyPath: AnyKeyPath, in type: any Decodable.Type) -> String? {
        if let known = fieldNames.withLock({ $0[KeyPathKey(keyPath: keyPath)] }) { return known }
        let recorder = ShapeRecorder()
        guard let probe = try? type.init(from: recorder), recorder.isKeyed, let read = Self.read(keyPath, on: probe) else { return nil }
        let matches = zip(recorder.fields, recorder.values).filter { field, value in
            if let a = unwrapped(value) as? AnyHashable, let b = unwrapped(read) as? AnyHashable { return a == b }
            return field.nested != nil && Swift.type(of: value) == Swift.type(of: unwrapped(read) ?? read)
        }
        guard matches.count == 1 else { return nil }
        let name = matches[0].0.name
        fieldNames.withLock { $0[KeyPathKey(keyPath: keyPath)] = name }
        return name
    }

    /// The store key (`address.city`) of a key path through a model's composite property to one of its fields
    /// (`\Office.address.city`, a sort's key path, which cannot be taken apart): read on a model whose composite
    /// properties hold values decoded with a distinct placeholder per field; nil when it reads none of them.
    static func compositeKey<T: PersistentModel>(_ keyPath: AnyKeyPath, in type: T.Type) -> String? {
        guard let typed = keyPath as? PartialKeyPath<T> else { return nil }
        let backing = ModelBackingData(propertyCount: T.schemaMetadata.count)
        let counter = ShapeRecorder.Counter()
        var keys: [(value: AnyHashable, key: String)] = []
        for (index, property) in T.schemaMetadata.enumerated() {
            let base = Schema.unwrapped(Swift.type(of: property.keyPath).valueType).0
            guard let codable = base as? any Codable.Type, case .composite = shape(of: codable) else { continue }
            let recorder = ShapeRecorder(counter: counter)
            guard let probe = try? codable.init(from: recorder) else { continue }
            backing.keep(.boxed(probe), at: index)
            for (path, value) in recorder.leaves {
                if let hashable = unwrapped(value) as? AnyHashable { keys.append((hashable, "\(property.name).\(path)")) }
            }
        }
        guard !keys.isEmpty, let read = unwrapped(T(backingData: backing)[keyPath: typed]) as? AnyHashable else { return nil }
        let matches = keys.filter { $0.value == read }
        return matches.count == 1 ? matches[0].key : nil
    }

    /// The store key (`list.name`) of a key path through a to-one relationship to one of its destination's attributes
    /// (`\Reminder.list?.name`), or nil.
    ///
    /// Found as `compositeKey(_:in:)` finds a field: read on a model whose to-one
    /// relationships hold models whose attributes hold a distinct placeholder each.
    static func toOneKey<T: PersistentModel>(_ keyPath: AnyKeyPath, in type: T.Type) -> String? {
        guard let typed = keyPath as? PartialKeyPath<T> else { return nil }
        let backing = ModelBackingData(propertyCount: T.schemaMetadata.count)
        var keys: [(value: AnyHashable, key: String)] = []
        var n = 0
        for (index, property) in T.schemaMetadata.enumerated() {
            guard let destination = Schema.unwrapped(Swift.type(of: property.keyPath).valueType).0 as? any PersistentModel.Type else {
                continue
            }
            let related = ModelBackingData(propertyCount: destination.schemaMetadata.count)
            for (fieldIndex, field) in destination.schemaMetadata.enumerated() {
                n += 1
                guard let value = placeholder(of: Schema.unwrapped(Swift.type(of: field.keyPath).valueType).0, n) else { continue }
                related.keep(.boxed(value), at: fieldIndex)
                if let hashable = value as? AnyHashable { keys.append((hashable, "\(property.name).\(field.name)")) }
            }
            backing.keep(.boxed(destination.init(backingData: related)), at: index)
        }
        guard !keys.isEmpty, let read = unwrapped(T(backingData: backing)[keyPath: typed]) as? AnyHashable else { return nil }
        let matches = keys.filter { $0.value == read }
        return matches.count == 1 ? matches[0].key : nil
    }

    private static func read<Root>(_ keyPath: AnyKeyPath, on root: Root) -> Any? {
        (keyPath as? PartialKeyPath<Root>).map { root[keyPath: $0] }
    }

    /// The value inside an optional (nil for `nil`), or the value itself.
    private static func unwrapped(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        return mirror.children.first?.value
    }

    /// A composite's dictionary for `value` (nested structs as nested dictionaries, enums as raw values, nil fields
    /// left out).
    static func dictionary(for value: any Encodable) throws -> [String: Any] {
        let encoder = FieldEncoder()
        try value.encode(to: encoder)
        guard case .keyed(let box) = encoder.result else {
            throw SwiftDataError("\(type(of: value)) did not encode as keyed fields, so it cannot be stored as a composite.")
        }
        return box.resolved
    }

    /// The value of `type` a composite's dictionary holds.
    static func value<Value: Decodable>(_ type: Value.Type, from dictionary: [String: Any]) throws -> Value {
        try FieldDecoder(value: dictionary, codingPath: []).decode(Value.self)
    }
}

// MARK: Finding the fields

/// Placeholder values of the types a composite's element can have, so that a type's `init(from:)` runs to the end;
/// each field's differs from the others' (`n` counts the fields), so that a key path read on the value made says which
/// field it reads.
private func placeholder<T>(_ type: T.Type, _ n: Int) -> T? {
    placeholder(of: type, n) as? T
}

/// The placeholder of `type` (nil for a type that has none).
private func placeholder(of type: Any.Type, _ n: Int) -> Any? {
    // Integers from 100 up, so that no string placeholder's length (2 to 4) or count reads as one of them.
    let small = UInt8(truncatingIfNeeded: n + 100)
    let value: Any? =
        switch type {
        case is String.Type: "\u{1}\(n)"
        case is Bool.Type: n % 2 == 1
        case is Int.Type: Int(small)
        case is Int8.Type: Int8(truncatingIfNeeded: small)
        case is Int16.Type: Int16(small)
        case is Int32.Type: Int32(small)
        case is Int64.Type: Int64(small)
        case is UInt.Type: UInt(small)
        case is UInt8.Type: small
        case is UInt16.Type: UInt16(small)
        case is UInt32.Type: UInt32(small)
        case is UInt64.Type: UInt64(small)
        case is Double.Type: Double(n) + 0.5
        case is Float.Type: Float(n) + 0.5
        case is Decimal.Type: Decimal(n) + Decimal(0.5)
        case is Date.Type: Date(timeIntervalSinceReferenceDate: Double(n) + 0.5)
        case is Data.Type: Data([small])
        case is UUID.Type: UUID(uuid: (small, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        case is URL.Type: URL(string: "about:\(n)")
        default: nil
        }
    return value
}

/// A raw-value enum's first case: from `allCases`, or (an enum without payloads is a plain value whose zero bits
/// are its first case) from zeroed memory.
func firstCase<T>(_ type: T.Type) -> T? {
    if let iterable = type as? any CaseIterable.Type { return firstOf(iterable) as? T }
    guard _isPOD(T.self), MemoryLayout<T>.size <= 8 else { return nil }
    return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 1) { buffer in
        buffer[0] = 0
        return UnsafeRawPointer(buffer.baseAddress!).load(as: T.self)
    }
}

private func firstOf<C: CaseIterable>(_ type: C.Type) -> Any? { C.allCases.first }

/// The fields are not a composite's (an array, a single value, a type that throws).
private struct NotComposite: Error {}

/// A decoder that records the keys a type's `init(from:)` reads and their types, answering each with a placeholder.
private final class ShapeRecorder: Decoder {
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    var fields: [CodableStorage.Field] = []
    /// The placeholder each field was given, in order.
    var values: [Any] = []
    /// The placeholder of each field that is not a nested composite, nested composites' fields included, with its
    /// path from this value (`location.latitude`).
    var leaves: [(path: String, value: Any)] = []
    var isKeyed = false
    /// How many fields have been given placeholders, this value's and its nested values' together.
    private let counter: Counter

    final class Counter {
        var next = 0
    }

    init(counter: Counter = Counter()) { self.counter = counter }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard !isKeyed else { throw NotComposite() }
        isKeyed = true
        return KeyedDecodingContainer(Recording<Key>(recorder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw NotComposite() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { throw NotComposite() }

    /// A placeholder for field `key` of `type`, recording the field.
    func record<T: Decodable>(_ type: T.Type, key: String) throws -> T {
        guard !fields.contains(where: { $0.name == key }) else { throw NotComposite() }
        counter.next += 1
        if Schema.attributeType(of: type) != nil, !(type is any RawRepresentable.Type), let value = placeholder(type, counter.next) {
            fields.append(.init(name: key, type: type, nested: nil))
            values.append(value)
            leaves.append((key, value))
            return value
        }
        if let raw = type as? any RawRepresentable.Type, Schema.attributeType(of: type) != nil, let value = firstCase(type) {
            fields.append(.init(name: key, type: raw, nested: nil))
            values.append(value)
            leaves.append((key, value))
            return value
        }
        // A nested struct: its own fields.
        let nested = ShapeRecorder(counter: counter)
        let value = try T(from: nested)
        guard nested.isKeyed, !nested.fields.isEmpty else { throw NotComposite() }
        fields.append(.init(name: key, type: type, nested: nested.fields))
        values.append(value)
        leaves += nested.leaves.map { ("\(key).\($0.path)", $0.value) }
        return value
    }

    struct Recording<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let recorder: ShapeRecorder
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { [] }
        func contains(_ key: Key) -> Bool { true }
        /// Optional fields read nil: the field is recorded with its type when the decoding reads it after this.
        func decodeNil(forKey key: Key) throws -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try recorder.record(type, key: key.stringValue) }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            try recorder.record(type, key: key.stringValue)
        }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try recorder.record(type, key: key.stringValue) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try recorder.record(type, key: key.stringValue) }
        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
            -> KeyedDecodingContainer<NestedKey>
        { throw NotComposite() }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw NotComposite() }
        func superDecoder() throws -> any Decoder { throw NotComposite() }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw NotComposite() }
    }
}

// MARK: Archived values

/// Stores a `Codable` value as its binary property list (a value that is not a collection or keyed struct is kept in
/// a one-element array, as a property list has no bare top-level string or number); reads those, and keyed archives
/// of Foundation values that cast to the type (`[String]` archived by Core Data's default transformer).
private final class PropertyListTransformer<Value: Codable>: ValueTransformer, StoreDataTransformer, @unchecked Sendable {
    override class func transformedValueClass() -> AnyClass { NSData.self }
    override class func allowsReverseTransformation() -> Bool { true }
    override func transformedValue(_ value: Any?) -> Any? { value.flatMap { try? storeData(for: $0) } }
    override func reverseTransformedValue(_ value: Any?) -> Any? { (value as? Data).flatMap { try? self.value(fromStoreData: $0) } }

    func storeData(for value: Any) throws -> Data {
        guard let typed = value as? Value else { throw SwiftDataError("the value is a \(type(of: value)), not a \(Value.self)") }
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        do {
            return try encoder.encode(typed)
        } catch {
            return try encoder.encode([typed])
        }
    }

    func value(fromStoreData data: Data) throws -> Any? {
        let decoder = PropertyListDecoder()
        if let value = try? decoder.decode(Value.self, from: data) { return value }
        // A keyed archive of Foundation values (an array of strings archived by a store written elsewhere, as Core
        // Data's default transformer archives it).
        if let archived = try? NSSecureUnarchiveFromDataTransformer().value(fromStoreData: data), let value = archived as? Value {
            return value
        }
        do {
            guard let value = try decoder.decode([Value].self, from: data).first else {
                throw SwiftDataError("the stored property list holds no \(Value.self)")
            }
            return value
        } catch {
            throw SwiftDataError("the stored bytes are not a property list of \(Value.self): \(error)")
        }
    }
}
