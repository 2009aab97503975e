internal import OpenCoreData

/// A model's key path, opened to its value type: encodes a value a detached model holds (boxed) for its managed
/// object, and lists the models a relationship's value holds.
protocol ModelKeyPath {
    func encode(_ stored: Any, asStored: Bool) -> Any?
    func relatedModels(in stored: Any) -> [any PersistentModel]
}

extension KeyPath: ModelKeyPath {
    func encode(_ stored: Any, asStored: Bool) -> Any? { ModelValues.encode(stored as! Value, asStored: asStored) }

    func relatedModels(in stored: Any) -> [any PersistentModel] { ModelValues.models(in: stored as! Value) }
}

/// How a model class's values go into a new managed object: its entity and each persisted property (worked out once
/// per class).
struct InsertPlan {
    /// A class, so that walking the properties of each inserted model copies a reference, not the fields.
    final class Property {
        let name: String
        /// Its position in the class's `schemaMetadata` (where a detached model keeps its value).
        let schemaIndex: Int
        /// Its index among the entity's properties.
        let entityIndex: Int?
        let accessor: any ModelKeyPath
        /// An attribute that stores the Swift value's attribute value as it is (not transformed, not a composite):
        /// set by index.
        let isDirect: Bool
        let isRelationship: Bool
        /// A transformable attribute: its transformer takes the value as it is.
        let isTransformed: Bool

        init(
            name: String, schemaIndex: Int, entityIndex: Int?, accessor: any ModelKeyPath, isDirect: Bool, isRelationship: Bool,
            isTransformed: Bool
        ) {
            self.name = name
            self.schemaIndex = schemaIndex
            self.entityIndex = entityIndex
            self.accessor = accessor
            self.isDirect = isDirect
            self.isRelationship = isRelationship
            self.isTransformed = isTransformed
        }
    }

    let entity: NSEntityDescription
    let properties: [Property]
    /// Where the accessors of a model of this class with a row find its direct attributes.
    let layout: ModelLayout

    init(entity: NSEntityDescription, properties: [Property], propertyCount: Int) {
        self.entity = entity
        self.properties = properties
        var indexes = [Int](repeating: -1, count: propertyCount)
        for property in properties where property.isDirect {
            if let index = property.entityIndex { indexes[property.schemaIndex] = index }
        }
        layout = ModelLayout(entity: entity, entityIndexes: indexes)
    }
}

/// Where a model's accessors find its values on its row: for each persisted property, by its position in the class's
/// `schemaMetadata`, the index of its attribute among the entity's properties when the attribute stores the Swift
/// value's attribute value as it is (-1 for any other property: those go by key, encoded by their type).
///
/// A model with a row reads and sets those by index, as `@Managed` properties do, not through a lookup of its name and
/// an `Any`.
final class ModelLayout: @unchecked Sendable {
    let entity: NSEntityDescription
    private let entityIndexes: [Int]

    init(entity: NSEntityDescription, entityIndexes: [Int]) {
        self.entity = entity
        self.entityIndexes = entityIndexes
    }

    /// The entity index of the direct attribute at `position` in the class's metadata, if it is one.
    func entityIndex(at position: Int) -> Int? {
        guard position >= 0, position < entityIndexes.count else { return nil }
        let index = entityIndexes[position]
        return index >= 0 ? index : nil
    }
}
