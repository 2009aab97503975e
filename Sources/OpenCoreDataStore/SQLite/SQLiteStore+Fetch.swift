import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel
import OpenCoreDataPredicate

// Fetching: a request's SQL (table, joins, filter, order, window), its rows, IDs, dictionaries and counts, and the
// key-and-values reads a fetched results controller makes.
extension SQLiteStore {
    // MARK: Fetching

    /// A fetch's SQL, piece by piece: the table and joins, the filter with its arguments, the order and the window.
    struct Query {
        var compiler: SQLPredicateCompiler
        let table: SQLiteSchema.Table
        let whereClause: String
        let arguments: [SQLArgument]
        let order: String
        let window: String
        /// The only entity whose rows the query can return, when the table holds no other (its rows' `Z_ENT` need not
        /// be read, so an index on the sort columns covers the query).
        let onlyEntity: NSEntityDescription?

        var from: String { ([sqlQuote(table.name) + " t0"] + compiler.joins).joined(separator: " ") }
        /// The columns that make a row's object ID.
        var idColumns: String { onlyEntity == nil ? "t0.\(SQLColumns.primaryKey), t0.\(SQLColumns.entity)" : "t0.\(SQLColumns.primaryKey)" }
    }

    func query(for request: StoreFetchRequest) throws -> Query {
        let entity = request.entity
        var compiler = SQLPredicateCompiler(entity: entity, mapping: schema)
        var whereParts: [String] = []
        var arguments: [SQLArgument] = []
        let table = schema.table(for: entity)
        let entities = request.includesSubentities ? entity.selfAndDescendants : [entity]
        let tableEntityCount = SQLiteSchema.treeOrder(table.rootEntity).count
        if entities.count != tableEntityCount {
            whereParts.append("t0.\(SQLColumns.entity) IN (\(entities.map { String($0.entityID) }.joined(separator: ", ")))")
        }
        if let predicate = request.predicate {
            let fragment = try compiler.compile(predicate)
            whereParts.append(fragment.sql)
            arguments += fragment.arguments
        }
        let order = try compiler.orderTerms(request.sortDescriptors) + ["t0.\(SQLColumns.primaryKey) ASC"]
        var window = ""
        if request.fetchLimit > 0 || request.fetchOffset > 0 {
            window = " LIMIT \(request.fetchLimit > 0 ? request.fetchLimit : -1) OFFSET \(max(0, request.fetchOffset))"
        }
        return Query(
            compiler: compiler, table: table, whereClause: whereParts.isEmpty ? "" : " WHERE " + whereParts.joined(separator: " AND "),
            arguments: arguments, order: order.joined(separator: ", "), window: window,
            onlyEntity: tableEntityCount == 1 ? table.rootEntity : nil)
    }

    /// The object ID in the first columns of a row selected with `Query.idColumns`.
    func objectID(in row: StatementColumns, onlyEntity: NSEntityDescription?) throws -> NSManagedObjectID {
        try objectID(pk: row.integer(0), entityID: onlyEntity == nil ? Int(row.integer(1)) : 0, onlyEntity: onlyEntity)
    }

    /// A row's object ID: of `onlyEntity` when the query's table holds only it, else of the entity numbered `entityID`.
    func objectID(pk: Int64, entityID: Int, onlyEntity: NSEntityDescription?) throws -> NSManagedObjectID {
        if let onlyEntity { return NSManagedObjectID(entity: onlyEntity, storeIdentifier: identifier, primaryKey: pk) }
        return try objectID(pk: pk, entityID: entityID)
    }

    package func execute(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        var query = try query(for: request)
        let (whereClause, arguments, order, window, onlyEntity) = (
            query.whereClause, query.arguments, query.order, query.window, query.onlyEntity
        )
        switch request.resultKind {
        case .count:
            let inner = "SELECT t0.\(SQLColumns.primaryKey) FROM \(query.from)\(whereClause)\(window)"
            let sql = "SELECT COUNT(*) FROM (\(inner))"
            return .count(
                try read { db in
                    var count = 0
                    try db.forEachRow(sql: sql, arguments: arguments) { row in count = Int(row.integer(0)) }
                    return count
                })
        case .objectIDs:
            let sql = "SELECT \(query.idColumns) FROM \(query.from)\(whereClause) ORDER BY \(order)\(window)"
            return .objectIDs(
                try read { db in
                    var ids: [NSManagedObjectID] = []
                    try db.forEachRow(sql: sql, arguments: arguments) { row in ids.append(try objectID(in: row, onlyEntity: onlyEntity)) }
                    return ids
                })
        case .rows:
            let sql = "SELECT \(selectColumnsByTable[query.table.name]!) FROM \(query.from)\(whereClause) ORDER BY \(order)\(window)"
            return .rows(
                try read { db in
                    var rows: [RowSnapshot] = []
                    try db.forEachRow(sql: sql, arguments: arguments) { row in rows.append(try decode(row, onlyEntity: onlyEntity)) }
                    countRowsRead(rows.count)
                    return rows
                })
        case .dictionaries(let keyPaths):
            var columns: [(String, NSAttributeType?)] = []
            for keyPath in keyPaths { columns.append(try query.compiler.valueExpression(forKeyPath: keyPath)) }
            let select = columns.map(\.0).joined(separator: ", ")
            let distinct = request.returnsDistinctResults ? "DISTINCT " : ""
            let orderClause = request.returnsDistinctResults ? "" : " ORDER BY \(order)"
            let sql = "SELECT \(distinct)\(select) FROM \(query.from)\(whereClause)\(orderClause)\(window)"
            return .dictionaries(
                try read { db in
                    var result: [[String: AttributeValue]] = []
                    try db.forEachRow(sql: sql, arguments: arguments) { row in
                        var dict: [String: AttributeValue] = [:]
                        for (i, keyPath) in keyPaths.enumerated() { dict[keyPath] = Self.value(in: row, at: i, type: columns[i].1) }
                        result.append(dict)
                    }
                    return result
                })
        }
    }

    /// A selected value as an attribute value; a column without an attribute type holds a primary key.
    static func value(in row: StatementColumns, at index: Int, type: NSAttributeType?) -> AttributeValue {
        if let type { return row.attributeValue(index, type: type) ?? .null }
        return row.optionalInteger(index).map { .integer($0) } ?? .null
    }

    /// The SQL of `forEachObjectID`: the ID columns (`Z_PK`, and `Z_ENT` unless the table holds one entity), then
    /// one column per key path.
    func idsAndValuesQuery(_ request: StoreFetchRequest, values keyPaths: [String]) throws -> (
        sql: String, arguments: [SQLArgument], types: [NSAttributeType?], onlyEntity: NSEntityDescription?
    ) {
        var query = try query(for: request)
        var columns: [(String, NSAttributeType?)] = []
        for keyPath in keyPaths { columns.append(try query.compiler.valueExpression(forKeyPath: keyPath)) }
        let select = ([query.idColumns] + columns.map(\.0)).joined(separator: ", ")
        let sql = "SELECT \(select) FROM \(query.from)\(query.whereClause) ORDER BY \(query.order)\(query.window)"
        return (sql, query.arguments, columns.map(\.1), query.onlyEntity)
    }

    package func forEachResultKey(
        _ request: StoreFetchRequest, values keyPaths: [String],
        _ body: (_ entityID: Int, _ primaryKey: Int64, _ values: ResultKeyValues) throws -> Void
    ) throws {
        let (sql, arguments, types, onlyEntity) = try idsAndValuesQuery(request, values: keyPaths)
        let first = onlyEntity == nil ? 2 : 1
        let count = types.count
        var columns = types.map(ResultColumn.init)
        // One buffer of values for every row, refilled in place: a value the row repeats is not even decoded.
        let values = UnsafeMutablePointer<AttributeValue>.allocate(capacity: max(count, 1))
        values.initialize(repeating: .null, count: count)
        defer {
            values.deinitialize(count: count)
            values.deallocate()
        }
        var lastEntityID = onlyEntity?.entityID ?? 0
        try columns.withUnsafeMutableBufferPointer { columns in
            try read { db in
                try db.forEachRow(sql: sql, arguments: arguments) { row in
                    let pk = row.integer(0)
                    if onlyEntity == nil {
                        let entityID = Int(row.integer(1))
                        if entityID != lastEntityID {
                            guard decoders[entityID] != nil else {
                                throw CoreDataError(
                                    .persistentStoreOperation,
                                    "Row \(pk) has entity number \(entityID), which the model does not have; the store is damaged.")
                            }
                            lastEntityID = entityID
                        }
                    }
                    var changed: UInt64 = 0
                    for i in 0..<count where !columns[i].repeats(in: row, at: first + i) {
                        values[i] = Self.value(in: row, at: first + i, type: columns[i].type)
                        columns[i].remember(row, at: first + i)
                        changed |= ResultKeyValues.bit(i)
                    }
                    try body(lastEntityID, pk, ResultKeyValues(base: values, count: count, changedBits: changed))
                }
            }
        }
    }

    /// A column of `forEachResultKey`: its type and, for text, the bytes it held in the previous row.
    ///
    /// A column that
    /// repeats them keeps its decoded value (a sort's leading key, a section key); one that rarely repeats (a title)
    /// stops being compared.
    struct ResultColumn {
        let type: NSAttributeType?
        private let isText: Bool
        private var bytes: [UInt8]?
        private var same = 0
        private var changed = 0

        init(type: NSAttributeType?) {
            self.type = type
            isText = type == .stringAttributeType
        }

        /// Whether comparing still pays: past 64 changes, only if rows repeated more often than not.
        private var isWorthComparing: Bool { isText && (changed <= 64 || same >= changed) }

        /// Whether the column holds the previous row's bytes in this row (counted either way, while compared).
        mutating func repeats(in row: StatementColumns, at index: Int) -> Bool {
            guard isWorthComparing, let bytes else { return false }
            if row.textEquals(index, bytes) {
                same += 1
                return true
            }
            changed += 1
            return false
        }

        /// Keeps the column's bytes in this row for the next comparison (while compared).
        mutating func remember(_ row: StatementColumns, at index: Int) {
            if isWorthComparing { bytes = row.textBytes(index) }
        }
    }

    func objectID(pk: Int64, entityID: Int) throws -> NSManagedObjectID {
        guard let entity = decoders[entityID]?.entity else {
            throw CoreDataError(
                .persistentStoreOperation, "Row \(pk) has entity number \(entityID), which the model does not have; the store is damaged.")
        }
        return NSManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: pk)
    }

    /// A row as a snapshot of its entity: `onlyEntity` when the table holds no other (its `Z_ENT` is then not read,
    /// as the fetch that found the row did not filter on it), else the entity its `Z_ENT` names.
    func decode(_ row: StatementColumns, onlyEntity: NSEntityDescription?) throws -> RowSnapshot {
        if let onlyEntity, let decoder = decoders[onlyEntity.entityID] { return try decoder.decode(row) }
        let entityID = Int(row.integer(1))
        guard let decoder = decoders[entityID] else {
            throw CoreDataError(
                .persistentStoreOperation, "A row has entity number \(entityID), which the model does not have; the store is damaged.")
        }
        return try decoder.decode(row)
    }

    package func rows(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID: RowSnapshot] {
        let found = try read { db in try self.rows(for: objectIDs, in: db) }
        countRowsRead(found.count)
        return found
    }

    /// The stored rows of the given objects, read with `db` (500 primary keys per statement).
    func rows(for objectIDs: [NSManagedObjectID], in db: Database) throws -> [NSManagedObjectID: RowSnapshot] {
        var result: [NSManagedObjectID: RowSnapshot] = [:]
        let byTable = Dictionary(grouping: objectIDs.filter { !$0.isTemporaryID }) { schema.tableName(for: $0.entity) }
        for (table, ids) in byTable {
            let root = schema.table(for: ids[0].entity).rootEntity
            let onlyEntity = root.subentities.isEmpty ? root : nil
            for chunk in stride(from: 0, to: ids.count, by: 500) {
                let slice = ids[chunk..<min(chunk + 500, ids.count)]
                let sql =
                    "SELECT \(selectColumnsByTable[table]!) FROM \(sqlQuote(table)) t0 WHERE t0.Z_PK IN (\(slice.map { String($0.primaryKey) }.joined(separator: ",")))"
                try db.forEachRow(sql: sql) { row in
                    let snapshot = try decode(row, onlyEntity: onlyEntity)
                    result[snapshot.objectID] = snapshot
                }
            }
        }
        return result
    }

    package func relatedObjectIDs(of objectID: NSManagedObjectID, relationship: NSRelationshipDescription) throws -> [NSManagedObjectID] {
        guard !objectID.isTemporaryID, let destination = relationship.destinationEntity else { return [] }
        let table = sqlQuote(schema.tableName(for: destination))
        let sql: String
        // An ordered relationship's destinations in their order (those without one last), else by primary key.
        let order = schema.orderColumn(for: relationship)
        switch schema.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            let by = order.map { "\(sqlQuote($0)) IS NULL, \(sqlQuote($0)), " } ?? ""
            sql = "SELECT Z_PK, Z_ENT FROM \(table) WHERE \(sqlQuote(column)) = ? ORDER BY \(by)Z_PK"
        case .joinTable(let name, let source, let dest):
            let by = order.map { "j.\(sqlQuote($0)) IS NULL, j.\(sqlQuote($0)), " } ?? ""
            sql =
                "SELECT d.Z_PK, d.Z_ENT FROM \(sqlQuote(name)) j JOIN \(table) d ON d.Z_PK = j.\(sqlQuote(dest)) WHERE j.\(sqlQuote(source)) = ? ORDER BY \(by)d.Z_PK"
        }
        return try read { db in
            var ids: [NSManagedObjectID] = []
            try db.forEachRow(sql: sql, arguments: [.integer(objectID.primaryKey)]) { row in
                ids.append(try self.objectID(pk: row.integer(0), entityID: Int(row.integer(1))))
            }
            return ids
        }
    }
}
