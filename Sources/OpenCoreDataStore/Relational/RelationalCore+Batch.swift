import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

// Batch requests: rows changed and deleted in SQL inside the back end's transaction, without objects (Core Data's
// NSBatchUpdateRequest and NSBatchDeleteRequest; batch inserts go through `InsertPlan`).
extension RelationalCore {
    /// Inserts rows of `entity`, the chunks `next` hands over (one value per property, as a save's inserts) until it
    /// returns nil, under keys after the table's largest and (in Core Data's layout) the root entity's recorded
    /// maximum, which advances with them; returns how many, and their IDs when `collectingIDs`.
    package func batchInsert<C: RelationalWriteConnection>(
        _ entity: NSEntityDescription, collectingIDs: Bool, on connection: C, next: () throws -> [[SnapshotValue]]?
    ) throws -> (count: Int, ids: [NSManagedObjectID]) {
        var key = try largestKey(of: entity, on: connection) + 1
        let first = key
        let plan = try InsertPlan(entity: entity, schema: schema, writers: columnWriters(for: entity), on: connection)
        while let chunk = try next() {
            var index = chunk.startIndex
            while index < chunk.endIndex {
                let count = plan.rowsForNextStatement(remaining: chunk.endIndex - index)
                try plan.insertRows(chunk[index..<(index + count)], firstKey: key)
                key += Int64(count)
                index += count
            }
        }
        try recordLargestKey(key - 1, of: entity, on: connection)
        let ids = collectingIDs ? (first..<key).map { NSManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: $0) } : []
        return (Int(key - first), ids)
    }

    /// Sets attributes of every row a fetch matches (each row's version advances, so optimistic locking sees the
    /// change); returns their IDs when `collectingIDs`, and how many.
    package func batchUpdate(
        _ request: StoreFetchRequest, values: [(index: Int, value: AttributeValue)], collectingIDs: Bool,
        on connection: some RelationalWriteConnection
    ) throws -> (count: Int, ids: [NSManagedObjectID]) {
        let entity = request.entity
        let query = try plan(request)
        var columns: [String] = []
        var arguments: [SQLArgument] = []
        for (index, value) in values {
            let property = entity.allProperties[index]
            if let leaves = schema.compositeLeaves(of: property), let composite = property as? NSAttributeDescription {
                // A composite set as a whole: each element column takes its element's value.
                let parts = try CompositeValues.columnValues(value, of: composite, leaves: leaves, entityName: entity.name)
                for (leaf, part) in zip(leaves, parts) {
                    columns.append(leaf.column)
                    arguments.append(SQLStorage.encode(part, as: leaf.element.attributeType, uuidBytes: schema.storesUUIDsAsBytes))
                }
                continue
            }
            guard let type = entity._attributeType(at: index) else { continue }
            columns.append(schema.columnName(for: property))
            arguments.append(SQLStorage.encode(value, as: type, uuidBytes: schema.storesUUIDsAsBytes))
        }
        let assignments = (columns.map { "\(dialect.quote($0)) = ?" } + ["Z_OPT = Z_OPT + 1"]).joined(separator: ", ")
        var ids: [NSManagedObjectID] = []
        if collectingIDs {
            try connection.forEachRow(sql: query.matchingIDsSQL, arguments: query.arguments) { row in
                ids.append(try objectID(in: row, onlyEntity: query.onlyEntity))
            }
        }
        let changed = try connection.run(
            sql: dialect.finalize(
                "UPDATE \(dialect.quote(query.table.name)) SET \(assignments) WHERE \(SQLColumns.primaryKey) IN (\(query.matchingKeysSubquery))"
            ),
            arguments: arguments + query.arguments)
        return (collectingIDs ? ids.count : changed, ids)
    }

    /// Deletes rows and applies their relationships' delete rules as Core Data's batch delete does.
    ///
    /// A deny rule with destinations refuses the whole request (naming entity and relationship), cascade deletes the
    /// destinations too, and every foreign key or join row that pointed at a deleted row goes. Returns the IDs of every
    /// row deleted.
    package func batchDelete(_ targets: StoreBatchTargets, on connection: some RelationalWriteConnection) throws -> [NSManagedObjectID] {
        var pending: [NSManagedObjectID]
        switch targets {
        case .matching(let request):
            let query = try plan(request)
            pending = []
            try connection.forEachRow(sql: query.matchingIDsSQL, arguments: query.arguments) { row in
                pending.append(try objectID(in: row, onlyEntity: query.onlyEntity))
            }
        case .objectIDs(let ids):
            pending = try existing(ids, on: connection)
        }
        var deleted: [NSManagedObjectID] = []
        var seen: Set<NSManagedObjectID> = []
        while !pending.isEmpty {
            let round = pending.filter { seen.insert($0).inserted }
            deleted += round
            pending = try cascade(from: round, on: connection)
        }
        try removeRows(deleted, on: connection)
        return deleted
    }

    /// The IDs of `ids` whose rows exist, keeping their order.
    func existing(_ ids: [NSManagedObjectID], on connection: some RelationalWriteConnection) throws -> [NSManagedObjectID] {
        let found = try rows(for: ids.filter { !$0.isTemporaryID && $0.storeIdentifier == identifier }, on: connection)
        return ids.filter { found[$0] != nil }
    }

    /// The rows the delete rules of `rows`' relationships add (cascade); throws for a deny rule with destinations.
    func cascade(from rows: [NSManagedObjectID], on connection: some RelationalWriteConnection) throws -> [NSManagedObjectID] {
        var next: [NSManagedObjectID] = []
        let byEntity = Dictionary(grouping: rows, by: { ObjectIdentifier($0.entity) })
        for group in byEntity.values {
            let entity = group[0].entity
            for relationship in entity.allRelationships where !relationship.isTransient {
                guard relationship.deleteRule == .cascadeDeleteRule || relationship.deleteRule == .denyDeleteRule else { continue }
                let destinations = try self.destinations(of: group.map(\.primaryKey), relationship, on: connection)
                if relationship.deleteRule == .denyDeleteRule, !destinations.isEmpty {
                    throw CoreDataError(
                        .validationRelationshipDeniedDelete,
                        "The batch delete would delete \(entity.name) objects whose relationship '\(relationship.name)' has the Deny rule and still holds \(destinations.count) object(s); nothing was deleted.",
                        entityName: entity.name, key: relationship.name)
                }
                next += destinations
            }
        }
        return next
    }

    /// The destinations of `relationship` from the rows with primary keys `keys`.
    func destinations(of keys: [Int64], _ relationship: NSRelationshipDescription, on connection: some RelationalWriteConnection) throws
        -> [NSManagedObjectID]
    {
        guard let owner = relationship.entity, let target = relationship.destinationEntity else { return [] }
        let list = keys.map(String.init).joined(separator: ", ")
        let targetTable = dialect.quote(schema.tableName(for: target))
        let sql: String
        if !relationship.isToMany {
            let column = dialect.quote(schema.columnName(for: relationship))
            sql =
                "SELECT d.Z_PK, d.Z_ENT FROM \(targetTable) d WHERE d.Z_PK IN (SELECT \(column) FROM \(dialect.quote(schema.tableName(for: owner))) WHERE Z_PK IN (\(list)))"
        } else {
            switch schema.toManyLink(for: relationship) {
            case .inverseForeignKey(let column):
                sql = "SELECT d.Z_PK, d.Z_ENT FROM \(targetTable) d WHERE d.\(dialect.quote(column)) IN (\(list))"
            case .joinTable(let name, let source, let destination):
                sql =
                    "SELECT d.Z_PK, d.Z_ENT FROM \(targetTable) d WHERE d.Z_PK IN (SELECT \(dialect.quote(destination)) FROM \(dialect.quote(name)) WHERE \(dialect.quote(source)) IN (\(list)))"
            }
        }
        var ids: [NSManagedObjectID] = []
        try connection.forEachRow(sql: sql, arguments: []) { row in
            ids.append(try objectID(pk: row.integer(0), entityID: Int(row.integer(1))))
        }
        return ids.filter { $0.entity.isKindOf(entity: target) }
    }

    /// Deletes the rows, the join rows that name them, and clears every foreign key that points at them.
    func removeRows(_ ids: [NSManagedObjectID], on connection: some RelationalWriteConnection) throws {
        let byTable = Dictionary(grouping: ids, by: { schema.tableName(for: $0.entity) })
        for (table, rows) in byTable {
            let (create, keyTable) = dialect.temporaryKeyTable("ocd_batch_keys")
            try connection.run(sql: create, arguments: [])
            try connection.run(sql: "DELETE FROM \(keyTable)", arguments: [])
            let insert = try connection.prepare(sql: dialect.insertIgnoringDuplicates(intoQuoted: keyTable, columns: ["pk"]))
            for row in rows { try insert.run { try $0.bind(row.primaryKey) } }
            let keys = "(SELECT pk FROM \(keyTable))"
            let root = rows[0].entity.rootEntity
            for entity in schema.model.entities {
                for relationship in entity.properties.compactMap({ $0 as? NSRelationshipDescription }) where !relationship.isTransient {
                    guard let destination = relationship.destinationEntity, destination.rootEntity === root else { continue }
                    if !relationship.isToMany {
                        let column = dialect.quote(schema.columnName(for: relationship))
                        var assignments = ["\(column) = NULL"]
                        if let entityColumn = schema.entityColumnName(for: relationship) {
                            assignments.append("\(dialect.quote(entityColumn)) = NULL")
                        }
                        try connection.run(
                            sql:
                                "UPDATE \(dialect.quote(schema.tableName(for: entity))) SET \(assignments.joined(separator: ", ")) WHERE \(column) IN \(keys)"
                        )
                    } else if case .joinTable(let name, _, let destinationColumn) = schema.toManyLink(for: relationship) {
                        try connection.run(sql: "DELETE FROM \(dialect.quote(name)) WHERE \(dialect.quote(destinationColumn)) IN \(keys)")
                    } else if case .inverseForeignKey(let column) = schema.toManyLink(for: relationship),
                        relationship.inverseRelationship == nil
                    {
                        try connection.run(
                            sql:
                                "UPDATE \(dialect.quote(schema.tableName(for: destination))) SET \(dialect.quote(column)) = NULL WHERE \(dialect.quote(column)) IN \(keys)"
                        )
                    }
                }
                // This entity's own join rows, as the rows' owner.
                guard entity.rootEntity === root else { continue }
                for relationship in entity.properties.compactMap({ $0 as? NSRelationshipDescription })
                where relationship.isToMany && !relationship.isTransient {
                    if case .joinTable(let name, let source, _) = schema.toManyLink(for: relationship) {
                        try connection.run(sql: "DELETE FROM \(dialect.quote(name)) WHERE \(dialect.quote(source)) IN \(keys)")
                    }
                }
            }
            try connection.run(sql: "DELETE FROM \(dialect.quote(table)) WHERE Z_PK IN \(keys)")
        }
        try connection.run(sql: "DROP TABLE IF EXISTS \(dialect.temporaryKeyTable("ocd_batch_keys").name)", arguments: [])
    }
}
