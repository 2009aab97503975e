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
}
