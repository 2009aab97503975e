import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// The part of a SQL store that every back end shares: the store's tables (`schema`), how its rows decode into
/// snapshots, and the reads a context makes — fetches of every result kind, rows by ID, a to-many's destinations, the
/// key-and-values reads of a fetched results controller — written once over `RelationalConnection`.
///
/// A back end opens its connections, keeps the transaction and maps its errors; everything it reads goes through here,
/// in its dialect.
package struct RelationalCore: @unchecked Sendable {
    /// The store's UUID, which object IDs carry.
    package let identifier: String
    package let schema: RelationalSchema
    package let dialect: any SQLDialect
    /// A decoder per concrete entity, by entity number.
    let decoders: [Int: RowDecoder]
    /// How each property of each concrete entity is written, by entity number, then property index (worked out once:
    /// saves and batch inserts bind through them, see `columnWriters(for:)`).
    private let columnWriters: [Int: [ColumnWriter]]
    /// `t0.Z_PK, t0.Z_ENT, t0.Z_OPT, t0.<column>…` per table name: every column a row decodes from.
    let selectColumns: [String: String]
    /// The reads of rows by key written so far, by table and number of keys (batch faulting asks for the same ones
    /// again and again; writing one was a tenth of reading a batch of 20 rows).
    private let keyedReads = KeyedReadCache()

    package init(identifier: String, schema: RelationalSchema, dialect: any SQLDialect, externalData: URL?) {
        self.identifier = identifier
        self.schema = schema
        self.dialect = dialect
        var selectColumns: [String: String] = [:]
        for table in schema.tables {
            let columns = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version] + table.columns.map(\.name)
            selectColumns[table.name] = columns.map { "t0." + dialect.quote($0) }.joined(separator: ", ")
        }
        self.selectColumns = selectColumns
        var decoders: [Int: RowDecoder] = [:]
        for entity in schema.model.entities {
            decoders[entity.entityID] = RowDecoder(
                entity: entity, schema: schema, model: schema.model, storeID: identifier, externalData: externalData)
        }
        self.decoders = decoders
        var columnWriters: [Int: [ColumnWriter]] = [:]
        for entity in schema.model.entities {
            columnWriters[entity.entityID] = entity.allProperties.map { ColumnWriter($0, schema: schema) }
        }
        self.columnWriters = columnWriters
    }

    /// How each property of `entity` is written, by property index.
    func columnWriters(for entity: NSEntityDescription) -> [ColumnWriter] {
        columnWriters[entity.entityID] ?? entity.allProperties.map { ColumnWriter($0, schema: schema) }
    }

    /// The plan of a request on this store's tables.
    package func plan(_ request: StoreFetchRequest) throws -> FetchPlan {
        try FetchPlan(request, schema: schema, dialect: dialect)
    }

    // MARK: Object IDs and rows

    /// The object ID in the first columns of a row selected with `FetchPlan.idColumns`.
    func objectID(in row: some RelationalRow, onlyEntity: NSEntityDescription?) throws -> NSManagedObjectID {
        try objectID(pk: row.integer(0), entityID: onlyEntity == nil ? Int(row.integer(1)) : 0, onlyEntity: onlyEntity)
    }

    /// A row's object ID: of `onlyEntity` when the query's table holds only it, else of the entity numbered `entityID`.
    func objectID(pk: Int64, entityID: Int, onlyEntity: NSEntityDescription?) throws -> NSManagedObjectID {
        if let onlyEntity { return NSManagedObjectID(entity: onlyEntity, storeIdentifier: identifier, primaryKey: pk) }
        return try objectID(pk: pk, entityID: entityID)
    }

    func objectID(pk: Int64, entityID: Int) throws -> NSManagedObjectID {
        guard let entity = decoders[entityID]?.entity else { throw Self.unknownEntity(entityID, row: pk) }
        return NSManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: pk)
    }

    static func unknownEntity(_ entityID: Int, row pk: Int64?) -> CoreDataError {
        CoreDataError(
            .persistentStoreOperation,
            "\(pk.map { "Row \($0)" } ?? "A row") has entity number \(entityID), which the model does not have; the store is damaged.")
    }

    /// A row as a snapshot of its entity: `onlyEntity` when the table holds no other (its `Z_ENT` is then not read, as
    /// the fetch that found the row did not filter on it), else the entity its `Z_ENT` names.
    ///
    /// `requested`, when given, finds the ID that was asked for by primary key: the snapshot carries that one when it
    /// names the row's entity, rather than a new ID equal to it.
    func decode(
        _ row: some RelationalRow, onlyEntity: NSEntityDescription?, requested: ((Int64) -> NSManagedObjectID?)? = nil
    ) throws -> RowSnapshot {
        let decoder: RowDecoder
        if let onlyEntity, let only = decoders[onlyEntity.entityID] {
            decoder = only
        } else {
            let entityID = Int(row.integer(1))
            guard let found = decoders[entityID] else { throw Self.unknownEntity(entityID, row: nil) }
            decoder = found
        }
        if let requested, let id = requested(row.integer(0)), id.entity === decoder.entity, id.storeIdentifier == identifier {
            return try decoder.decode(row, as: id)
        }
        return try decoder.decode(row)
    }

    // MARK: Reads

    /// Runs a fetch request.
    package func execute(_ request: StoreFetchRequest, on connection: some RelationalConnection) throws -> StoreFetchResult {
        if let sorted = try executeSortingInMemory(request, on: connection) { return sorted }
        var plan = try plan(request)
        let (arguments, onlyEntity) = (plan.arguments, plan.onlyEntity)
        switch request.resultKind {
        case .count:
            var count = 0
            try connection.forEachRow(sql: plan.countSQL, arguments: arguments) { row in count = Int(row.integer(0)) }
            return .count(count)
        case .objectIDs:
            var ids: [NSManagedObjectID] = []
            try connection.forEachRow(sql: plan.objectIDsSQL, arguments: arguments) { row in
                ids.append(try objectID(in: row, onlyEntity: onlyEntity))
            }
            return .objectIDs(ids)
        case .rows:
            var rows: [RowSnapshot] = []
            try connection.forEachRow(sql: plan.rowsSQL(selectColumns: selectColumns[plan.table.name]!), arguments: arguments) { row in
                rows.append(try decode(row, onlyEntity: onlyEntity))
            }
            return .rows(rows)
        case .dictionaries(let keyPaths):
            // A distinct fetch cannot order by columns it does not select (PostgreSQL refuses, SQLite picks any row's):
            // with sorts, it reads its sort keys too, in no order and no window, and is sorted, made distinct and
            // windowed in memory, by the comparison the SQL uses.
            let inMemory = request.returnsDistinctResults && !request.sortDescriptors.isEmpty
            var extra: [String] = []
            for key in request.sortDescriptors.map(\.key) where inMemory && !keyPaths.contains(key) && !extra.contains(key) {
                extra.append(key)
            }
            let read = keyPaths + extra
            let (sql, types) = try plan.dictionariesSQL(read, distinct: request.returnsDistinctResults, windowed: !inMemory)
            var result: [[String: AttributeValue]] = []
            try connection.forEachRow(sql: sql, arguments: arguments) { row in
                var dict: [String: AttributeValue] = [:]
                for (i, keyPath) in read.enumerated() { dict[keyPath] = Self.value(in: row, at: i, type: types[i]) }
                result.append(dict)
            }
            return .dictionaries(inMemory ? request.orderedDistinct(result, droppingKeys: extra) : result)
        case .grouped(let query):
            let (sql, arguments, columns) = try plan.groupedSQL(
                query, sorts: request.sortDescriptors, distinct: request.returnsDistinctResults)
            // Where each object column's `Z_ENT` is, when `groupedSQL` read one (after the columns, in their order).
            var entityColumns: [Int: Int] = [:]
            for (i, column) in columns.enumerated()
            where column.type == nil && !column.isAggregate && column.entity?.subentities.isEmpty == false {
                entityColumns[i] = columns.count + entityColumns.count
            }
            var result: [[String: AttributeValue]] = []
            try connection.forEachRow(sql: sql, arguments: arguments) { row in
                var dict: [String: AttributeValue] = [:]
                for (i, column) in columns.enumerated() {
                    let name = query.columns[i].name
                    if let type = column.type {
                        dict[name] = row.attributeValue(i, type: type) ?? .null
                        continue
                    }
                    // An object: its ID's URI (the context makes the ID of it).
                    guard let pk = row.optionalInteger(i) else {
                        dict[name] = .null
                        continue
                    }
                    let entity = column.entity ?? request.entity
                    var id = NSManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: pk)
                    if let entityColumn = entityColumns[i], let entityID = row.optionalInteger(entityColumn) {
                        id = try objectID(pk: pk, entityID: Int(entityID))
                    }
                    dict[name] = .uri(id.uriRepresentation())
                }
                result.append(dict)
            }
            return .dictionaries(result)
        }
    }

    /// A selected value as an attribute value; a column without an attribute type holds a primary key.
    static func value(in row: some RelationalRow, at index: Int, type: NSAttributeType?) -> AttributeValue {
        if let type { return row.attributeValue(index, type: type) ?? .null }
        return row.optionalInteger(index).map { .integer($0) } ?? .null
    }

    /// Hands `body` each matching row's entity number, primary key and the values of `keyPaths`, in the request's order.
    ///
    /// One buffer of values serves every row, refilled in place: a text value the row repeats (a sort's leading key, a
    /// section key) is not even decoded again.
    package func forEachResultKey(
        _ request: StoreFetchRequest, values keyPaths: [String], on connection: some RelationalConnection,
        _ body: (_ entityID: Int, _ primaryKey: Int64, _ values: ResultKeyValues) throws -> Void
    ) throws {
        if try forEachResultKeySortingInMemory(request, values: keyPaths, on: connection, body) { return }
        var plan = try plan(request)
        let (sql, types) = try plan.idsAndValuesSQL(keyPaths)
        let (arguments, onlyEntity) = (plan.arguments, plan.onlyEntity)
        let first = onlyEntity == nil ? 2 : 1
        let count = types.count
        var columns = types.map(ResultColumn.init)
        let values = UnsafeMutablePointer<AttributeValue>.allocate(capacity: max(count, 1))
        values.initialize(repeating: .null, count: count)
        defer {
            values.deinitialize(count: count)
            values.deallocate()
        }
        var lastEntityID = onlyEntity?.entityID ?? 0
        try columns.withUnsafeMutableBufferPointer { columns in
            try connection.forEachRow(sql: sql, arguments: arguments) { row in
                let pk = row.integer(0)
                if onlyEntity == nil {
                    let entityID = Int(row.integer(1))
                    if entityID != lastEntityID {
                        guard decoders[entityID] != nil else { throw Self.unknownEntity(entityID, row: pk) }
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

    /// The stored rows of the given objects (500 primary keys per statement, bound as parameters to statements the
    /// connection may keep prepared: batch faulting reads the same shape again and again).
    package func rows(for objectIDs: [NSManagedObjectID], on connection: some RelationalConnection) throws -> [NSManagedObjectID:
        RowSnapshot]
    {
        var result: [NSManagedObjectID: RowSnapshot] = [:]
        result.reserveCapacity(objectIDs.count)
        try forEachRow(of: objectIDs, on: connection) { result[$0.objectID] = $0 }
        return result
    }

    /// `rows(for:on:)` by primary key, for objects of one table (`StoreEngine.rowsByPrimaryKey(for:)`).
    package func rowsByPrimaryKey(for objectIDs: [NSManagedObjectID], on connection: some RelationalConnection) throws -> [Int64:
        RowSnapshot]
    {
        var result: [Int64: RowSnapshot] = [:]
        result.reserveCapacity(objectIDs.count)
        try forEachRow(of: objectIDs, on: connection) { result[$0.objectID.primaryKey] = $0 }
        return result
    }

    /// Reads the stored rows of the given objects as `rows(for:on:)` does, handing each to `body` as it is read.
    package func forEachRow(
        of objectIDs: [NSManagedObjectID], on connection: some RelationalConnection, _ body: (RowSnapshot) throws -> Void
    ) throws {
        // (The usual case, IDs of one entity — a batch of a fetch, a fault —, is one table without grouping.)
        let oneEntity = objectIDs.first.map { first in objectIDs.allSatisfy { $0.entity === first.entity && !$0.isTemporaryID } } ?? false
        let byTable =
            oneEntity
            ? [schema.tableName(for: objectIDs[0].entity): objectIDs]
            : Dictionary(grouping: objectIDs.filter { !$0.isTemporaryID }) { schema.tableName(for: $0.entity) }
        for (table, ids) in byTable {
            let root = schema.table(for: ids[0].entity).rootEntity
            let onlyEntity = root.subentities.isEmpty ? root : nil
            for chunk in stride(from: 0, to: ids.count, by: 500) {
                let keys = ids[chunk..<min(chunk + 500, ids.count)]
                let parameters = KeyedReadSQL.parameterCount(for: keys.count, maximum: 500)
                let sql = keyedReads.sql(table: table, parameters: parameters) {
                    KeyedReadSQL.rows(table: table, selectColumns: selectColumns[table]!, parameters: parameters, dialect: dialect)
                }
                var arguments = keys.map { SQLArgument.integer($0.primaryKey) }
                if let last = arguments.last { arguments += repeatElement(last, count: parameters - arguments.count) }
                // Snapshots carry the IDs asked for (the objects' own), found by key: no new ID per row, and the
                // caller's lookups by them compare identical objects.
                let byKey = keys.sorted { $0.primaryKey < $1.primaryKey }
                let requested = { (pk: Int64) -> NSManagedObjectID? in
                    var (low, high) = (0, byKey.count)
                    while low < high {
                        let middle = (low + high) / 2
                        if byKey[middle].primaryKey < pk { low = middle + 1 } else { high = middle }
                    }
                    return low < byKey.count && byKey[low].primaryKey == pk ? byKey[low] : nil
                }
                try connection.forEachRow(reusing: sql, arguments: arguments) { row in
                    try body(try decode(row, onlyEntity: onlyEntity, requested: requested))
                }
            }
        }
    }

    /// The destinations of a to-many relationship of a stored object, in the relationship's order.
    package func relatedObjectIDs(
        of objectID: NSManagedObjectID, relationship: NSRelationshipDescription, on connection: some RelationalConnection
    ) throws -> [NSManagedObjectID] {
        guard !objectID.isTemporaryID, let sql = KeyedReadSQL.destinations(of: relationship, schema: schema, dialect: dialect) else {
            return []
        }
        var ids: [NSManagedObjectID] = []
        try connection.forEachRow(sql: sql, arguments: [.integer(objectID.primaryKey)]) { row in
            ids.append(try self.objectID(pk: row.integer(0), entityID: Int(row.integer(1))))
        }
        return ids
    }

    /// The destinations of a to-many relationship of each of several stored objects, 500 sources a statement (for
    /// prefetching): each source's in the relationship's order; sources with none are absent.
    package func relatedObjectIDs(
        ofEach objectIDs: [NSManagedObjectID], relationship: NSRelationshipDescription, on connection: some RelationalConnection
    ) throws -> [NSManagedObjectID: [NSManagedObjectID]] {
        let sources = objectIDs.filter { !$0.isTemporaryID }
        let byKey = Dictionary(sources.map { ($0.primaryKey, $0) }) { first, _ in first }
        var found: [NSManagedObjectID: [NSManagedObjectID]] = [:]
        for chunk in stride(from: 0, to: sources.count, by: 500) {
            let keys = sources[chunk..<min(chunk + 500, sources.count)]
            let parameters = KeyedReadSQL.parameterCount(for: keys.count, maximum: 500)
            guard let sql = KeyedReadSQL.destinations(ofEach: relationship, parameters: parameters, schema: schema, dialect: dialect) else {
                return [:]
            }
            var arguments = keys.map { SQLArgument.integer($0.primaryKey) }
            if let last = arguments.last { arguments += repeatElement(last, count: parameters - arguments.count) }
            try connection.forEachRow(reusing: sql, arguments: arguments) { row in
                guard let source = byKey[row.integer(0)] else { return }
                found[source, default: []].append(try self.objectID(pk: row.integer(1), entityID: Int(row.integer(2))))
            }
        }
        return found
    }
}

/// A column of `forEachResultKey`: its type and, for text, the bytes it held in the previous row.
///
/// A column that repeats them keeps its decoded value (a sort's leading key, a section key); one that rarely repeats
/// (a title) stops being compared.
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
    mutating func repeats(in row: some RelationalRow, at index: Int) -> Bool {
        guard isWorthComparing, let bytes else { return false }
        if row.textEquals(index, bytes) {
            same += 1
            return true
        }
        changed += 1
        return false
    }

    /// Keeps the column's bytes in this row for the next comparison (while compared).
    mutating func remember(_ row: some RelationalRow, at index: Int) {
        if isWorthComparing { bytes = row.textBytes(index) }
    }
}

/// The SQL of reads by key, written once per table and number of keys.
private final class KeyedReadCache: @unchecked Sendable {
    private let lock = NSLock()
    private var statements: [String: [Int: String]] = [:]

    func sql(table: String, parameters: Int, write: () -> String) -> String {
        if let sql = lock.withLock({ statements[table]?[parameters] }) { return sql }
        let sql = write()
        lock.withLock { statements[table, default: [:]][parameters] = sql }
        return sql
    }
}
