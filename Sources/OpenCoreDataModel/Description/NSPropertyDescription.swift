import Foundation

/// The attribute types Core Data defines, with Core Data's raw values.
///
/// For example:
/// ```swift
/// let type = (entity.propertiesByName["price"] as? NSAttributeDescription)?.attributeType   // .integer32AttributeType
/// ```
public enum NSAttributeType: UInt, Sendable, CaseIterable {
    case undefinedAttributeType = 0
    case integer16AttributeType = 100
    case integer32AttributeType = 200
    case integer64AttributeType = 300
    case decimalAttributeType = 400
    case doubleAttributeType = 500
    case floatAttributeType = 600
    case stringAttributeType = 700
    case booleanAttributeType = 800
    case dateAttributeType = 900
    case binaryDataAttributeType = 1000
    case UUIDAttributeType = 1100
    case URIAttributeType = 1200
    case transformableAttributeType = 1800
    case objectIDAttributeType = 2000
    /// A composite: a dictionary of named values (its `elements`), kept together in one attribute.
    case compositeAttributeType = 2100

    /// The name Xcode's model editor writes in a model file (`attributeType="Integer 32"`).
    public var xcodeName: String {
        switch self {
        case .undefinedAttributeType: return "Undefined"
        case .integer16AttributeType: return "Integer 16"
        case .integer32AttributeType: return "Integer 32"
        case .integer64AttributeType: return "Integer 64"
        case .decimalAttributeType: return "Decimal"
        case .doubleAttributeType: return "Double"
        case .floatAttributeType: return "Float"
        case .stringAttributeType: return "String"
        case .booleanAttributeType: return "Boolean"
        case .dateAttributeType: return "Date"
        case .binaryDataAttributeType: return "Binary"
        case .UUIDAttributeType: return "UUID"
        case .URIAttributeType: return "URI"
        case .transformableAttributeType: return "Transformable"
        case .objectIDAttributeType: return "ObjectID"
        case .compositeAttributeType: return "Composite"
        }
    }

    /// Whether the store can persist values of this type (undefined and object ID attributes are not stored, and are
    /// rejected when a model is loaded or used unless transient).
    public var isSupported: Bool {
        switch self {
        case .undefinedAttributeType, .objectIDAttributeType: return false
        default: return true
        }
    }

    /// Whether a value of this type is held as given and stored as the bytes a save makes of it (transformable and
    /// composite attributes).
    public var isArchived: Bool { self == .transformableAttributeType || self == .compositeAttributeType }

    /// Whether values of this type are numbers (integers, decimal, double, float, boolean).
    public var isNumeric: Bool {
        switch self {
        case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType, .decimalAttributeType,
            .doubleAttributeType, .floatAttributeType, .booleanAttributeType:
            return true
        default: return false
        }
    }
}

/// What happens to the destination objects of a relationship when its source object is deleted.
///
/// For example:
/// ```swift
/// Relationship("employees", to: "Employee", toMany: true, inverse: "department", deleteRule: .cascadeDeleteRule)
/// ```
public enum NSDeleteRule: UInt, Sendable, CaseIterable {
    /// Do nothing to the destination objects; they keep pointing at the deleted object.
    case noActionDeleteRule = 0
    /// Remove the deleted object from the destinations' inverse relationship.
    case nullifyDeleteRule = 1
    /// Delete the destination objects too.
    case cascadeDeleteRule = 2
    /// Refuse to delete the source while it has destination objects: saving fails.
    case denyDeleteRule = 3
}

/// A property of an entity: an attribute or a relationship.
///
/// Descriptions are mutable while a model is being built and frozen once a persistent store coordinator uses the
/// model; changing a frozen description is a programming error and stops with a precondition failure.
///
/// For example:
/// ```swift
/// for property in entity.properties where !property.isOptional { print(property.name, "is required") }
/// ```
public class NSPropertyDescription: @unchecked Sendable, CustomStringConvertible {
    /// The property's name, unique within its entity and the entity's ancestors.
    public var name: String {
        get { oftenRead.name }
        set {
            oftenRead.name = newValue
            _checkMutable()
        }
    }
    /// Whether the property may be `nil` when the object is saved.
    public var isOptional: Bool {
        get { oftenRead.isOptional }
        set {
            oftenRead.isOptional = newValue
            _checkMutable()
        }
    }
    /// Whether the property is kept in memory only and never written to the store.
    public var isTransient: Bool {
        get { oftenRead.isTransient }
        set {
            oftenRead.isTransient = newValue
            _checkMutable()
        }
    }
    /// Free-form information from the model file or the builder.
    public var userInfo: [String: String] = [:] { didSet { _checkMutable() } }
    /// The property's name in an earlier model version, when it was renamed (Xcode's "Renaming ID", written as
    /// `elementID`).
    public var renamingIdentifier: String? { didSet { _checkMutable() } }
    /// Text that makes the entity's version hash differ when nothing else about the property changed (Xcode's
    /// "Version Hash Modifier").
    public var versionHashModifier: String? { didSet { _checkMutable() } }
    /// The entity that declares this property.
    public internal(set) weak var entity: NSEntityDescription?

    // The fields above that every object or row reads, behind accessors compiled here: see `NSEntityDescription`.
    private struct OftenRead {
        var name: String
        var isOptional = true
        var isTransient = false
    }
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var oftenRead: OftenRead

    /// A property named `name`.
    public init(name: String) {
        self.oftenRead = OftenRead(name: name)
    }

    func _checkMutable() {
        precondition(
            entity?.managedObjectModel?.isFrozen != true,
            "The model is in use by a persistent store coordinator and can no longer be changed; copy it first.")
    }

    /// The property's kind and name.
    public var description: String { "\(type(of: self))(\(name))" }
}

/// An attribute: a named value of one of Core Data's scalar types.
///
/// For example:
/// ```swift
/// let price = NSAttributeDescription(name: "price", type: .integer32AttributeType, isOptional: false, defaultValue: .integer(0))
/// ```
public final class NSAttributeDescription: NSPropertyDescription, @unchecked Sendable {
    /// The attribute's type.
    public var attributeType: NSAttributeType {
        get { storedType }
        set {
            storedType = newValue
            _checkMutable()
        }
    }
    // Behind an accessor compiled here, as `NSEntityDescription`'s most read fields are.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var storedType: NSAttributeType
    /// The value a newly inserted object starts with, or `nil`.
    public var defaultValue: AttributeValue = .null { didSet { _checkMutable() } }
    /// The name of the class of the attribute's values, as Xcode writes it (`customClassName`); informational.
    public var attributeValueClassName: String?
    /// The name of the transformer that turns a transformable attribute's values into the `Data` the store keeps
    /// (see `ValueTransformer`); nil means Core Data's default, `NSKeyedUnarchiveFromData`.
    public var valueTransformerName: String? { didSet { _checkMutable() } }
    /// For a derived attribute, the expression Core Data computes its value from at every save of the object (Xcode's
    /// "Derived", written as `derivationExpression`): a key path (`author.name`), a to-many aggregate
    /// (`posts.@count`, `items.@sum.price`), `now()`, or `lowercase:(key)`, `uppercase:(key)`, `canonical:(key)`.
    public var derivationExpression: String? { didSet { _checkMutable() } }
    /// Whether Core Data may keep a binary attribute's large values in files beside the store (Xcode's "Allows
    /// External Storage").
    ///
    /// OpenCoreData's own stores keep every value in the row; stores Apple's Core Data wrote are read with their
    /// external files.
    public var allowsExternalBinaryDataStorage = false { didSet { _checkMutable() } }
    /// Whether persistent history keeps the attribute's last value when its object is deleted (Xcode's "Preserve
    /// After Deletion", written as `preserveAfterDeletion`); part of the attribute's version hash.
    public var preservesValueInHistoryOnDeletion = false { didSet { _checkMutable() } }
    /// For a composite attribute, the attributes its dictionary holds (Core Data's
    /// `NSCompositeAttributeDescription.elements`); its value is a `[String: Any]` with those keys.
    public var elements: [NSAttributeDescription] = [] { didSet { _checkMutable() } }

    /// An attribute named `name` of `type`, optional unless told, with `defaultValue` for new objects.
    public init(name: String, type: NSAttributeType, isOptional: Bool = true, defaultValue: AttributeValue = .null) {
        self.storedType = type
        self.defaultValue = defaultValue
        super.init(name: name)
        self.isOptional = isOptional
    }
}

/// A relationship from one entity to another: to-one or to-many, usually with an inverse.
///
/// For example:
/// ```swift
/// let items = NSRelationshipDescription(name: "items", destinationEntityName: "Item", inverseName: "order", toMany: true)
/// ```
public final class NSRelationshipDescription: NSPropertyDescription, @unchecked Sendable {
    /// The entity at the other end.
    public internal(set) weak var destinationEntity: NSEntityDescription?
    /// The relationship at the other end that points back, if any.
    public internal(set) weak var inverseRelationship: NSRelationshipDescription?
    /// What deleting the source object does to the destination objects.
    public var deleteRule: NSDeleteRule = .nullifyDeleteRule { didSet { _checkMutable() } }
    /// The fewest destination objects allowed when saving (0 means no minimum).
    public var minCount: Int = 0 { didSet { _checkMutable() } }
    /// The most destination objects allowed (0 means no maximum, and so does -1, which some compiled models hold; 1
    /// makes the relationship to-one).
    public var maxCount: Int = 1 { didSet { _checkMutable() } }
    /// Whether a to-many relationship keeps its destinations in order.
    public var isOrdered: Bool = false { didSet { _checkMutable() } }

    /// The destination entity's name, kept so that the model can be resolved after every entity is added.
    public internal(set) var destinationEntityName: String
    /// The inverse relationship's name, kept so that the model can be resolved after every entity is added.
    public internal(set) var inverseRelationshipName: String?

    /// A relationship named `name` to `destinationEntityName`, with its inverse, counts and delete rule.
    public init(
        name: String, destinationEntityName: String, inverseName: String? = nil, toMany: Bool = false,
        deleteRule: NSDeleteRule = .nullifyDeleteRule, isOptional: Bool = true, minCount: Int = 0, maxCount: Int? = nil,
        isOrdered: Bool = false
    ) {
        self.destinationEntityName = destinationEntityName
        self.inverseRelationshipName = inverseName
        super.init(name: name)
        self.deleteRule = deleteRule
        self.isOptional = isOptional
        self.minCount = minCount
        self.maxCount = maxCount ?? (toMany ? 0 : 1)
        self.isOrdered = isOrdered
    }

    /// Whether the relationship holds a set of destinations rather than at most one.
    public var isToMany: Bool { maxCount != 1 }

}

/// A fetched property: a read-only, in-memory property whose value is the result of a fetch, evaluated when first
/// read (`$FETCH_SOURCE` stands for the object, `$FETCHED_PROPERTY` for this description) and kept until the object
/// is refreshed.
///
/// For example:
/// ```swift
/// let cheaper = NSFetchedPropertyDescription(
///     name: "cheaperProducts", fetchRequest: FetchRequestTemplateDescription(
///         name: "cheaperProducts", entityName: "Product", predicateFormat: "price < $FETCH_SOURCE.price"))
/// ```
/// Its value, through `value(forKey:)`, is an array of managed objects. It is never stored.
public final class NSFetchedPropertyDescription: NSPropertyDescription, @unchecked Sendable {
    /// The fetch that gives the property's value (the context layer's `fetchRequest` builds it).
    public var fetchRequestTemplate: FetchRequestTemplateDescription { didSet { _checkMutable() } }

    /// A fetched property named `name`, evaluated with `fetchRequest`.
    public init(name: String, fetchRequest: FetchRequestTemplateDescription) {
        self.fetchRequestTemplate = fetchRequest
        super.init(name: name)
        isTransient = true
    }
}

/// Properties are equal when they are the same description (as Core Data's, which compare by identity in sets such as
/// `NSPersistentHistoryChange.updatedProperties`).
extension NSPropertyDescription: Hashable {
    /// Whether both are the same description.
    public static func == (lhs: NSPropertyDescription, rhs: NSPropertyDescription) -> Bool { lhs === rhs }
    /// Hashes the description's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

extension NSPropertyDescription {
    /// Whether this is a composite attribute (`attributeType == .compositeAttributeType`).
    package var isComposite: Bool { (self as? NSAttributeDescription)?.attributeType == .compositeAttributeType }
}
