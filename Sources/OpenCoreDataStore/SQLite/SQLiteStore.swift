import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel
import OpenCoreDataPredicate

/// The SQLite persistent store, on GRDB: a `DatabasePool` in WAL mode for a file, a `DatabaseQueue` in memory.
///
/// Opening checks that the file is a SQLite database written by OpenCoreData for the same model (by version hash)
/// and creates the schema in an empty file. Every save is one transaction with optimistic locking (`Z_OPT`).
public final class SQLiteStore: PersistentStore, @unchecked Sendable {
    public let identifier: String
    public let url: URL?
    public let model: NSManagedObjectModel
    public let schema: SQLiteSchema
    public var type: String { url == nil ? NSInMemoryStoreType : NSSQLiteStoreType }

    let writer: any DatabaseWriter
    private let decoders: [Int: RowDecoder]
    private let selectColumnsByTable: [String: String]
    private let closedLock = NSLock()
    private var closed = false
    private var _rowsRead = 0

    /// How many rows fetches and faults have read so far (for tests and benchmarks that count work, not time).
    public var rowsRead: Int { closedLock.withLock { _rowsRead } }

    func countRowsRead(_ n: Int) { closedLock.withLock { _rowsRead += n } }

    /// Format of the store's own bookkeeping; bump when the layout changes.
    static let formatVersion = "1"

    /// Opens (or creates) a store.
    ///
    /// - Parameters:
    ///   - url: The SQLite file, or `nil` for a store in memory.
    ///   - model: The model; it is validated and frozen.
    ///   - readOnly: Open without writing anything (the file must already be a store).
    /// - Throws: `CoreDataError` — `.persistentStoreNotAStore` for a file that is not SQLite,
    ///   `.persistentStoreIncompatibleVersionHash` for a store made with another model, `.persistentStoreOpen` when
    ///   the file cannot be opened (missing folder, permissions, locked by another process).
    ///   - timeout: How long to wait for a lock another connection or process holds before failing.
    public init(url: URL?, model: NSManagedObjectModel, readOnly: Bool = false, timeout: TimeInterval = 5) throws {
        try model.validate()
        for entity in model.entities {
            for case let r as NSRelationshipDescription in entity.properties where r.isOrdered {
                throw CoreDataError(
                    .unsupported,
                    "Relationship '\(entity.name).\(r.name)' is ordered; ordered relationships are not supported by the SQLite store yet.",
                    entityName: entity.name, key: r.name)
            }
        }
        self.url = url
        self.model = model
        let schema = SQLiteSchema(model: model)
        self.schema = schema

        var config = Configuration()
        config.prepareDatabase { db in
            SQLiteFunctions.install(in: db)
            // Keep the -wal and -shm files when the last connection closes (as Apple's stores keep them): without a
            // non-empty -wal, GRDB's pool creates and drops a table on every read-write open to make one, which
            // rewrote the store's header and schema cookie each time the store was opened, even to read.
            guard !readOnly, url != nil else { return }
            var persist: CInt = 1
            _ = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
        }
        config.busyMode = .timeout(timeout)
        config.readonly = readOnly
        config.label = "OpenCoreData.SQLiteStore"
        let path = url?.path
        do {
            if let path {
                // Look before opening: a file that is not this project's store must not be switched to WAL mode,
                // written to, or left with -wal and -shm files.
                let state = try StoreFile.inspect(path)
                if readOnly {
                    guard state != .missing else { throw CoreDataError(.persistentStoreOpen, "No store at \(path).") }
                    writer = try DatabaseQueue(path: StoreFile.readOnlyURI(path, state: state), configuration: config)
                } else {
                    if case .sqlite = state {
                        var inspection = config
                        inspection.readonly = true
                        let reader = try DatabaseQueue(path: StoreFile.readOnlyURI(path, state: state), configuration: inspection)
                        defer { try? reader.close() }
                        _ = try reader.read { db in try Self.storeIdentifier(in: db, model: model, place: path) }
                    }
                    writer = try DatabasePool(path: path, configuration: config)
                }
            } else {
                writer = try DatabaseQueue(configuration: config)
            }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw Self.openError(error, path: path)
        }

        var selectColumns: [String: String] = [:]
        for table in schema.tables {
            let columns = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version] + table.columns.map(\.name)
            selectColumns[table.name] = columns.map { "t0." + sqlQuote($0) }.joined(separator: ", ")
        }
        selectColumnsByTable = selectColumns

        let storeID: String
        do {
            storeID = try Self.prepare(writer: writer, schema: schema, model: model, path: path, readOnly: readOnly)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw Self.openError(error, path: path)
        }
        identifier = storeID
        var decoders: [Int: RowDecoder] = [:]
        for entity in model.entities {
            decoders[entity.entityID] = RowDecoder(entity: entity, schema: schema, model: model, storeID: storeID)
        }
        self.decoders = decoders
    }

    static func openError(_ error: any Error, path: String?) -> CoreDataError {
        let place = path ?? "the in-memory store"
        if let db = error as? DatabaseError {
            switch db.resultCode {
            case .SQLITE_NOTADB:
                return CoreDataError(
                    .persistentStoreNotAStore, "\(place) is not a SQLite store (\(db.message ?? "file is not a database")).",
                    sqliteResultCode: db.resultCode.primaryResultCode.rawValue, underlyingError: db)
            case .SQLITE_CORRUPT:
                return CoreDataError(
                    .persistentStoreNotAStore,
                    "\(place) is a damaged SQLite store (\(db.message ?? "database disk image is malformed")); it was not changed.",
                    sqliteResultCode: db.resultCode.primaryResultCode.rawValue, underlyingError: db)
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return CoreDataError(
                    .persistentStoreOpen, "\(place) is locked by another connection or process; try again when it is released.")
            case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY:
                return CoreDataError(.persistentStoreOpen, "Cannot open \(place): \(db.message ?? "unable to open database file").")
            default:
                return CoreDataError(.persistentStoreOpen, "Cannot open \(place): \(db.message ?? "\(db.resultCode)").")
            }
        }
        return CoreDataError(.persistentStoreOpen, "Cannot open \(place): \(error)")
    }

    /// Creates the schema in a new store, or checks an existing one; returns the store's identifier.
    private static func prepare(
        writer: any DatabaseWriter, schema: SQLiteSchema, model: NSManagedObjectModel, path: String?, readOnly: Bool
    ) throws -> String {
        let place = path ?? "the in-memory store"
        let check: (Database) throws -> String? = { db in try storeIdentifier(in: db, model: model, place: place) }
        if readOnly {
            guard let id = try writer.read(check) else {
                throw CoreDataError(.persistentStoreIncompatibleSchema, "\(place) is empty: it holds no OpenCoreData store.")
            }
            return id
        }
        return try writer.write { db in
            if let id = try check(db) { return id }
            for statement in schema.creationStatements { try db.execute(sql: statement) }
            try db.execute(sql: "CREATE TABLE Z_METADATA (Z_KEY TEXT PRIMARY KEY, Z_VALUE TEXT)")
            let id = UUID().uuidString
            var meta: [(String, String)] = [
                ("identifier", id), ("modelVersionHash", model.versionHashString), ("formatVersion", formatVersion),
                ("changeToken", "0"),
            ]
            for (name, hash) in model.entityVersionHashesByName {
                meta.append(("entityHash." + name, hash.map { String(format: "%02x", $0) }.joined()))
            }
            for (k, v) in meta {
                try db.execute(sql: "INSERT INTO Z_METADATA (Z_KEY, Z_VALUE) VALUES (?, ?)", arguments: [k, v])
            }
            return id
        }
    }

    /// The identifier of the store in `db`, nil for an empty database; throws for a database that is not an
    /// OpenCoreData store or was made with another model.
    private static func storeIdentifier(in db: Database, model: NSManagedObjectModel, place: String) throws -> String? {
        guard try db.tableExists("Z_METADATA") else {
            let tables = try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            if !tables.isEmpty {
                throw CoreDataError(
                    .persistentStoreIncompatibleSchema,
                    "\(place) is a SQLite database but not an OpenCoreData store (it has tables \(tables.prefix(5).joined(separator: ", ")) and no Z_METADATA)."
                )
            }
            return nil
        }
        let rows = try Row.fetchAll(db, sql: "SELECT Z_KEY, Z_VALUE FROM Z_METADATA")
        var meta: [String: String] = [:]
        for row in rows { meta[row[0]] = row[1] }
        guard let storeID = meta["identifier"] else {
            throw CoreDataError(.persistentStoreIncompatibleSchema, "\(place) has no store identifier in Z_METADATA.")
        }
        let storedHash = meta["modelVersionHash"] ?? ""
        if storedHash != model.versionHashString {
            var differences: [String] = []
            let current = model.entityVersionHashesByName.mapValues { $0.map { String(format: "%02x", $0) }.joined() }
            var stored: [String: String] = [:]
            for (key, value) in meta where key.hasPrefix("entityHash.") { stored[String(key.dropFirst(11))] = value }
            for name in Set(current.keys).union(stored.keys).sorted() {
                switch (stored[name], current[name]) {
                case (nil, _?): differences.append("entity '\(name)' is new in the model")
                case (_?, nil): differences.append("entity '\(name)' is in the store but not the model")
                case (let a?, let b?) where a != b: differences.append("entity '\(name)' changed")
                default: break
                }
            }
            throw CoreDataError(
                .persistentStoreIncompatibleVersionHash,
                "The model used to open \(place) is not the one that created it (\(differences.isEmpty ? "version hashes differ" : differences.joined(separator: "; "))). Migration is not supported yet."
            )
        }
        return storeID
    }

    private func checkOpen() throws {
        closedLock.lock()
        defer { closedLock.unlock() }
        if closed { throw CoreDataError(.persistentStoreOperation, "The store \(url?.path ?? "in memory") has been closed.") }
    }

    public func close() throws {
        closedLock.lock()
        closed = true
        closedLock.unlock()
        if let pool = writer as? DatabasePool { try pool.close() }
        if let queue = writer as? DatabaseQueue, url != nil { try queue.close() }
    }

    public var changeToken: Int64 {
        get throws {
            try checkOpen()
            return try writer.read { db in
                try Int64.fetchOne(db, sql: "SELECT CAST(Z_VALUE AS INTEGER) FROM Z_METADATA WHERE Z_KEY = 'changeToken'") ?? 0
            }
        }
    }

    /// Runs `body` with a reader, mapping SQLite errors to `CoreDataError`.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try checkOpen()
        do {
            return try writer.read(body)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "read")
        }
    }

    func mapError(_ error: any Error, doing what: String) -> CoreDataError {
        let place = url?.path ?? "the store"
        guard let db = error as? DatabaseError else {
            return CoreDataError(.persistentStoreOperation, "Could not \(what) \(place): \(error)", underlyingError: error)
        }
        // A multi-row insert's SQL repeats its row of parameters dozens of times: its start says what it was.
        var sql = db.sql ?? ""
        if sql.count > 300 { sql = sql.prefix(300) + "…" }
        let reason = db.message ?? "\(db.resultCode)"
        let message: String
        if db.resultCode == .SQLITE_BUSY || db.resultCode == .SQLITE_LOCKED {
            message = "Could not \(what) \(place): it is locked by another connection or process (\(db.message ?? "busy"))."
        } else if reason.contains("parser stack overflow") || reason.contains("Expression tree is too large") {
            message = "Could not \(what) \(place): the predicate is nested too deeply for SQLite (\(reason)); simplify it [SQL: \(sql)]"
        } else {
            message = "Could not \(what) \(place): \(reason) [SQL: \(sql)]"
        }
        return CoreDataError(
            .persistentStoreOperation, message, sqliteResultCode: db.resultCode.primaryResultCode.rawValue, sql: db.sql == nil ? nil : sql,
            underlyingError: db)
    }

    // MARK: Fetching

    /// A fetch's SQL, piece by piece: the table and joins, the filter with its arguments, the order and the window.
    private struct Query {
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

    private func query(for request: StoreFetchRequest) throws -> Query {
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
    private func objectID(in row: StatementColumns, onlyEntity: NSEntityDescription?) throws -> NSManagedObjectID {
        try objectID(pk: row.integer(0), entityID: onlyEntity == nil ? Int(row.integer(1)) : 0, onlyEntity: onlyEntity)
    }

    /// A row's object ID: of `onlyEntity` when the query's table holds only it, else of the entity numbered `entityID`.
    private func objectID(pk: Int64, entityID: Int, onlyEntity: NSEntityDescription?) throws -> NSManagedObjectID {
        if let onlyEntity { return NSManagedObjectID(entity: onlyEntity, storeIdentifier: identifier, primaryKey: pk) }
        return try objectID(pk: pk, entityID: entityID)
    }

    public func execute(_ request: StoreFetchRequest) throws -> StoreFetchResult {
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
                    try db.forEachRow(sql: sql, arguments: arguments) { row in rows.append(try decode(row)) }
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
    private static func value(in row: StatementColumns, at index: Int, type: NSAttributeType?) -> AttributeValue {
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

    public func forEachResultKey(
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

    /// A column of `forEachResultKey`: its type and, for text, the bytes it held in the previous row. A column that
    /// repeats them keeps its decoded value (a sort's leading key, a section key); one that rarely repeats (a title)
    /// stops being compared.
    private struct ResultColumn {
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

    func decode(_ row: StatementColumns) throws -> RowSnapshot {
        let entityID = Int(row.integer(1))
        guard let decoder = decoders[entityID] else {
            throw CoreDataError(
                .persistentStoreOperation, "A row has entity number \(entityID), which the model does not have; the store is damaged.")
        }
        return try decoder.decode(row)
    }

    public func rows(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID: RowSnapshot] {
        let found = try read { db in try self.rows(for: objectIDs, in: db) }
        countRowsRead(found.count)
        return found
    }

    /// The stored rows of the given objects, read with `db` (500 primary keys per statement).
    func rows(for objectIDs: [NSManagedObjectID], in db: Database) throws -> [NSManagedObjectID: RowSnapshot] {
        var result: [NSManagedObjectID: RowSnapshot] = [:]
        let byTable = Dictionary(grouping: objectIDs.filter { !$0.isTemporaryID }) { schema.tableName(for: $0.entity) }
        for (table, ids) in byTable {
            for chunk in stride(from: 0, to: ids.count, by: 500) {
                let slice = ids[chunk..<min(chunk + 500, ids.count)]
                let sql =
                    "SELECT \(selectColumnsByTable[table]!) FROM \(sqlQuote(table)) t0 WHERE t0.Z_PK IN (\(slice.map { String($0.primaryKey) }.joined(separator: ",")))"
                try db.forEachRow(sql: sql) { row in
                    let snapshot = try decode(row)
                    result[snapshot.objectID] = snapshot
                }
            }
        }
        return result
    }

    public func relatedObjectIDs(of objectID: NSManagedObjectID, relationship: NSRelationshipDescription) throws -> [NSManagedObjectID] {
        guard !objectID.isTemporaryID, let destination = relationship.destinationEntity else { return [] }
        let table = sqlQuote(schema.tableName(for: destination))
        let sql: String
        switch schema.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            sql = "SELECT Z_PK, Z_ENT FROM \(table) WHERE \(sqlQuote(column)) = ? ORDER BY Z_PK"
        case .joinTable(let name, let source, let dest):
            sql =
                "SELECT d.Z_PK, d.Z_ENT FROM \(sqlQuote(name)) j JOIN \(table) d ON d.Z_PK = j.\(sqlQuote(dest)) WHERE j.\(sqlQuote(source)) = ? ORDER BY d.Z_PK"
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

/// Decodes rows of one concrete entity into snapshots.
struct RowDecoder {
    enum Step {
        case attribute(column: Int, type: NSAttributeType, name: String)
        case toOne(column: Int, entityColumn: Int, fallback: NSEntityDescription)
        case toMany
        case transient(AttributeValue)
    }

    let entity: NSEntityDescription
    let steps: [Step]
    let storeID: String
    let model: NSManagedObjectModel

    init(entity: NSEntityDescription, schema: SQLiteSchema, model: NSManagedObjectModel, storeID: String) {
        self.entity = entity
        self.storeID = storeID
        self.model = model
        let table = schema.table(for: entity)
        var index: [String: Int] = [:]
        for (i, column) in table.columns.enumerated() { index[column.name] = i + 3 }
        steps = entity.allProperties.map { property in
            if property.isTransient {
                return .transient(property.transientReadValue)
            }
            if let attribute = property as? NSAttributeDescription {
                return .attribute(column: index[schema.columnName(for: attribute)]!, type: attribute.attributeType, name: attribute.name)
            }
            let relationship = property as! NSRelationshipDescription
            if relationship.isToMany { return .toMany }
            return .toOne(
                column: index[schema.columnName(for: relationship)]!,
                entityColumn: index[schema.entityColumnName(for: relationship)]!, fallback: relationship.destinationEntity!)
        }
    }

    func decode(_ row: StatementColumns) throws -> RowSnapshot {
        let pk = row.integer(0)
        let version = row.integer(2)
        let id = NSManagedObjectID(entity: entity, storeIdentifier: storeID, primaryKey: pk)
        var values: [SnapshotValue] = []
        values.reserveCapacity(steps.count)
        for step in steps {
            switch step {
            case .attribute(let column, let type, let name):
                let stored = row.value(column)
                guard let value = SQLStorage.decode(stored, as: type) else {
                    throw CoreDataError(
                        .persistentStoreOperation,
                        "Row \(pk) of '\(entity.name)' holds \(stored) in '\(name)', which is not a valid \(type.xcodeName); the store is damaged.",
                        entityName: entity.name, key: name)
                }
                values.append(.attribute(value))
            case .toOne(let column, let entityColumn, let fallback):
                if let fk = row.optionalInteger(column) {
                    let entityID = row.optionalInteger(entityColumn)
                    let destination = entityID.flatMap { model.entity(withID: Int($0)) } ?? fallback
                    values.append(.toOne(NSManagedObjectID(entity: destination, storeIdentifier: storeID, primaryKey: fk)))
                } else {
                    values.append(.toOne(nil))
                }
            case .toMany: values.append(.toMany)
            case .transient(let v): values.append(.attribute(v))
            }
        }
        return RowSnapshot(objectID: id, version: version, values: values)
    }
}
