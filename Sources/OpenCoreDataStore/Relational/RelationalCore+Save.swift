import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// What a save wrote, before the back end finishes its transaction (history, change token) and reads back the rows
/// `readBack` names.
package struct RelationalWriteResult {
    package var insertedRows: [RowSnapshot]
    /// The updated rows built from what was written.
    package var updatedRows: [NSManagedObjectID: RowSnapshot]
    /// Updated rows whose stored form must be read back (after everything else the transaction writes).
    package var readBack: [NSManagedObjectID]
}

// Saving: a save's rows, written in five steps inside the back end's transaction, on any relational connection.
extension RelationalCore {
    /// Writes a save's rows inside the caller's transaction, in five steps.
    ///
    /// 1. Permanent IDs for inserts, in the order of the request; 2. inserts; 3. updates; 4. link and order changes;
    /// 5. deletes.
    ///
    /// Primary keys for inserted rows are allocated inside the transaction (after the table's current maximum), so
    /// relationships between new objects are written directly. Updates and deletes check the row's `Z_OPT` version
    /// under the `.fail` policy (the statement must change exactly one row) and throw a merge conflict naming the
    /// object if someone else changed it.
    package func write<C: RelationalWriteConnection>(_ request: StoreSaveRequest, on connection: C) throws -> RelationalWriteResult {
        let ids = try PermanentIDs(for: request.inserts, core: self, on: connection)
        var statements = SaveStatements<C.Statement>(policy: request.conflictPolicy)
        let insertedRows = try writeInserts(request.inserts, ids: ids, on: connection)
        let (updatedRows, readBack) = try writeUpdates(request, ids: ids, statements: &statements, on: connection)
        try writeLinkChanges(request.linkChanges, ids: ids, on: connection)
        try writeOrderChanges(request.orderChanges, ids: ids, on: connection)
        try writeDeletes(request, statements: &statements, on: connection)
        return RelationalWriteResult(insertedRows: insertedRows, updatedRows: updatedRows, readBack: readBack)
    }

    /// Step 2: inserts, one prepared statement per entity.
    ///
    /// The snapshots of inserted rows are what was written, normalized as a read would return them (no need to read
    /// them back): the values handed over, shared, unless one reads back differently.
    func writeInserts<C: RelationalWriteConnection>(
        _ inserts: [StoreSaveRequest.Insert], ids: PermanentIDs, on connection: C
    ) throws -> [RowSnapshot] {
        var insertedRows: [RowSnapshot] = []
        insertedRows.reserveCapacity(inserts.count)
        var plans: [ObjectIdentifier: InsertPlan<C>] = [:]
        let permanentIDs = ids.permanent
        // By index, reading each element in place: iterating `zip` copies every insert (and so retains its ID and
        // values) on top of the copies the snapshot needs. Inserts come in runs of one entity; a run's rows are written
        // `InsertPlan.batchRows` at a time by one statement, the rest one by one.
        var index = inserts.startIndex
        while index < inserts.endIndex {
            let entityKey = permanentIDs[index]._entityIdentity
            let plan: InsertPlan<C>
            if let made = plans[entityKey] {
                plan = made
            } else {
                let entity = permanentIDs[index].entity
                plan = try InsertPlan(entity: entity, schema: schema, writers: columnWriters(for: entity), on: connection)
                plans[entityKey] = plan
            }
            var end = index + 1
            while end < inserts.endIndex, permanentIDs[end]._entityIdentity == entityKey { end += 1 }
            while index < end {
                let rows = index..<(index + plan.rowsForNextStatement(remaining: end - index))
                insertedRows += try plan.insert(inserts[rows], ids: permanentIDs[rows], resolve: ids.resolve)
                index = rows.upperBound
            }
        }
        return insertedRows
    }

    /// Step 3: updates.
    ///
    /// Rows that change the same properties of the same entity share one statement. Under the `.fail` policy a row
    /// whose base values came with the request is built as saved from them (the version check proved the row held
    /// them); the others are returned to be read back.
    private func writeUpdates<C: RelationalWriteConnection>(
        _ request: StoreSaveRequest, ids: PermanentIDs, statements: inout SaveStatements<C.Statement>, on connection: C
    ) throws -> (built: [NSManagedObjectID: RowSnapshot], readBack: [NSManagedObjectID]) {
        var updatedRows: [NSManagedObjectID: RowSnapshot] = [:]
        var readBack: [NSManagedObjectID] = []
        for update in request.updates {
            let entity = update.objectID.entity
            let changes = update.changes.sorted(by: { $0.key < $1.key })
            let indexes = changes.map(\.key)
            let statement = try statements.statement(.update(entity: ObjectIdentifier(entity), indexes: indexes), on: connection) {
                let columns = indexes.flatMap { schema.columnNames(for: entity.allProperties[$0]) }
                let assignments = (columns.map { "\(dialect.quote($0)) = ?" } + ["Z_OPT = Z_OPT + 1"]).joined(separator: ", ")
                return "UPDATE \(dialect.quote(schema.tableName(for: entity))) SET \(assignments)"
            }
            var saved = request.conflictPolicy == .fail ? update.base.flatMap { $0.count == entity.allProperties.count ? $0 : nil } : nil
            let writers = columnWriters(for: entity)
            try writeRow(
                statement, update.objectID, expectedVersion: update.expectedVersion, policy: request.conflictPolicy, doing: "update",
                on: connection
            ) { row in
                for (index, value) in changes {
                    let read = try writers[index].bind(value, into: &row, resolve: ids.resolve)
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
    private func writeLinkChanges(
        _ linkChanges: [StoreSaveRequest.LinkChange], ids: PermanentIDs, on connection: some RelationalWriteConnection
    ) throws {
        for change in linkChanges.sorted(by: { !$0.isInsert && $1.isInsert }) {
            let s = SQLArgument.integer(try ids.resolve(change.source).primaryKey)
            let d = SQLArgument.integer(try ids.resolve(change.destination).primaryKey)
            let link = schema.toManyLink(for: change.relationship)
            if case .inverseForeignKey(let column) = link, change.relationship.inverseRelationship == nil,
                let destinationEntity = change.relationship.destinationEntity
            {
                let table = dialect.quote(schema.tableName(for: destinationEntity))
                let column = dialect.quote(column)
                try connection.run(
                    sql: dialect.finalize(
                        change.isInsert
                            ? "UPDATE \(table) SET \(column) = ? WHERE Z_PK = ?"
                            : "UPDATE \(table) SET \(column) = NULL WHERE \(column) = ? AND Z_PK = ?"),
                    arguments: [s, d])
                continue
            }
            guard case .joinTable(let name, let source, let destination) = link else { continue }
            if change.isInsert {
                try connection.run(sql: dialect.insertIgnoringDuplicates(into: name, columns: [source, destination]), arguments: [s, d])
            } else {
                try connection.run(
                    sql: dialect.finalize(
                        "DELETE FROM \(dialect.quote(name)) WHERE \(dialect.quote(source)) = ? AND \(dialect.quote(destination)) = ?"),
                    arguments: [s, d])
            }
        }
    }

    /// Step 4 too: the order of ordered relationships, as positions from 1 in their order column.
    private func writeOrderChanges(
        _ orderChanges: [StoreSaveRequest.OrderChange], ids: PermanentIDs, on connection: some RelationalWriteConnection
    ) throws {
        for change in orderChanges {
            guard let order = schema.orderColumn(for: change.relationship), let destination = change.relationship.destinationEntity else {
                continue
            }
            let source = try ids.resolve(change.source).primaryKey
            let sql: String
            switch schema.toManyLink(for: change.relationship) {
            case .inverseForeignKey(let column):
                sql =
                    "UPDATE \(dialect.quote(schema.tableName(for: destination))) SET \(dialect.quote(order)) = ? WHERE Z_PK = ? AND \(dialect.quote(column)) = ?"
            case .joinTable(let name, let sourceColumn, let destinationColumn):
                sql =
                    "UPDATE \(dialect.quote(name)) SET \(dialect.quote(order)) = ? WHERE \(dialect.quote(destinationColumn)) = ? AND \(dialect.quote(sourceColumn)) = ?"
            }
            let statement = try connection.prepare(sql: dialect.finalize(sql))
            for (position, id) in change.destinations.enumerated() {
                let key = try ids.resolve(id).primaryKey
                try statement.run { row in
                    try row.bind(Int64(position + 1))
                    try row.bind(key)
                    try row.bind(source)
                }
            }
        }
    }

    /// Step 5: deletes, with the join-table rows that point at them.
    private func writeDeletes<C: RelationalWriteConnection>(
        _ request: StoreSaveRequest, statements: inout SaveStatements<C.Statement>, on connection: C
    ) throws {
        for delete in request.deletes {
            let entity = delete.objectID.entity
            let statement = try statements.statement(.delete(entity: ObjectIdentifier(entity)), on: connection) {
                "DELETE FROM \(dialect.quote(schema.tableName(for: entity)))"
            }
            try writeRow(
                statement, delete.objectID, expectedVersion: delete.expectedVersion, policy: request.conflictPolicy, doing: "delete",
                on: connection)
            let key = SQLArgument.integer(delete.objectID.primaryKey)
            for relationship in entity.allRelationships where relationship.isToMany {
                switch schema.toManyLink(for: relationship) {
                case .joinTable(let name, let source, _):
                    try connection.run(
                        sql: dialect.finalize("DELETE FROM \(dialect.quote(name)) WHERE \(dialect.quote(source)) = ?"), arguments: [key])
                case .inverseForeignKey(let column):
                    // A hidden foreign key (no inverse to clear it) no longer points at the deleted row.
                    guard relationship.inverseRelationship == nil, let destination = relationship.destinationEntity else { continue }
                    let column = dialect.quote(column)
                    try connection.run(
                        sql: dialect.finalize(
                            "UPDATE \(dialect.quote(schema.tableName(for: destination))) SET \(column) = NULL WHERE \(column) = ?"),
                        arguments: [key])
                }
            }
        }
    }

    /// Runs an UPDATE or DELETE of one row (a statement from `SaveStatements`, which ends in its row filter), checking
    /// its version under the `.fail` policy; a row changed or deleted by someone else is a merge conflict that aborts
    /// the save.
    private func writeRow<C: RelationalWriteConnection>(
        _ statement: C.Statement, _ id: NSManagedObjectID, expectedVersion: Int64, policy: StoreSaveRequest.ConflictPolicy,
        doing what: String, on connection: C, values: (inout C.Statement.Binder) throws -> Void = { _ in }
    ) throws {
        let changed = try statement.run { row in
            try values(&row)
            try row.bind(id.primaryKey)
            if policy == .fail { try row.bind(expectedVersion) }
        }
        if changed == 0 { throw try conflict(id, doing: what, on: connection) }
    }

    private func conflict(_ id: NSManagedObjectID, doing what: String, on connection: some RelationalConnection) throws -> CoreDataError {
        var exists = false
        try connection.forEachRow(
            sql: dialect.finalize("SELECT Z_PK FROM \(dialect.quote(schema.tableName(for: id.entity))) WHERE Z_PK = ?"),
            arguments: [.integer(id.primaryKey)]
        ) { _ in exists = true }
        let why = exists ? "was changed by another context or process since it was read" : "was deleted by another context or process"
        return CoreDataError(
            .managedObjectMerge,
            "Could not \(what) \(id.entity.name) \(id.uriRepresentation().absoluteString): it \(why) (optimistic locking conflict). Nothing was saved; refresh the object or set a merge policy.",
            entityName: id.entity.name)
    }
}

/// A save's UPDATE and DELETE statements of one row, prepared on first use and dropped with the save, by what they do.
private struct SaveStatements<Statement: RelationalStatement> {
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
    mutating func statement<C: RelationalWriteConnection>(_ shape: Shape, on connection: C, sql: () -> String) throws -> Statement
    where C.Statement == Statement {
        if let statement = prepared[shape] { return statement }
        let statement = try connection.prepare(sql: connection.dialect.finalize(sql() + rowFilter))
        prepared[shape] = statement
        return statement
    }
}

/// How the rows of one entity are inserted: the statements, prepared once per save, and how each property is written.
///
/// Where the back end has a bulk statement (PostgreSQL's `INSERT … SELECT * FROM unnest(…)` of one array per column),
/// runs of rows go through it, up to `maximumBulkRows` per execution: one round trip to the server instead of one per
/// few rows. Otherwise rows go `batchRows` at a time through one multi-row `INSERT … VALUES (…), (…), …` where the
/// entity's columns allow it: each execution of a statement costs the engine opening and closing its table cursor,
/// about a third of writing a row of ten attributes one at a time in SQLite.
final class InsertPlan<C: RelationalWriteConnection> {
    /// At most this many rows per statement (fewer when the entity has so many columns that the engine's limit on
    /// parameters would be reached).
    static var maximumBatchRows: Int { 32 }
    /// At most this many rows per execution of a bulk statement (its arrays are built in memory before they are sent).
    static var maximumBulkRows: Int { 5_000 }

    let entity: NSEntityDescription
    let entityNumber: Int64
    /// What each property writes, in property order.
    let kinds: [ColumnWriter.Kind]
    /// How each property is written (a plain attribute value goes the inline way `kinds` allows; others through these).
    let writers: [ColumnWriter]
    let schema: RelationalSchema
    /// How many rows one execution of the batch statement writes (1: no batch statement).
    let batchRows: Int
    /// The statement's text up to `VALUES `, and the number of parameters of one row.
    private let head: String
    private let columnCount: Int
    private let connection: C
    private let single: C.Statement
    private var batch: C.Statement?
    /// The back end's statement taking any number of rows, if it has one.
    private let bulk: C.Statement?

    /// `writers`: how each of the entity's properties is written (the store's, worked out when it opened).
    init(entity: NSEntityDescription, schema: RelationalSchema, writers: [ColumnWriter], on connection: C) throws {
        let dialect = connection.dialect
        let names = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version] + entity.allProperties.flatMap(schema.columnNames(for:))
        let table = dialect.quote(schema.tableName(for: entity))
        head = "INSERT INTO \(table) (\(names.map(dialect.quote).joined(separator: ", "))) VALUES "
        columnCount = names.count
        self.connection = connection
        single = try connection.prepare(sql: dialect.finalize(head + Self.tuples(1, columns: names.count)))
        batchRows = max(1, min(Self.maximumBatchRows, connection.parameterLimit / names.count))
        // Every new row has the entity's number and version 1: literals, not arrays.
        let literals = [1: String(entity.entityID), 2: "1"]
        if let sql = dialect.bulkInsert(intoQuoted: table, columns: names.map(dialect.quote), literals: literals) {
            let declared = Dictionary(schema.table(for: entity).columns.map { ($0.name, $0.type) }, uniquingKeysWith: { first, _ in first })
            bulk = try connection.prepareBulk(
                sql: sql,
                columns: names.indices.map { index in
                    (names[index], literals[index] == nil ? dialect.columnType(declared[names[index]] ?? "INTEGER") : nil)
                })
        } else {
            bulk = nil
        }
        self.entity = entity
        entityNumber = Int64(entity.entityID)
        self.writers = writers
        kinds = writers.map(\.kind)
        self.schema = schema
    }

    /// `rows` groups of `columns` placeholders.
    private static func tuples(_ rows: Int, columns: Int) -> String {
        let tuple = "(" + Array(repeating: "?", count: columns).joined(separator: ", ") + ")"
        return Array(repeating: tuple, count: rows).joined(separator: ", ")
    }

    /// How many of `remaining` rows (more than 0) the next statement writes: up to `maximumBulkRows` with a bulk
    /// statement when more than `batchRows` remain (a few rows cost the same either way), else `batchRows` or 1.
    func rowsForNextStatement(remaining: Int) -> Int {
        if goesInBulk(remaining) { return min(remaining, Self.maximumBulkRows) }
        return remaining >= batchRows ? batchRows : 1
    }

    /// Whether `rows` rows take the bulk statement (there is one, and a few rows cost the same either way).
    private func goesInBulk(_ rows: Int) -> Bool { bulk != nil && rows > batchRows }

    /// The statement writing `rows` rows, as `rowsForNextStatement` counts them.
    ///
    /// The batch statement has parameters for exactly `batchRows` rows: any other count would leave some bound to the
    /// previous execution's values.
    private func statement(rows: Int) throws -> C.Statement {
        if rows == 1 { return single }
        if goesInBulk(rows), let bulk { return bulk }
        precondition(rows == batchRows, "InsertPlan writes 1 or \(batchRows) rows at a time, not \(rows)")
        if let batch { return batch }
        let made = try connection.prepare(sql: connection.dialect.finalize(head + Self.tuples(rows, columns: columnCount)))
        batch = made
        return made
    }

    /// Inserts the rows of `inserts` (as many as `rowsForNextStatement` allows) under the permanent `ids`, and returns their snapshots:
    /// the values written, except those that read back differently.
    func insert(
        _ inserts: ArraySlice<StoreSaveRequest.Insert>, ids: ArraySlice<NSManagedObjectID>,
        resolve: (NSManagedObjectID) throws -> NSManagedObjectID
    ) throws -> [RowSnapshot] {
        let rows = inserts.count
        precondition(rows == ids.count, "one ID per insert")
        let statement = try statement(rows: rows)
        var snapshots: [RowSnapshot] = []
        snapshots.reserveCapacity(rows)
        try send(statement, rows: rows) { row in
            for (insert, id) in zip(inserts.indices, ids) {  // by index: no copy of each insert
                let values = try bind(inserts[insert].values, primaryKey: id.primaryKey, into: &row, resolve: resolve)
                snapshots.append(RowSnapshot(objectID: id, version: 1, values: values))
            }
        }
        return snapshots
    }

    /// Inserts rows (as many as `rowsForNextStatement` allows) under consecutive primary keys from `firstKey`, making no snapshot: a
    /// batch insert's rows, which set no relationship.
    func insertRows(_ rows: ArraySlice<[SnapshotValue]>, firstKey: Int64) throws {
        let statement = try statement(rows: rows.count)
        try send(statement, rows: rows.count) { row in
            var key = firstKey
            for index in rows.indices {
                _ = try bind(rows[index], primaryKey: key, into: &row, resolve: { $0 })
                key += 1
            }
        }
    }

    /// Runs a statement of `rows` rows: a bulk one is sent without waiting (the next statement waits for it), so the
    /// next rows are bound while the server writes these; others run as any statement does.
    private func send(_ statement: C.Statement, rows: Int, _ body: (inout C.Statement.Binder) throws -> Void) throws {
        if goesInBulk(rows) { try statement.send(body) } else { try statement.run(body) }
    }

    /// Binds one row's parameters and returns its snapshot values as `insert` does.
    private func bind(
        _ values: [SnapshotValue], primaryKey: Int64, into row: inout C.Statement.Binder,
        resolve: (NSManagedObjectID) throws -> NSManagedObjectID
    ) throws -> [SnapshotValue] {
        // The values as stored: `values` itself unless one reads back differently, copied only then (a copy made
        // ahead of the loop would cost every row an array).
        var stored: [SnapshotValue]?
        let coreDataLayout = schema.isAppleLayout
        try row.bind(primaryKey)
        try row.bind(entityNumber)
        try row.bind(1 as Int64)
        try kinds.withUnsafeBufferPointer { kinds in
            for index in kinds.indices {
                // The common case inline: an attribute value, bound as its column stores it.
                if case .attribute(let type) = kinds[index], case .attribute(let value) = values[index] {
                    do {
                        if let read = try row.bind(value, as: type, coreDataLayout: coreDataLayout) {
                            if stored == nil { stored = values }
                            stored![index] = .attribute(read)
                        }
                    } catch let loss as DecimalPrecisionLoss {
                        throw loss.error(entity.allProperties[index])
                    }
                    continue
                }
                if let read = try writers[index].bind(values[index], into: &row, resolve: resolve) {
                    if stored == nil { stored = values }
                    stored![index] = read
                }
            }
        }
        return stored ?? values
    }
}
