import Foundation

extension NSAttributeType {
    // Short names, as Apple's newer `NSAttributeDescription.AttributeType` spells them, for the builder.
    /// A `String` attribute.
    public static let string = NSAttributeType.stringAttributeType
    /// An `Integer 16` attribute.
    public static let integer16 = NSAttributeType.integer16AttributeType
    /// An `Integer 32` attribute.
    public static let integer32 = NSAttributeType.integer32AttributeType
    /// An `Integer 64` attribute.
    public static let integer64 = NSAttributeType.integer64AttributeType
    /// A `Decimal` attribute.
    public static let decimal = NSAttributeType.decimalAttributeType
    /// A `Double` attribute.
    public static let double = NSAttributeType.doubleAttributeType
    /// A `Float` attribute.
    public static let float = NSAttributeType.floatAttributeType
    /// A `Boolean` attribute.
    public static let boolean = NSAttributeType.booleanAttributeType
    /// A `Date` attribute.
    public static let date = NSAttributeType.dateAttributeType
    /// A `Binary Data` attribute.
    public static let binaryData = NSAttributeType.binaryDataAttributeType
    /// A `UUID` attribute.
    public static let uuid = NSAttributeType.UUIDAttributeType
    /// A `URI` attribute.
    public static let uri = NSAttributeType.URIAttributeType
    /// A `Transformable` attribute: any value its `ValueTransformer` turns into `Data`.
    public static let transformable = NSAttributeType.transformableAttributeType
}

/// One entity in a model built with `NSManagedObjectModel { … }`.
///
/// For example:
/// ```swift
/// Entity("Manager", parent: "Employee") { Relationship("reports", to: "Employee", toMany: true, inverse: "manager") }
/// ```
public struct Entity {
    let make: () -> NSEntityDescription

    /// An entity with its properties.
    ///
    /// - Parameters:
    ///   - name: The entity's name.
    ///   - parent: The name of the entity it inherits from.
    ///   - abstract: Whether the entity has no instances of its own.
    ///   - managedObjectClass: The `NSManagedObject` subclass for its objects (typed subclasses).
    ///   - unique: Its uniqueness constraints, each a list of property names.
    ///   - properties: Its attributes and relationships.
    public init(
        _ name: String, parent: String? = nil, abstract: Bool = false, managedObjectClass: AnyObject.Type? = nil,
        unique: [[String]] = [], @PropertyListBuilder _ properties: () -> [PropertySpec] = { [] }
    ) {
        let specs = properties()
        self.make = {
            let entity = NSEntityDescription(name: name, superentityName: parent, isAbstract: abstract)
            entity.uniquenessConstraints = unique
            entity.managedObjectClass = managedObjectClass
            entity.managedObjectClassName = managedObjectClass.map { String(describing: $0) }
            for spec in specs { entity.addProperty(spec.make()) }
            return entity
        }
    }
}

/// One property in an entity built with `Entity(…) { … }`: an `Attribute` or a `Relationship`.
///
/// For example:
/// ```swift
/// Entity("Product") { Attribute("name", .string); Relationship("shelf", to: "Shelf", inverse: "products") }   // two specs
/// ```
public struct PropertySpec {
    let make: () -> NSPropertyDescription
}

/// An attribute in `Entity(…) { … }`.
///
/// For example:
/// ```swift
/// Attribute("price", .integer32, optional: false, default: 0)
/// ```
public struct Attribute {
    let spec: PropertySpec

    /// An attribute.
    ///
    /// - Parameters:
    ///   - name: The attribute's name.
    ///   - type: Its type (`.string`, `.integer32`, `.date`, …).
    ///   - optional: Whether it may be nil when saved (default true, as in Xcode).
    ///   - defaultValue: The value new objects start with (any Swift value of a matching kind).
    ///   - transient: Whether it is kept in memory only.
    ///   - transformer: For a `.transformable` attribute, the name of its `ValueTransformer` (nil: Core Data's
    ///     default, keyed archiving).
    ///   - preservesValueInHistoryOnDeletion: Whether persistent history keeps its value when an object is deleted
    ///     (the change's `tombstone`).
    public init(
        _ name: String, _ type: NSAttributeType, optional: Bool = true, default defaultValue: Any? = nil,
        transient: Bool = false, transformer: NSValueTransformerName? = nil, preservesValueInHistoryOnDeletion: Bool = false
    ) {
        let value = AttributeValue(any: defaultValue) ?? .null
        spec = PropertySpec {
            let attribute = NSAttributeDescription(name: name, type: type, isOptional: optional, defaultValue: value)
            attribute.isTransient = transient
            attribute.preservesValueInHistoryOnDeletion = preservesValueInHistoryOnDeletion
            attribute.valueTransformerName = transformer?.rawValue
            return attribute
        }
    }
}

/// A relationship in `Entity(…) { … }`.
///
/// For example:
/// ```swift
/// Relationship("department", to: "Department", inverse: "employees")
/// ```
public struct Relationship {
    let spec: PropertySpec

    /// A relationship.
    ///
    /// - Parameters:
    ///   - name: The relationship's name.
    ///   - destination: The destination entity's name.
    ///   - toMany: Whether it holds a set of objects.
    ///   - inverse: The name of the relationship that points back.
    ///   - deleteRule: What deleting the source does to the destinations.
    ///   - optional: Whether a to-one may be nil (a to-many may be empty) when saved.
    ///   - minCount: For to-many, the fewest destinations allowed.
    ///   - maxCount: For to-many, the most destinations allowed (0 or nil: no limit).
    ///   - ordered: Whether a to-many keeps its order.
    public init(
        _ name: String, to destination: String, toMany: Bool = false, inverse: String? = nil,
        deleteRule: NSDeleteRule = .nullifyDeleteRule, optional: Bool = true, minCount: Int = 0, maxCount: Int? = nil,
        ordered: Bool = false
    ) {
        spec = PropertySpec {
            NSRelationshipDescription(
                name: name, destinationEntityName: destination, inverseName: inverse, toMany: toMany,
                deleteRule: deleteRule, isOptional: optional, minCount: minCount,
                maxCount: toMany ? (maxCount ?? 0) : 1, isOrdered: ordered)
        }
    }
}

/// Collects the entities of `NSManagedObjectModel { … }`.
///
/// For example:
/// ```swift
/// let model = try NSManagedObjectModel { Entity("A") {}; if withB { Entity("B") {} } }
/// ```
@resultBuilder
public enum EntityListBuilder {
    /// One entity.
    public static func buildExpression(_ entity: Entity) -> [Entity] { [entity] }
    /// The entities of a block, in order.
    public static func buildBlock(_ parts: [Entity]...) -> [Entity] { parts.flatMap { $0 } }
    /// The entities of a `for` loop.
    public static func buildArray(_ parts: [[Entity]]) -> [Entity] { parts.flatMap { $0 } }
    /// The entities of an `if` without `else`, when it ran.
    public static func buildOptional(_ part: [Entity]?) -> [Entity] { part ?? [] }
    /// The entities of an `if` branch.
    public static func buildEither(first: [Entity]) -> [Entity] { first }
    /// The entities of an `else` branch.
    public static func buildEither(second: [Entity]) -> [Entity] { second }
}

/// Collects the properties of `.entity(…) { … }`.
///
/// For example:
/// ```swift
/// Entity("Product") { Attribute("name", .string); for day in days { Attribute(day, .boolean) } }
/// ```
@resultBuilder
public enum PropertyListBuilder {
    /// One attribute.
    public static func buildExpression(_ attribute: Attribute) -> [PropertySpec] { [attribute.spec] }
    /// One relationship.
    public static func buildExpression(_ relationship: Relationship) -> [PropertySpec] { [relationship.spec] }
    /// The properties of a block, in order.
    public static func buildBlock(_ parts: [PropertySpec]...) -> [PropertySpec] { parts.flatMap { $0 } }
    /// The properties of a `for` loop.
    public static func buildArray(_ parts: [[PropertySpec]]) -> [PropertySpec] { parts.flatMap { $0 } }
    /// The properties of an `if` without `else`, when it ran.
    public static func buildOptional(_ part: [PropertySpec]?) -> [PropertySpec] { part ?? [] }
    /// The properties of an `if` branch.
    public static func buildEither(first: [PropertySpec]) -> [PropertySpec] { first }
    /// The properties of an `else` branch.
    public static func buildEither(second: [PropertySpec]) -> [PropertySpec] { second }
}

extension NSManagedObjectModel {
    /// Builds and checks a model in Swift.
    ///
    /// For example:
    /// ```swift
    /// let model = try NSManagedObjectModel {
    ///     Entity("Department") {
    ///         Attribute("name", .string, optional: false)
    ///         Relationship("employees", to: "Employee", toMany: true, inverse: "department", deleteRule: .cascadeDeleteRule)
    ///     }
    ///     Entity("Employee") {
    ///         Attribute("name", .string)
    ///         Relationship("department", to: "Department", inverse: "employees")
    ///     }
    /// }
    /// ```
    ///
    /// `configurations` names the model's configurations and the entities each lists (as Xcode's model editor does),
    /// for coordinators that keep one store per configuration: `["Cache": ["Thumbnail"]]`.
    /// - Throws: `CoreDataError(.invalidModel)` naming the entity and property at fault, or a configuration listing an
    ///   entity the model does not have.
    public convenience init(configurations: [String: [String]] = [:], @EntityListBuilder _ entities: () -> [Entity]) throws {
        self.init()
        for spec in entities() { addEntity(spec.make()) }
        for (name, members) in configurations.sorted(by: { $0.key < $1.key }) {
            if let missing = members.first(where: { entity(named: $0) == nil }) {
                throw CoreDataError(.invalidModel, "Configuration '\(name)' lists entity '\(missing)', which the model does not have.")
            }
            setEntityNames(members, forConfigurationName: name)
        }
        try validate()
    }
}
