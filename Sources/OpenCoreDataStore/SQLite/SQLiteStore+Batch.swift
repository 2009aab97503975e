import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

/// What a batch delete removes: the rows a fetch matches, or given objects.
package enum StoreBatchTargets: Sendable {
    case matching(StoreFetchRequest)
    case objectIDs([NSManagedObjectID])
}

// Batch requests: rows written, changed and deleted in SQL, one transaction each, without objects (Core Data's
// NSBatchInsertRequest, NSBatchUpdateRequest, NSBatchDeleteRequest).
extension SQLiteStore {
    /// Inserts rows of `entity` in one transaction, the chunks `next` hands over (one value per property of the
    /// entity, as a save's inserts) until it returns nil; returns how many, and their IDs when `collectingIDs`.
    package func batchInsert(
        _ entity: NSEntityDescription, collectingIDs: Bool, author: HistoryAuthor = HistoryAuthor(),
        next: () throws -> [[SnapshotValue]]?
    ) throws -> (count: Int, ids: [NSManagedObjectID]) {
        try batchWrite(doing: "batch-insert into", author: author) { db in
            // Keys after the table's largest and (in Core Data's layout) the root entity's recorded maximum, which
            // advances with them.
            let table = sqlQuote(schema.tableName(for: entity))
            let rootNumber = entity.rootEntity.entityID
            var key = try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(table)") ?? 0
            if schema.isAppleLayout {
                key = max(key, try Int64.fetchOne(db, sql: "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?", arguments: [rootNumber]) ?? 0)
            }
            key += 1
            let first = key
            let plan = try InsertPlan(entity: entity, schema: schema, db: db)
            let arena = BindArena()
            while let chunk = try next() {
                var index = chunk.startIndex
                while index < chunk.endIndex {
                    let count = chunk.endIndex - index >= plan.batchRows ? plan.batchRows : 1
                    try plan.insertRows(chunk[index..<(index + count)], firstKey: key, arena: arena, db: db)
                    key += Int64(count)
                    index += count
                }
            }
            if schema.isAppleLayout {
                try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ?", arguments: [key - 1, rootNumber])
            }
            let ids =
                collectingIDs ? (first..<key).map { NSManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: $0) } : []
            return (Int(key - first), ids)
        }
    }

    /// Sets attributes of every row a fetch matches (each row's version advances, so optimistic locking sees the
    /// change); returns their IDs when `collectingIDs`, and how many.
    package func batchUpdate(
        _ request: StoreFetchRequest, values: [(index: Int, value: AttributeValue)], collectingIDs: Bool,
        author: HistoryAuthor = HistoryAuthor()
    ) throws -> (count: Int, ids: [NSManagedObjectID]) {
        let entity = request.entity
        let query = try query(for: request)
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
        let assignments = (columns.map { "\(sqlQuote($0)) = ?" } + ["Z_OPT = Z_OPT + 1"]).joined(separator: ", ")
        let table = sqlQuote(query.table.name)
        let matching = "SELECT t0.\(SQLColumns.primaryKey) FROM \(query.from)\(query.whereClause)"
        return try batchWrite(doing: "batch-update", author: author) { db in
            var ids: [NSManagedObjectID] = []
            if collectingIDs {
                try db.forEachRow(sql: "SELECT \(query.idColumns) FROM \(query.from)\(query.whereClause)", arguments: query.arguments) {
                    row in ids.append(try objectID(in: row, onlyEntity: query.onlyEntity))
                }
            }
            try db.execute(
                sql: "UPDATE \(table) SET \(assignments) WHERE \(SQLColumns.primaryKey) IN (\(matching))",
                arguments: StatementArguments((arguments + query.arguments).map(\.databaseValue)))
            return (collectingIDs ? ids.count : db.changesCount, ids)
        }
    }

    /// Deletes rows and applies their relationships' delete rules as Core Data's batch delete does.
    ///
    /// A deny rule with destinations refuses the whole request (naming entity and relationship), cascade deletes the
    /// destinations too, and every foreign key or join row that pointed at a deleted row goes. Returns the IDs of every
    /// row deleted.
    package func batchDelete(_ targets: StoreBatchTargets, author: HistoryAuthor = HistoryAuthor()) throws -> [NSManagedObjectID] {
        try batchWrite(doing: "batch-delete from", author: author) { db in
            var pending: [NSManagedObjectID]
            switch targets {
            case .matching(let request):
                let query = try query(for: request)
                pending = []
                try db.forEachRow(sql: "SELECT \(query.idColumns) FROM \(query.from)\(query.whereClause)", arguments: query.arguments) {
                    row in pending.append(try objectID(in: row, onlyEntity: query.onlyEntity))
                }
            case .objectIDs(let ids):
                pending = try existing(ids, in: db)
            }
            var deleted: [NSManagedObjectID] = []
            var seen: Set<NSManagedObjectID> = []
            while !pending.isEmpty {
                let round = pending.filter { seen.insert($0).inserted }
                deleted += round
                pending = try cascade(from: round, in: db)
            }
            try removeRows(deleted, in: db)
            return deleted
        }
    }

    /// Runs a batch operation in one write transaction (or in the one `performAsOneTransaction` holds) and advances
    /// the change token with it.
    private func batchWrite<T>(doing what: String, author: HistoryAuthor, _ body: (Database) throws -> T) throws -> T {
        let held = try checkOpen()
        var number: Int64?
        func run(_ db: Database) throws -> T {
            let result = try body(db)
            number = try flushHistory(db, author: author)
            if schema.isAppleLayout {
                try AppleStoreMetadata.advanceChangeToken(db)
            } else {
                try db.execute(sql: "UPDATE Z_METADATA SET Z_VALUE = CAST(Z_VALUE AS INTEGER) + 1 WHERE Z_KEY = 'changeToken'")
            }
            return result
        }
        do {
            if let held {
                var result: T?
                try held.inSavepoint {
                    result = try run(held)
                    return .commit
                }
                return result!
            }
            let result = try withoutActuallyEscaping(run) { escapable in try writer.write(escapable) }
            noteCommittedHistory(number)
            return result
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: what)
        }
    }

    /// The IDs of `ids` whose rows exist, keeping their order.
    private func existing(_ ids: [NSManagedObjectID], in db: Database) throws -> [NSManagedObjectID] {
        let found = try rows(for: ids.filter { !$0.isTemporaryID && $0.storeIdentifier == identifier }, in: db)
        return ids.filter { found[$0] != nil }
    }

    /// The rows the delete rules of `rows`' relationships add (cascade); throws for a deny rule with destinations.
    private func cascade(from rows: [NSManagedObjectID], in db: Database) throws -> [NSManagedObjectID] {
        var next: [NSManagedObjectID] = []
        let byEntity = Dictionary(grouping: rows, by: { ObjectIdentifier($0.entity) })
        for group in byEntity.values {
            let entity = group[0].entity
            for relationship in entity.allRelationships where !relationship.isTransient {
                guard relationship.deleteRule == .cascadeDeleteRule || relationship.deleteRule == .denyDeleteRule else { continue }
                let destinations = try self.destinations(of: group.map(\.primaryKey), relationship, in: db)
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
    private func destinations(of keys: [Int64], _ relationship: NSRelationshipDescription, in db: Database) throws -> [NSManagedObjectID] {
        guard let owner = relationship.entity, let target = relationship.destinationEntity else { return [] }
        let list = keys.map(String.init).joined(separator: ", ")
        let targetTable = sqlQuote(schema.tableName(for: target))
        let sql: String
        if !relationship.isToMany {
            let column = sqlQuote(schema.columnName(for: relationship))
            sql =
                "SELECT d.Z_PK, d.Z_ENT FROM \(targetTable) d WHERE d.Z_PK IN (SELECT \(column) FROM \(sqlQuote(schema.tableName(for: owner))) WHERE Z_PK IN (\(list)))"
        } else {
            switch schema.toManyLink(for: relationship) {
            case .inverseForeignKey(let column):
                sql = "SELECT d.Z_PK, d.Z_ENT FROM \(targetTable) d WHERE d.\(sqlQuote(column)) IN (\(list))"
            case .joinTable(let name, let source, let destination):
                sql =
                    "SELECT d.Z_PK, d.Z_ENT FROM \(targetTable) d WHERE d.Z_PK IN (SELECT \(sqlQuote(destination)) FROM \(sqlQuote(name)) WHERE \(sqlQuote(source)) IN (\(list)))"
            }
        }
        var ids: [NSManagedObjectID] = []
        try db.forEachRow(sql: sql) { row in ids.append(try objectID(pk: row.integer(0), entityID: Int(row.integer(1)))) }
        return ids.filter { $0.entity.isKindOf(entity: target) }
    }

    /// Deletes the rows, the join rows that name them, and clears every foreign key that points at them.
    private func removeRows(_ ids: [NSManagedObjectID], in db: Database) throws {
        let byTable = Dictionary(grouping: ids, by: { schema.tableName(for: $0.entity) })
        for (table, rows) in byTable {
            try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS ocd_batch_keys (pk INTEGER PRIMARY KEY)")
            try db.execute(sql: "DELETE FROM temp.ocd_batch_keys")
            let insert = try db.makeStatement(sql: "INSERT OR IGNORE INTO temp.ocd_batch_keys (pk) VALUES (?)")
            for row in rows { try insert.execute(arguments: [row.primaryKey]) }
            let keys = "(SELECT pk FROM temp.ocd_batch_keys)"
            let root = rows[0].entity.rootEntity
            for entity in schema.model.entities {
                for relationship in entity.properties.compactMap({ $0 as? NSRelationshipDescription }) where !relationship.isTransient {
                    guard let destination = relationship.destinationEntity, destination.rootEntity === root else { continue }
                    if !relationship.isToMany {
                        let column = sqlQuote(schema.columnName(for: relationship))
                        var assignments = ["\(column) = NULL"]
                        if let entityColumn = schema.entityColumnName(for: relationship) {
                            assignments.append("\(sqlQuote(entityColumn)) = NULL")
                        }
                        try db.execute(
                            sql:
                                "UPDATE \(sqlQuote(schema.tableName(for: entity))) SET \(assignments.joined(separator: ", ")) WHERE \(column) IN \(keys)"
                        )
                    } else if case .joinTable(let name, _, let destinationColumn) = schema.toManyLink(for: relationship) {
                        try db.execute(sql: "DELETE FROM \(sqlQuote(name)) WHERE \(sqlQuote(destinationColumn)) IN \(keys)")
                    } else if case .inverseForeignKey(let column) = schema.toManyLink(for: relationship),
                        relationship.inverseRelationship == nil
                    {
                        try db.execute(
                            sql:
                                "UPDATE \(sqlQuote(schema.tableName(for: destination))) SET \(sqlQuote(column)) = NULL WHERE \(sqlQuote(column)) IN \(keys)"
                        )
                    }
                }
                // This entity's own join rows, as the rows' owner.
                guard entity.rootEntity === root else { continue }
                for relationship in entity.properties.compactMap({ $0 as? NSRelationshipDescription })
                where relationship.isToMany && !relationship.isTransient {
                    if case .joinTable(let name, let source, _) = schema.toManyLink(for: relationship) {
                        try db.execute(sql: "DELETE FROM \(sqlQuote(name)) WHERE \(sqlQuote(source)) IN \(keys)")
                    }
                }
            }
            try db.execute(sql: "DELETE FROM \(sqlQuote(table)) WHERE Z_PK IN \(keys)")
        }
        try db.execute(sql: "DROP TABLE IF EXISTS temp.ocd_batch_keys")
    }
}
