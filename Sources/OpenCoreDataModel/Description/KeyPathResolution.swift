import Foundation

/// What a key path (`department.head.name`, `employees.@count`) names in a model: the relationships it goes through,
/// the property it ends at, and where it stops making sense.
///
/// One walk of the model that every layer shares: the SQL compiler, the controller (which relationships its
/// predicate, sorts and section key read through), dictionary results, key-value coding and the `coredata` tool.
///
/// For example:
/// ```swift
/// let path = try employee.resolveKeyPath("department.name")
/// path.relationships.map(\.name)   // ["department"]
/// path.attribute?.attributeType    // .stringAttributeType
/// ```
public struct KeyPathResolution {
    /// The relationships the key path goes through, in order (a to-one or to-many at each step; the last component
    /// too when it names a relationship).
    public var relationships: [NSRelationshipDescription] = []
    /// The property the key path ends at, when it ends at one (not after a collection operator).
    public var property: NSPropertyDescription?
    /// The collection operator (`@count`, `@sum`, …) and the key path after it, when the path has one.
    public var collectionOperator: (name: String, rest: String)?
    /// The composite attribute the key path goes into (`address` in `address.street`), when it ends at an element
    /// of one; `property` is then the element.
    public var compositeAttribute: NSAttributeDescription?
    /// The element's key path inside the composite's value (`["street"]`, `["geo", "lat"]`).
    public var compositeElementPath: [String] = []

    /// The attribute the key path ends at, when it ends at one.
    public var attribute: NSAttributeDescription? { property as? NSAttributeDescription }
    /// Whether the key path goes through a to-many relationship (so it names a collection of values).
    public var throughToMany: Bool { relationships.contains { $0.isToMany } }
}

/// The collection operators key paths may use.
private let collectionOperators: Set<String> = ["@count", "@sum", "@avg", "@min", "@max"]

extension NSEntityDescription {
    /// Resolves a key path against this entity and the entities its relationships lead to.
    ///
    /// For example:
    /// ```swift
    /// let type = try entity.resolveKeyPath("department.budget").attribute?.attributeType
    /// ```
    /// - Throws: `CoreDataError(.unknownKey)` naming the component the model lacks, an attribute followed by more
    ///   components, or an unknown collection operator.
    /// - Complexity: O(c) dictionary lookups for c components.
    public func resolveKeyPath(_ keyPath: String) throws -> KeyPathResolution {
        var resolution = KeyPathResolution()
        let components = keyPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var current: NSEntityDescription = self
        for (i, key) in components.enumerated() {
            if key.hasPrefix("@") {
                guard collectionOperators.contains(key) else {
                    throw CoreDataError(
                        .unknownKey,
                        "Unknown collection operator '\(key)' in key path '\(keyPath)'; expected @count, @sum, @avg, @min or @max.",
                        entityName: name, key: keyPath)
                }
                resolution.collectionOperator = (key, components[(i + 1)...].joined(separator: "."))
                return resolution
            }
            guard let property = current.propertiesByName[key] else {
                throw CoreDataError(
                    .unknownKey,
                    components.count == 1
                        ? "Entity '\(current.name)' has no property '\(key)'."
                        : "Entity '\(current.name)' has no property '\(key)' (in key path '\(keyPath)').",
                    entityName: current.name, key: keyPath)
            }
            let isLast = i == components.count - 1
            if let relationship = property as? NSRelationshipDescription {
                resolution.relationships.append(relationship)
                if isLast {
                    resolution.property = relationship
                } else if let destination = relationship.destinationEntity {
                    current = destination
                }
            } else if let composite = property as? NSAttributeDescription, composite.attributeType == .compositeAttributeType, !isLast {
                return try resolution.resolvingElements(Array(components[(i + 1)...]), of: composite, in: current, keyPath: keyPath)
            } else {
                guard isLast else {
                    throw CoreDataError(
                        .unknownKey, "'\(current.name).\(key)' is an attribute, so key path '\(keyPath)' cannot go further.",
                        entityName: current.name, key: keyPath)
                }
                resolution.property = property
            }
        }
        return resolution
    }
}

extension KeyPathResolution {
    /// The resolution ending at the element `components` names inside `composite` (nested composites walked).
    fileprivate func resolvingElements(
        _ components: [String], of composite: NSAttributeDescription, in entity: NSEntityDescription, keyPath: String
    ) throws -> KeyPathResolution {
        var resolution = self
        resolution.compositeAttribute = composite
        var current = composite
        for (i, key) in components.enumerated() {
            guard current.attributeType == .compositeAttributeType, let element = current.elements.first(where: { $0.name == key }) else {
                let names = current.elements.map(\.name).sorted().joined(separator: ", ")
                throw CoreDataError(
                    .unknownKey,
                    current.attributeType == .compositeAttributeType
                        ? "'\(entity.name).\(composite.name)' has no element '\(components[...i].joined(separator: "."))' (its elements: \(names)); key path '\(keyPath)'."
                        : "'\(entity.name).\(composite.name).\(components[..<i].joined(separator: "."))' is an element, so key path '\(keyPath)' cannot go further.",
                    entityName: entity.name, key: keyPath)
            }
            resolution.compositeElementPath.append(key)
            current = element
        }
        resolution.property = current
        return resolution
    }
}
