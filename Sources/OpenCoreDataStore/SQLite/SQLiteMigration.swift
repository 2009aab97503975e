import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Migrates a SQLite store from one model version to another along a mapping model.
///
/// The new store is built beside the old one (`<name>.migrating`), filled from it with `INSERT … SELECT` statements in
/// one transaction (rows streamed by SQLite, never loaded as objects), checked against the destination model, and
/// only then put in the old one's place by a rename: a failure, or a crash at any moment, leaves the old store as it
/// was (a half-built `.migrating` file is removed by the next attempt). The store keeps its UUID, so object IDs and
/// their URIs stay valid.
package enum SQLiteMigration {
    /// What a migration did, a line per change, for people (`coredata migrate` prints it).
    package typealias Report = MigrationReport

    /// Migrates the store at `url`, written with `source`, to `destination` along `mapping`: in place, or into a
    /// new store at `target` (the source then stays as it is).
    ///
    /// - Throws: `CoreDataError(.migration)` naming the entity and attribute whose values the destination model
    ///   refuses (a required value missing), or what stopped the migration; the store is then unchanged.
    package static func migrateStore(
        at url: URL, from source: NSManagedObjectModel, to destination: NSManagedObjectModel, mapping: NSMappingModel,
        into target: URL? = nil
    ) throws -> Report {
        try source.validate()
        try destination.validate()
        let path = url.path
        let targetPath = (target ?? url).standardizedFileURL.path
        let inPlace = targetPath == url.standardizedFileURL.path
        if !inPlace, FileManager.default.fileExists(atPath: targetPath) {
            throw CoreDataError(.migration, "A file is already at \(targetPath); the migrated store goes to a new path.")
        }
        let building = targetPath + ".migrating"
        removeFiles(building)
        do {
            let (uuid, extra, sourceSchema) = try readSource(url, model: source)
            let schema = RelationalSchema(appleLayoutFor: destination)
            var report = Report()
            try build(
                building, from: path, sourceSchema: sourceSchema, schema: schema, mapping: mapping, uuid: uuid, extra: extra,
                report: &report)
            if inPlace {
                try swap(building, into: path)
            } else if rename(building, targetPath) != 0 {
                throw CoreDataError(.migration, "Cannot put the migrated store at \(targetPath): \(String(cString: strerror(errno))).")
            }
            return report
        } catch {
            removeFiles(building)
            if let error = error as? CoreDataError { throw error }
            throw CoreDataError(.migration, "Migrating \(path) failed: \(error); the store was not changed.", underlyingError: error)
        }
    }

    private static func removeFiles(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// The source store's UUID, the metadata keys a migration keeps (those Core Data does not write: the app's, and
    /// the change token), and its tables.
    private static func readSource(_ url: URL, model: NSManagedObjectModel) throws -> (
        String, [String: PropertyListValue], RelationalSchema
    ) {
        try StoreFile.read(url) { db, path in
            guard let catalog = try AppleStoreCatalog.read(db, place: path) else {
                let id = try SQLiteStore.storeIdentifier(in: db, model: model, place: path, upgradable: true) ?? UUID().uuidString
                let token = try Int64.fetchOne(db, sql: "SELECT CAST(Z_VALUE AS INTEGER) FROM Z_METADATA WHERE Z_KEY = 'changeToken'") ?? 0
                let format = try String.fetchOne(db, sql: "SELECT Z_VALUE FROM Z_METADATA WHERE Z_KEY = 'formatVersion'")
                guard format != "1" else {
                    throw CoreDataError(
                        .migration, "\(path) is in store format 1; open it once read-write with the model that wrote it, then migrate it.")
                }
                return (id, [AppleStoreMetadata.changeTokenKey: .integer(token + 1)], RelationalSchema(legacyLayoutFor: model))
            }
            var extra = catalog.metadata.filter { !$0.key.hasPrefix("NS") && !$0.key.hasPrefix("_NS") }
            if case .integer(let token)? = catalog.metadata[AppleStoreMetadata.changeTokenKey] {
                extra[AppleStoreMetadata.changeTokenKey] = .integer(token + 1)
            }
            return (catalog.uuid, extra, try RelationalSchema(model: model, appleStore: catalog, place: path))
        }
    }

    /// Builds the migrated store at `building` from the store at `path`, in one transaction.
    private static func build(
        _ building: String, from path: String, sourceSchema: RelationalSchema, schema: RelationalSchema, mapping: NSMappingModel,
        uuid: String, extra: [String: PropertyListValue], report: inout Report
    ) throws {
        let queue = try DatabaseQueue(path: building)
        defer { try? queue.close() }
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA auto_vacuum = 2") }
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "ATTACH DATABASE ? AS src", arguments: ["file:\(path)?mode=ro"])
            defer { try? db.execute(sql: "DETACH DATABASE src") }
            try db.inTransaction {
                _ = try AppleStoreMetadata.create(db, schema: schema, model: schema.model, uuid: uuid, extra: extra)
                db.add(function: uuidBytes)
                var copier = RowCopier(source: sourceSchema, destination: schema, mapping: mapping, db: db, from: "src.", into: "main.")
                try copier.copy(report: &report)
                try copier.validate()
                try copyHistory(db, remap: copier.historyEntityRemap(prefix: "main."))
                try copier.updateKeyMaxima()
                return .commit
            }
        }
        try queue.writeWithoutTransaction { db in _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") }
    }

    /// `ocd_uuid_bytes(text)`: a UUID written as text (this project's former layout) as its 16 bytes.
    private static let uuidBytes = DatabaseFunction("ocd_uuid_bytes", argumentCount: 1, pure: true) { values in
        guard let text = String.fromDatabaseValue(values[0]), let uuid = UUID(uuidString: text) else { return values[0] }
        return withUnsafeBytes(of: uuid.uuid) { Data($0) }
    }

    /// Core Data's persistent-history tables (`ATRANSACTION`, `ACHANGE`, `ATRANSACTIONSTRING`) come along as they are
    /// (their own tables, indexes and `Z_PRIMARYKEY` rows), the entity numbers a change names mapped to the new ones
    /// by `remap`.
    private static func copyHistory(_ db: Database, remap: String?) throws {
        let tables = try String.fetchAll(
            db, sql: "SELECT name FROM src.sqlite_master WHERE type = 'table' AND name IN ('ATRANSACTION', 'ACHANGE', 'ATRANSACTIONSTRING')"
        )
        guard !tables.isEmpty else { return }
        for table in tables {
            guard
                let create = try String.fetchOne(
                    db, sql: "SELECT sql FROM src.sqlite_master WHERE type = 'table' AND name = ?", arguments: [table])
            else { continue }
            try db.execute(sql: create)
            try db.execute(sql: "INSERT INTO main.\(sqlQuote(table)) SELECT * FROM src.\(sqlQuote(table))")
            for index in try String.fetchAll(
                db, sql: "SELECT sql FROM src.sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", arguments: [table])
            {
                try db.execute(sql: index)
            }
        }
        if tables.contains("ACHANGE"), try db.columns(in: "ACHANGE").contains(where: { $0.name.uppercased() == "ZENTITY" }), let remap {
            try db.execute(sql: remap)
        }
        try db.execute(
            sql: "INSERT OR REPLACE INTO main.Z_PRIMARYKEY SELECT * FROM src.Z_PRIMARYKEY WHERE Z_ENT >= 16000 AND Z_ENT < 17000")
    }

    /// Puts the built store in the old one's place: the old store's WAL is folded into it first (so that no stale WAL
    /// is ever applied to the new file), then the new file is renamed over it, then the old `-wal` and `-shm` go.
    private static func swap(_ building: String, into path: String) throws {
        let old = try DatabaseQueue(path: path)
        // A connection still reading the old store (another process) keeps the checkpoint from finishing: the store
        // is in use, and is left as it was.
        let busy = try old.writeWithoutTransaction { db in try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")?[0] as Int? }
        try old.close()
        guard busy ?? 0 == 0 else {
            throw CoreDataError(
                .migration, "\(path) is open in another connection or process; migrate it when nothing else uses it. It was not changed.")
        }
        guard rename(building, path) == 0 else {
            throw CoreDataError(.migration, "Cannot put the migrated store in place of \(path): \(String(cString: strerror(errno))).")
        }
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        for suffix in ["-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: building + suffix) }
    }
}

extension SQLiteStore {
    /// Migrates the store at `url` to `model` by lightweight migration: the source model is the version of `model`'s
    /// bundle whose hashes the store recorded, else the one the store caches (`Z_MODELCACHE`, checked against the
    /// recorded entities), and the mapping is inferred.
    ///
    /// For example:
    /// ```swift
    /// let report = try SQLiteStore.migrateStore(at: url, to: newModel)
    /// report.changes.forEach { print($0) }   // "added Item.note", "renamed Item.title to name", …
    /// ```
    /// - Returns: What changed (nothing when the store is already `model`'s).
    /// - Throws: `CoreDataError(.migrationMissingSourceModel)` when the store keeps no model that wrote it,
    ///   `.inferredMappingModel` for a change lightweight migration cannot infer, `.migration` for a result the model
    ///   refuses; the store is then unchanged.
    @discardableResult
    package static func migrateStore(at url: URL, to model: NSManagedObjectModel, from source: NSManagedObjectModel? = nil) throws
        -> MigrationReport
    {
        guard
            let (origin, mapping) = try LightweightMigration.plan(
                at: url, place: url.path, metadata: try metadata(at: url), to: model, from: source)
        else { return MigrationReport() }
        return try SQLiteMigration.migrateStore(at: url, from: origin, to: model, mapping: mapping)
    }
}
