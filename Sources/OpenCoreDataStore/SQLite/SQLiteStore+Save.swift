import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

extension SQLiteStore {
    /// Writes one save in a single transaction; on any error nothing is written.
    ///
    /// Primary keys for inserted rows are allocated inside the transaction (after the table's current maximum), so
    /// relationships between new objects are written directly. Updates and deletes check the row's `Z_OPT` version
    /// under the `.fail` policy and throw a merge conflict naming the object if someone else changed it.
    public func save(_ request: StoreSaveRequest) throws -> StoreSaveResult {
        try checkOpenForWrite()
        do {
            return try writer.write { db in try self.write(request, in: db) }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "save to")
        }
    }

    private func checkOpenForWrite() throws {
        _ = try changeToken  // throws if closed
    }

    private func write(_ request: StoreSaveRequest, in db: Database) throws -> StoreSaveResult {
        // 1. Permanent IDs for inserts.
        var nextPK: [String: Int64] = [:]
        var permanent: [NSManagedObjectID: NSManagedObjectID] = [:]
        for insert in request.inserts {
            let table = schema.tableName(for: insert.objectID.entity)
            if nextPK[table] == nil {
                nextPK[table] = (try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(sqlQuote(table))") ?? 0) + 1
            }
            let pk = nextPK[table]!
            nextPK[table] = pk + 1
            permanent[insert.objectID] = NSManagedObjectID(entity: insert.objectID.entity, storeIdentifier: identifier, primaryKey: pk)
        }
        func resolve(_ id: NSManagedObjectID) throws -> NSManagedObjectID {
            if !id.isTemporaryID { return id }
            guard let p = permanent[id] else {
                throw CoreDataError(
                    .managedObjectReferentialIntegrity,
                    "An object being saved points to \(id), which is neither stored nor being inserted (was it deleted or made in another context?)."
                )
            }
            return p
        }
        // 2. Inserts. The snapshots of inserted rows are what was written, normalized as a read would return them
        // (no need to read them back).
        var snapshots: [NSManagedObjectID: RowSnapshot] = [:]
        snapshots.reserveCapacity(request.inserts.count + request.updates.count)
        var insertSQL: [ObjectIdentifier: String] = [:]  // the column list is the same for every row of an entity
        for insert in request.inserts {
            let id = permanent[insert.objectID]!
            let entity = id.entity
            var columns = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version]
            var values: [DatabaseValue] = [id.primaryKey.databaseValue, entity.entityID.databaseValue, 1.databaseValue]
            var stored: [SnapshotValue] = []
            stored.reserveCapacity(insert.values.count)
            for (property, value) in zip(entity.allProperties, insert.values) {
                stored.append(try storedValue(property, value, resolve: resolve))
                guard !property.isTransient else { continue }
                try append(property, value, to: &columns, &values, resolve: resolve)
            }
            let sql: String
            if let cached = insertSQL[ObjectIdentifier(entity)] {
                sql = cached
            } else {
                sql =
                    "INSERT INTO \(sqlQuote(schema.tableName(for: entity))) (\(columns.map(sqlQuote).joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))"
                insertSQL[ObjectIdentifier(entity)] = sql
            }
            try db.cachedStatement(sql: sql).execute(arguments: StatementArguments(values))  // same SQL per entity: prepared once
            snapshots[id] = RowSnapshot(objectID: id, version: 1, values: stored)
        }
        // 3. Updates.
        for update in request.updates {
            let entity = update.objectID.entity
            var columns: [String] = []
            var values: [DatabaseValue] = []
            for (index, value) in update.changes.sorted(by: { $0.key < $1.key }) {
                let property = entity.allProperties[index]
                guard !property.isTransient else { continue }
                try append(property, value, to: &columns, &values, resolve: resolve)
            }
            let assignments = (columns.map { "\(sqlQuote($0)) = ?" } + ["Z_OPT = Z_OPT + 1"]).joined(separator: ", ")
            try writeRow(
                "UPDATE \(sqlQuote(schema.tableName(for: entity))) SET \(assignments)", values, update.objectID,
                expectedVersion: update.expectedVersion, policy: request.conflictPolicy, doing: "update", in: db)
        }
        // 4. Link changes (join tables); removals before additions.
        for change in request.linkChanges.sorted(by: { !$0.isInsert && $1.isInsert }) {
            guard case .joinTable(let name, let source, let destination) = schema.toManyLink(for: change.relationship) else { continue }
            let s = try resolve(change.source).primaryKey
            let d = try resolve(change.destination).primaryKey
            if change.isInsert {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO \(sqlQuote(name)) (\(sqlQuote(source)), \(sqlQuote(destination))) VALUES (?, ?)",
                    arguments: [s, d])
            } else {
                try db.execute(
                    sql: "DELETE FROM \(sqlQuote(name)) WHERE \(sqlQuote(source)) = ? AND \(sqlQuote(destination)) = ?", arguments: [s, d])
            }
        }
        // 5. Deletes, with the join-table rows that point at them.
        for delete in request.deletes {
            let entity = delete.objectID.entity
            try writeRow(
                "DELETE FROM \(sqlQuote(schema.tableName(for: entity)))", [], delete.objectID,
                expectedVersion: delete.expectedVersion, policy: request.conflictPolicy, doing: "delete", in: db)
            for relationship in entity.allRelationships where relationship.isToMany {
                if case .joinTable(let name, let source, _) = schema.toManyLink(for: relationship) {
                    try db.execute(
                        sql: "DELETE FROM \(sqlQuote(name)) WHERE \(sqlQuote(source)) = ?", arguments: [delete.objectID.primaryKey])
                }
            }
        }
        try db.execute(sql: "UPDATE Z_METADATA SET Z_VALUE = CAST(Z_VALUE AS INTEGER) + 1 WHERE Z_KEY = 'changeToken'")
        // 6. The updated rows as now stored.
        for (id, snapshot) in try rows(for: request.updates.map(\.objectID), in: db) { snapshots[id] = snapshot }
        return StoreSaveResult(permanentIDs: permanent, snapshots: snapshots)
    }

    /// A property's value as reading the inserted row back would give it.
    private func storedValue(
        _ property: NSPropertyDescription, _ value: SnapshotValue, resolve: (NSManagedObjectID) throws -> NSManagedObjectID
    ) throws -> SnapshotValue {
        if property.isTransient { return .attribute((property as? NSAttributeDescription)?.defaultValue ?? .null) }
        switch (property, value) {
        case (let attribute as NSAttributeDescription, .attribute(let v)):
            let type = attribute.attributeType
            return .attribute(SQLStorage.decode(SQLStorage.encode(v, as: type), as: type) ?? v)
        case (_ as NSRelationshipDescription, .toOne(let id)): return .toOne(try id.map(resolve))
        case (_ as NSRelationshipDescription, .toMany): return .toMany
        default: return value
        }
    }

    private func append(
        _ property: NSPropertyDescription, _ value: SnapshotValue, to columns: inout [String], _ values: inout [DatabaseValue],
        resolve: (NSManagedObjectID) throws -> NSManagedObjectID
    ) throws {
        switch (property, value) {
        case (let attribute as NSAttributeDescription, .attribute(let v)):
            columns.append(schema.columnName(for: attribute))
            values.append(SQLStorage.encode(v, as: attribute.attributeType).databaseValue)
        case (let relationship as NSRelationshipDescription, .toOne(let id)):
            columns.append(schema.columnName(for: relationship))
            columns.append(schema.entityColumnName(for: relationship))
            if let id {
                let target = try resolve(id)
                values.append(target.primaryKey.databaseValue)
                values.append(target.entity.entityID.databaseValue)
            } else {
                values.append(.null)
                values.append(.null)
            }
        case (_ as NSRelationshipDescription, .toMany):
            break
        default:
            throw CoreDataError(
                .wrongValueType, "Internal error: property '\(property.name)' received a value of the wrong kind while saving.",
                key: property.name)
        }
    }

    /// Runs an UPDATE or DELETE of one row (the statement up to its WHERE clause), checking its version under the
    /// `.fail` policy; a row changed or deleted by someone else is a merge conflict that aborts the save.
    private func writeRow(
        _ statement: String, _ values: [DatabaseValue], _ id: NSManagedObjectID, expectedVersion: Int64,
        policy: StoreSaveRequest.ConflictPolicy, doing what: String, in db: Database
    ) throws {
        var sql = statement + " WHERE Z_PK = ?"
        var arguments = values + [id.primaryKey.databaseValue]
        if policy == .fail {
            sql += " AND Z_OPT = ?"
            arguments.append(expectedVersion.databaseValue)
        }
        try db.cachedStatement(sql: sql).execute(arguments: StatementArguments(arguments))
        if db.changesCount == 0 { throw try conflict(id, in: db, doing: what) }
    }

    private func conflict(_ id: NSManagedObjectID, in db: Database, doing what: String) throws -> CoreDataError {
        let exists =
            try Bool.fetchOne(
                db, sql: "SELECT COUNT(*) > 0 FROM \(sqlQuote(schema.tableName(for: id.entity))) WHERE Z_PK = ?", arguments: [id.primaryKey]
            ) ?? false
        let why = exists ? "was changed by another context or process since it was read" : "was deleted by another context or process"
        return CoreDataError(
            .managedObjectMerge,
            "Could not \(what) \(id.entity.name) \(id.uriRepresentation().absoluteString): it \(why) (optimistic locking conflict). Nothing was saved; refresh the object or set a merge policy.",
            entityName: id.entity.name)
    }
}
