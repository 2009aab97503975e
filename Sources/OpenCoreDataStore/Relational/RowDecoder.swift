import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Decodes rows of one concrete entity into snapshots.
///
/// A class: a read looks its decoder up for every row, and a struct's copy retained each of its references.
final class RowDecoder {
    enum Step {
        /// A column read as is; `property` indexes the entity's `allProperties` (a number, not the name: a payload
        /// with no reference to count is copied for free as the decoder walks its steps for every row).
        case attribute(column: Int, type: NSAttributeType, property: Int)
        /// Binary data that Apple's Core Data may keep outside the row (`allowsExternalBinaryDataStorage`): a marker
        /// byte, then the bytes or the name of a file in `folder`.
        case externalBinary(column: Int, name: String, folder: URL?)
        case toOne(column: Int, entityColumn: Int?, fallback: NSEntityDescription)
        /// A composite kept in a column per element: its value is rebuilt from them.
        case composite(columns: [Int], leaves: [CompositeLeaf], attribute: NSAttributeDescription)
        case toMany
        case transient(SnapshotValue)
    }

    /// Where a step reads a plain attribute: its column and type, or a column of -1 for any other step.
    ///
    /// Trivial values: the per-row loop walks these, where walking `steps` copied each case and its payload.
    struct Plain {
        let column: Int
        let type: NSAttributeType
    }

    let entity: NSEntityDescription
    let steps: [Step]
    /// `steps` as `Plain` values, position for position.
    let plain: [Plain]
    let storeID: String
    let model: NSManagedObjectModel

    init(entity: NSEntityDescription, schema: RelationalSchema, model: NSManagedObjectModel, storeID: String, externalData: URL? = nil) {
        self.entity = entity
        self.storeID = storeID
        self.model = model
        let table = schema.table(for: entity)
        var index: [String: Int] = [:]
        for (i, column) in table.columns.enumerated() { index[column.name] = i + 3 }
        steps = entity.allProperties.enumerated().map { position, property in
            if property.isTransient {
                return .transient(property.transientSnapshotValue)
            }
            if let attribute = property as? NSAttributeDescription, let leaves = schema.compositeLeaves(of: attribute) {
                return .composite(columns: leaves.map { index[$0.column]! }, leaves: leaves, attribute: attribute)
            }
            if let attribute = property as? NSAttributeDescription {
                let column = index[schema.columnName(for: attribute)]!
                if schema.isAppleLayout, attribute.allowsExternalBinaryDataStorage, attribute.attributeType == .binaryDataAttributeType {
                    return .externalBinary(column: column, name: attribute.name, folder: externalData)
                }
                return .attribute(column: column, type: attribute.attributeType, property: position)
            }
            let relationship = property as! NSRelationshipDescription
            if relationship.isToMany { return .toMany }
            return .toOne(
                column: index[schema.columnName(for: relationship)]!,
                entityColumn: schema.entityColumnName(for: relationship).map { index[$0]! }, fallback: relationship.destinationEntity!)
        }
        plain = steps.map { step in
            if case .attribute(let column, let type, _) = step { return Plain(column: column, type: type) }
            return Plain(column: -1, type: .undefinedAttributeType)
        }
    }

    func decode(_ row: some RelationalRow) throws -> RowSnapshot {
        try decode(row, as: NSManagedObjectID(entity: entity, storeIdentifier: storeID, primaryKey: row.integer(0)))
    }

    /// The row as the snapshot of `id` (an ID of this entity whose primary key is the row's).
    func decode(_ row: some RelationalRow, as id: NSManagedObjectID) throws -> RowSnapshot {
        let pk = id.primaryKey
        let version = row.integer(2)
        var values: [SnapshotValue] = []
        values.reserveCapacity(steps.count)
        for (position, plain) in plain.enumerated() {
            if plain.column >= 0 {
                // (The back end's typed reader: numbers and dates straight from the column, no stored value between.)
                guard let value = row.attributeValue(plain.column, type: plain.type) else {
                    throw damaged(row, column: plain.column, type: plain.type, property: position, primaryKey: pk)
                }
                values.append(.attribute(value))
                continue
            }
            switch steps[position] {
            case .attribute(let column, let type, let property):
                guard let value = row.attributeValue(column, type: type) else {
                    throw damaged(row, column: column, type: type, property: property, primaryKey: pk)
                }
                values.append(.attribute(value))
            case .externalBinary(let column, let name, let folder):
                guard case .blob(let bytes) = row.value(column) else {
                    values.append(.attribute(.null))
                    continue
                }
                do {
                    values.append(.attribute(.data(try AppleExternalData.read(bytes, folder: folder))))
                } catch let error as PropertyListError {
                    throw CoreDataError(
                        .persistentStoreOperation, "Row \(pk) of '\(entity.name)': '\(name)' \(error).", entityName: entity.name, key: name)
                }
            case .toOne(let column, let entityColumn, let fallback):
                if let fk = row.optionalInteger(column) {
                    let entityID = entityColumn.flatMap { row.optionalInteger($0) }
                    let destination = entityID.flatMap { model.entity(withID: Int($0)) } ?? fallback
                    values.append(.toOne(NSManagedObjectID(entity: destination, storeIdentifier: storeID, primaryKey: fk)))
                } else {
                    values.append(.toOne(nil))
                }
            case .composite(let columns, let leaves, let attribute):
                values.append(.attribute(try decodeComposite(row, columns: columns, leaves: leaves, attribute: attribute, primaryKey: pk)))
            case .toMany: values.append(.toMany)
            case .transient(let v): values.append(v)
            }
        }
        return RowSnapshot(objectID: id, version: version, values: values)
    }

    /// The error for a column that holds no valid value of its attribute's type.
    private func damaged(_ row: some RelationalRow, column: Int, type: NSAttributeType, property: Int, primaryKey: Int64) -> CoreDataError {
        let stored = row.value(column)
        let name = entity.allProperties[property].name
        return CoreDataError(
            .persistentStoreOperation,
            "Row \(primaryKey) of '\(entity.name)' holds \(stored) in '\(name)', which is not a valid \(type.xcodeName); the store is damaged.",
            entityName: entity.name, key: name)
    }

    /// A composite's value, rebuilt from its element columns.
    private func decodeComposite(
        _ row: some RelationalRow, columns: [Int], leaves: [CompositeLeaf], attribute: NSAttributeDescription, primaryKey: Int64
    ) throws -> AttributeValue {
        var values: [AttributeValue] = []
        for (column, leaf) in zip(columns, leaves) {
            let stored = row.value(column)
            guard let value = SQLStorage.decode(stored, as: leaf.element.attributeType) else {
                let key = "\(attribute.name).\(leaf.path.joined(separator: "."))"
                throw CoreDataError(
                    .persistentStoreOperation,
                    "Row \(primaryKey) of '\(entity.name)' holds \(stored) in '\(key)', which is not a valid \(leaf.element.attributeType.xcodeName); the store is damaged.",
                    entityName: entity.name, key: attribute.name)
            }
            values.append(value)
        }
        return try CompositeValues.compositeValue(values, of: attribute, leaves: leaves, entityName: entity.name)
    }
}
