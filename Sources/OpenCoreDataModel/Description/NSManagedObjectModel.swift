import Foundation

/// A managed object model: the entities of an application's data, their properties and how they relate.
///
/// Build one in Swift with the result builder, or load the `.xcdatamodeld` an iOS app ships:
/// ```swift
/// let model = try NSManagedObjectModel {
///     Entity("Products") {
///         Attribute("name", .string)
///         Attribute("price", .integer32, default: 0)
///     }
///     Entity("FavoriteProducts", parent: "Products")
/// }
/// let loaded = try NSManagedObjectModel(contentsOf: URL(fileURLWithPath: "Groceries.xcdatamodeld"))
/// ```
/// A model is checked and frozen (`validate()`) when a coordinator first uses it: relationship destinations and
/// inverses must exist, names must be unique, every attribute type must be one the store supports.
public final class NSManagedObjectModel: @unchecked Sendable, CustomStringConvertible {
    /// The entities, in the order they were added.
    public private(set) var entities: [NSEntityDescription] = []
    /// Identifiers of this model version (from the builder or the model file's `versionHashModifier`); informational.
    public var versionIdentifiers: Set<String> = []
    /// The fetch requests stored in the model, by name (the model file's `<fetchRequest>` elements, or set with
    /// `setFetchRequestTemplate(_:forName:)`).
    public var fetchRequestTemplateDescriptions: [String: FetchRequestTemplateDescription] = [:]

    /// The bundle this model was loaded from (an `.xcdatamodeld` or `.momd`), whose other versions a migration may
    /// start from: Core Data looks for the model that wrote a store among the versions an app ships.
    package internal(set) var versionBundleURL: URL?

    /// Whether a relationship may name an inverse whose own inverse is another (as Xcode allows); set for models
    /// loaded from Xcode's files, whose builder models must pair their inverses.
    var acceptsMismatchedInverses = false

    /// The entities of each named configuration (Xcode's "Configurations"), in the order given.
    private var configurationEntities: [String: [String]] = [:]

    /// The names of the model's configurations (besides the default one, which holds every entity).
    public var configurations: [String] { configurationEntities.keys.sorted() }

    /// The entities of a configuration: every entity for nil (the default configuration), nil for a name the model
    /// does not have.
    ///
    /// For example:
    /// ```swift
    /// let synced = model.entities(forConfigurationName: "Cloud")?.map(\.name)
    /// ```
    public func entities(forConfigurationName name: String?) -> [NSEntityDescription]? {
        guard let name, name != "Default", name != "PF_DEFAULT_CONFIGURATION_NAME" else { return entities }
        return configurationEntities[name].map { names in names.compactMap { entity(named: $0) } }
    }

    /// Makes `entities` the members of configuration `name`; call before the model is used.
    public func setEntities(_ entities: [NSEntityDescription], forConfigurationName name: String) {
        precondition(!isFrozen, "The model is in use and can no longer be changed.")
        configurationEntities[name] = entities.map(\.name)
    }

    /// Sets a configuration's members by name (the loaders').
    package func setEntityNames(_ names: [String], forConfigurationName name: String) {
        configurationEntities[name] = names
    }

    private let lock = NSLock()
    private var _isFrozen = false
    /// Set when the model freezes: whether a save has transformable values to turn into data.
    private var hasStoredTransformables = false
    /// Set when the model freezes: whether a save has derived attributes to compute.
    private var hasDerived = false
    /// Set when the model freezes: whether an entity has a uniqueness constraint.
    private var hasConstraints = false
    private var _entitiesByName: [String: NSEntityDescription] = [:]

    /// An empty model: add entities, then use it (or load one with `init(contentsOf:)`).
    public init() {}

    /// Creates a model from entities; relationships and parents are resolved by name and checked.
    ///
    /// - Throws: `CoreDataError` with code `.invalidModel` naming the entity and property at fault.
    public init(entities: [NSEntityDescription]) throws {
        for entity in entities { addEntity(entity) }
        try validate()
    }

    /// Whether the model has been checked and can no longer change.
    public var isFrozen: Bool {
        lock.lock()
        defer { lock.unlock() }
        return _isFrozen
    }

    /// Adds an entity; call before the model is used.
    public func addEntity(_ entity: NSEntityDescription) {
        precondition(!isFrozen, "The model is in use and can no longer be changed.")
        entity.managedObjectModel = self
        entities.append(entity)
        _entitiesByName[entity.name] = entity
    }

    /// The entities keyed by name.
    public var entitiesByName: [String: NSEntityDescription] {
        Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// The entity of the given name, or `nil`.
    public func entity(named name: String) -> NSEntityDescription? {
        _entitiesByName[name] ?? entities.first { $0.name == name }
    }

    /// The entity with the given `entityID` (the `Z_ENT` number), or `nil`.
    public func entity(withID id: Int) -> NSEntityDescription? {
        guard id >= 1, id <= entities.count else { return nil }
        if isFrozen { return entitiesInIDOrder[id - 1] }
        return entities.first { $0.entityID == id }
    }

    /// The entities by `entityID`, set when the model is resolved.
    private var entitiesInIDOrder: [NSEntityDescription] = []

    /// Numbers the entities as Core Data numbers them in a store (`Z_ENT`): root entities in case-insensitive name
    /// order, each followed depth-first by its subentities in the same order.
    private func numberEntities() {
        func ordered(_ list: [NSEntityDescription]) -> [NSEntityDescription] {
            list.sorted { a, b in
                let (x, y) = (a.name.lowercased(), b.name.lowercased())
                return x != y ? x < y : a.name < b.name
            }
        }
        var order: [NSEntityDescription] = []
        func visit(_ entity: NSEntityDescription) {
            order.append(entity)
            for sub in ordered(entity.subentities) { visit(sub) }
        }
        for root in ordered(entities.filter { $0.superentity == nil }) { visit(root) }
        for (i, entity) in order.enumerated() { entity.entityID = i + 1 }
        entitiesInIDOrder = order
    }

    /// The entity version hashes keyed by entity name.
    public var entityVersionHashesByName: [String: Data] {
        Dictionary(entities.map { ($0.name, $0.versionHash) }, uniquingKeysWith: { a, _ in a })
    }

    /// A hash of every entity's version hash: equal for two models whose stores are interchangeable.
    public var versionHash: Data {
        let joined = entities.map(\.name).sorted().map { name in
            name + ":" + (entity(named: name)?.versionHash.hexString ?? "")
        }.joined(separator: ";")
        return SHA256Digest.hash(Data(joined.utf8))
    }

    /// The version hash as lowercase hex, as the store records it.
    public var versionHashString: String { versionHash.hexString }

    /// Resolves names into references, checks the model, and freezes it.
    ///
    /// Idempotent.
    ///
    /// - Throws: `CoreDataError(.invalidModel)` naming the entity and property at fault.
    public func validate() throws {
        if isFrozen { return }
        try resolve()
        for entity in entities where entity.superentity == nil {
            freezeTree(entity)
        }
        let transformables = entities.contains { entity in
            entity.attributesByName.values.contains { $0.attributeType.isArchived && !$0.isTransient }
        }
        let derived = entities.contains { entity in entity.attributesByName.values.contains { $0.derivationExpression != nil } }
        let constraints = entities.contains { !$0.uniquenessConstraints.isEmpty }
        lock.lock()
        _isFrozen = true
        hasStoredTransformables = transformables
        hasDerived = derived
        hasConstraints = constraints
        lock.unlock()
    }

    /// Whether an entity has a derived attribute (one with a `derivationExpression`), which a save computes (false
    /// until the model is frozen).
    package var _hasDerivedAttributes: Bool { lock.withLock { hasDerived } }

    /// Whether an entity has a uniqueness constraint (false until the model is frozen).
    package var _hasUniquenessConstraints: Bool { lock.withLock { hasConstraints } }

    /// Whether an entity has a stored transformable attribute (false until the model is frozen).
    package var _hasStoredTransformableAttributes: Bool { lock.withLock { hasStoredTransformables } }

    private func freezeTree(_ entity: NSEntityDescription) {
        entity.freeze()
        for sub in entity.subentities { freezeTree(sub) }
    }

    private func fail(_ message: String, entity: String? = nil, key: String? = nil) -> CoreDataError {
        CoreDataError(.invalidModel, message, entityName: entity, key: key)
    }

    private func resolve() throws {
        var byName: [String: NSEntityDescription] = [:]
        for entity in entities {
            guard !entity.name.isEmpty else { throw fail("An entity has an empty name.") }
            guard byName[entity.name] == nil else {
                throw fail("The model has two entities named '\(entity.name)'.", entity: entity.name)
            }
            byName[entity.name] = entity
        }
        _entitiesByName = byName
        for entity in entities { entity.subentities = [] }
        for entity in entities {
            entity.superentity = nil
            guard let parentName = entity.superentityName else { continue }
            guard let parent = byName[parentName] else {
                throw fail(
                    "Entity '\(entity.name)' inherits from '\(parentName)', which is not in the model.",
                    entity: entity.name)
            }
            entity.superentity = parent
            parent.subentities.append(entity)
        }
        for entity in entities {
            var seen: Set<ObjectIdentifier> = [ObjectIdentifier(entity)]
            var current = entity.superentity
            while let c = current {
                guard seen.insert(ObjectIdentifier(c)).inserted else {
                    throw fail("Entity '\(entity.name)' inherits from itself through its parents.", entity: entity.name)
                }
                current = c.superentity
            }
        }
        numberEntities()
        for entity in entities {
            var names: Set<String> = []
            for property in entity.allProperties {
                guard !property.name.isEmpty else {
                    throw fail("Entity '\(entity.name)' has a property with an empty name.", entity: entity.name)
                }
                guard names.insert(property.name).inserted else {
                    throw fail(
                        "Entity '\(entity.name)' has two properties named '\(property.name)' (its own or inherited).",
                        entity: entity.name, key: property.name)
                }
                if let attribute = property as? NSAttributeDescription, !attribute.attributeType.isSupported {
                    // Undefined is the type of a transient attribute that holds any value in memory.
                    if attribute.attributeType == .undefinedAttributeType {
                        guard attribute.isTransient else {
                            throw fail(
                                "Attribute '\(entity.name).\(property.name)' has type Undefined, which only a transient attribute may have.",
                                entity: entity.name, key: property.name)
                        }
                        continue
                    }
                    throw fail(
                        "Attribute '\(entity.name).\(property.name)' has type \(attribute.attributeType.xcodeName), which OpenCoreData does not support yet.",
                        entity: entity.name, key: property.name)
                }
            }
        }
        for entity in entities {
            for case let relationship as NSRelationshipDescription in entity.properties {
                try resolve(relationship, in: entity, byName: byName)
            }
            try checkUniquenessConstraints(of: entity)
        }
    }

    /// Each constraint names stored attributes or to-one relationships of the entity (or its parents).
    private func checkUniquenessConstraints(of entity: NSEntityDescription) throws {
        for constraint in entity.uniquenessConstraints {
            for name in constraint {
                let property = entity.allProperties.first { $0.name == name }
                let storedToOne = (property as? NSRelationshipDescription).map { !$0.isToMany } ?? false
                guard let property, !property.isTransient, property is NSAttributeDescription || storedToOne else {
                    throw fail(
                        "Entity '\(entity.name)' has a uniqueness constraint on '\(name)', which is not a stored attribute or to-one relationship of it.",
                        entity: entity.name, key: name)
                }
            }
        }
    }

    private func resolve(
        _ relationship: NSRelationshipDescription, in entity: NSEntityDescription, byName: [String: NSEntityDescription]
    ) throws {
        let where_ = "Relationship '\(entity.name).\(relationship.name)'"
        guard let destination = byName[relationship.destinationEntityName] else {
            throw fail(
                "\(where_) points to entity '\(relationship.destinationEntityName)', which is not in the model.",
                entity: entity.name, key: relationship.name)
        }
        relationship.destinationEntity = destination
        guard relationship.minCount >= 0, relationship.maxCount >= -1,
            relationship.maxCount <= 0 || relationship.minCount <= relationship.maxCount
        else {
            throw fail(
                "\(where_) has min count \(relationship.minCount) and max count \(relationship.maxCount); min must not exceed max.",
                entity: entity.name, key: relationship.name)
        }
        relationship.inverseRelationship = nil
        guard let inverseName = relationship.inverseRelationshipName else { return }
        guard let inverse = destination.propertiesByName[inverseName] as? NSRelationshipDescription else {
            throw fail(
                "\(where_) names inverse '\(inverseName)', which is not a relationship of '\(destination.name)'.",
                entity: entity.name, key: relationship.name)
        }
        guard
            inverse.destinationEntityName == entity.name
                || (byName[inverse.destinationEntityName].map { entity.isKindOf(entity: $0) } ?? false)
        else {
            throw fail(
                "\(where_) names inverse '\(destination.name).\(inverseName)', but that relationship points to '\(inverse.destinationEntityName)', not '\(entity.name)'.",
                entity: entity.name, key: relationship.name)
        }
        if let back = inverse.inverseRelationshipName, back != relationship.name {
            // Xcode opens and ships such a model (Artsy Folio's names `thumbnail` as the inverse of two relationships);
            // a model file's pair is kept one-sided: no inverse is maintained or stored through it.
            if acceptsMismatchedInverses { return }
            throw fail(
                "\(where_) names inverse '\(destination.name).\(inverseName)', whose own inverse is '\(back)'; inverses must name each other.",
                entity: entity.name, key: relationship.name)
        }
        relationship.inverseRelationship = inverse
    }

    /// The model's entity names.
    public var description: String { "NSManagedObjectModel(\(entities.map(\.name).joined(separator: ", ")))" }
}
