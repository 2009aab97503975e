import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel
import OpenCoreDataPredicate

extension SQLiteStore {
    /// Writes one save in a single transaction; on any error nothing is written.
    ///
    /// Primary keys for inserted rows are allocated inside the transaction (after the table's current maximum), so
    /// relationships between new objects are written directly. Updates and deletes check the row's `Z_OPT` version
    /// under the `.fail` policy and throw a merge conflict naming the object if someone else changed it.
    package func save(_ request: StoreSaveRequest) throws -> StoreSaveResult {
        let held = try checkOpen()
        do {
            if let held {
                // Inside `performAsOneTransaction`: a savepoint, so that a failed save leaves the earlier ones.
                var result: StoreSaveResult?
                var number: Int64?
                try held.inSavepoint {
                    result = try self.write(request, in: held, history: &number)
                    return .commit
                }
                // Noted as committed when the whole transaction commits (`performAsOneTransaction`).
                if let number { closedLock.withLock { heldHistoryNumbers.append(number) } }
                return result!
            }
            var number: Int64?
            let result = try writer.write { db in try self.write(request, in: db, history: &number) }
            noteCommittedHistory(number)
            return result
        } catch let error as CoreDataError {
            throw error
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw (try? constraintError(error, request)) ?? mapError(error, doing: "save to")
        } catch {
            throw mapError(error, doing: "save to")
        }
    }

    /// Writes a save in six steps, inside the caller's transaction, handing back the number of the history
    /// transaction it recorded.
    private func write(_ request: StoreSaveRequest, in db: Database, history number: inout Int64?) throws -> StoreSaveResult {
        // 1. Permanent IDs for inserts, in the order of the request.
        let ids = try PermanentIDs(
            for: request.inserts, tableName: { self.schema.tableName(for: $0) }, store: identifier, recordsMaximum: schema.isAppleLayout,
            in: db)
        let arena = BindArena()  // text and blobs of the row being bound (see `BindArena`)
        var statements = SaveStatements(policy: request.conflictPolicy)
        // 2. Inserts; 3. updates; 4. link changes; 5. deletes.
        let insertedRows = try writeInserts(request.inserts, ids: ids, arena: arena, in: db)
        var (updatedRows, readBack) = try writeUpdates(request, ids: ids, statements: &statements, arena: arena, in: db)
        try writeLinkChanges(request.linkChanges, ids: ids, in: db)
        try writeOrderChanges(request.orderChanges, ids: ids, in: db)
        try writeDeletes(request, statements: &statements, arena: arena, in: db)
        number = try flushHistory(db, author: request.historyAuthor)
        if schema.isAppleLayout {
            try AppleStoreMetadata.advanceChangeToken(db)
        } else {
            try db.execute(sql: "UPDATE Z_METADATA SET Z_VALUE = CAST(Z_VALUE AS INTEGER) + 1 WHERE Z_KEY = 'changeToken'")
        }
        // 6. The updated rows as now stored: those not built from what was written, read back.
        if !readBack.isEmpty { updatedRows.merge(try rows(for: readBack, in: db)) { _, read in read } }
        return StoreSaveResult(insertedRows: insertedRows, updatedRows: updatedRows)
    }

    /// Step 2: inserts, one prepared statement per entity.
    ///
    /// The snapshots of inserted rows are what was written,
    /// normalized as a read would return them (no need to read them back): the values handed over, shared, unless
    /// one reads back differently.
    func writeInserts(
        _ inserts: [StoreSaveRequest.Insert], ids: PermanentIDs, arena: BindArena, in db: Database
    ) throws -> [RowSnapshot] {
        var insertedRows: [RowSnapshot] = []
        insertedRows.reserveCapacity(inserts.count)
        var plans: [ObjectIdentifier: InsertPlan] = [:]
        let permanentIDs = ids.permanent
        // By index, reading each element in place: iterating `zip` copies every insert (and so retains its ID and
        // values) on top of the copies the snapshot needs. Inserts come in runs of one entity; a run's rows are written
        // `InsertPlan.batchRows` at a time by one statement, the rest one by one.
        var index = inserts.startIndex
        while index < inserts.endIndex {
            let entityKey = permanentIDs[index]._entityIdentity
            let plan: InsertPlan
            if let made = plans[entityKey] {
                plan = made
            } else {
                plan = try InsertPlan(entity: permanentIDs[index].entity, schema: schema, db: db)
                plans[entityKey] = plan
            }
            var end = index + 1
            while end < inserts.endIndex, permanentIDs[end]._entityIdentity == entityKey { end += 1 }
            while index < end {
                let rows = index..<(index + (end - index >= plan.batchRows ? plan.batchRows : 1))
                insertedRows += try plan.insert(inserts[rows], ids: permanentIDs[rows], arena: arena, db: db, resolve: ids.resolve)
                index = rows.upperBound
            }
        }
        return insertedRows
    }

    /// Step 3: updates.
    ///
    /// Rows that change the same properties of the same entity share one statement. Under the
    /// `.fail` policy a row whose base values came with the request is built as saved from them (the version check
    /// proved the row held them); the others are returned to be read back.
    private func writeUpdates(
        _ request: StoreSaveRequest, ids: PermanentIDs, statements: inout SaveStatements, arena: BindArena, in db: Database
    ) throws -> (built: [NSManagedObjectID: RowSnapshot], readBack: [NSManagedObjectID]) {
        var updatedRows: [NSManagedObjectID: RowSnapshot] = [:]
        var readBack: [NSManagedObjectID] = []
        for update in request.updates {
            let entity = update.objectID.entity
            let changes = update.changes.sorted(by: { $0.key < $1.key })
            let indexes = changes.map(\.key)
            let statement = try statements.statement(.update(entity: ObjectIdentifier(entity), indexes: indexes), in: db) {
                let columns = indexes.flatMap { schema.columnNames(for: entity.allProperties[$0]) }
                let assignments = (columns.map { "\(sqlQuote($0)) = ?" } + ["Z_OPT = Z_OPT + 1"]).joined(separator: ", ")
                return "UPDATE \(sqlQuote(schema.tableName(for: entity))) SET \(assignments)"
            }
            var saved = request.conflictPolicy == .fail ? update.base.flatMap { $0.count == entity.allProperties.count ? $0 : nil } : nil
            try writeRow(
                statement, update.objectID, expectedVersion: update.expectedVersion, policy: request.conflictPolicy, doing: "update",
                in: db, arena: arena
            ) { row in
                for (index, value) in changes {
                    let read = try ColumnWriter(entity.allProperties[index], schema: schema).bind(value, into: &row, resolve: ids.resolve)
                    if saved != nil { saved![index] = read ?? value }
                }
            }
            if var saved {
                // Transient values are not the row's: a read gives their defaults.
                for index in entity._transientIndexes { saved[index] = entity.allProperties[index].transientSnapshotValue }
                updatedRows[update.objectID] = RowSnapshot(objectID: update.objectID, version: update.expectedVersion + 1, values: saved)
            } else {
                readBack.append(update.objectID)
            }
        }
        return (updatedRows, readBack)
    }

    /// Step 4: link changes (join tables, and the hidden foreign keys of to-many relationships without inverse).
    ///
    /// Removals go before additions. A link kept in the inverse's foreign key was written with that to-one.
    private func writeLinkChanges(_ linkChanges: [StoreSaveRequest.LinkChange], ids: PermanentIDs, in db: Database) throws {
        for change in linkChanges.sorted(by: { !$0.isInsert && $1.isInsert }) {
            let s = try ids.resolve(change.source).primaryKey
            let d = try ids.resolve(change.destination).primaryKey
            let link = schema.toManyLink(for: change.relationship)
            if case .inverseForeignKey(let column) = link, change.relationship.inverseRelationship == nil,
                let destinationEntity = change.relationship.destinationEntity
            {
                let table = sqlQuote(schema.tableName(for: destinationEntity))
                try db.execute(
                    sql: change.isInsert
                        ? "UPDATE \(table) SET \(sqlQuote(column)) = ? WHERE Z_PK = ?"
                        : "UPDATE \(table) SET \(sqlQuote(column)) = NULL WHERE \(sqlQuote(column)) = ? AND Z_PK = ?",
                    arguments: [s, d])
                continue
            }
            guard case .joinTable(let name, let source, let destination) = link else { continue }
            if change.isInsert {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO \(sqlQuote(name)) (\(sqlQuote(source)), \(sqlQuote(destination))) VALUES (?, ?)",
                    arguments: [s, d])
            } else {
                try db.execute(
                    sql: "DELETE FROM \(sqlQuote(name)) WHERE \(sqlQuote(source)) = ? AND \(sqlQuote(destination)) = ?", arguments: [s, d])
            }
        }
    }

    /// Step 4 too: the order of ordered relationships, as positions from 1 in their order column.
    private func writeOrderChanges(_ orderChanges: [StoreSaveRequest.OrderChange], ids: PermanentIDs, in db: Database) throws {
        for change in orderChanges {
            guard let order = schema.orderColumn(for: change.relationship), let destination = change.relationship.destinationEntity else {
                continue
            }
            let source = try ids.resolve(change.source).primaryKey
            let statement: Statement
            switch schema.toManyLink(for: change.relationship) {
            case .inverseForeignKey(let column):
                statement = try db.cachedStatement(
                    sql:
                        "UPDATE \(sqlQuote(schema.tableName(for: destination))) SET \(sqlQuote(order)) = ? WHERE Z_PK = ? AND \(sqlQuote(column)) = ?"
                )
            case .joinTable(let name, let sourceColumn, let destinationColumn):
                statement = try db.cachedStatement(
                    sql:
                        "UPDATE \(sqlQuote(name)) SET \(sqlQuote(order)) = ? WHERE \(sqlQuote(destinationColumn)) = ? AND \(sqlQuote(sourceColumn)) = ?"
                )
            }
            for (position, id) in change.destinations.enumerated() {
                try statement.execute(arguments: [position + 1, try ids.resolve(id).primaryKey, source])
            }
        }
    }

    /// Step 5: deletes, with the join-table rows that point at them.
    private func writeDeletes(_ request: StoreSaveRequest, statements: inout SaveStatements, arena: BindArena, in db: Database) throws {
        for delete in request.deletes {
            let entity = delete.objectID.entity
            let statement = try statements.statement(.delete(entity: ObjectIdentifier(entity)), in: db) {
                "DELETE FROM \(sqlQuote(schema.tableName(for: entity)))"
            }
            try writeRow(
                statement, delete.objectID, expectedVersion: delete.expectedVersion, policy: request.conflictPolicy, doing: "delete",
                in: db, arena: arena)
            for relationship in entity.allRelationships where relationship.isToMany {
                switch schema.toManyLink(for: relationship) {
                case .joinTable(let name, let source, _):
                    try db.execute(
                        sql: "DELETE FROM \(sqlQuote(name)) WHERE \(sqlQuote(source)) = ?", arguments: [delete.objectID.primaryKey])
                case .inverseForeignKey(let column):
                    // A hidden foreign key (no inverse to clear it) no longer points at the deleted row.
                    guard relationship.inverseRelationship == nil, let destination = relationship.destinationEntity else { continue }
                    try db.execute(
                        sql:
                            "UPDATE \(sqlQuote(schema.tableName(for: destination))) SET \(sqlQuote(column)) = NULL WHERE \(sqlQuote(column)) = ?",
                        arguments: [delete.objectID.primaryKey])
                }
            }
        }
    }

    /// Runs an UPDATE or DELETE of one row (a statement from `SaveStatements`, which ends in its row filter),
    /// checking its version under the `.fail` policy; a row changed or deleted by someone else is a merge conflict that
    /// aborts the save.
    private func writeRow(
        _ statement: Statement, _ id: NSManagedObjectID, expectedVersion: Int64, policy: StoreSaveRequest.ConflictPolicy,
        doing what: String, in db: Database, arena: BindArena, values: (inout RowBinder) throws -> Void = { _ in }
    ) throws {
        try statement.run(arena: arena) { row in
            try values(&row)
            try row.bind(id.primaryKey)
            if policy == .fail { try row.bind(expectedVersion) }
        }
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

/// A save's UPDATE and DELETE statements of one row, prepared on first use and dropped with the save (see
/// `runBinding`), by what they do.
private struct SaveStatements {
    enum Shape: Hashable {
        /// Sets the properties at `indexes` (in order) of a row of `entity`.
        case update(entity: ObjectIdentifier, indexes: [Int])
        case delete(entity: ObjectIdentifier)
    }

    /// Picks the row, and under the `.fail` policy checks its version: ` WHERE Z_PK = ? [AND Z_OPT = ?]`.
    private let rowFilter: String
    private var prepared: [Shape: Statement] = [:]

    init(policy: StoreSaveRequest.ConflictPolicy) {
        rowFilter = " WHERE Z_PK = ?" + (policy == .fail ? " AND Z_OPT = ?" : "")
    }

    /// The statement for `shape`; `sql` gives its text up to the row filter, the first time.
    mutating func statement(_ shape: Shape, in db: Database, sql: () -> String) throws -> Statement {
        if let statement = prepared[shape] { return statement }
        let statement = try db.makeStatement(sql: sql() + rowFilter)
        statement.prepareForRowBinding()
        prepared[shape] = statement
        return statement
    }
}

/// How the rows of one entity are inserted: the statements, prepared once per save, and how each property is written.
///
/// Rows go `batchRows` at a time through one multi-row `INSERT … VALUES (…), (…), …` where the entity's columns
/// allow it: each execution of a statement costs SQLite opening and closing its table cursor and GRDB its checks,
/// about a third of writing a row of ten attributes one at a time.
final class InsertPlan {
    /// At most this many rows per statement (fewer when the entity has so many columns that SQLite's limit on
    /// parameters would be reached).
    static let maximumBatchRows = 32

    let entity: NSEntityDescription
    let entityNumber: Int64
    /// What each property writes, in property order.
    let kinds: [ColumnWriter.Kind]
    let schema: SQLiteSchema
    /// How many rows one execution of the batch statement writes (1: no batch statement).
    let batchRows: Int
    /// The statement's text up to `VALUES `, and one row's parameters.
    private let head: String
    private let tuple: String
    private let single: Statement
    private var batch: Statement?

    init(entity: NSEntityDescription, schema: SQLiteSchema, db: Database) throws {
        let names = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version] + entity.allProperties.flatMap(schema.columnNames(for:))
        head = "INSERT INTO \(sqlQuote(schema.tableName(for: entity))) (\(names.map(sqlQuote).joined(separator: ", "))) VALUES "
        tuple = "(" + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
        single = try db.makeStatement(sql: head + tuple)  // for this save only (see `run(binding:)`)
        single.prepareForRowBinding()
        let parameterLimit = Int(sqlite3_limit(db.sqliteConnection, SQLITE_LIMIT_VARIABLE_NUMBER, -1))
        batchRows = max(1, min(Self.maximumBatchRows, parameterLimit / names.count))
        self.entity = entity
        entityNumber = Int64(entity.entityID)
        kinds = entity.allProperties.map { ColumnWriter.Kind($0, schema: schema) }
        self.schema = schema
    }

    /// Inserts the rows of `inserts` (1 or `batchRows` of them) under the permanent `ids`, and returns their snapshots:
    /// the values written, except those that read back differently.
    func insert(
        _ inserts: ArraySlice<StoreSaveRequest.Insert>, ids: ArraySlice<NSManagedObjectID>, arena: BindArena, db: Database,
        resolve: (NSManagedObjectID) throws -> NSManagedObjectID
    ) throws -> [RowSnapshot] {
        // The batch statement has parameters for exactly `batchRows` rows: any other count would leave some bound to
        // the previous execution's values.
        let rows = inserts.count
        precondition(
            rows == ids.count && (rows == 1 || rows == batchRows), "InsertPlan writes 1 or \(batchRows) rows at a time, not \(rows)")
        let statement: Statement
        if rows == 1 {
            statement = single
        } else if let batch {
            statement = batch
        } else {
            statement = try db.makeStatement(sql: head + Array(repeating: tuple, count: rows).joined(separator: ", "))
            statement.prepareForRowBinding()
            batch = statement
        }
        var snapshots: [RowSnapshot] = []
        snapshots.reserveCapacity(rows)
        try statement.run(arena: arena) { row in
            for (insert, id) in zip(inserts.indices, ids) {  // by index: no copy of each insert
                let values = try bind(inserts[insert].values, primaryKey: id.primaryKey, into: &row, resolve: resolve)
                snapshots.append(RowSnapshot(objectID: id, version: 1, values: values))
            }
        }
        return snapshots
    }

    /// Inserts rows (1 or `batchRows` of them) under consecutive primary keys from `firstKey`, making no snapshot: a
    /// batch insert's rows, which set no relationship.
    func insertRows(_ rows: ArraySlice<[SnapshotValue]>, firstKey: Int64, arena: BindArena, db: Database) throws {
        precondition(rows.count == 1 || rows.count == batchRows, "InsertPlan writes 1 or \(batchRows) rows at a time, not \(rows.count)")
        let statement: Statement
        if rows.count == 1 {
            statement = single
        } else if let batch {
            statement = batch
        } else {
            statement = try db.makeStatement(sql: head + Array(repeating: tuple, count: rows.count).joined(separator: ", "))
            statement.prepareForRowBinding()
            batch = statement
        }
        try statement.run(arena: arena) { row in
            var key = firstKey
            for index in rows.indices {
                _ = try bind(rows[index], primaryKey: key, into: &row, resolve: { $0 })
                key += 1
            }
        }
    }

    /// Binds one row's parameters and returns its snapshot values as `insert` does.
    private func bind(
        _ values: [SnapshotValue], primaryKey: Int64, into row: inout RowBinder, resolve: (NSManagedObjectID) throws -> NSManagedObjectID
    ) throws -> [SnapshotValue] {
        var stored = values
        try row.bind(primaryKey)
        try row.bind(entityNumber)
        try row.bind(1 as Int64)
        try kinds.withUnsafeBufferPointer { kinds in
            for index in kinds.indices {
                // The common case inline: an attribute value, bound as its column stores it.
                if case .attribute(let type) = kinds[index], case .attribute(let value) = values[index] {
                    do {
                        if let read = try row.bind(value, as: type, coreDataLayout: schema.isAppleLayout) {
                            stored[index] = .attribute(read)
                        }
                    } catch let loss as DecimalPrecisionLoss {
                        throw loss.error(entity.allProperties[index])
                    }
                    continue
                }
                let writer = ColumnWriter(entity.allProperties[index], schema: schema)
                if let read = try writer.bind(values[index], into: &row, resolve: resolve) { stored[index] = read }
            }
        }
        return stored
    }
}
