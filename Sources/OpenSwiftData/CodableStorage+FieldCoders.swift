internal import OpenCoreData

// How a composite's value (the `[String: Any]` of its elements) is made from a `Codable` value and read back: an encoder
// and a decoder that work on dictionaries, for `CodableStorage`.

// MARK: Encoding to a dictionary

/// Encodes a value as a composite holds it: a keyed value as a dictionary, a single value as itself.
final class FieldEncoder: Encoder {
    final class Fields {
        var fields: [String: Any] = [:]
        /// The fields, with those of nested containers as dictionaries.
        var resolved: [String: Any] { fields.mapValues { ($0 as? Fields)?.resolved ?? $0 } }
    }

    enum Result {
        case none
        case keyed(Fields)
        case single(Any)
    }

    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    var result = Result.none

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: Fields
        if case .keyed(let existing) = result {
            box = existing
        } else {
            box = Fields()
            result = .keyed(box)
        }
        return KeyedEncodingContainer(Keyed<Key>(box: box))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { Unsupported(codingPath: codingPath) }
    func singleValueContainer() -> any SingleValueEncodingContainer { Single(encoder: self) }

    /// `value` as a composite's element holds it.
    static func element<T: Encodable>(_ value: T) throws -> Any? {
        if Schema.attributeType(of: T.self) != nil, !(T.self is any RawRepresentable.Type) { return value }
        let encoder = FieldEncoder()
        try value.encode(to: encoder)
        switch encoder.result {
        case .none: return nil
        case .keyed(let box): return box.resolved
        case .single(let single): return single
        }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let box: Fields
        var codingPath: [any CodingKey] { [] }
        mutating func encodeNil(forKey key: Key) throws {}
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            box.fields[key.stringValue] = try FieldEncoder.element(value)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
            -> KeyedEncodingContainer<NestedKey>
        {
            let nested = Fields()
            box.fields[key.stringValue] = nested
            return KeyedEncodingContainer(Keyed<NestedKey>(box: nested))
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { Unsupported(codingPath: [key]) }
        mutating func superEncoder() -> any Encoder { FieldEncoder() }
        mutating func superEncoder(forKey key: Key) -> any Encoder { FieldEncoder() }
    }

    struct Single: SingleValueEncodingContainer {
        let encoder: FieldEncoder
        var codingPath: [any CodingKey] { [] }
        mutating func encodeNil() throws { encoder.result = .none }
        mutating func encode<T: Encodable>(_ value: T) throws {
            if let element = try FieldEncoder.element(value) { encoder.result = .single(element) } else { encoder.result = .none }
        }
    }

    /// Arrays have no place in a composite (a type that holds one is archived instead).
    struct Unsupported: UnkeyedEncodingContainer {
        var codingPath: [any CodingKey]
        var count: Int { 0 }
        private func fail() -> any Error {
            EncodingError.invalidValue([], .init(codingPath: codingPath, debugDescription: "a composite holds no arrays"))
        }
        mutating func encodeNil() throws { throw fail() }
        mutating func encode<T: Encodable>(_ value: T) throws { throw fail() }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            KeyedEncodingContainer(Keyed<NestedKey>(box: Fields()))
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
        mutating func superEncoder() -> any Encoder { FieldEncoder() }
    }
}

// MARK: Decoding from a dictionary

/// Decodes a value from what a composite holds: a dictionary of its elements (numbers as `NSNumber` or Swift
/// integers and floating-point numbers).
struct FieldDecoder: Decoder {
    let value: Any?
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard let fields = value as? [String: Any] else {
            throw DecodingError.typeMismatch(
                [String: Any].self,
                .init(codingPath: codingPath, debugDescription: "the stored composite is \(value.map { "\(Swift.type(of: $0))" } ?? "nil")")
            )
        }
        return KeyedDecodingContainer(Keyed<Key>(fields: fields, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "a composite holds no arrays"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(decoder: self) }

    /// The value as a `T`: converted when `T` is an element type, else decoded by `T`'s `init(from:)`.
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if Schema.attributeType(of: T.self) != nil, !(T.self is any RawRepresentable.Type) {
            guard let converted = Self.convert(value, to: T.self) else {
                throw DecodingError.typeMismatch(
                    T.self,
                    .init(codingPath: codingPath, debugDescription: "the stored value is \(value.map { "\(Swift.type(of: $0))" } ?? "nil")")
                )
            }
            return converted
        }
        return try T(from: self)
    }

    /// A stored element value as `T`.
    static func convert<T>(_ value: Any?, to type: T.Type) -> T? {
        guard let value, !(value is NSNull) else { return nil }
        if let same = value as? T { return same }
        let number: NSNumber? =
            switch value {
            case let n as NSNumber: n
            case let i as Int: NSNumber(value: i)
            case let i as Int64: NSNumber(value: i)
            case let d as Double: NSNumber(value: d)
            case let b as Bool: NSNumber(value: b)
            default: nil
            }
        if let number {
            let converted: Any? =
                switch type {
                case is Bool.Type: number.boolValue
                case is Int.Type: Int(exactly: number.int64Value)
                case is Int8.Type: Int8(exactly: number.int64Value)
                case is Int16.Type: Int16(exactly: number.int64Value)
                case is Int32.Type: Int32(exactly: number.int64Value)
                case is Int64.Type: number.int64Value
                case is UInt.Type: UInt(exactly: number.int64Value)
                case is UInt8.Type: UInt8(exactly: number.int64Value)
                case is UInt16.Type: UInt16(exactly: number.int64Value)
                case is UInt32.Type: UInt32(exactly: number.int64Value)
                case is UInt64.Type: UInt64(bitPattern: number.int64Value)
                case is Double.Type: number.doubleValue
                case is Float.Type: number.floatValue
                case is Decimal.Type: number.decimalValue
                default: nil
                }
            return converted as? T
        }
        if T.self == Decimal.self, let decimal = value as? NSDecimalNumber { return decimal.decimalValue as? T }
        return nil
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let fields: [String: Any]
        let codingPath: [any CodingKey]
        var allKeys: [Key] { fields.keys.compactMap { Key(stringValue: $0) } }
        func contains(_ key: Key) -> Bool { fields[key.stringValue] != nil }
        func decodeNil(forKey key: Key) throws -> Bool {
            guard let value = fields[key.stringValue] else { return true }
            return value is NSNull
        }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            guard let value = fields[key.stringValue], !(value is NSNull) else {
                throw DecodingError.keyNotFound(
                    key, .init(codingPath: codingPath, debugDescription: "the stored composite has no '\(key.stringValue)'"))
            }
            return try FieldDecoder(value: value, codingPath: codingPath + [key]).decode(T.self)
        }
        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
            -> KeyedDecodingContainer<NestedKey>
        { try FieldDecoder(value: fields[key.stringValue], codingPath: codingPath + [key]).container(keyedBy: type) }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try FieldDecoder(value: nil, codingPath: codingPath + [key]).unkeyedContainer()
        }
        func superDecoder() throws -> any Decoder { FieldDecoder(value: fields, codingPath: codingPath) }
        func superDecoder(forKey key: Key) throws -> any Decoder {
            FieldDecoder(value: fields[key.stringValue], codingPath: codingPath + [key])
        }
    }

    struct Single: SingleValueDecodingContainer {
        let decoder: FieldDecoder
        var codingPath: [any CodingKey] { decoder.codingPath }
        func decodeNil() -> Bool { decoder.value == nil || decoder.value is NSNull }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decode(T.self) }
    }
}
