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
    var object: NSManagedObject? {
        get { heldObject }
        set {
            heldObject = newValue
            row = newValue.map { Unmanaged.passUnretained($0) }
        }
    }
    /// The context the model belongs to, kept alive by its models (as a fetched array is used after the expression
    /// that made the context: `try ModelContext(container).fetch(…)`); the context holds its models' rows weakly, so
    /// there is no cycle.
    var context: ModelContext? {
        get { heldContext }
        set {
            heldContext = newValue
            rowContext = newValue.map { Unmanaged.passUnretained($0) }
        }
    }
    @exclusivity(unchecked) private var heldObject: NSManagedObject?
    @exclusivity(unchecked) private var heldContext: ModelContext?
    /// `object` and `context` unretained, for the accessors.
    ///
    /// A strong reference read from a property is retained for the calls that use it and released after (the compiler
    /// cannot tell that they leave the property alone): a retain and a release of each, 180 of the 1,480 instructions
    /// a set of a saved model's attribute cost (W6's accessor workload). The properties above keep both alive for as
    /// long as these are set.
    @exclusivity(unchecked) private var row: Unmanaged<NSManagedObject>?
    @exclusivity(unchecked) private var rowContext: Unmanaged<ModelContext>?
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
        (heldObject, heldContext) = (object, context)
        (row, rowContext) = (Unmanaged.passUnretained(object), Unmanaged.passUnretained(context))
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
        guard let row else { return nil }
        return row._withUnsafeGuaranteedRef { object in
            rowIndex(at: index, of: object).flatMap { object.attributeValueAsAccessor(at: $0) }
        }
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
        guard let row else { return false }
        var moved = Optional(consume attribute)
        let done = row._withUnsafeGuaranteedRef { object in
            guard let entityIndex = rowIndex(at: index, of: object) else { return false }
            object.setAttributeValueAsAccessor(moved.take().unsafelyUnwrapped, at: entityIndex, original: original)
            return true
        }
        if done { rowContext?._withUnsafeGuaranteedRef { $0.noteChange() } }
        return done
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
