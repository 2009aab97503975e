internal import OpenCoreData
internal import OpenCoreDataRuntimeShims
import Synchronization

public import protocol OpenCoreDataContext.ManagedPropertyValue
public import enum OpenCoreDataModel.AttributeValue

/// Where a model's values live.
///
/// Until the model is inserted into a context its accessors keep values in the model itself; once inserted (or when
/// a context made the model for a fetched row) they read and write the managed object that holds its row. The
/// accessors `@Model` writes call `setInitialValue(_:forKey:at:)`, `value(forKey:at:)` and `setValue(_:forKey:at:)`.
public final class ModelBackingData {
    // Unchecked exclusivity on these three, as on the held values below: a model (and so its backing data) is used from
    // one thread at a time, and the accessors read them on every call (a checked access cost 76 instructions a set).
    /// The managed object of the model's row, once inserted or fetched.
    @exclusivity(unchecked) var object: NSManagedObject?
    /// The context the model belongs to, kept alive by its models (as a fetched array is used after the expression
    /// that made the context: `try ModelContext(container).fetch(…)`); the context holds its models' rows weakly, so
    /// there is no cycle.
    @exclusivity(unchecked) var context: ModelContext?
    /// The identifier of a model not inserted yet (made on first use).
    private var detachedIdentifier: PersistentIdentifier?
    /// Where the accessors find the direct attributes on the model's row (set at insert, else found on first use).
    @exclusivity(unchecked) var layout: ModelLayout?

    /// Backing data for a model not inserted into a context yet.
    public init() {}

    /// Backing data for a model of `propertyCount` persisted properties not inserted into a context yet (`@Model`
    /// passes the count, so that the values it keeps have their places from the start).
    public init(propertyCount: Int) {
        if propertyCount > 0 { makeRoom(for: propertyCount) }
    }

    deinit {
        discardHeld()
    }

    init(object: NSManagedObject, context: ModelContext) {
        self.object = object
        self.context = context
    }

    /// The identifier of a model of entity `entityName` (temporary until saved).
    func identifier(entityName: @autoclosure () -> String) -> PersistentIdentifier {
        if let object { return PersistentIdentifier(objectID: object.objectID) }
        if let detachedIdentifier { return detachedIdentifier }
        let made = PersistentIdentifier(temporaryFor: entityName())
        detachedIdentifier = made
        return made
    }

    /// A value a model not inserted yet holds.
    @usableFromInline enum Held {
        /// Not set.
        case none
        /// A string, number, date… as the attribute value it is stored as (no box, no cast when it is inserted).
        case direct(AttributeValue)
        /// Any other value, in a box of its own (a reference: an `Any` inline would make every held value 40 bytes
        /// instead of 24, and most are strings, numbers and dates).
        case box(HeldBox)

        /// Any other value, boxed.
        @inlinable static func boxed(_ value: Any) -> Held { .box(HeldBox(value)) }
    }

    /// A value held boxed: a model, an enum, a composite, an array… (`Held.box`).
    @usableFromInline final class HeldBox {
        @usableFromInline let value: Any
        @usableFromInline init(_ value: Any) { self.value = value }
    }

    /// The values of a model not inserted yet, by the property's position in its class's `schemaMetadata`:
    /// `heldCount` of them, in memory this backing data allocates and frees (none once the model has a row).
    ///
    /// Plain memory, not an array of `Held`: making an array looks its generic storage class up in the runtime's
    /// metadata cache each time and destroying one goes through generic value witnesses (1.5k of the 19k instructions
    /// a `@Model` make-and-insert cost, W6's contender under callgrind), and an array in a class property costs a
    /// retain, a release and exclusivity checks at each set. Unchecked exclusivity: a model (and so its backing data)
    /// is used from one thread at a time, as SwiftData's models are not `Sendable`. Every test that makes a model runs
    /// this path.
    @exclusivity(unchecked) private var held: UnsafeMutablePointer<Held>?
    @exclusivity(unchecked) private(set) var heldCount = 0

    /// The held value at `index` (none past the end).
    func heldValue(at index: Int) -> Held {
        guard index >= 0, index < heldCount, let held else { return .none }
        return held[index]
    }

    /// Allocates `count` positions, none set, with the values held so far moved into theirs.
    private func makeRoom(for count: Int) {
        let made = UnsafeMutablePointer<Held>.allocate(capacity: count)
        made.initialize(repeating: .none, count: count)
        if let held {
            for index in 0..<Swift.min(count, heldCount) { swap(&made[index], &held[index]) }
        }
        discardHeld()
        (held, heldCount) = (made, count)
    }

    /// Frees the held values: once the model has its row, or when the backing data goes.
    func discardHeld() {
        guard let held else { return }
        held.deinitialize(count: heldCount)
        held.deallocate()
        (self.held, heldCount) = (nil, 0)
    }

    /// Moves the held value at `index` out (none past the end), leaving none there: no retain and release of a string.
    func takeHeld(at index: Int) -> Held {
        guard index >= 0, index < heldCount, let held else { return .none }
        var taken = Held.none
        swap(&taken, &held[index])
        return taken
    }

    /// Keeps a property's initial value (the model's initializer sets it through the property's `init` accessor);
    /// `index` is the property's position in its class's `schemaMetadata`.
    public func setInitialValue<Value>(_ value: Value, forKey key: String, at index: Int) {
        keep(.boxed(value), at: index)
    }

    /// Keeps the initial value of a string, number, date, data, UUID or URL property (or an optional one) as the
    /// attribute value it is stored as.
    ///
    /// Inlinable, so that each model's initializer is specialized for the property's type: its attribute value is
    /// then made directly, not through the generic witnesses of `Optional`'s conformance (W6's `@Model` contender).
    @inlinable
    public func setInitialValue<Value: ManagedPropertyValue>(_ value: Value, forKey key: String, at index: Int) {
        if let attribute = value.managedAttributeValue {
            keep(.direct(attribute), at: index)
        } else {
            keep(.boxed(value), at: index)
        }
    }

    @usableFromInline
    func keep(_ value: consuming Held, at index: Int) {
        if index < heldCount, let held {
            held[index] = value
            return
        }
        precondition(index >= 0, "a model property's position is never negative")
        makeRoom(for: Swift.max(16, index + 1))
        held![index] = value
    }

    /// Takes the values a subclass's part of a model kept apart until the model's backing data was first asked for (a
    /// subclass initializes its own properties before its superclass's initializer has run): positions `start..<end`.
    public func adopt(_ other: ModelBackingData, from start: Int, to end: Int) {
        guard other !== self, object == nil else { return }
        for index in start..<Swift.min(end, other.heldCount) {
            let value = other.heldValue(at: index)
            if case .none = value { continue }
            keep(value, at: index)
        }
    }

    /// An attribute value as `value(forKey:)` returns it (numbers as `NSNumber`), whatever the attribute's width.
    static func managedValue(_ value: AttributeValue) -> Any? { value.foundationValue(as: .undefinedAttributeType) }

    /// The value of the persisted property `key` (at `index` in its class's `schemaMetadata`): the row's once the model
    /// is in a context, else the one the model holds.
    public func value<Value>(forKey key: String, at index: Int) -> Value {
        guard let object else {
            if case .box(let held) = heldValue(at: index), let value = held.value as? Value { return value }
            if let none = ModelValues.none(as: Value.self) { return none }
            preconditionFailure("\(Value.self) property '\(key)' was read before it was set")
        }
        return ModelValues.decode(object.value(forKey: key), as: Value.self, context: context)
    }

    /// The value of a string, number, date, data, UUID or URL property (or an optional one).
    ///
    /// Inlinable, as the setter: specialized for the property's type in the model's getter, so that the value is made
    /// from what the row holds by its type's own code, not through `Optional`'s generic witnesses.
    @inlinable
    public func value<Value: ManagedPropertyValue>(forKey key: String, at index: Int) -> Value {
        guard isDetached else {
            if let attribute = rowAttributeValue(at: index), let value = Value.fromManagedAttribute(attribute) { return value }
            return Value.fromManaged(rowValue(forKey: key, at: index))
        }
        return heldValue(forKey: key, at: index)
    }

    /// The attribute value the row holds for the direct attribute at `index` in the model's metadata, read as a
    /// `@Managed` property reads it (no `Any` made); nil for any other property.
    @usableFromInline func rowAttributeValue(at index: Int) -> AttributeValue? {
        guard let object, let entityIndex = rowIndex(at: index, of: object) else { return nil }
        return object.attributeValueAsAccessor(at: entityIndex)
    }

    /// The value a model not in a context yet holds for a string, number, date… property.
    @usableFromInline func heldValue<Value: ManagedPropertyValue>(forKey key: String, at index: Int) -> Value {
        switch heldValue(at: index) {
        case .direct(let held): return Value.fromManaged(Self.managedValue(held))
        case .box(let held): if let value = held.value as? Value { return value }
        case .none: break
        }
        if let none = ModelValues.none(as: Value.self) { return none }
        preconditionFailure("\(Value.self) property '\(key)' was read before it was set")
    }

    /// The row's value of property `key` (at `index` in its class's `schemaMetadata`) as `value(forKey:)` gives it: by
    /// index, as a `@Managed` property reads it, when it is a direct attribute (no lookup of the key).
    @usableFromInline func rowValue(forKey key: String, at index: Int) -> Any? {
        guard let object else { preconditionFailure("'\(key)' was read from the row of a model that has none") }
        if let entityIndex = rowIndex(at: index, of: object) { return object.valueAsAccessor(at: entityIndex) }
        return object.value(forKey: key)
    }

    /// Sets the persisted property `key` (at `index` in its class's `schemaMetadata`): on the row once the model is in
    /// a context, else in the model.
    public func setValue<Value>(_ value: Value, forKey key: String, at index: Int) {
        guard let object else {
            keep(.boxed(value), at: index)
            return
        }
        set(value, forKey: key, on: object)
    }

    /// Sets a string, number, date, data, UUID or URL property (or an optional one); a model not in a context yet keeps
    /// its attribute value.
    ///
    /// Inlinable, as `setInitialValue` is: specialized for the property's type in the model's setter.
    @inlinable
    public func setValue<Value: ManagedPropertyValue>(_ value: Value, forKey key: String, at index: Int) {
        guard isDetached else {
            // A string, number, date… goes to the row by index as its attribute value, as a `@Managed` property sets it.
            if let attribute = value.managedAttributeValue, setOnRow(attribute, at: index, original: { value.managedValue }) { return }
            setOnRow(value, forKey: key)
            return
        }
        if let attribute = value.managedAttributeValue {
            keep(.direct(attribute), at: index)
        } else {
            keep(.boxed(value), at: index)
        }
    }

    /// Whether the model has no row yet (its values are kept here).
    @usableFromInline var isDetached: Bool { object == nil }

    /// Sets the direct attribute at `index` (the property's position in its class's `schemaMetadata`) on the model's
    /// row, by its index in the row's entity; false when the property is not one (the caller sets it by key).
    @usableFromInline func setOnRow(_ attribute: consuming AttributeValue, at index: Int, original: () -> Any?) -> Bool {
        guard let object, let entityIndex = rowIndex(at: index, of: object) else { return false }
        object.setAttributeValueAsAccessor(attribute, at: entityIndex, original: original)
        context?.noteChange()
        return true
    }

    /// The index in `object`'s entity of the direct attribute at `index` in the model's metadata (nil for any other).
    ///
    /// `object` is the model's row. The layout is the insert's, or found for the row's entity on first use.
    private func rowIndex(at index: Int, of object: NSManagedObject) -> Int? {
        if let layout, layout.entity === object.entity { return layout.entityIndex(at: index) }
        guard let found = context?.container.layout(for: object.entity) else { return nil }
        layout = found
        return found.entityIndex(at: index)
    }

    /// Sets property `key` on the model's row.
    @usableFromInline func setOnRow<Value>(_ value: Value, forKey key: String) {
        guard let object else { preconditionFailure("'\(key)' was set on the row of a model that has none") }
        set(value, forKey: key, on: object)
    }

    private func set<Value>(_ value: Value, forKey key: String, on object: NSManagedObject) {
        if let context, ModelValues.mayHoldModels(Value.self) { ModelValues.insertRelated(value, into: context) }
        object.setValue(ModelValues.encode(value, asStored: ModelValues.isTransformed(key, of: object, for: Value.self)), forKey: key)
        context?.noteChange()
    }
}

/// The managed object of a model's row: it remembers the model without keeping it alive (a model nobody holds goes, and
/// a later fetch makes a new one for the same row).
///
/// Not through a weak reference: the first one made to an object gives it a side table (an allocation, and reference
/// counting through it until the object goes), one per model. The row holds an unowned reference instead, which keeps
/// the model's memory but not the model, and reads it with the runtime's `swift_tryRetain`, which fails once the
/// model's `deinit` has begun: a dying model is never handed out, and a new one is made for the row.
final class ModelObject: NSManagedObject {
    /// The model's address, on which the object holds an unowned reference (0: none); behind a lock, so that a read
    /// never meets an address a write on another thread is letting go.
    private let modelAddress = Mutex<UInt>(0)

    /// The model of the row, while it is alive.
    var model: AnyObject? {
        get {
            let retained = modelAddress.withLock { address -> UInt in
                guard let held = UnsafeMutableRawPointer(bitPattern: address) else { return 0 }
                return UInt(bitPattern: swift_tryRetain(held))
            }
            guard let pointer = UnsafeMutableRawPointer(bitPattern: retained) else { return nil }
            return Unmanaged<AnyObject>.fromOpaque(pointer).takeRetainedValue()
        }
        set {
            let new = newValue.map { UInt(bitPattern: swift_unownedRetain(Unmanaged.passUnretained($0).toOpaque())) } ?? 0
            let old = modelAddress.withLock { address in
                defer { address = new }
                return address
            }
            if let old = UnsafeMutableRawPointer(bitPattern: old) { swift_unownedRelease(old) }
        }
    }

    deinit {
        if let held = UnsafeMutableRawPointer(bitPattern: modelAddress.withLock { $0 }) { swift_unownedRelease(held) }
    }
}

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
