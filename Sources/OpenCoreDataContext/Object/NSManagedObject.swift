import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore
import Synchronization

/// A type a fetch request can return: managed objects, object IDs, dictionaries or counts.
public protocol NSFetchRequestResult: AnyObject {}

extension NSManagedObjectID: NSFetchRequestResult {}
extension NSNumber: NSFetchRequestResult {}
extension NSDictionary: NSFetchRequestResult {}

/// Counts managed objects as they are released (see `NSManagedObject.releasedObjects`).
private let releaseCounter = Atomic<Int>(0)

/// The value a property holds in memory.
enum PropertyValue {
    case attribute(AttributeValue)
    case toOne(NSManagedObject?)
    case toMany(Set<NSManagedObject>)

    /// Whether this is an attribute's value other than nil (read without copying the value).
    var isAttributeOtherThanNull: Bool {
        switch self {
        case .attribute(.null): return false
        case .attribute: return true
        default: return false
        }
    }
}

/// A property value reduced to what equality needs (identities instead of objects).
enum ComparableValue: Equatable {
    case attribute(AttributeValue)
    case toOne(ObjectIdentifier?)
    case toMany(Set<ObjectIdentifier>)
}

/// An object of an entity, living in one context: read and write its properties by key, or through a typed
/// subclass's `@Managed` properties.
///
/// For example:
/// ```swift
/// let product = NSManagedObject(entity: productEntity, insertInto: context)
/// product.setValue("Banana", forKey: "name")
/// let name = product.value(forKey: "name") as? String
/// ```
/// Objects are bound to their context's queue and are not `Sendable`: pass `objectID` between threads.
///
/// Rule for bad keys and values, as on Apple platforms: `value(forKey:)`, `setValue(_:forKey:)` and
/// `value(forKeyPath:)` have Apple's non-throwing signatures. An unknown key is a programming error: it stops the
/// program with a precondition failure naming the entity and the key. A value of the wrong type is not: the object
/// keeps its previous value and the next `save()` fails with a validation error (code 1550, the entity, key and value
/// in `userInfo`). For keys and values that come from input, use the checked variants, which throw instead:
/// `checkedValue(forKey:)`, `setCheckedValue(_:forKey:)`, `checkedValue(forKeyPath:)`.
open class NSManagedObject: NSFetchRequestResult, PredicateSubject, Hashable, CustomStringConvertible {
    /// The object's entity.
    public let entity: NSEntityDescription
    /// The object's ID: temporary until the object is saved, permanent after.
    public internal(set) var objectID: NSManagedObjectID {
        get {
            if let id = _objectID { return id }
            let id = NSManagedObjectID(temporaryFor: entity)
            _objectID = id
            return id
        }
        set { _objectID = newValue }
    }
    // Created lazily: objects made for fetched rows get their permanent ID at once and never pay for a temporary one.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var _objectID: NSManagedObjectID?
    /// The context the object belongs to, or `nil` once it is deleted and saved, reset away, or never inserted.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    public internal(set) weak var managedObjectContext: NSManagedObjectContext? {
        didSet { contextLock = managedObjectContext?.lock }
    }
    /// The lock of the context the object was last put in. Every property access takes it; holding it strongly
    /// saves loading the weak context reference each time (a weak load, and the context's retain and release, take
    /// the runtime's slow path). Once the context is gone the lock guards nothing else, which is harmless.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var contextLock: NSRecursiveLock?

    enum State {
        case unattached  // created with no context
        case inserted
        case stored
        case deleted
        case invalid  // deleted and saved, or reset away
    }

    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var state: State = .unattached
    /// Committed values (from the store); `nil` for a fault or a new object.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var snapshot: RowSnapshot?
    /// Pending values that differ from the committed ones, by property index.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var changes: PropertySlots<PropertyValue> = [:]
    /// Committed destinations of to-many relationships, by property index, once loaded.
    /// Holders are listed by their context, so merges visit only them (not every registered object).
    var toManyCommitted: [Int: [NSManagedObjectID]] = [:] {
        didSet {
            if oldValue.isEmpty, !toManyCommitted.isEmpty { managedObjectContext?.noteToManyHolder(self) }
        }
    }
    /// Values at the start of the current event, for the properties changed during it.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var eventOriginals: PropertySlots<ComparableValue> = [:]
    /// Whether the object's insertion has been reported to observers: until then, its edits need no event originals
    /// (observers see it as inserted, whatever it holds).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var insertionReported = false
    /// Keys changed in the event being reported (valid during objects-did-change delivery).
    var reportedChangedKeys: Set<String> = []
    /// Faults created by a batched fetch share a group to load their rows together; the slot says where this one is.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var batchGroup: BatchSlot?
    /// Order of insertion into the context: unsaved objects sort (and get primary keys) in this order.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var insertionOrder = 0
    /// Set on stand-in objects used to translate Swift key paths into model keys.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var keyRecorder: KeyRecorder?

    /// Creates an object of `entity` and inserts it into `context` (or leaves it unattached when `context` is nil).
    ///
    /// Subclasses that override this initialiser must call it.
    public required init(entity: NSEntityDescription, insertInto context: NSManagedObjectContext?) {
        self.entity = entity
        if let context {
            context.insert(self)
        }
    }

    deinit {
        releaseCounter.add(1, ordering: .relaxed)
    }

    /// How many managed objects this process has released so far: the registry sweeps its weak tables only when
    /// enough of them may have died since its last sweep.
    static var releasedObjects: Int { releaseCounter.load(ordering: .relaxed) }

    /// Creates an object of the entity whose class is this subclass, inserted in `context`.
    ///
    /// The entity is the one whose `managedObjectClass` is this class, or whose name is `entityName`.
    public convenience init(context: NSManagedObjectContext) {
        guard let entity = context.entity(forClass: Self.self) else {
            preconditionFailure(
                "The model of this context has no entity for class \(Self.self): name an entity '\(Self.entityName)' or set its managedObjectClass."
            )
        }
        self.init(entity: entity, insertInto: context)
    }

    /// The name of the entity this class stands for; the class name by default. Override when they differ.
    open class var entityName: String {
        String(describing: self)
    }

    // MARK: Life-cycle hooks (override in subclasses)

    /// Called once when the object is first inserted into a context.
    open func awakeFromInsert() {}
    /// Called when the object's values are first loaded from the store.
    open func awakeFromFetch() {}
    /// Called before the object is saved.
    open func willSave() {}
    /// Called after the object has been saved.
    open func didSave() {}

    // MARK: State

    /// Whether the object was inserted and not yet saved.
    public var isInserted: Bool { withContext { state == .inserted } }
    /// Whether the object has unsaved changes to a stored object.
    public var isUpdated: Bool { withContext { state == .stored && !changes.isEmpty } }
    /// Whether the object will be deleted at the next save.
    public var isDeleted: Bool { withContext { state == .deleted } }
    /// Whether the object's values have not been loaded yet.
    public var isFault: Bool { withContext { state == .stored && snapshot == nil } }
    /// Whether the object has unsaved changes of any kind.
    public var hasChanges: Bool { withContext { state == .inserted || state == .deleted || (state == .stored && !changes.isEmpty) } }
    /// Whether any property differs from its committed value (alias of `isUpdated || isInserted` for attributes).
    public var hasPersistentChangedValues: Bool { withContext { !changes.isEmpty } }

    func withContext<T>(_ body: () throws -> T) rethrows -> T {
        guard let contextLock else { return try body() }
        contextLock.lock()
        defer { contextLock.unlock() }
        return try body()
    }

    // MARK: Key-value coding

    /// The value of a property: an attribute value (`NSNumber`, `String`, `Date`, …), the destination of a to-one
    /// relationship, or a `Set<NSManagedObject>` for a to-many; Core Data's signature.
    ///
    /// For example:
    /// ```swift
    /// let name = product.value(forKey: "name") as? String
    /// ```
    /// A key that is not a property goes to `value(forUndefinedKey:)`, which stops the program by default (an
    /// unknown key is a programming error, as on Apple platforms). A fault whose row was deleted from the store
    /// reads nil, as Core Data's faults do with `shouldDeleteInaccessibleFaults`. Use `checkedValue(forKey:)` for keys
    /// that come from input.
    public func value(forKey key: String) -> Any? {
        guard let index = entity.propertyIndex(named: key) else { return value(forUndefinedKey: key) }
        return readable { try value(at: index) }
    }

    /// The value of a property, or a thrown error for a key the entity does not have.
    ///
    /// For example:
    /// ```swift
    /// let value = try object.checkedValue(forKey: keyTypedByTheUser)
    /// ```
    /// - Throws: `CoreDataError(.unknownKey)` if the entity has no such property (and the class computes no value
    ///   for it in `value(forUndefinedKey:)`), `.objectNotFound` if the object's row was deleted from the store
    ///   before its values were loaded.
    public func checkedValue(forKey key: String) throws -> Any? {
        guard let index = entity.propertyIndex(named: key) else {
            let probe = UndefinedKeyProbe()
            let value = Self.$undefinedKeyProbe.withValue(probe) { self.value(forUndefinedKey: key) }
            if probe.missedKey { throw unknownKey(key) }
            return value
        }
        return try value(at: index)
    }

    /// Reads through `body`: a row deleted from the store reads nil; any other failure (the object's context is
    /// gone, the store cannot be read) stops the program with its message, as an unfulfillable fault does in Core
    /// Data. The checked variants throw those errors instead.
    private func readable(_ body: () throws -> Any?) -> Any? {
        do {
            return try body()
        } catch let error as CoreDataError where error.code == .objectNotFound {
            return nil
        } catch {
            preconditionFailure("\(error) (checkedValue(forKey:) and checkedValue(forKeyPath:) throw this instead)")
        }
    }

    /// Set while `checkedValue(forKey:)` asks `value(forUndefinedKey:)`: the default implementation then reports the
    /// unknown key to the probe instead of stopping the program.
    final class UndefinedKeyProbe: @unchecked Sendable {
        var missedKey = false
    }

    @TaskLocal static var undefinedKeyProbe: UndefinedKeyProbe?

    /// The value of a key that is not a property of the entity: override to offer computed keys (for example a
    /// section key derived from a stored attribute), as Key-Value Coding lets Core Data subclasses do.
    ///
    /// For example:
    /// ```swift
    /// override func value(forUndefinedKey key: String) -> Any? {
    ///     key == "initial" ? (value(forKey: "name") as? String).map { String($0.prefix(1)) } : super.value(forUndefinedKey: key)
    /// }
    /// ```
    /// The default stops the program with a precondition failure naming the entity and the key (or, under
    /// `checkedValue(forKey:)`, makes it throw `CoreDataError(.unknownKey)`).
    open func value(forUndefinedKey key: String) -> Any? {
        if let probe = Self.undefinedKeyProbe {
            probe.missedKey = true
            return nil
        }
        preconditionFailure(unknownKey(key).message + " (checkedValue(forKey:) throws this instead)")
    }

    /// Sets a property; Core Data's signature. Relationship values are an object (or nil) for a to-one and a `Set`
    /// or array of objects for a to-many; inverse relationships are updated at once.
    ///
    /// For example:
    /// ```swift
    /// product.setValue(185, forKey: "price")
    /// ```
    /// An unknown key stops the program with a precondition failure naming the entity and the key. A value the
    /// property cannot hold (a string for an integer, an object of another entity) leaves the property as it was and
    /// makes the next `save()` fail with a validation error naming the entity, key and value, until the property is
    /// set to a value it can hold or the context rolls back. Use `setCheckedValue(_:forKey:)` to get the error at
    /// once.
    public func setValue(_ value: Any?, forKey key: String) {
        do {
            try setCheckedValue(value, forKey: key)
        } catch let error as CoreDataError where error.code == .unknownKey || error.code == .objectWithoutContext {
            preconditionFailure(error.message + " (setCheckedValue(_:forKey:) throws this instead)")
        } catch let error as CoreDataError {
            guard let context = managedObjectContext, let index = entity.propertyIndex(named: key) else {
                preconditionFailure(error.message + " (setCheckedValue(_:forKey:) throws this instead)")
            }
            context.rejectValue(of: self, at: index, error, value: value.map { String(describing: $0) } ?? "nil")
        } catch {
            preconditionFailure("\(error)")
        }
    }

    /// Sets a property, or throws when the key is unknown or the value does not fit.
    ///
    /// For example:
    /// ```swift
    /// try object.setCheckedValue(valueFromJSON, forKey: keyFromJSON)
    /// ```
    /// - Throws: `CoreDataError(.unknownKey)` for an unknown key, `.wrongValueType` for a value the property
    ///   cannot hold (with the entity, key and value in the message), `.managedObjectReferentialIntegrity` for a
    ///   deleted object.
    public func setCheckedValue(_ value: Any?, forKey key: String) throws {
        try withContext {
            guard let index = entity.propertyIndex(named: key) else { throw unknownKey(key) }
            if let type = entity._attributeType(at: index) {
                let v = try ValueConversion.fromAny(
                    value, type: type, attribute: entity.allProperties[index] as! NSAttributeDescription, entityName: entity.name)
                try setAttribute(consume v, at: index)
            } else if let relationship = entity.allProperties[index] as? NSRelationshipDescription {
                try setPropertyValue(try relationshipValue(value, relationship), at: index)
            }
            managedObjectContext?.clearRejectedValue(of: self, at: index)
        }
    }

    /// A typed setter's path: `value` is already an attribute value (no `Any` to cast) and `index` is its property's
    /// position in the object's entity. Anything this path does not take — a relationship, a value the attribute
    /// cannot hold — goes through `setValue(original(), forKey:)`, which converts it or throws the error a key-value
    /// caller would get.
    @usableFromInline
    final func setAttributeValue(_ value: consuming AttributeValue, at index: Int, original: () -> Any?) throws {
        let handled = try withContext { () throws -> Bool in
            guard let type = entity._attributeType(at: index) else { return false }
            // Moved out (a captured value cannot be consumed): a string or data set costs no reference count here.
            var taken = AttributeValue.null
            swap(&taken, &value)
            guard let converted = ValueConversion.coerced(consume taken, to: type) else { return false }
            try setAttribute(consume converted, at: index)
            return true
        }
        if !handled { try setCheckedValue(original(), forKey: entity.allProperties[index].name) }
    }

    /// A typed getter's path: the value of the property at `index` in the object's entity, as `value(forKey:)`
    /// gives it.
    @usableFromInline
    final func value(at index: Int) throws -> Any? {
        try withContext { try anyValue(try currentValue(at: index), property: entity.allProperties[index]) }
    }

    /// The property index a typed accessor's storage key path stands for in the object's entity, once remembered
    /// (see `ManagedKeyNames`).
    @usableFromInline
    final func accessorIndex(_ storage: AnyKeyPath) -> Int? { entity._accessorIndex(for: storage) }

    /// The value at a key path through to-one relationships (a single value) or to-many ones (a set of values,
    /// or a number for `@count`, `@sum`, `@avg`, `@min`, `@max`); Core Data's signature.
    ///
    /// For example:
    /// ```swift
    /// let department = employee.value(forKeyPath: "department.name") as? String
    /// ```
    /// A key path that names no property stops the program with a precondition failure naming it; use
    /// `checkedValue(forKeyPath:)` for key paths that come from input.
    public func value(forKeyPath keyPath: String) -> Any? {
        do {
            return try checkedValue(forKeyPath: keyPath)
        } catch let error as CoreDataError where error.code == .unknownKey {
            preconditionFailure(error.message + " (checkedValue(forKeyPath:) throws this instead)")
        } catch {
            return readable { throw error }
        }
    }

    /// The value at a key path, or a thrown error for a key path the model does not have.
    ///
    /// For example:
    /// ```swift
    /// let total = try department.checkedValue(forKeyPath: "employees.@sum.salary")
    /// ```
    /// - Throws: `CoreDataError(.unknownKey)` naming the first component the model lacks or an unknown collection
    ///   operator; the errors of `checkedValue(forKey:)`.
    public func checkedValue(forKeyPath keyPath: String) throws -> Any? {
        try withContext {
            let components = keyPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            // A single key the entity does not have may be a computed one (`value(forUndefinedKey:)`).
            if components.count == 1, entity.propertiesByName[keyPath] == nil { return try checkedValue(forKey: keyPath) }
            try validateKeyPath(components, keyPath: keyPath)
            var objects: [NSManagedObject] = [self]
            var isCollection = false
            for (i, key) in components.enumerated() {
                if key.hasPrefix("@") {
                    let rest = components[(i + 1)...].joined(separator: ".")
                    return try collectionOperator(key, rest: rest, objects: objects, keyPath: keyPath)
                }
                if i == components.count - 1 {
                    guard isCollection else { return try objects.first?.checkedValue(forKey: key) }
                    var values: Set<AnyHashable> = []
                    for object in objects {
                        let value = try object.checkedValue(forKey: key)
                        if let set = value as? Set<NSManagedObject> {
                            values.formUnion(set.map { AnyHashable($0) })
                        } else if let hashable = value as? AnyHashable {
                            values.insert(hashable)
                        }
                    }
                    return values
                }
                var next: [NSManagedObject] = []
                for object in objects {
                    guard let index = object.entity.propertyIndex(named: key) else { throw object.unknownKey(key, in: keyPath) }
                    switch try object.currentValue(at: index) {
                    case .toOne(let o): if let o { next.append(o) }
                    case .toMany(let set):
                        isCollection = true
                        next.append(contentsOf: set.sorted { $0.objectID < $1.objectID })
                    case .attribute: break
                    }
                }
                if next.isEmpty, !isCollection { return nil }
                objects = next
            }
            return nil
        }
    }

    /// Checks every component of a key path against the model, so that an unknown key is an error even when a
    /// relationship on the way is nil.
    private func validateKeyPath(_ components: [String], keyPath: String) throws {
        var current: NSEntityDescription? = entity
        for (i, key) in components.enumerated() {
            if key.hasPrefix("@") {
                guard ["@count", "@sum", "@avg", "@min", "@max"].contains(key) else {
                    throw CoreDataError(
                        .unknownKey,
                        "Unknown collection operator '\(key)' in key path '\(keyPath)'; expected @count, @sum, @avg, @min or @max.",
                        entityName: entity.name, key: keyPath)
                }
                return
            }
            guard let entity = current, let property = entity.propertiesByName[key] else {
                throw CoreDataError(
                    .unknownKey,
                    "Entity '\(current?.name ?? "?")' has no property '\(key)' (in key path '\(keyPath)').",
                    entityName: current?.name, key: keyPath)
            }
            if property is NSAttributeDescription, i < components.count - 1 {
                throw CoreDataError(
                    .unknownKey, "'\(entity.name).\(key)' is an attribute, so key path '\(keyPath)' cannot go further.",
                    entityName: entity.name, key: keyPath)
            }
            current = (property as? NSRelationshipDescription)?.destinationEntity
        }
    }

    private func collectionOperator(_ op: String, rest: String, objects: [NSManagedObject], keyPath: String) throws -> Any? {
        if op == "@count" { return NSNumber(value: objects.count) }
        var values: [AttributeValue] = []
        for object in objects {
            let v = rest.isEmpty ? nil : try object.checkedValue(forKeyPath: rest)
            if let value = AttributeValue(any: v), !value.isNull { values.append(value) }
        }
        do {
            let result = try PredicateSemantics.aggregate(op, values)
            switch result {
            case .null: return nil
            case .integer(let i): return NSNumber(value: i)
            case .double(let d): return NSNumber(value: d)
            default: return ValueConversion.toAny(result, type: .stringAttributeType) ?? nil
            }
        } catch {
            throw CoreDataError(.unknownKey, "Key path '\(keyPath)': \(error)", entityName: entity.name, key: keyPath)
        }
    }

    func unknownKey(_ key: String, in path: String? = nil) -> CoreDataError {
        CoreDataError(
            .unknownKey,
            "Entity '\(entity.name)' has no property '\(key)'\(path.map { " (in key path '\($0)')" } ?? "").",
            entityName: entity.name, key: path ?? key)
    }

    func anyValue(_ value: PropertyValue, property: NSPropertyDescription) throws -> Any? {
        switch value {
        case .attribute(let v): return ValueConversion.toAny(v, type: (property as! NSAttributeDescription).attributeType)
        case .toOne(let o): return o
        case .toMany(let s): return s
        }
    }

    func relationshipValue(_ value: Any?, _ relationship: NSRelationshipDescription) throws -> PropertyValue {
        let where_ = "'\(entity.name).\(relationship.name)'"
        func check(_ object: NSManagedObject) throws -> NSManagedObject {
            guard let destination = relationship.destinationEntity, object.entity.isKindOf(entity: destination) else {
                throw CoreDataError(
                    .wrongValueType,
                    "\(where_) holds \(relationship.destinationEntityName) objects; it cannot hold a \(object.entity.name).",
                    entityName: entity.name, key: relationship.name)
            }
            if let mine = managedObjectContext, let theirs = object.managedObjectContext, mine !== theirs {
                throw CoreDataError(
                    .managedObjectExternalRelationship,
                    "\(where_) cannot point to an object of another context (\(object.objectID)); fetch it in this context with existingObject(with:).",
                    entityName: entity.name, key: relationship.name)
            }
            return object
        }
        if !relationship.isToMany {
            if value == nil || value is NSNull { return .toOne(nil) }
            if let optional = value as? any _OptionalProtocol, optional._wrapped == nil { return .toOne(nil) }
            guard let object = (value as? NSManagedObject) ?? ((value as? any _OptionalProtocol)?._wrapped as? NSManagedObject) else {
                throw CoreDataError(
                    .wrongValueType, "\(where_) is a to-one relationship; it needs a managed object or nil, not \(type(of: value!)).",
                    entityName: entity.name, key: relationship.name)
            }
            return .toOne(try check(object))
        }
        if value == nil || value is NSNull { return .toMany([]) }
        var set: Set<NSManagedObject> = []
        if let sequence = value as? any Sequence {
            for element in sequence {
                guard let object = element as? NSManagedObject else {
                    throw CoreDataError(
                        .wrongValueType,
                        "\(where_) is a to-many relationship; its elements must be managed objects, not \(type(of: element)).",
                        entityName: entity.name, key: relationship.name)
                }
                set.insert(try check(object))
            }
            return .toMany(set)
        }
        throw CoreDataError(
            .wrongValueType, "\(where_) is a to-many relationship; it needs a Set or array of managed objects, not \(type(of: value!)).",
            entityName: entity.name, key: relationship.name)
    }

    // MARK: Changed and committed values

    /// The properties with unsaved changes and their new values (`NSNull` for nil is not used: nil values are absent
    /// from Swift dictionaries, so a key set to nil maps to `NSNull()`).
    public func changedValues() -> [String: Any] {
        withContext {
            var result: [String: Any] = [:]
            for (index, value) in changes {
                let property = entity.allProperties[index]
                result[property.name] = ((try? anyValue(value, property: property)) ?? nil) ?? NSNull()
            }
            return result
        }
    }

    /// The changes made since the last `processPendingChanges()` (valid while objects-did-change is delivered).
    public func changedValuesForCurrentEvent() -> [String: Any] {
        withContext {
            var result: [String: Any] = [:]
            for key in reportedChangedKeys {
                result[key] = ((try? checkedValue(forKey: key)) ?? nil) ?? NSNull()
            }
            return result
        }
    }

    /// The last saved values of the given keys (all properties when `keys` is nil); `NSNull()` stands for nil.
    public func committedValues(forKeys keys: [String]?) -> [String: Any] {
        withContext {
            var result: [String: Any] = [:]
            if snapshot == nil, state == .stored { try? fulfillFault() }
            let names = keys ?? entity.allProperties.map(\.name)
            for name in names {
                guard let index = entity.propertyIndex(named: name) else { continue }
                let property = entity.allProperties[index]
                guard let snapshot else { continue }
                switch snapshot.values[index] {
                case .attribute(let v):
                    result[name] = ValueConversion.toAny(v, type: (property as! NSAttributeDescription).attributeType) ?? NSNull()
                case .toOne(let id):
                    result[name] = id.map { managedObjectContext?.object(with: $0) as Any } ?? NSNull()
                case .toMany:
                    if let ids = toManyCommitted[index], let context = managedObjectContext {
                        result[name] = Set(ids.map { context.object(with: $0) })
                    }
                }
            }
            return result
        }
    }

    // MARK: Identity

    public static func == (a: NSManagedObject, b: NSManagedObject) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// What `Set` and `Dictionary` hash: the object's address, mixed by `_IdentityHash` rather than SipHash.
    public final func _rawHashValue(seed: Int) -> Int { _IdentityHash.mix(ObjectIdentifier(self), seed: seed) }

    open var description: String {
        withContext {
            let fault = state == .stored && snapshot == nil
            var text = "<\(type(of: self)) \(entity.name) \(objectID.uriRepresentation().absoluteString)"
            if fault { return text + " fault>" }
            let attributes = entity.allAttributes.compactMap { a -> String? in
                guard let i = entity.propertyIndex(named: a.name), let v = try? currentValue(at: i), case .attribute(let value) = v else {
                    return nil
                }
                return "\(a.name)=\(value)"
            }
            text += " {" + attributes.joined(separator: ", ") + "}>"
            return text
        }
    }

    // MARK: PredicateSubject

    public var predicateObjectID: NSManagedObjectID { objectID }

    public func predicateValue(forKey key: String) throws -> PredicateKeyValue {
        try withContext {
            guard let index = entity.propertyIndex(named: key) else { throw unknownKey(key) }
            switch try currentValue(at: index) {
            case .attribute(let v): return .value(v)
            case .toOne(let o): return .object(o)
            case .toMany(let s): return .objects(s.sorted { $0.objectID < $1.objectID })
            }
        }
    }
}
