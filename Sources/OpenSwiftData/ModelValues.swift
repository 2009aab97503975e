internal import OpenCoreData
import Synchronization

/// Conversion between a model property's Swift value and what a managed object holds.
enum ModelValues {
    /// nil as a `Value`, when `Value` is optional.
    static func none<Value>(as type: Value.Type) -> Value? {
        (Value.self as? any OptionalValue.Type)?.noneValue as? Value
    }

    /// `value` as a managed object's value: optionals unwrapped, enums as their raw values, models as their managed
    /// objects, arrays of models as sets of them.
    ///
    /// `asStored`: the attribute is transformable, so its transformer takes the value as it is (an optional unwrapped).
    static func encode<Value>(_ value: Value, asStored: Bool = false) -> Any? {
        // The kind of `Value` is worked out once per type: most values are strings, numbers and dates that a managed
        // object takes as they are, and the casts below cost more than setting them.
        switch kind(of: Value.self) {
        case .leaf: return value
        case .optional(let optional): return optional.type.encodeWrapped(value, asStored: asStored)
        case .codable:
            // A composite's dictionary, unless the attribute keeps the value as its transformer's bytes.
            guard !asStored, let encodable = value as? any Encodable,
                case .composite = CodableStorage.shape(of: Value.self as! any Codable.Type)
            else { return value }
            do {
                return try CodableStorage.dictionary(for: encodable)
            } catch {
                preconditionFailure("\(error)")
            }
        case .other: break
        }
        if asStored { return value }
        if let model = value as? any PersistentModel { return model.persistentBackingData.object }
        if Value.self is any ModelArray.Type, let models = value as? [any PersistentModel] {
            return Set(models.compactMap { $0.persistentBackingData.object })
        }
        if let managed = value as? any ManagedPropertyValue { return managed.managedValue }
        if let raw = value as? any RawRepresentable { return encodeRaw(raw) }
        return value
    }

    /// How a type's values are encoded.
    enum Kind: Sendable {
        /// Taken by a managed object as it is.
        case leaf
        /// An optional: its wrapped value is encoded.
        case optional(OptionalMetatype)
        /// A `Codable` type that is none of the others: a composite, or a transformable attribute's value.
        case codable
        /// Anything else: enums, models, arrays of models.
        case other
    }

    /// Whether the attribute `key` of `object` keeps a `Value` as its transformer's bytes (looked up only for the
    /// types that could be a composite's).
    static func isTransformed<Value>(_ key: String, of object: NSManagedObject, for type: Value.Type) -> Bool {
        let base = Schema.unwrapped(Value.self).0
        guard case .codable = kind(of: base) else { return false }
        return (object.entity.propertiesByName[key] as? NSAttributeDescription)?.attributeType == .transformableAttributeType
    }

    /// `Optional`'s metatype, seen through `OptionalValue`.
    struct OptionalMetatype: @unchecked Sendable {
        let type: any OptionalValue.Type
    }

    private static let kinds = Mutex<[ObjectIdentifier: Kind]>([:])

    /// The kind of `type`, worked out on first use.
    static func kind(of type: Any.Type) -> Kind {
        let key = ObjectIdentifier(type)
        if let known = kinds.withLock({ $0[key] }) { return known }
        let kind: Kind
        if let optional = type as? any OptionalValue.Type {
            kind = .optional(OptionalMetatype(type: optional))
        } else if Schema.attributeType(of: type) != nil, !(type is any RawRepresentable.Type) {
            kind = .leaf
        } else if type is any Codable.Type, Schema.attributeType(of: type) == nil, Schema.modelDestination(type) == nil,
            !(type is any ManagedPropertyValue.Type)
        {
            kind = .codable
        } else {
            kind = .other
        }
        kinds.withLock { $0[key] = kind }
        return kind
    }

    private static func encodeRaw<R: RawRepresentable>(_ value: R) -> Any? { encode(value.rawValue) }

    /// A managed object's value as a `Value`.
    static func decode<Value>(_ stored: Any?, as type: Value.Type, context: ModelContext?) -> Value {
        if let optional = Value.self as? any OptionalValue.Type {
            return optional.decodeWrapped(stored, context: context) as! Value
        }
        if let model = Value.self as? any PersistentModel.Type, let object = stored as? NSManagedObject, let context {
            return context.model(for: object, as: model) as! Value
        }
        if let element = (Value.self as? any ModelArray.Type)?.modelElement, let context {
            let objects = (stored as? Set<NSManagedObject>).map { Array($0) } ?? (stored as? [NSManagedObject]) ?? []
            let models = objects.sorted { $0.objectID < $1.objectID }.map { context.model(for: $0, as: element) }
            return (Value.self as! any ModelArray.Type).make(models) as! Value
        }
        if let value = stored as? Value { return value }
        if let managed = Value.self as? any ManagedPropertyValue.Type { return managed.fromManaged(stored) as! Value }
        if let raw = Value.self as? any RawRepresentable.Type, let made = decodeRaw(stored, as: raw, context: context) {
            return made as! Value
        }
        if let dictionary = stored as? [String: Any], let decodable = Value.self as? any Decodable.Type {
            do {
                return try CodableStorage.value(decodable, from: dictionary) as! Value
            } catch {
                preconditionFailure("cannot read the stored composite as \(Value.self): \(error)")
            }
        }
        preconditionFailure("cannot read a stored \(stored.map { "\(Swift.type(of: $0))" } ?? "nil") as \(Value.self)")
    }

    private static func decodeRaw<R: RawRepresentable>(_ stored: Any?, as type: R.Type, context: ModelContext?) -> R? {
        R(rawValue: decode(stored, as: R.RawValue.self, context: context))
    }

    /// Whether a value of `type` may hold models (a model, an array of models, or an optional of either).
    static func mayHoldModels(_ type: Any.Type) -> Bool {
        Schema.modelDestination(Schema.unwrapped(type).0) != nil
    }

    /// Inserts into `context` the models `value` holds that are not in a context yet (a related model goes in with
    /// the model that points to it, as in SwiftData).
    static func insertRelated<Value>(_ value: Value, into context: ModelContext) {
        for model in models(in: value) { context.insertIfDetached(model) }
    }

    /// The models `value` holds: itself if it is a model, its elements if it is an array of models, through an optional.
    static func models<Value>(in value: Value) -> [any PersistentModel] {
        if let model = value as? any PersistentModel { return [model] }
        if let models = value as? [any PersistentModel] { return models }
        if let optional = Value.self as? any OptionalValue.Type { return optional.wrappedModels(value) }
        return []
    }
}

/// `Optional`, seen through its wrapped type.
protocol OptionalValue {
    static var noneValue: Self { get }
    static func encodeWrapped<T>(_ value: T, asStored: Bool) -> Any?
    static func decodeWrapped(_ stored: Any?, context: ModelContext?) -> Any
    static func wrappedModels<T>(_ value: T) -> [any PersistentModel]
}

extension Optional: OptionalValue {
    static var noneValue: Self { nil }

    static func encodeWrapped<T>(_ value: T, asStored: Bool) -> Any? {
        guard let wrapped = value as! Wrapped? else { return nil }
        return ModelValues.encode(wrapped, asStored: asStored)
    }

    static func decodeWrapped(_ stored: Any?, context: ModelContext?) -> Any {
        guard let stored, !(stored is NSNull) else { return Wrapped?.none as Any }
        return Wrapped?.some(ModelValues.decode(stored, as: Wrapped.self, context: context)) as Any
    }

    static func wrappedModels<T>(_ value: T) -> [any PersistentModel] {
        guard let wrapped = value as! Wrapped? else { return [] }
        return ModelValues.models(in: wrapped)
    }
}

/// An array of models (a to-many relationship).
protocol ModelArray {
    static var modelElement: any PersistentModel.Type { get }
    static func make(_ models: [any PersistentModel]) -> Any
    /// `\.count` of the array type (a to-many's count in a predicate).
    static var countKeyPath: AnyKeyPath { get }
    /// `\.isEmpty` of the array type.
    static var isEmptyKeyPath: AnyKeyPath { get }
}

extension Array: ModelArray where Element: PersistentModel {
    static var modelElement: any PersistentModel.Type { Element.self }
    static func make(_ models: [any PersistentModel]) -> Any { models.map { $0 as! Element } }
    static var countKeyPath: AnyKeyPath { \[Element].count }
    static var isEmptyKeyPath: AnyKeyPath { \[Element].isEmpty }
}
