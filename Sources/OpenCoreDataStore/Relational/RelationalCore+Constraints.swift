import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

extension RelationalCore {
    /// The error for a save a unique index refused (the save wrote nothing): which uniqueness constraint, with which
    /// values, and which objects — two of the save (`.constraintValidation`, 1551), or one of the save and a stored one
    /// (`.constraintConflict`, 133021), found with `connection` (outside the failed transaction).
    package func constraintError(
        entity: NSEntityDescription, constraint: [String], _ request: StoreSaveRequest, on connection: some RelationalConnection
    ) throws -> CoreDataError {
        let table = schema.tableName(for: entity)
        let indexes = constraint.compactMap { name in entity.allProperties.firstIndex { $0.name == name } }
        // The values each object of the save gives the constrained properties.
        var written: [(id: NSManagedObjectID, values: [SnapshotValue])] = []
        for insert in request.inserts where insert.objectID.entity.isKindOf(entity: entity) {
            written.append((insert.objectID, indexes.map { insert.values[$0] }))
        }
        for update in request.updates where update.objectID.entity.isKindOf(entity: entity) {
            guard let base = update.base else { continue }
            written.append((update.objectID, indexes.map { update.changes[$0] ?? base[$0] }))
        }
        let keys = constraint.joined(separator: ", ")
        func describe(_ values: [SnapshotValue]) -> String {
            zip(constraint, values).map { name, value in
                switch value {
                case .attribute(let v): return "\(name) = \(v)"
                case .toOne(let id): return "\(name) = \(id?.uriRepresentation().absoluteString ?? "nil")"
                case .toMany: return name
                }
            }.joined(separator: ", ")
        }
        // Two objects of the save with the same values.
        for (i, a) in written.enumerated() {
            if let b = written[(i + 1)...].first(where: { $0.values == a.values && !a.values.contains(.attribute(.null)) }) {
                return CoreDataError(
                    .constraintValidation,
                    "Two \(entity.name) objects of the save share \(describe(a.values)), which the uniqueness constraint (\(keys)) allows once: \(a.id.uriRepresentation().absoluteString) and \(b.id.uriRepresentation().absoluteString). Nothing was saved.",
                    entityName: entity.name, key: keys)
            }
        }
        // An object of the save and a stored one.
        let columns = constraint.compactMap { name in entity.allProperties.first { $0.name == name }.map(schema.columnName(for:)) }
        for (id, values) in written {
            var arguments: [SQLArgument] = []
            var conditions: [String] = []
            for (column, value) in zip(columns, values) {
                switch value {
                case .attribute(let v):
                    let type = (entity.allProperties.first { schema.columnName(for: $0) == column } as? NSAttributeDescription)?
                        .attributeType
                    let bytes = schema.storesUUIDsAsBytes
                    arguments.append(
                        type.map { SQLStorage.encode(v, as: $0, uuidBytes: bytes) } ?? SQLStorage.encode(v, uuidBytes: bytes))
                case .toOne(let target): arguments.append(target.map { .integer($0.primaryKey) } ?? .null)
                case .toMany: arguments.append(.null)
                }
                conditions.append("\(dialect.quote(column)) = ?")
            }
            var stored: NSManagedObjectID?
            try connection.forEachRow(
                sql: dialect.finalize(
                    "SELECT Z_PK, Z_ENT FROM \(dialect.quote(table)) WHERE \(conditions.joined(separator: " AND ")) LIMIT 1"),
                arguments: arguments
            ) { row in stored = try self.objectID(pk: row.integer(0), entityID: Int(row.integer(1))) }
            if let stored, stored != id {
                var error = CoreDataError(
                    .constraintConflict,
                    "The \(entity.name) object \(id.uriRepresentation().absoluteString) has \(describe(values)), which the stored object \(stored.uriRepresentation().absoluteString) has already: the uniqueness constraint (\(keys)) allows it once. Nothing was saved.",
                    entityName: entity.name, key: keys)
                error.conflictingObjectIDs = [id, stored]
                return error
            }
        }
        return CoreDataError(
            .constraintConflict, "The save breaks \(entity.name)'s uniqueness constraint (\(keys)). Nothing was saved.",
            entityName: entity.name, key: keys)
    }
}
