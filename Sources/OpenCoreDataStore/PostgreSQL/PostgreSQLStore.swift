import Foundation
import Logging
import OpenCoreDataModel
import OpenCoreDataPredicate

/// The type of a store on a PostgreSQL server (`postgresql://user@host:port/database`).
public let NSPostgreSQLStoreType = "PostgreSQL"

/// A store on a PostgreSQL server, which several processes and machines share: Core Data's layout (the tables,
/// `Z_PRIMARYKEY`, `Z_METADATA`, `Z_MODELCACHE`) in the database's current schema, read and written by the relational
/// core every SQL store shares, in PostgreSQL's dialect, over postgres-nio.
///
/// Opening an empty database creates the store (one process at a time: the creation holds an advisory lock); opening
/// one whose store another model made is refused, the database untouched. Every save is one transaction with
/// optimistic locking (`Z_OPT`); writers take the metadata row's lock first, so saves commit one after another in the
/// order they advanced the change token.
///
/// For example:
/// ```swift
/// let store = try PostgreSQLStore(url: URL(string: "postgresql://app@db.internal/inventory")!, model: model)
/// print(store.url!, try store.changeToken)   // the URL never shows a password
/// ```
public final class PostgreSQLStore: StoreEngine, @unchecked Sendable {
    /// The store's UUID, kept in its metadata; object IDs carry it.
    public let identifier: String
    /// The store's URL, without its password.
    public let url: URL?
    /// The model the store was opened with.
    public let model: NSManagedObjectModel
    /// The model configuration whose entities the coordinator keeps in this store.
    public let configurationName: String
    /// `NSPostgreSQLStoreType`.
    public var type: String { NSPostgreSQLStoreType }
    /// The tables, and the reads and writes every SQL back end shares.
    package let core: RelationalCore
    package var schema: RelationalSchema { core.schema }
    let location: PostgreSQLLocation
    let pool: PostgreSQLPool
    let readOnly: Bool
    /// The connection whose transaction `performAsOneTransaction` holds open, and the thread running its body.
    var held: (connection: PostgreSQLConnection, thread: pthread_t)?
    let heldLock = NSLock()
    /// This store's name in the commit announcements its transactions make (`NOTIFY` payloads): the watcher of
    /// other writers' commits skips its own.
    let origin = UUID().uuidString
    /// How many transactions ran again after a serialization failure or a deadlock (`heldLock`).
    package var retriedTransactions = 0
    /// How many times a transaction runs again after a serialization failure or deadlock before the error is thrown.
    static let retries = 10

    /// The pause before retry `attempt` (1, 2, …): 2 ms doubling to at most 0.5 s, with a random part, so that writers
    /// that failed together do not retry together.
    static func pause(beforeRetry attempt: Int) -> TimeInterval {
        let base = min(0.5, 0.002 * pow(2, Double(attempt - 1)))
        return base * Double.random(in: 0.5...1.5)
    }

    /// Values of the commit counter this store's own transactions set, not yet passed by the watcher (`heldLock`).
    var ownCommits: Set<Int64> = []
    /// Records every write's changes as persistent history; nil when the store keeps none (or is read-only).
    let history: PersistentHistory?
    /// Following other writers' history (`startFollowingHistory`): the newest history transaction — a value of the
    /// commit counter — handed over, this store's own transactions not yet passed, and the newest value a watcher
    /// saw committed (`heldLock`).
    var historyCursor: Int64?
    var ownHistory: Set<Int64> = []
    var watchedThrough: Int64?

    /// Opens (or, in a database without one, creates) the store.
    ///
    /// - Parameters:
    ///   - url: `postgresql://user[:password]@host[:port]/database`, with `sslmode`, `sslrootcert`, `host=/socket/folder`
    ///     and `notify=off` as query items.
    ///   - model: The model; it is validated and frozen.
    ///   - readOnly: Open without writing anything (the database must already hold the store).
    ///   - timeout: How long to wait for the server: to connect (retrying while it cannot be reached), and for each
    ///     statement.
    ///   - configurationName: The model configuration whose objects the store holds (nil: every entity's).
    ///   - tracksHistory: Record persistent history (`NSPersistentHistoryTrackingKey`), creating its tables when the
    ///     store has none. A store that has them records history whatever this says, so that no writer leaves gaps.
    /// - Throws: `CoreDataError` naming the server and database (never the password): `.persistentStoreOpen` when it
    ///   cannot be reached or refuses the login; `.persistentStoreIncompatibleVersionHash` for a store another model
    ///   made; `.persistentStoreIncompatibleSchema` for a database holding tables of the store's names but no store.
    public init(
        url: URL, model: NSManagedObjectModel, readOnly: Bool = false, timeout: TimeInterval = 10, configurationName: String? = nil,
        tracksHistory: Bool = false
    ) throws {
        try model.validate()
        if let configurationName, model.entities(forConfigurationName: configurationName) == nil {
            throw CoreDataError(.persistentStoreOpen, "The model has no configuration '\(configurationName)'.")
        }
        let location = try PostgreSQLLocation(url)
        self.location = location
        self.url = URL(string: location.description)
        self.model = model
        self.configurationName = configurationName ?? defaultConfigurationName
        self.readOnly = readOnly
        pool = PostgreSQLPool(location, timeout: timeout, logger: Logger(label: "OpenCoreData.PostgreSQL"))
        let schema = RelationalSchema(appleLayoutFor: model)
        let identifier: String
        do {
            (identifier, history) = try pool.withConnection { connection in
                try connection.inTransaction {
                    let identifier = try Self.prepare(connection, schema: schema, model: model, readOnly: readOnly)
                    let history = try Self.prepareHistory(
                        connection, schema: schema, model: model, requested: tracksHistory, readOnly: readOnly)
                    return (identifier, history)
                }
            }
        } catch let error as CoreDataError {
            pool.close()
            throw error
        } catch {
            pool.close()
            throw Self.mapError(error, doing: "open the store at", location)
        }
        self.identifier = identifier
        core = RelationalCore(identifier: identifier, schema: schema, dialect: PostgreSQLDialect(), externalData: nil)
    }

    /// The advisory lock that makes creating a store one process's work at a time.
    static let creationLock: Int64 = 0x4F43_445F_5354_4F52  // "OCD_STOR"

    /// Creates the store in an empty database, or checks the one there; returns its UUID.
    ///
    /// Runs in the caller's transaction.
    private static func prepare(_ connection: PostgreSQLConnection, schema: RelationalSchema, model: NSManagedObjectModel, readOnly: Bool)
        throws -> String
    {
        let place = connection.location.description
        try connection.run(sql: "SELECT pg_advisory_xact_lock($1)", arguments: [.integer(creationLock)])
        var exists = false
        try connection.forEachRow(sql: "SELECT to_regclass('z_metadata') IS NOT NULL", arguments: []) { row in
            exists = row.integer(0) != 0
        }
        if exists {
            var uuid: String?
            try connection.forEachRow(sql: "SELECT Z_UUID FROM Z_METADATA ORDER BY Z_VERSION LIMIT 1", arguments: []) { row in
                if case .text(let text) = row.value(0) { uuid = text }
            }
            let metadata = try AppleStoreMetadata.read(connection)
            guard let uuid, case .dictionary(let hashes)? = metadata["NSStoreModelVersionHashes"] else {
                throw CoreDataError(
                    .persistentStoreIncompatibleSchema, "\(place) has a Z_METADATA table but no store metadata in it; it was not changed.")
            }
            var stored: [String: String] = [:]
            for (name, value) in hashes { if case .data(let data) = value { stored[name] = data.hexString } }
            let current = model.entityVersionHashesByName.mapValues(\.hexString)
            guard stored == current else {
                throw CoreDataError(
                    .persistentStoreIncompatibleVersionHash,
                    "The model used to open \(place) is not the one that created it (\(SQLiteStore.hashDifferences(stored: stored, current: current))). It was not changed; it needs migrating to this model: open it with shouldMigrateStoreAutomatically (the default of a container), or run `coredata migrate --store`."
                )
            }
            try checkColumns(connection, schema: schema, place: place)
            // Stores made before the commit counter existed get it on a read-write open.
            if !readOnly {
                for statement in PostgreSQLFunctions.commitCounterStatements(for: schema, dialect: connection.dialect) {
                    try connection.run(sql: statement)
                }
                // …and the functions added since (predicates' `FetchFunction` calls).
                var hasFunctions = false
                try connection.forEachRow(
                    sql: "SELECT to_regproc($1) IS NOT NULL", arguments: [.text(PostgreSQLFunctions.lastAddedFunction)]
                ) { row in hasFunctions = row.integer(0) != 0 }
                if !hasFunctions {
                    for statement in PostgreSQLFunctions.functionStatements { try connection.run(sql: statement) }
                }
            }
            return uuid
        }
        guard !readOnly else { throw CoreDataError(.persistentStoreOpen, "No store at \(place) (the database holds none).") }
        // Tables of the store's names without its metadata: another program's, or a store half made by hand.
        let names = schema.tables.map(\.name) + schema.joinTableList.map(\.name) + ["Z_PRIMARYKEY", "Z_MODELCACHE"]
        var taken: [String] = []
        try connection.forEachRow(
            sql: "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename = ANY(string_to_array($1, ','))",
            arguments: [.text(names.map(PostgreSQLDialect().storedName).joined(separator: ","))]
        ) { row in if case .text(let name) = row.value(0) { taken.append(name) } }
        guard taken.isEmpty else {
            throw CoreDataError(
                .persistentStoreIncompatibleSchema,
                "\(place) holds tables of the store's names (\(taken.sorted().joined(separator: ", "))) but no store; it was not changed.")
        }
        for statement in PostgreSQLFunctions.creationStatements { try connection.run(sql: statement) }
        let uuid = try AppleStoreMetadata.create(connection, schema: schema, model: model, type: NSPostgreSQLStoreType)
        for statement in PostgreSQLFunctions.commitCounterStatements(for: schema, dialect: connection.dialect) {
            try connection.run(sql: statement)
        }
        return uuid
    }

    /// Checks that every table of the store has the columns the model gives it, of the types the store makes them:
    /// one missing or changed by hand (`ALTER TABLE … TYPE`) would read as NULL or fail mid-fetch, so the store is
    /// refused at open, naming the table and column.
    private static func checkColumns(_ connection: PostgreSQLConnection, schema: RelationalSchema, place: String) throws {
        let dialect = PostgreSQLDialect()
        var actual: [String: String] = [:]
        try connection.forEachRow(
            sql:
                // The catalog itself: information_schema.columns costs 3–10 ms a call on a small database, this 0.5 ms.
                """
                SELECT c.relname::text, a.attname::text, format_type(a.atttypid, NULL) FROM pg_attribute a
                JOIN pg_class c ON c.oid = a.attrelid
                WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
                """,
            arguments: []
        ) { row in
            guard case .text(let table) = row.value(0), case .text(let column) = row.value(1), case .text(let type) = row.value(2) else {
                return
            }
            actual[table + "." + column] = type
        }
        var expected: [(table: String, column: String, type: String)] = []
        for table in schema.tables {
            for (column, type) in [("Z_PK", "INTEGER"), ("Z_ENT", "INTEGER"), ("Z_OPT", "INTEGER")] + table.columns {
                expected.append((table.name, column, type))
            }
        }
        for join in schema.joinTableList {
            for column in [join.sourceColumn, join.destinationColumn] + (join.orderColumns) {
                expected.append((join.name, column, "INTEGER"))
            }
        }
        for (table, column, type) in expected {
            let want = dialect.columnType(type).components(separatedBy: " COLLATE").first ?? ""
            let key = dialect.storedName(table) + "." + dialect.storedName(column)
            guard let have = actual[key] else {
                throw CoreDataError(
                    .persistentStoreIncompatibleSchema,
                    "\(place): the store's table \(dialect.storedName(table)) has no column \(dialect.storedName(column)), which the model needs; it was not changed."
                )
            }
            guard have == want else {
                throw CoreDataError(
                    .persistentStoreIncompatibleSchema,
                    "\(place): column \(key) is \(have), not \(want) as the store makes it (changed outside this project?); it was not changed."
                )
            }
        }
    }

    /// Creates persistent history's tables, functions and triggers when asked or when the store has them.
    ///
    /// A store with history records whatever the option says, so that no writer leaves gaps; nil without history or
    /// read-only. Runs in the caller's transaction,
    /// after `prepare` (under its lock).
    private static func prepareHistory(
        _ connection: PostgreSQLConnection, schema: RelationalSchema, model: NSManagedObjectModel, requested: Bool, readOnly: Bool
    ) throws -> PersistentHistory? {
        guard !readOnly, try requested || PersistentHistory.exists(connection) else { return nil }
        try PersistentHistory.create(connection, model: model)
        for statement in PostgreSQLFunctions.historyFunctions { try connection.run(sql: statement) }
        let history = try PersistentHistory(connection)
        for statement in history.triggerStatements(schema: schema, model: model, dialect: connection.dialect) {
            try connection.run(sql: statement)
        }
        return history
    }

    /// The error a failure of the server or the client becomes, naming the store (never its password).
    static func mapError(_ error: any Error, doing what: String, _ location: PostgreSQLLocation) -> CoreDataError {
        if let error = error as? CoreDataError { return error }
        if let error = error as? PostgreSQLError {
            if error.isRetryable {
                return CoreDataError(
                    .persistentStoreOperation,
                    "Could not \(what) \(location): \(error.message) — other writers kept conflicting with it (a serialization failure or deadlock, retried \(retries) times); nothing of it was committed.",
                    sql: error.sql, underlyingError: error)
            }
            if error.isConnectionLost {
                return CoreDataError(
                    .persistentStoreOperation,
                    "Could not \(what) \(location): the connection was lost (\(error.message)); nothing of this operation was committed.",
                    sql: error.sql, underlyingError: error)
            }
            return CoreDataError(
                .persistentStoreOperation, "Could not \(what) \(location): \(error.message) [SQL: \(error.sql.prefix(300))]",
                sql: error.sql, underlyingError: error)
        }
        return CoreDataError(.persistentStoreOperation, "Could not \(what) \(location): \(error)", underlyingError: error)
    }

    /// Runs `body` with a connection — the one whose transaction this thread holds (`performAsOneTransaction`), else
    /// one of the pool's — mapping errors to `CoreDataError`.
    ///
    /// A pooled connection the server dropped (restarted, say) fails at its first statement; when that statement was
    /// the start of the work — nothing of it reached the server — the work runs again once on a new connection.
    func withConnection<T>(doing what: String, _ body: (PostgreSQLConnection) throws -> T) throws -> T {
        do {
            if let connection = heldConnection() { return try body(connection) }
            do {
                return try pool.withConnection { connection in
                    connection.statementsRun = 0
                    return try body(connection)
                }
            } catch let error as PostgreSQLError where error.isConnectionLost && error.wasFirstStatement {
                return try pool.withConnection(body)
            }
        } catch {
            throw Self.mapError(error, doing: what, location)
        }
    }

    // MARK: StoreEngine

    /// A number that grows with every save, by any process on any machine that uses this project.
    public var changeToken: Int64 {
        get throws { try withConnection(doing: "read the change token of") { try AppleStoreMetadata.changeToken($0) } }
    }

    /// Closes the store's connections; later use throws.
    public func close() throws { pool.close() }

    package func execute(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        try withConnection(doing: "fetch from") { try core.execute(request, on: $0) }
    }

    package func forEachResultKey(
        _ request: StoreFetchRequest, values keyPaths: [String],
        _ body: (_ entityID: Int, _ primaryKey: Int64, _ values: ResultKeyValues) throws -> Void
    ) throws {
        try withConnection(doing: "fetch from") { try core.forEachResultKey(request, values: keyPaths, on: $0, body) }
    }

    package func rows(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID: RowSnapshot] {
        try withConnection(doing: "read") { try core.rows(for: objectIDs, on: $0) }
    }

    package func rowsByPrimaryKey(for objectIDs: [NSManagedObjectID]) throws -> [Int64: RowSnapshot] {
        try withConnection(doing: "read") { try core.rowsByPrimaryKey(for: objectIDs, on: $0) }
    }

    package func relatedObjectIDs(of objectID: NSManagedObjectID, relationship: NSRelationshipDescription) throws -> [NSManagedObjectID] {
        try withConnection(doing: "read") { try core.relatedObjectIDs(of: objectID, relationship: relationship, on: $0) }
    }

    package func relatedObjectIDs(ofEach objectIDs: [NSManagedObjectID], relationship: NSRelationshipDescription) throws
        -> [NSManagedObjectID: [NSManagedObjectID]]
    {
        try withConnection(doing: "read") { try core.relatedObjectIDs(ofEach: objectIDs, relationship: relationship, on: $0) }
    }

    /// Writes a save in one transaction.
    ///
    /// The change token advances first: its row's lock orders concurrent saves.
    package func save(_ request: StoreSaveRequest) throws -> StoreSaveResult {
        try checkWritable()
        return try withConnection(doing: "save to") { connection in
            do {
                return try writing(on: connection, author: request.historyAuthor) {
                    try AppleStoreMetadata.advanceChangeToken(connection)
                    var written = try core.write(request, on: connection)
                    if !written.readBack.isEmpty {
                        written.updatedRows.merge(try core.rows(for: written.readBack, on: connection)) { _, read in read }
                    }
                    return StoreSaveResult(insertedRows: written.insertedRows, updatedRows: written.updatedRows)
                }
            } catch let error as PostgreSQLError where error.isUniqueViolation {
                throw (try? constraintError(error, request, on: connection)) ?? Self.mapError(error, doing: "save to", location)
            }
        }
    }

    /// The uniqueness constraint a unique index's violation names (PostgreSQL names the index: `z_car_unique_maker`).
    private func constraintError(_ error: PostgreSQLError, _ request: StoreSaveRequest, on connection: PostgreSQLConnection) throws
        -> CoreDataError?
    {
        let dialect = PostgreSQLDialect()
        for entity in model.entities {
            for constraint in entity.uniquenessConstraints
            where dialect.storedName(RelationalSchema.uniqueIndexName(entity, constraint)) == error.constraintName {
                return try core.constraintError(entity: entity, constraint: constraint, request, on: connection)
            }
        }
        return nil
    }

    package func reservePermanentIDs(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID] {
        try checkWritable()
        return try withConnection(doing: "reserve permanent IDs in") { connection in
            try writing(on: connection, author: HistoryAuthor()) { try core.reservePermanentIDs(for: objectIDs, on: connection) }
        }
    }

    func checkWritable() throws {
        if readOnly { throw CoreDataError(.persistentStoreOperation, "The store at \(location) was opened read-only.") }
    }
}

// Batch requests: the relational core's, each in one transaction that advances the change token first.
extension PostgreSQLStore: BatchRequestStore {
    /// Runs a batch request in one transaction.
    private func batchWrite<T>(doing what: String, author: HistoryAuthor, _ body: (PostgreSQLConnection) throws -> T) throws -> T {
        try checkWritable()
        return try withConnection(doing: what) { connection in
            try writing(on: connection, author: author) {
                try AppleStoreMetadata.advanceChangeToken(connection)
                return try body(connection)
            }
        }
    }

    package func batchInsert(
        _ entity: NSEntityDescription, collectingIDs: Bool, author: HistoryAuthor, next: () throws -> [[SnapshotValue]]?
    ) throws -> (count: Int, ids: [NSManagedObjectID]) {
        try batchWrite(doing: "batch-insert into", author: author) { connection in
            try core.batchInsert(entity, collectingIDs: collectingIDs, on: connection, next: next)
        }
    }

    package func batchUpdate(
        _ request: StoreFetchRequest, values: [(index: Int, value: AttributeValue)], collectingIDs: Bool, author: HistoryAuthor
    ) throws -> (count: Int, ids: [NSManagedObjectID]) {
        try batchWrite(doing: "batch-update", author: author) { connection in
            try core.batchUpdate(request, values: values, collectingIDs: collectingIDs, on: connection)
        }
    }

    package func batchDelete(_ targets: StoreBatchTargets, author: HistoryAuthor) throws -> [NSManagedObjectID] {
        try batchWrite(doing: "batch-delete from", author: author) { connection in try core.batchDelete(targets, on: connection) }
    }
}

extension PostgreSQLStore {
    /// Runs `body` on a connection to the database at `url`, in a read-only transaction, after checking it holds a store.
    private static func reading<T>(_ url: URL, _ body: (PostgreSQLConnection, PostgreSQLLocation) throws -> T) throws -> T {
        let location = try PostgreSQLLocation(url)
        let connection = try PostgreSQLConnection(location)
        defer { connection.close() }
        do {
            return try connection.inTransaction {
                try connection.run(sql: "SET TRANSACTION READ ONLY")
                var exists = false
                try connection.forEachRow(sql: "SELECT to_regclass('z_metadata') IS NOT NULL", arguments: []) {
                    exists = $0.integer(0) != 0
                }
                guard exists else {
                    throw CoreDataError(.persistentStoreIncompatibleSchema, "\(location) holds no Core Data store (it has no Z_METADATA).")
                }
                return try body(connection, location)
            }
        } catch {
            throw mapError(error, doing: "read", location)
        }
    }

    /// The metadata of the store at `url` (Core Data's keys, `NSStoreUUID` among them), read without opening it.
    public static func metadata(at url: URL) throws -> [String: Any] {
        try reading(url) { connection, _ in
            var metadata = try AppleStoreMetadata.read(connection).mapValues(\.foundationObject)
            try connection.forEachRow(sql: "SELECT Z_UUID FROM Z_METADATA ORDER BY Z_VERSION LIMIT 1", arguments: []) { row in
                if case .text(let uuid) = row.value(0) { metadata["NSStoreUUID"] = metadata["NSStoreUUID"] ?? uuid }
            }
            return metadata
        }
    }

    /// The compressed model the store at `url` caches (`Z_MODELCACHE`), and how to name the store in messages.
    static func modelCache(at url: URL) throws -> (Data, String) {
        try reading(url) { connection, location in
            var content: Data?
            try connection.forEachRow(sql: "SELECT Z_CONTENT FROM Z_MODELCACHE LIMIT 1", arguments: []) { row in
                if case .blob(let data) = row.value(0) { content = data }
            }
            guard let content else {
                throw CoreDataError(
                    .persistentStoreIncompatibleSchema, "\(location) has an empty model cache (Z_MODELCACHE); give the model.")
            }
            return (content, location.description)
        }
    }
}

extension PostgreSQLStore: MetadataStore {
    /// The metadata in `Z_METADATA` (with `NSStoreUUID`).
    package func metadataValues() throws -> [String: Any] {
        try withConnection(doing: "read the metadata of") { connection in
            var metadata = try AppleStoreMetadata.read(connection).mapValues(\.foundationObject)
            metadata["NSStoreUUID"] = metadata["NSStoreUUID"] ?? identifier
            return metadata
        }
    }

    /// Replaces the app's metadata keys with `values` in one transaction (the metadata row locked, as saves lock it).
    package func setMetadataValues(_ values: [String: Any]) throws {
        guard !readOnly else {
            throw CoreDataError(.persistentStoreOperation, "The store at \(location) was opened read-only; its metadata cannot change.")
        }
        try withConnection(doing: "write the metadata of") { connection in
            try connection.inTransaction {
                let current = try AppleStoreMetadata.read(connection, locking: true)
                try AppleStoreMetadata.write(try AppleStoreMetadata.merging(app: values, into: current), connection)
            }
        }
    }
}
