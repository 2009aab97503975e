import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// How one property is written to its row's columns.
struct ColumnWriter {
    enum Kind {
        case attribute(NSAttributeType)
        /// A foreign key, and its destination's entity number when the store keeps one.
        case toOne(entityColumn: Bool)
        /// Binary data Core Data may keep outside the row: in its layout, the bytes after the marker 1 ("inline").
        case markedBinary
        /// A composite kept in a column per element (Core Data's layout).
        case composite([CompositeLeaf])
        /// Nothing in the row: a to-many relationship.
        case toMany
        /// Nothing in the row, and a read gives the default value: a transient property.
        case transient

        init(_ property: NSPropertyDescription, schema: RelationalSchema) {
            if property.isTransient {
                self = .transient
            } else if let leaves = schema.compositeLeaves(of: property) {
                self = .composite(leaves)
            } else if let attribute = property as? NSAttributeDescription {
                let marked = schema.isAppleLayout && attribute.allowsExternalBinaryDataStorage
                self = marked && attribute.attributeType == .binaryDataAttributeType ? .markedBinary : .attribute(attribute.attributeType)
            } else if let relationship = property as? NSRelationshipDescription, !relationship.isToMany {
                self = .toOne(entityColumn: schema.entityColumnName(for: relationship) != nil)
            } else {
                self = .toMany
            }
        }
    }

    let kind: Kind
    let property: NSPropertyDescription
    /// Whether the store is in Core Data's layout (UUIDs as 16 bytes, decimals in DECIMAL columns).
    let coreDataLayout: Bool

    init(_ property: NSPropertyDescription, schema: RelationalSchema) {
        self.property = property
        kind = Kind(property, schema: schema)
        coreDataLayout = schema.isAppleLayout
    }

    /// Binds what the property writes (nothing for to-many and transient properties) and returns the value reading
    /// the row back gives when that differs from `value`, else nil.
    func bind(_ value: SnapshotValue, into row: inout some RelationalBinder, resolve: (NSManagedObjectID) throws -> NSManagedObjectID)
        throws
        -> SnapshotValue?
    {
        switch (kind, value) {
        case (.attribute(let type), .attribute(let v)):
            do {
                return try row.bind(v, as: type, coreDataLayout: coreDataLayout).map { .attribute($0) }
            } catch let loss as DecimalPrecisionLoss {
                throw loss.error(property)
            }
        case (.toOne(let entityColumn), .toOne(let id)):
            guard let id else {
                try row.bindNull()
                if entityColumn { try row.bindNull() }
                return nil
            }
            let target = try resolve(id)
            try row.bind(target.primaryKey)
            if entityColumn { try row.bind(Int64(target.entity.entityID)) }
            return target == id ? nil : .toOne(target)
        case (.markedBinary, .attribute(let v)):
            guard case .data(let bytes) = v else {
                try row.bindNull()
                return nil
            }
            try row.bind(Data([1]) + bytes)
            return nil
        case (.composite(let leaves), .attribute(let v)):
            let attribute = property as! NSAttributeDescription
            let entityName = property.entity?.name ?? ""
            for (leaf, value) in zip(leaves, try CompositeValues.columnValues(v, of: attribute, leaves: leaves, entityName: entityName)) {
                do {
                    _ = try row.bind(value, as: leaf.element.attributeType, coreDataLayout: coreDataLayout)
                } catch let loss as DecimalPrecisionLoss {
                    throw loss.error(leaf.element)
                }
            }
            return nil
        case (.toMany, .toMany):
            return nil
        case (.transient, _):
            return property.transientSnapshotValue
        default:
            throw CoreDataError(
                .wrongValueType, "Internal error: property '\(property.name)' received a value of the wrong kind while saving.",
                key: property.name)
        }
    }
}

extension NSPropertyDescription {
    /// What reading a row gives for this property when it is transient (no column holds it): its default value.
    var transientReadValue: AttributeValue { (self as? NSAttributeDescription)?.defaultValue ?? .null }

    /// What a row read from the store holds for a transient property: an attribute's default, no destination for a
    /// relationship (the store keeps none).
    var transientSnapshotValue: SnapshotValue {
        guard let relationship = self as? NSRelationshipDescription else { return .attribute(transientReadValue) }
        return relationship.isToMany ? .toMany : .toOne(nil)
    }
}
