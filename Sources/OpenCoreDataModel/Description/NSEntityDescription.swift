import Foundation

/// An entity: a named kind of managed object with attributes and relationships, possibly inheriting from a
/// superentity.
///
/// Subentities share their root entity's table in the SQLite store (as in Core Data) and inherit every property of
/// their ancestors. After the model is frozen, the lookup tables (`propertiesByName`, `allProperties`, …) are computed
/// once and shared by every thread.
///
/// For example:
/// ```swift
/// let product = NSEntityDescription(name: "Product")
/// product.addProperty(NSAttributeDescription(name: "name", type: .stringAttributeType))
/// ```
public final class NSEntityDescription: @unchecked Sendable, CustomStringConvertible, Hashable {
    /// The entity's name, unique within its model.
    public var name: String {
        get { oftenRead.name }
        set {
            oftenRead.name = newValue
            _checkMutable()
        }
    }
    /// The name of the Swift class for the entity's objects, as the model file gives it (`representedClassName`):
    /// a coordinator looks a module-qualified name (`MyApp.Entry`) up when the entity has no `managedObjectClass`.
    public var managedObjectClassName: String? { didSet { _checkMutable() } }
    /// The managed object subclass to instantiate for this entity, or `nil` for the generic `NSManagedObject`.
    ///
    /// For example:
    /// ```swift
    /// let model = try NSManagedObjectModel(contentsOf: modelURL)
    /// model.entitiesByName["Entry"]?.managedObjectClass = Entry.self
    /// ```
    /// Typed as `AnyObject.Type` because the model layer does not know `NSManagedObject`; the context checks the type.
    /// It does not change the model's schema or version hashes, so it may be set on a loaded (frozen) model — before
    /// any context uses the model, as it is read without a lock.
    public var managedObjectClass: AnyObject.Type? {
        get { oftenRead.managedObjectClass }
        set { oftenRead.managedObjectClass = newValue }
    }
    /// Whether the entity has no instances of its own (only its subentities' objects exist).
    public var isAbstract: Bool = false { didSet { _checkMutable() } }
    /// Free-form information from the model file or the builder.
    public var userInfo: [String: String] = [:] { didSet { _checkMutable() } }
    /// The entity's name in an earlier model version, when it was renamed (Xcode's "Renaming ID", written as
    /// `elementID`): migration and reading an older store match it.
    public var renamingIdentifier: String? { didSet { _checkMutable() } }
    /// The entity's uniqueness constraints, each a list of attribute (or to-one relationship) names.
    ///
    /// No two objects of the entity (and its subentities) may share the values of one. A save that breaks one fails with
    /// `.constraintConflict` (133021), or `.constraintValidation` (1551) for two objects of the same save.
    public var uniquenessConstraints: [[String]] = [] { didSet { _checkMutable() } }
    /// The indexes a store keeps for the entity (fetch indexes, compound indexes and indexed attributes of a model
    /// file); names that are not stored properties are skipped.
    public var indexes: [NSFetchIndexDescription] = [] { didSet { _checkMutable() } }
    /// Text that makes the entity's version hash differ when nothing else about it changed (Xcode's "Version Hash
    /// Modifier"), to force a migration.
    public var versionHashModifier: String? { didSet { _checkMutable() } }

    /// The properties this entity declares itself (not inherited), in declaration order.
    public private(set) var properties: [NSPropertyDescription] = []
    /// The entity this one inherits from, if any.
    public internal(set) weak var superentity: NSEntityDescription?
    /// The entities that inherit directly from this one.
    public internal(set) var subentities: [NSEntityDescription] = []
    /// The name of the superentity, kept so the model can be resolved after every entity is added.
    public internal(set) var superentityName: String?
    /// The model the entity belongs to.
    public internal(set) weak var managedObjectModel: NSManagedObjectModel?

    /// The entity's number within its model (1-based, stable for a given set of entity names); the SQLite store keeps
    /// it in each row's `Z_ENT` column.
    public internal(set) var entityID: Int {
        get { oftenRead.entityID }
        set { oftenRead.entityID = newValue }
    }

    // The fields above that every object or row reads, stored behind accessors. Another module's access to a class's
    // stored property checks exclusivity at run time (about 150 instructions through the runtime's access set, several
    // per object a fetch makes) whatever the declaration says; an access compiled here skips it in release builds. The
    // fields do not change once a coordinator uses the model (`_checkMutable()`), and a model is built on one thread.
    // Debug builds, and so the tests, keep the checks. (The property descriptions do the same.)
    private struct OftenRead {
        var name: String
        var managedObjectClass: AnyObject.Type?
        var entityID = 0
    }
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var oftenRead: OftenRead

    /// The tables computed when the model freezes (nil before); set once, never replaced.
    private var frozen: _FrozenEntity? {
        didSet { frozenTables = frozen.map { Unmanaged.passUnretained($0) } }
    }
    /// `frozen`, for reading without retaining it: lookups run on every property access, and loading a class
    /// reference out of a `var` costs a retain and a release, atomic operations that showed as the largest item in
    /// the wall time of inserting objects.
    ///
    /// `frozen` keeps the tables alive for as long as the entity lives.
    private var frozenTables: Unmanaged<_FrozenEntity>?

    /// The frozen tables' `body`, or nil before the model is frozen.
    @inline(__always)
    private func withFrozen<Result>(_ body: (_FrozenEntity) -> Result) -> Result? {
        guard let frozenTables else { return nil }
        return frozenTables._withUnsafeGuaranteedRef(body)
    }

    /// An entity named `name`, below `superentityName` when given.
    public init(name: String, superentityName: String? = nil, isAbstract: Bool = false) {
        self.oftenRead = OftenRead(name: name)
        self.superentityName = superentityName
        self.isAbstract = isAbstract
    }

    /// Adds a property declared by this entity.
    public func addProperty(_ property: NSPropertyDescription) {
        _checkMutable()
        property.entity = self
        properties.append(property)
    }

    func _checkMutable() {
        precondition(
            managedObjectModel?.isFrozen != true,
            "The model is in use by a persistent store coordinator and can no longer be changed; copy it first.")
    }

    /// The entity's name.
    public var description: String { "NSEntityDescription(\(name))" }
    /// Entities are equal only to themselves (identity).
    public static func == (a: NSEntityDescription, b: NSEntityDescription) -> Bool { a === b }
    /// Hashes the entity's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: Lookups

    /// Every property, inherited ones first (from the root down), then this entity's own.
    public var allProperties: [NSPropertyDescription] {
        if let value = withFrozen({ $0.allProperties }) { return value }
        return (superentity?.allProperties ?? []) + properties
    }

    /// Every property by name, inherited ones included.
    public var propertiesByName: [String: NSPropertyDescription] {
        if let value = withFrozen({ $0.propertiesByName }) { return value }
        return Dictionary(allProperties.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// Every attribute by name, inherited ones included.
    public var attributesByName: [String: NSAttributeDescription] {
        propertiesByName.compactMapValues { $0 as? NSAttributeDescription }
    }

    /// Every relationship by name, inherited ones included.
    public var relationshipsByName: [String: NSRelationshipDescription] {
        propertiesByName.compactMapValues { $0 as? NSRelationshipDescription }
    }

    /// Every attribute, inherited ones first.
    public var allAttributes: [NSAttributeDescription] {
        if let value = withFrozen({ $0.attributes }) { return value }
        return allProperties.compactMap { $0 as? NSAttributeDescription }
    }

    /// Every relationship, inherited ones first.
    public var allRelationships: [NSRelationshipDescription] {
        if let value = withFrozen({ $0.relationships }) { return value }
        return allProperties.compactMap { $0 as? NSRelationshipDescription }
    }

    /// The position of a property in `allProperties`, or `nil` if the entity has no property of that name.
    public func propertyIndex(named name: String) -> Int? {
        if let index = withFrozen({ $0.indexByName.index(of: name) }) { return index }
        return allProperties.firstIndex { $0.name == name }
    }

    /// The entity at the top of this entity's inheritance chain (itself when it has no superentity).
    public var rootEntity: NSEntityDescription {
        var entity = self
        while let parent = entity.superentity { entity = parent }
        return entity
    }

    /// The identity of `rootEntity`, without walking the (weak) superentity links once the model is frozen: object
    /// IDs of one table compare and hash by it.
    package var _rootEntityIdentity: ObjectIdentifier { withFrozen({ $0.rootIdentity }) ?? ObjectIdentifier(rootEntity) }

    /// The property index a typed accessor remembered under `key` (its storage key path), once the model is frozen.
    package func _accessorIndex(for key: AnyObject) -> Int? { withFrozen({ $0.accessorIndexes.index(for: key) }) ?? nil }

    /// Remembers a typed accessor's property index under `key` (nothing before the model is frozen); returns whether
    /// it is remembered.
    @discardableResult
    package func _rememberAccessorIndex(_ index: Int, for key: AnyObject) -> Bool {
        withFrozen({ $0.accessorIndexes.remember(index, for: key) }) ?? false
    }

    /// The positions (in `allProperties`) of the to-many relationships.
    package var _toManyIndexes: [Int] {
        if let value = withFrozen({ $0.toManyIndexes }) { return value }
        return Self.toManyIndexes(allProperties)
    }

    /// The positions of the transient attributes: values the object keeps in memory and a save does not write.
    package var _transientIndexes: [Int] {
        if let value = withFrozen({ $0.transientIndexes }) { return value }
        return Self.transientIndexes(allProperties)
    }

    private static func transientIndexes(_ properties: [NSPropertyDescription]) -> [Int] {
        properties.indices.filter { properties[$0].isTransient }
    }

    /// The positions of the properties a save validates: required ones, and to-many relationships with a count limit.
    ///
    /// Optional attributes and optional to-ones can hold anything their type allows, so a save skips them.
    package var _validatedIndexes: [Int] {
        if let value = withFrozen({ $0.validatedIndexes }) { return value }
        return Self.validatedIndexes(allProperties)
    }

    /// The attribute type of the property at `index` (its position in `allProperties`), nil for a relationship:
    /// what a setter checks a value against, without a cast or a read of the description per call.
    package func _attributeType(at index: Int) -> NSAttributeType? {
        if let type = withFrozen({ $0.attributeTypes[index] }) { return type }
        return (allProperties[index] as? NSAttributeDescription)?.attributeType
    }

    /// The attributes with a default value other than nil, by position: what a new object starts with.
    package var _attributeDefaults: [(index: Int, value: AttributeValue)] {
        if let value = withFrozen({ $0.attributeDefaults }) { return value }
        return Self.attributeDefaults(allProperties)
    }

    private static func attributeDefaults(_ properties: [NSPropertyDescription]) -> [(index: Int, value: AttributeValue)] {
        properties.indices.compactMap { index in
            guard let attribute = properties[index] as? NSAttributeDescription, !attribute.defaultValue.isNull else { return nil }
            return (index, attribute.defaultValue)
        }
    }

    private static func toManyIndexes(_ properties: [NSPropertyDescription]) -> [Int] {
        properties.indices.filter { (properties[$0] as? NSRelationshipDescription)?.isToMany == true }
    }

    private static func validatedIndexes(_ properties: [NSPropertyDescription]) -> [Int] {
        properties.indices.filter { index in
            let property = properties[index]
            if let r = property as? NSRelationshipDescription, r.isToMany {
                return !r.isOptional || r.minCount > 0 || r.maxCount > 0
            }
            return !property.isOptional
        }
    }

    /// This entity and every entity below it.
    public var selfAndDescendants: [NSEntityDescription] {
        if let value = withFrozen({ $0.selfAndDescendants }) { return value }
        return [self] + subentities.flatMap { $0.selfAndDescendants }
    }

    /// Whether this entity is `other` or inherits from it.
    public func isKindOf(entity other: NSEntityDescription) -> Bool {
        var entity: NSEntityDescription? = self
        while let e = entity {
            if e === other { return true }
            entity = e.superentity
        }
        return false
    }

    /// A hash of everything about the entity that affects how its objects are stored, computed as Core Data computes
    /// it (see `computeVersionHash()`): two models whose entities have equal hashes can share a store, and the hashes
    /// equal the `NSStoreModelVersionHashes` Apple's Core Data records for the same model.
    ///
    /// - Complexity: O(1) once the model is in use; before, O(p log p) for p properties.
    public var versionHash: Data {
        if let value = withFrozen({ $0.versionHash }) { return value }
        return computeVersionHash()
    }

    /// Computes the lookup tables once; called when the model freezes (after resolution, parents first).
    func freeze() {
        guard frozen == nil else { return }  // readers hold the tables unretained (`frozenTables`): never replace them
        let all = (superentity?.allProperties ?? []) + properties
        let index = PropertyNameIndex(all.map(\.name))
        frozen = _FrozenEntity(
            allProperties: all,
            propertiesByName: Dictionary(all.map { ($0.name, $0) }, uniquingKeysWith: { _, b in b }),
            indexByName: index,
            attributes: all.compactMap { $0 as? NSAttributeDescription },
            relationships: all.compactMap { $0 as? NSRelationshipDescription },
            selfAndDescendants: [self] + subentities.flatMap { $0.selfAndDescendants },
            versionHash: computeVersionHash(),
            rootIdentity: ObjectIdentifier(rootEntity),
            toManyIndexes: Self.toManyIndexes(all), transientIndexes: Self.transientIndexes(all),
            validatedIndexes: Self.validatedIndexes(all),
            attributeDefaults: Self.attributeDefaults(all), attributeTypes: all.map { ($0 as? NSAttributeDescription)?.attributeType })
    }
}

/// A class, so reading one table is one load through one reference (a struct would be copied out of the
/// optional, retaining every table, on each access).
private final class _FrozenEntity {
    let allProperties: [NSPropertyDescription]
    let propertiesByName: [String: NSPropertyDescription]
    let indexByName: PropertyNameIndex
    let attributes: [NSAttributeDescription]
    let relationships: [NSRelationshipDescription]
    let selfAndDescendants: [NSEntityDescription]
    let versionHash: Data
    let rootIdentity: ObjectIdentifier
    let toManyIndexes: [Int]
    let transientIndexes: [Int]
    let validatedIndexes: [Int]
    let attributeDefaults: [(index: Int, value: AttributeValue)]
    let attributeTypes: [NSAttributeType?]
    /// Typed accessors' property indexes, filled as they are first used.
    let accessorIndexes = _AccessorIndexCache()

    init(
        allProperties: [NSPropertyDescription],
        propertiesByName: [String: NSPropertyDescription],
        indexByName: PropertyNameIndex,
        attributes: [NSAttributeDescription],
        relationships: [NSRelationshipDescription],
        selfAndDescendants: [NSEntityDescription],
        versionHash: Data,
        rootIdentity: ObjectIdentifier,
        toManyIndexes: [Int],
        transientIndexes: [Int],
        validatedIndexes: [Int],
        attributeDefaults: [(index: Int, value: AttributeValue)],
        attributeTypes: [NSAttributeType?]
    ) {
        self.allProperties = allProperties
        self.propertiesByName = propertiesByName
        self.indexByName = indexByName
        self.attributes = attributes
        self.relationships = relationships
        self.selfAndDescendants = selfAndDescendants
        self.versionHash = versionHash
        self.rootIdentity = rootIdentity
        self.toManyIndexes = toManyIndexes
        self.transientIndexes = transientIndexes
        self.validatedIndexes = validatedIndexes
        self.attributeDefaults = attributeDefaults
        self.attributeTypes = attributeTypes
    }
}

/// Finds a property's position by name: the lookup every `value(forKey:)` and `setValue(_:forKey:)` starts with.
///
/// An open-addressing table hashed by the name's length and three of its bytes. A `[String: Int]` costs a SipHash of
/// the key per lookup (seeded and DoS-resistant, which a table built from the model's own names does not need):
/// several times as long for the short names models use.
struct PropertyNameIndex {
    private let names: [String]
    private let slots: [Int32]  // positions in `names`, -1 for an empty slot
    private let mask: Int

    init(_ names: [String]) {
        var size = 8
        while size < names.count * 3 { size *= 2 }
        var slots = [Int32](repeating: -1, count: size)
        for (i, name) in names.enumerated() {
            var slot = Self.hash(name) & (size - 1)
            while slots[slot] >= 0 {
                if names[Int(slots[slot])] == name { break }  // a later property of the same name wins, as before
                slot = (slot + 1) & (size - 1)
            }
            slots[slot] = Int32(i)
        }
        self.names = names
        self.slots = slots
        self.mask = size - 1
    }

    func index(of name: String) -> Int? {
        var slot = Self.hash(name) & mask
        while true {
            let i = slots[slot]
            if i < 0 {
                // String equality is canonical equivalence, which the byte hash does not see: a non-ASCII name may
                // equal a model name spelled with other code points.
                return name.utf8.contains(where: { $0 >= 0x80 }) ? names.lastIndex(of: name) : nil
            }
            if names[Int(i)] == name { return Int(i) }
            slot = (slot + 1) & mask
        }
    }

    /// The UTF-8 length and the first, middle and last bytes, read in place (a small string's from a stack copy):
    /// no pass over the bytes, and enough to tell apart the names of one entity in nearly every model; equal hashes
    /// are probed past.
    private static func hash(_ name: String) -> Int {
        if let h = name.utf8.withContiguousStorageIfAvailable(hash(bytes:)) { return h }
        var name = name
        return name.withUTF8(hash(bytes:))
    }

    private static func hash(bytes: UnsafeBufferPointer<UInt8>) -> Int {
        let count = bytes.count
        guard count > 0 else { return 0 }
        return (count &* 0x9E37) ^ (Int(bytes[0]) &* 0x1F3) ^ (Int(bytes[count / 2]) &* 0x2C9) ^ (Int(bytes[count - 1]) &* 0x3B)
    }
}
