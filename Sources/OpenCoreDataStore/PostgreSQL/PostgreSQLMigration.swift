import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Migrates a PostgreSQL store from one model version to another along a mapping model, in one transaction.
///
/// PostgreSQL's schema changes are transactional, so the new store is built beside the old one in a schema of its own
/// (`ocd_migrating_` and random digits, so no schema of the user's is touched), filled from the old tables with the
/// relational core's `INSERT … SELECT` statements (rows never leave the server), checked against the destination
/// model, and then put in place — the old tables dropped, the new ones moved into the store's schema — all before the
/// one `COMMIT`. A failure anywhere, or a client that dies, leaves the store exactly as it was. The store's tables are
/// locked for the whole migration (other processes' writes wait, then fail against the new version's tables until
/// they reopen with the new model); the store keeps its UUID, so object IDs stay valid; persistent history stays, its
/// entity numbers mapped to the new model's.
enum PostgreSQLMigration {
    /// A name for the schema the new tables are built in: made for this migration and gone at its end (its creation
    /// is rolled back with a failed one), so a schema of that name the user made is never dropped or written to.
    static func buildingSchemaName() -> String {
        "ocd_migrating_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
    }

    static func migrateStore(at url: URL, from source: NSManagedObjectModel, to destination: NSManagedObjectModel, mapping: NSMappingModel)
        throws -> MigrationReport
    {
        try source.validate()
        try destination.validate()
        let location = try PostgreSQLLocation(url)
        let connection: PostgreSQLConnection
        do {
            connection = try PostgreSQLConnection(location)
        } catch {
            throw PostgreSQLStore.mapError(error, doing: "migrate the store at", location)
        }
        defer { connection.close() }
        do {
            return try connection.inTransaction {
                try migrate(connection, from: source, to: destination, mapping: mapping)
            }
        } catch let error as CoreDataError {
            throw error
        } catch {
            let message = (error as? PostgreSQLError)?.message ?? "\(error)"
            throw CoreDataError(.migration, "Migrating \(location) failed: \(message); the store was not changed.", underlyingError: error)
        }
    }

    private static func migrate(
        _ connection: PostgreSQLConnection, from source: NSManagedObjectModel, to destination: NSManagedObjectModel, mapping: NSMappingModel
    ) throws -> MigrationReport {
        let dialect = PostgreSQLDialect()
        let q = dialect.quote
        let sourceSchema = RelationalSchema(appleLayoutFor: source)
        let schema = RelationalSchema(appleLayoutFor: destination)
        try connection.run(sql: "SET LOCAL lock_timeout = '30s'")
        try connection.run(sql: "SELECT pg_advisory_xact_lock($1)", arguments: [.integer(PostgreSQLStore.creationLock)])
        let oldTables =
            sourceSchema.tables.map(\.name) + sourceSchema.joinTableList.map(\.name) + ["Z_PRIMARYKEY", "Z_METADATA", "Z_MODELCACHE"]
        // Nobody writes (or reads a half-moved store) until the commit.
        try connection.run(sql: "LOCK TABLE \(oldTables.map(q).joined(separator: ", ")) IN ACCESS EXCLUSIVE MODE")
        var uuid: String?
        try connection.forEachRow(sql: "SELECT Z_UUID FROM Z_METADATA ORDER BY Z_VERSION LIMIT 1", arguments: []) { row in
            if case .text(let text) = row.value(0) { uuid = text }
        }
        let metadata = try AppleStoreMetadata.read(connection)
        var extra = metadata.filter { !$0.key.hasPrefix("NS") && !$0.key.hasPrefix("_NS") }
        if case .integer(let token)? = metadata[AppleStoreMetadata.changeTokenKey] {
            extra[AppleStoreMetadata.changeTokenKey] = .integer(token + 1)
        }
        var home = "public"
        try connection.forEachRow(sql: "SELECT current_schema()::text", arguments: []) { row in
            if case .text(let name) = row.value(0) { home = name }
        }
        let homePrefix = sqlQuote(home) + "."
        // Read while the store's schema is still the current one.
        let keepsHistory = try PersistentHistory.exists(connection)
        let building = buildingSchemaName()
        try connection.run(sql: "CREATE SCHEMA \(building)")
        // New tables go to the building schema; the store's functions are still found in its own.
        try connection.run(sql: "SELECT set_config('search_path', $1, true)", arguments: [.text("\(building), \(sqlQuote(home))")])
        _ = try AppleStoreMetadata.create(
            connection, schema: schema, model: destination, uuid: uuid ?? UUID().uuidString, extra: extra, type: NSPostgreSQLStoreType)
        var copier = RowCopier(
            source: sourceSchema, destination: schema, mapping: mapping, db: connection, from: homePrefix, into: building + ".")
        var report = MigrationReport()
        try copier.copy(report: &report)
        try copier.validate()
        try copier.updateKeyMaxima()
        // Persistent history stays where it is: its entity numbers become the new model's, its key rows come along.
        if keepsHistory {
            if let remap = copier.historyEntityRemap(prefix: homePrefix) { try connection.run(sql: remap) }
            try connection.run(
                sql:
                    "INSERT INTO \(building).z_primarykey SELECT * FROM \(homePrefix)z_primarykey WHERE z_ent >= 16000 AND z_ent < 17000 ON CONFLICT DO NOTHING"
            )
        }
        // The swap: the old tables (and their triggers) go, the history triggers' functions of the old model with them,
        // and the new tables move in.
        for table in oldTables { try connection.run(sql: "DROP TABLE \(homePrefix)\(q(table)) CASCADE") }
        var functions: [String] = []
        try connection.forEachRow(
            sql: """
                SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = $1 AND p.proname LIKE 'z\\_ocd\\_history\\_%'
                """, arguments: [.text(home)]
        ) { row in if case .text(let name) = row.value(0) { functions.append(name) } }
        for function in functions { try connection.run(sql: "DROP FUNCTION \(function) CASCADE") }
        var built: [String] = []
        try connection.forEachRow(sql: "SELECT tablename::text FROM pg_tables WHERE schemaname = $1", arguments: [.text(building)]) { row in
            if case .text(let name) = row.value(0) { built.append(name) }
        }
        for table in built { try connection.run(sql: "ALTER TABLE \(building).\(sqlQuote(table)) SET SCHEMA \(sqlQuote(home))") }
        try connection.run(sql: "DROP SCHEMA \(building)")
        try connection.run(sql: "SELECT set_config('search_path', $1, true)", arguments: [.text(sqlQuote(home))])
        for statement in PostgreSQLFunctions.commitCounterStatements(for: schema, dialect: dialect) { try connection.run(sql: statement) }
        return report
    }
}

extension PostgreSQLStore {
    /// Migrates the store at `url` to `model` by lightweight migration (the source model and mapping chosen as for a
    /// SQLite store: `LightweightMigration.plan`), in one transaction.
    ///
    /// - Returns: What changed (nothing when the store is already `model`'s).
    /// - Throws: `CoreDataError(.migrationMissingSourceModel)` when the store keeps no model that wrote it,
    ///   `.inferredMappingModel` for a change lightweight migration cannot infer, `.migration` for a result the model
    ///   refuses or a failure of the server; the store is then unchanged.
    @discardableResult
    package static func migrateStore(at url: URL, to model: NSManagedObjectModel, from source: NSManagedObjectModel? = nil) throws
        -> MigrationReport
    {
        let place = try PostgreSQLLocation(url).description
        guard
            let (origin, mapping) = try LightweightMigration.plan(
                at: url, place: place, metadata: try metadata(at: url), to: model, from: source)
        else { return MigrationReport() }
        return try PostgreSQLMigration.migrateStore(at: url, from: origin, to: model, mapping: mapping)
    }
}
