import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// A type a fetch request can return: managed objects, object IDs, dictionaries or counts.
///
/// For example:
/// ```swift
/// let request = NSFetchRequest<NSManagedObject>(entityName: "Product")   // NSManagedObject is a result type
/// ```
public protocol NSFetchRequestResult: AnyObject {}

extension NSManagedObjectID: NSFetchRequestResult {}
extension NSNumber: NSFetchRequestResult {}
extension NSDictionary: NSFetchRequestResult {}

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
    var _objectID: NSManagedObjectID?
    /// The context the object belongs to, or `nil` once it is deleted and saved, reset away, or never inserted.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    public internal(set) weak var managedObjectContext: NSManagedObjectContext? {
        didSet { contextLock = managedObjectContext?.lock }
    }
    /// The lock of the context the object was last put in.
    ///
    /// Every property access takes it; holding it strongly
    /// saves loading the weak context reference each time (a weak load, and the context's retain and release, take
    /// the runtime's slow path). Once the context is gone the lock guards nothing else, which is harmless.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var contextLock: ContextLock?
    /// The table of stored objects the object was last registered in, which holds it without a reference: its `deinit`
    /// removes it from there.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var storedObjects: StoredObjects?

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
    /// Whether the object was new in its context (inserted, not yet saved there) when it was deleted there.
    ///
    /// Its deletion then only takes the insertion back. An object a child context reads from its parent may have a
    /// temporary ID too — the parent's unsaved object — and its deletion must reach the parent.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var wasNewWhenDeleted = false
    /// Committed values (from the store); `nil` for a fault or a new object.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var snapshot: RowSnapshot?
    /// Pending values that differ from the committed ones, by property index.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var changes: PropertySlots<PropertyValueSlots> = [:]
    /// The order of an ordered to-many's destinations while it has a pending change, by property index (see
    /// `orderedMembers(at:)`).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var pendingOrder: [Int: [NSManagedObject]] = [:]
    /// Fetched properties' values once read, by property index (dropped when the object is refreshed).
    var fetchedPropertyValues: [Int: [NSManagedObject]] = [:]
    /// Committed destinations of to-many relationships, by property index, once loaded.
    ///
    /// Holders are listed by their context, so merges visit only them (not every registered object).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var toManyCommitted: [Int: [NSManagedObjectID]] = [:] {
        didSet {
            if oldValue.isEmpty, !toManyCommitted.isEmpty { managedObjectContext?.noteToManyHolder(self) }
        }
    }
    /// Values at the start of the current event, for the properties changed during it.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var eventOriginals: PropertySlots<ComparableValueSlots> = [:]
    /// Whether the object's insertion has been reported to observers: until then, its edits need no event originals
    /// (observers see it as inserted, whatever it holds).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var insertionReported = false
    /// The context's marked sets the object is in (`MarkedObjects`), a bit each.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var marks: UInt8 = 0
    /// Whether the context holds a value `setValue(_:forKey:)` rejected for this object: a setter checks this flag
    /// rather than the context's table, so a set that follows no rejection costs nothing more.
    var hasRejectedValue = false
    /// Set when the object was a fault whose row had gone from the store and its context's
    /// `shouldDeleteInaccessibleFaults` marked it deleted.
    var isInaccessible = false
    /// Keys changed in the event being reported (valid during objects-did-change delivery).
    var reportedChangedKeys = PropertyMask()
    /// Where a fault's values come from before its row is read: its place in a batched fetch's group (whose rows load
    /// together), or the values a fetch with `propertiesToFetch` read for it.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var faultSource: FaultSource?
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
    /// Whether this is such a stand-in (a typed getter then records its key instead of reading).
    @usableFromInline final var isRecordingKeys: Bool { keyRecorder != nil }

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
        if let storedObjects, let id = _objectID { storedObjects.forget(ObjectIdentifier(self), id: id) }
    }

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

    /// The name of the entity this class stands for; the class name by default.
    ///
    /// Override when they differ.
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
    /// Called when the object is deleted from its context (by `delete(_:)` or a cascade), before its relationships'
    /// delete rules run: it still reads its relationships.
    open func prepareForDeletion() {}
    /// Called before a refresh that discards the object's changes turns it back into its stored state.
    open func willTurnIntoFault() {}
    /// Called after a refresh that discarded the object's changes.
    open func didTurnIntoFault() {}

    // MARK: Validation (override in subclasses, calling super)

    /// Checks the new object before it is saved.
    ///
    /// Each property is checked against its description (required values, a to-many's minimum and maximum counts).
    /// Override to add checks, calling `super` first.
    ///
    /// - Throws: a `CoreDataError` naming the entity, the key and the object (`.validationMultipleErrors` with each
    ///   one in `underlying` when several fail); an override may throw its own errors, which the save reports.
    open func validateForInsert() throws {
        try throwingAll(try withContext { try propertyValidationErrors() })
    }

    /// Checks the changed stored object before it is saved, as `validateForInsert()` checks a new one.
    open func validateForUpdate() throws {
        try throwingAll(try withContext { try propertyValidationErrors() })
    }

    /// Checks the deleted object before its deletion is saved: a relationship with the Deny rule must hold nothing.
    open func validateForDelete() throws {
        try throwingAll(try withContext { try denyRuleErrors() })
    }

    /// Throws `errors`: the one, or all of them in one.
    private func throwingAll(_ errors: [CoreDataError]) throws {
        if errors.count == 1 { throw errors[0] }
        if errors.count > 1 {
            throw CoreDataError(
                .validationMultipleErrors, "\(errors.count) validation errors: " + errors.map(\.message).joined(separator: " | "),
                underlying: errors)
        }
    }

    /// The IDs of the objects the relationship `key` holds, without making or loading those objects (Core Data's).
    ///
    /// A to-one's one or none, a to-many's in no particular order. Empty for a key that is not a relationship.
    public func objectIDs(forRelationshipNamed key: String) -> [NSManagedObjectID] {
        withContext {
            guard let index = entity.propertyIndex(named: key), entity.allProperties[index] is NSRelationshipDescription else {
                return []
            }
            switch changes[index] {
            case .toOne(let destination): return destination.map { [$0.objectID] } ?? []
            case .toMany(let destinations): return destinations.map(\.objectID)
            default: break
            }
            guard state == .stored || state == .deleted else { return [] }
            if snapshot == nil { try? fulfillFault() }  // a row gone from the store holds nothing
            return rowRelatedIDs(at: index) { try? committedToMany(at: $0) }
        }
    }

    // MARK: Key-value observing's calls (Core Data's custom accessors make them)

    /// Core Data's call before a custom accessor reads a primitive value: the fault fires when the value is read.
    public func willAccessValue(forKey key: String?) {}
    /// Core Data's call after a custom accessor read a primitive value.
    public func didAccessValue(forKey key: String?) {}
    /// Core Data's call before a custom accessor sets a primitive value (key-value observing's; the change itself is
    /// recorded, and the context's observers told, by `setPrimitiveValue(_:forKey:)`).
    public func willChangeValue(forKey key: String) {}
    /// Core Data's call after a custom accessor set a primitive value.
    public func didChangeValue(forKey key: String) {}

    // MARK: State

    /// Whether the object was inserted and not yet saved.
    public var isInserted: Bool { withContext { state == .inserted } }
    /// Whether the object has unsaved changes to a stored object.
    public var isUpdated: Bool { withContext { state == .stored && !changes.isEmpty } }
    /// Whether the object will be deleted at the next save.
    public var isDeleted: Bool { withContext { state == .deleted || isInaccessible } }
    /// Whether the object's values have not been loaded yet (a stored object, or one deleted before its values were
    /// read: deleting does not load them).
    public var isFault: Bool { withContext { (state == .stored || state == .deleted) && snapshot == nil } }
    /// Whether the relationship `key` has not been loaded.
    ///
    /// A to-one's is not while the object itself is a fault; a to-many's until its destinations are read (on first
    /// access, or by a fetch's `relationshipKeyPathsForPrefetching`). False for a key that is not a relationship, and
    /// for a relationship with an unsaved change.
    public func hasFault(forRelationshipNamed key: String) -> Bool {
        withContext {
            guard let index = entity.propertyIndex(named: key),
                let relationship = entity.allProperties[index] as? NSRelationshipDescription,
                changes[index] == nil, state == .stored || state == .deleted
            else { return false }
            guard snapshot != nil else { return true }
            return relationship.isToMany && toManyCommitted[index] == nil
        }
    }
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

    // MARK: Key-value coding (the rest is in NSManagedObject+KeyValueCoding.swift)

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
            for key in reportedChangedKeys.names(in: entity) {
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
                    guard let attribute = property as? NSAttributeDescription else { continue }  // a fetched property
                    result[name] = ((try? ValueConversion.toAny(v, attribute: attribute, entityName: entity.name)) ?? nil) ?? NSNull()
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

    /// Objects are equal only to themselves (identity), as in Core Data.
    public static func == (a: NSManagedObject, b: NSManagedObject) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

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

    /// The object's ID, which `SELF == %@` compares.
    public var predicateObjectID: NSManagedObjectID { objectID }

    /// The value of `key` for predicate evaluation in memory.
    public func predicateValue(forKey key: String) throws -> PredicateKeyValue {
        try withContext {
            guard let index = entity.propertyIndex(named: key) else { throw unknownKey(key) }
            switch try currentValue(at: index) {
            case .attribute(let v):
                // A composite as the dictionary of its elements, for key paths into it (`address.street`).
                guard entity.allProperties[index].isComposite else { return .value(v) }
                let elements = try compositeElement(named: key, at: []) as? [String: Any]
                return .value(elements.map { .object(OpaqueValue($0)) } ?? .null)
            case .toOne(let o): return .object(o)
            case .toMany(let s): return .objects(s.sorted { $0.objectID < $1.objectID })
            }
        }
    }
}
