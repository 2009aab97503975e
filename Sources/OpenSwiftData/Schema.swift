internal import OpenCoreData

public import class OpenCoreDataModel.ValueTransformer

/// The models a container stores, and how each property maps to the store: SwiftData's `Schema`.
///
/// For example:
/// ```swift
/// let schema = Schema([Trip.self, Stop.self])
/// let container = try ModelContainer(for: schema, configurations: [ModelConfiguration(isStoredInMemoryOnly: true)])
/// ```
/// Each model class is an entity named after the class; each persisted property an attribute (strings, integers,
/// floating-point numbers, `Bool`, `Date`, `Data`, `UUID`, `URL`, `Decimal`, enums with such raw values, and their
/// optionals) or a relationship (a model: to-one; an array of models: to-many).
public final class Schema: @unchecked Sendable {
    /// One persisted property of a model, as `@Model` lists it in `schemaMetadata`.
    public struct PropertyMetadata: @unchecked Sendable {
        /// The property's name (its name in the store).
        public let name: String
        /// The property's key path on its model class.
        public let keyPath: AnyKeyPath
        /// The property's initial value as declared, if it has one.
        public let defaultValue: Any?
        /// Its `Schema.Attribute` or `Schema.Relationship` options, from `@Attribute` or `@Relationship`.
        public let metadata: Any?

        /// Metadata of a property.
        public init(name: String, keyPath: AnyKeyPath, defaultValue: Any?, metadata: Any?) {
            self.name = name
            self.keyPath = keyPath
            self.defaultValue = defaultValue
            self.metadata = metadata
        }
    }

    /// The options `@Attribute` gives an attribute.
    public final class Attribute: @unchecked Sendable {
        /// An option of an attribute.
        public struct Option: Hashable, Sendable {
            let name: String
            /// For `.transformable(by:)`: the transformer's registered name.
            var transformerName: String?

            init(name: String) { self.name = name }

            /// Options are equal when they are the same option (with the same transformer).
            public static func == (a: Self, b: Self) -> Bool { a.name == b.name && a.transformerName == b.transformerName }
            /// Hashes the option and its transformer.
            public func hash(into hasher: inout Hasher) {
                hasher.combine(name)
                hasher.combine(transformerName)
            }

            /// The value is stored as the bytes this transformer makes: register an instance under the class's name
            /// (`ValueTransformer.setValueTransformer(_:forName:)`) before making the container.
            public static func transformable(by transformerType: ValueTransformer.Type) -> Option {
                var option = Option(name: "transformable")
                option.transformerName = String(describing: transformerType)
                return option
            }

            /// The value is stored as the bytes the transformer registered under `transformerName` makes.
            public static func transformable(by transformerName: String) -> Option {
                var option = Option(name: "transformable")
                option.transformerName = transformerName
                return option
            }
            /// Values are unique among the entity's rows: inserting a model whose value equals a stored one's updates
            /// that one.
            public static let unique = Option(name: "unique")
            /// The value may be kept outside the row (a hint; OpenCoreData keeps it in the row).
            public static let externalStorage = Option(name: "externalStorage")
            /// The value stays readable in the history of a deletion.
            public static let preserveValueOnDeletion = Option(name: "preserveValueOnDeletion")
            /// The value is not saved (SwiftData's transient attribute).
            public static let ephemeral = Option(name: "ephemeral")
            /// Indexed for Spotlight on Apple's systems (ignored here).
            public static let spotlight = Option(name: "spotlight")
            /// Encrypted in CloudKit on Apple's systems (ignored here).
            public static let allowsCloudEncryption = Option(name: "allowsCloudEncryption")
        }

        /// The options given.
        public let options: [Option]

        /// The transformer `.transformable(by:)` names.
        ///
        /// - Throws: `SwiftDataError` when no transformer is registered under that name.
        func transformerName(checking entityName: String, _ propertyName: String) throws -> String? {
            guard let name = options.lazy.compactMap(\.transformerName).first else { return nil }
            guard ValueTransformer(forName: NSValueTransformerName(name)) != nil else {
                throw SwiftDataError(
                    "\(entityName).\(propertyName) is transformed by '\(name)', which is not registered: call ValueTransformer.setValueTransformer(_:forName:) with it before making the container."
                )
            }
            return name
        }

        /// The attribute's name in the previous version of the schema.
        public let originalName: String?
        /// A string that changes the attribute's version hash.
        public let hashModifier: String?

        /// An attribute's options.
        public init(_ options: Option..., originalName: String? = nil, hashModifier: String? = nil) {
            self.options = options
            self.originalName = originalName
            self.hashModifier = hashModifier
        }
    }

    /// The options `@Relationship` gives a relationship.
    public final class Relationship: @unchecked Sendable {
        /// What deleting a model does to the models this relationship holds.
        public enum DeleteRule: Hashable, Sendable {
            /// The related models lose their link to the deleted one.
            case nullify
            /// The related models are deleted too.
            case cascade
            /// The deletion fails while the relationship holds models.
            case deny
            /// Nothing is done to the related models.
            case noAction
        }

        /// An option of a relationship.
        public struct Option: Hashable, Sendable {
            let name: String
            /// The relationship's value is unique among the entity's rows.
            public static let unique = Option(name: "unique")
        }

        /// The options given.
        public let options: [Option]
        /// The delete rule.
        public let deleteRule: DeleteRule
        /// The fewest models a to-many holds (0: no minimum).
        public let minimumModelCount: Int?
        /// The most models a to-many holds (0: no maximum).
        public let maximumModelCount: Int?
        /// The relationship's name in the previous version of the schema.
        public let originalName: String?
        /// The inverse relationship's key path on the destination class.
        public let inverse: AnyKeyPath?
        /// A string that changes the relationship's version hash.
        public let hashModifier: String?

        /// A relationship's options.
        public init(
            _ options: Option..., deleteRule: DeleteRule = .nullify, minimumModelCount: Int? = 0, maximumModelCount: Int? = 0,
            originalName: String? = nil, inverse: AnyKeyPath? = nil, hashModifier: String? = nil
        ) {
            self.options = options
            self.deleteRule = deleteRule
            self.minimumModelCount = minimumModelCount
            self.maximumModelCount = maximumModelCount
            self.originalName = originalName
            self.inverse = inverse
            self.hashModifier = hashModifier
        }
    }

    /// The model classes, in the order given.
    public let types: [any PersistentModel.Type]

    /// The schema's version number (1.0.0 unless given; a `VersionedSchema`'s identifier).
    public let version: Version

    /// A schema of the given model classes, and of the classes they relate to.
    ///
    /// As in SwiftData, listing a model is enough to bring in every model it reaches through its relationships
    /// (`ModelContainer(for: User.self)` when a `User` has `jobs: [Job]`), and a subclass's model superclasses.
    public init(_ types: [any PersistentModel.Type], version: Version = Version(1, 0, 0)) {
        var seen: Set<ObjectIdentifier> = []
        var listed: [any PersistentModel.Type] = []
        // A subclass's model superclasses join the schema before it, as its entity's superentities.
        func add(_ type: any PersistentModel.Type) {
            var chain: [any PersistentModel.Type] = [type]
            while let parent = Self.superModel(of: chain[0]) { chain.insert(parent, at: 0) }
            for member in chain where seen.insert(ObjectIdentifier(member)).inserted { listed.append(member) }
        }
        for type in types { add(type) }
        // Then the classes their relationships reach, after the listed ones, until no new one turns up.
        var next = 0
        while next < listed.count {
            for property in listed[next].schemaMetadata {
                let (base, _) = Self.unwrapped(Swift.type(of: property.keyPath).valueType)
                if let destination = Self.modelDestination(base) { add(destination.type) }
            }
            next += 1
        }
        self.types = listed
        self.version = version
        var parents: Set<ObjectIdentifier> = []
        for type in listed { if let parent = Self.superModel(of: type) { parents.insert(ObjectIdentifier(parent)) } }
        self.superclasses = parents
    }

    /// The classes of the schema that other model classes subclass (a row of their entity may be a subclass's).
    let superclasses: Set<ObjectIdentifier>

    /// Whether `type` is `ancestor` or inherits from it.
    static func isSubclass(_ type: any PersistentModel.Type, of ancestor: any PersistentModel.Type) -> Bool {
        var current: AnyClass? = type
        while let each = current {
            if ObjectIdentifier(each) == ObjectIdentifier(ancestor) { return true }
            current = _getSuperclass(each)
        }
        return false
    }

    /// The model class `type` inherits from, if it is a subclass of one.
    static func superModel(of type: any PersistentModel.Type) -> (any PersistentModel.Type)? {
        guard let parent = _getSuperclass(type) else { return nil }
        return parent as? any PersistentModel.Type
    }

    /// A schema of the given model classes.
    public convenience init(_ types: any PersistentModel.Type..., version: Version = Version(1, 0, 0)) {
        self.init(types, version: version)
    }

    /// The entity name of a model class: the class's name.
    static func entityName(of type: any PersistentModel.Type) -> String { String(describing: type) }

    /// The managed object model the schema maps to.
    ///
    /// - Parameter configurations: named groups of entities (a store each), when the container has more than one.
    /// - Returns: the model, validated.
    /// - Throws: `SwiftDataError` naming the class and property whose type has no mapping, or a relationship whose
    ///   destination class the schema does not list.
    func makeManagedObjectModel(configurations: [(name: String, entities: Set<String>)] = []) throws -> NSManagedObjectModel {
        struct Link {
            let entity: String
            let name: String
            let destination: String
            let toMany: Bool
            let isOptional: Bool
            let options: Relationship?
            let keyPath: AnyKeyPath
            var inverse: String?
        }
        let names = Dictionary(types.map { (ObjectIdentifier($0), Self.entityName(of: $0)) }, uniquingKeysWith: { a, _ in a })
        var entities: [NSEntityDescription] = []
        var links: [Link] = []
        for type in types {
            let parent = Self.superModel(of: type)
            let entity = NSEntityDescription(name: Self.entityName(of: type), superentityName: parent.map { Self.entityName(of: $0) })
            entity.managedObjectClass = ModelObject.self
            entities.append(entity)
            // A subclass's entity declares its own properties; the others it inherits from its superentity.
            let inherited = Set(parent?.schemaMetadata.map(\.name) ?? [])
            for property in type.schemaMetadata where !inherited.contains(property.name) {
                let valueType = Swift.type(of: property.keyPath).valueType
                let (base, isOptional) = Self.unwrapped(valueType)
                if let destination = Self.modelDestination(base) {
                    guard let target = names[ObjectIdentifier(destination.type)] else {
                        throw SwiftDataError(
                            "\(entity.name).\(property.name) relates to \(destination.type), which the schema does not list.")
                    }
                    links.append(
                        Link(
                            entity: entity.name, name: property.name, destination: target, toMany: destination.toMany,
                            isOptional: isOptional || destination.toMany, options: property.metadata as? Relationship,
                            keyPath: property.keyPath))
                    continue
                }
                let options = property.metadata as? Attribute
                let attribute: NSAttributeDescription
                if let transformer = try options?.transformerName(checking: entity.name, property.name) {
                    attribute = NSAttributeDescription(name: property.name, type: .transformableAttributeType, isOptional: isOptional)
                    attribute.valueTransformerName = transformer
                } else if let attributeType = Self.attributeType(of: base) {
                    // The declared initial value is the attribute's default, as in SwiftData: rows a migration adds
                    // the attribute to get it.
                    let initial = property.defaultValue.flatMap { ModelValues.encode($0) }.flatMap { AttributeValue.converting($0) }
                    attribute = NSAttributeDescription(
                        name: property.name, type: attributeType, isOptional: isOptional, defaultValue: initial ?? .null)
                } else if let codable = base as? any Codable.Type {
                    attribute = CodableStorage.attribute(named: property.name, type: codable, isOptional: isOptional)
                } else {
                    throw SwiftDataError(
                        "\(entity.name).\(property.name) is a \(valueType), which OpenSwiftData cannot store: use strings, numbers, Bool, Date, Data, UUID, URL, Decimal, enums with such raw values, Codable types, models or arrays of models, or give it @Attribute(.transformable(by:))."
                    )
                }
                if let renaming = options?.originalName { attribute.renamingIdentifier = renaming }
                if let modifier = options?.hashModifier { attribute.versionHashModifier = modifier }
                if options?.options.contains(.ephemeral) == true { attribute.isTransient = true }
                if options?.options.contains(.externalStorage) == true { attribute.allowsExternalBinaryDataStorage = true }
                if options?.options.contains(.preserveValueOnDeletion) == true { attribute.preservesValueInHistoryOnDeletion = true }
                entity.addProperty(attribute)
                if options?.options.contains(.unique) == true { entity.uniquenessConstraints.append([property.name]) }
            }
        }
        for (type, entity) in zip(types, entities) {
            func names(_ group: [AnyKeyPath], _ macro: String) throws -> [String] {
                try group.map { keyPath in
                    guard let property = type.schemaMetadata.first(where: { $0.keyPath == keyPath }) else {
                        throw SwiftDataError("#\(macro) of \(entity.name) names \(keyPath), which is not a persisted property.")
                    }
                    return property.name
                }
            }
            // A subclass inherits its superclass's `#Unique` and `#Index` (static properties of the superclass): they
            // are its superentity's, whose table holds the subclass's rows too.
            let parent = Self.superModel(of: type)
            let inheritedUnique = Set(parent?.uniquenessConstraints ?? []), inheritedIndexes = Set(parent?.indexes ?? [])
            for group in type.uniquenessConstraints where !inheritedUnique.contains(group) {
                entity.uniquenessConstraints.append(try names(group, "Unique"))
            }
            for (i, group) in type.indexes.enumerated() where !inheritedIndexes.contains(group) {
                let elements = try names(group, "Index").map { NSFetchIndexElementDescription(propertyName: $0) }
                entity.indexes.append(NSFetchIndexDescription(name: "\(entity.name)_index\(i)", elements: elements))
            }
        }
        // Inverses: those given with `inverse:` (on either side), then a relationship whose destination has exactly one
        // relationship back to its entity pairs with it, as SwiftData infers.
        for i in links.indices {
            guard let keyPath = links[i].options?.inverse else { continue }
            guard let j = links.firstIndex(where: { $0.keyPath == keyPath }) else {
                throw SwiftDataError("The inverse of \(links[i].entity).\(links[i].name) is not a relationship of the schema.")
            }
            links[i].inverse = links[j].name
            links[j].inverse = links[i].name
        }
        for i in links.indices where links[i].inverse == nil {
            let back = links.indices.filter { j in
                j != i && links[j].entity == links[i].destination && links[j].destination == links[i].entity
                    && (links[j].inverse == nil || links[j].inverse == links[i].name)
            }
            if back.count == 1 {
                links[i].inverse = links[back[0]].name
                links[back[0]].inverse = links[i].name
            }
        }
        for link in links {
            let rule: NSDeleteRule =
                switch link.options?.deleteRule ?? .nullify {
                case .nullify: .nullifyDeleteRule
                case .cascade: .cascadeDeleteRule
                case .deny: .denyDeleteRule
                case .noAction: .noActionDeleteRule
                }
            let relationship = NSRelationshipDescription(
                name: link.name, destinationEntityName: link.destination, inverseName: link.inverse, toMany: link.toMany, deleteRule: rule,
                isOptional: link.isOptional, minCount: link.toMany ? max(0, link.options?.minimumModelCount ?? 0) : 0,
                maxCount: link.toMany ? max(0, link.options?.maximumModelCount ?? 0) : 1)
            if let renaming = link.options?.originalName { relationship.renamingIdentifier = renaming }
            entities.first { $0.name == link.entity }!.addProperty(relationship)
        }
        let model = NSManagedObjectModel()
        for entity in entities { model.addEntity(entity) }
        for configuration in configurations {
            model.setEntities(entities.filter { configuration.entities.contains($0.name) }, forConfigurationName: configuration.name)
        }
        try model.validate()
        return model
    }

    /// The type inside any optionals, and whether there was one.
    static func unwrapped(_ type: Any.Type) -> (Any.Type, Bool) {
        var current = type
        var isOptional = false
        while let optional = current as? any OptionalType.Type {
            current = optional.wrappedType
            isOptional = true
        }
        return (current, isOptional)
    }

    /// The destination class of a relationship property (a model, or an array of them), if it is one.
    static func modelDestination(_ type: Any.Type) -> (type: any PersistentModel.Type, toMany: Bool)? {
        if let model = type as? any PersistentModel.Type { return (model, false) }
        if let array = type as? any ModelArray.Type { return (array.modelElement, true) }
        return nil
    }

    /// The attribute type a Swift type is stored as.
    static func attributeType(of type: Any.Type) -> NSAttributeType? {
        switch type {
        case is String.Type: return .stringAttributeType
        case is Bool.Type: return .booleanAttributeType
        case is Int.Type, is Int64.Type, is UInt.Type, is UInt64.Type, is UInt32.Type: return .integer64AttributeType
        case is Int32.Type, is UInt16.Type: return .integer32AttributeType
        case is Int16.Type, is Int8.Type, is UInt8.Type: return .integer16AttributeType
        case is Double.Type: return .doubleAttributeType
        case is Float.Type: return .floatAttributeType
        case is Decimal.Type: return .decimalAttributeType
        case is Date.Type: return .dateAttributeType
        case is Data.Type: return .binaryDataAttributeType
        case is UUID.Type: return .UUIDAttributeType
        case is URL.Type: return .URIAttributeType
        default:
            if let raw = type as? any RawRepresentable.Type { return rawAttributeType(raw) }
            return nil
        }
    }

    private static func rawAttributeType<R: RawRepresentable>(_ type: R.Type) -> NSAttributeType? { attributeType(of: R.RawValue.self) }
}

/// `Optional`'s wrapped type, for reading a schema.
protocol OptionalType {
    static var wrappedType: Any.Type { get }
}

extension Optional: OptionalType {
    static var wrappedType: Any.Type { Wrapped.self }
}
