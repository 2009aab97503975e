import Foundation

/// How a store's entities and properties turn into those of another model version, as Core Data describes a
/// migration: one entity mapping per destination entity (and per source entity that goes), each with its property
/// mappings.
///
/// Lightweight migration infers it (`inferredMappingModel(forSourceModel:destinationModel:)`); code may also build one.
///
/// For example:
/// ```swift
/// let mapping = try NSMappingModel.inferredMappingModel(forSourceModel: version1, destinationModel: version2)
/// for entity in mapping.entityMappings { print(entity.name, entity.mappingType) }
/// ```
public final class NSMappingModel: @unchecked Sendable {
    /// The entity mappings, destination entities in entity-number order, then the source entities that go.
    public var entityMappings: [NSEntityMapping]

    /// A mapping model of `entityMappings`.
    public init(entityMappings: [NSEntityMapping] = []) {
        self.entityMappings = entityMappings
    }

    /// The entity mappings by name.
    public var entityMappingsByName: [String: NSEntityMapping] {
        Dictionary(entityMappings.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// The mapping Core Data's lightweight migration infers between two model versions.
    ///
    /// An entity or property of the destination maps from the source one of its name, or of its `renamingIdentifier`
    /// (Xcode's "Renaming ID"); destination entities with none are added, source entities with none removed;
    /// attributes keep their values (converted between numeric types), new ones take their default; relationships
    /// keep their links.
    ///
    /// - Throws: `CoreDataError(.inferredMappingModel)` naming the entity and property whose change Core Data cannot
    ///   infer (an attribute whose type changes to one its values do not convert to). A relationship whose
    ///   destination becomes another entity is inferred, as Core Data does: links to objects that are not of the new
    ///   destination's kind are dropped (a required relationship left empty then fails the migration).
    public static func inferredMappingModel(
        forSourceModel source: NSManagedObjectModel, destinationModel destination: NSManagedObjectModel
    ) throws -> NSMappingModel {
        try source.validate()
        try destination.validate()
        var mappings: [NSEntityMapping] = []
        var mappedSources: Set<String> = []
        for entity in destination.entities.sorted(by: { $0.entityID < $1.entityID }) {
            let stored = [entity.renamingIdentifier, entity.name].compactMap { $0 }
            guard let from = stored.lazy.compactMap({ source.entitiesByName[$0] }).first else {
                mappings.append(NSEntityMapping(name: "Add\(entity.name)", mappingType: .add, source: nil, destination: entity))
                continue
            }
            mappedSources.insert(from.name)
            let mapping = NSEntityMapping(
                name: "\(from.name)To\(entity.name)", mappingType: from.versionHash == entity.versionHash ? .copy : .transform,
                source: from, destination: entity)
            mapping.attributeMappings = try entity.allProperties.compactMap { $0 as? NSAttributeDescription }
                .filter { !$0.isTransient }
                .map { try NSPropertyMapping.inferred(for: $0, from: from) }
            mapping.relationshipMappings = entity.allProperties.compactMap { $0 as? NSRelationshipDescription }
                .filter { !$0.isTransient }
                .map { NSPropertyMapping.inferred(for: $0, from: from) }
            mappings.append(mapping)
        }
        for entity in source.entities.sorted(by: { $0.entityID < $1.entityID }) where !mappedSources.contains(entity.name) {
            mappings.append(NSEntityMapping(name: "Remove\(entity.name)", mappingType: .remove, source: entity, destination: nil))
        }
        return NSMappingModel(entityMappings: mappings)
    }
}

/// What an entity mapping does (Core Data's `NSEntityMappingType`).
public enum NSEntityMappingType: UInt, Sendable {
    case undefinedEntityMappingType = 0
    case customEntityMappingType = 1
    /// The destination entity is new: it starts empty.
    case addEntityMappingType = 2
    /// The source entity goes, with its objects.
    case removeEntityMappingType = 3
    /// Objects are copied unchanged.
    case copyEntityMappingType = 4
    /// Objects are copied with their properties mapped.
    case transformEntityMappingType = 5

    static let add = Self.addEntityMappingType
    static let remove = Self.removeEntityMappingType
    static let copy = Self.copyEntityMappingType
    static let transform = Self.transformEntityMappingType
}

/// How the objects of one source entity become objects of one destination entity (Core Data's `NSEntityMapping`).
///
/// For example:
/// ```swift
/// let mapping = NSEntityMapping(name: "PostToArticle", mappingType: .transformEntityMappingType, source: post, destination: article)
/// ```
public final class NSEntityMapping: @unchecked Sendable {
    /// The mapping's name (Core Data's inferred ones are `<Source>To<Destination>`, `Add<Entity>`, `Remove<Entity>`).
    public var name: String
    /// What the mapping does.
    public var mappingType: NSEntityMappingType
    /// The source entity's name (nil for an added entity).
    public var sourceEntityName: String?
    /// The destination entity's name (nil for a removed entity).
    public var destinationEntityName: String?
    /// The source entity's version hash.
    public var sourceEntityVersionHash: Data?
    /// The destination entity's version hash.
    public var destinationEntityVersionHash: Data?
    /// How each destination attribute gets its value.
    public var attributeMappings: [NSPropertyMapping] = []
    /// How each destination relationship gets its destinations.
    public var relationshipMappings: [NSPropertyMapping] = []

    /// A mapping from `source` to `destination` (either nil for an added or removed entity).
    public init(name: String, mappingType: NSEntityMappingType, source: NSEntityDescription?, destination: NSEntityDescription?) {
        self.name = name
        self.mappingType = mappingType
        sourceEntityName = source?.name
        destinationEntityName = destination?.name
        sourceEntityVersionHash = source?.versionHash
        destinationEntityVersionHash = destination?.versionHash
    }
}

/// How one destination property gets its value (Core Data's `NSPropertyMapping`): from a source property (its
/// `valueExpression` is then `$source.<name>` in Core Data's terms), or none (a new property, its default value).
///
/// For example:
/// ```swift
/// let title = NSPropertyMapping(name: "title", sourcePropertyName: "heading")
/// ```
public final class NSPropertyMapping: @unchecked Sendable {
    /// The destination property's name.
    public var name: String
    /// The source property the value comes from, or nil for a new property.
    public var sourcePropertyName: String?

    /// A mapping of destination property `name` from `sourcePropertyName` (nil: the property is new).
    public init(name: String, sourcePropertyName: String?) {
        self.name = name
        self.sourcePropertyName = sourcePropertyName
    }

    /// Core Data's value expression for the mapping, as format text (`$source.name`), or nil.
    public var valueExpression: String? { sourcePropertyName.map { "$source.\($0)" } }

    /// The source property of `entity` that `property` maps from: its renaming identifier's or its name's.
    static func sourceProperty(for property: NSPropertyDescription, in entity: NSEntityDescription) -> NSPropertyDescription? {
        [property.renamingIdentifier, property.name].compactMap { $0 }.lazy.compactMap { entity.propertiesByName[$0] }
            .first { !$0.isTransient }
    }

    static func inferred(for attribute: NSAttributeDescription, from entity: NSEntityDescription) throws -> NSPropertyMapping {
        guard let source = sourceProperty(for: attribute, in: entity) else {
            return NSPropertyMapping(name: attribute.name, sourcePropertyName: nil)
        }
        let place = "\(attribute.entity?.name ?? "?").\(attribute.name)"
        // A source property of the other kind (Mastodon's `Status.mentions`, a to-many relationship, then a Binary
        // attribute): Core Data's `_NSMappingModelBuilder` logs that properties cannot be mapped to other property
        // types, then maps the destination as a new property and drops the source's values — the inference succeeds.
        guard let old = source as? NSAttributeDescription else {
            return NSPropertyMapping(name: attribute.name, sourcePropertyName: nil)
        }
        guard
            old.attributeType == attribute.attributeType || (old.attributeType.isNumeric && attribute.attributeType.isNumeric)
                || attribute.attributeType == .stringAttributeType
                    && (old.attributeType.isNumeric || old.attributeType == .URIAttributeType)
        else {
            throw CoreDataError(
                .inferredMappingModel,
                "\(place) changes type from \(old.attributeType) to \(attribute.attributeType), which Core Data cannot infer a mapping for.",
                entityName: attribute.entity?.name, key: attribute.name)
        }
        return NSPropertyMapping(name: attribute.name, sourcePropertyName: old.name)
    }

    /// A relationship maps from the source relationship of its name (or renaming identifier), whatever its
    /// destination now is (from a source attribute of that name it is new, as an attribute from a relationship is): Core Data's inference keeps it (Artsy's app migrates `Album.cover` from `Artwork` to `Image`
    /// with an inferred mapping); the migration keeps the links whose objects are still of the destination's kind.
    static func inferred(for relationship: NSRelationshipDescription, from entity: NSEntityDescription) -> NSPropertyMapping {
        let old = sourceProperty(for: relationship, in: entity) as? NSRelationshipDescription
        return NSPropertyMapping(name: relationship.name, sourcePropertyName: old?.name)
    }
}
