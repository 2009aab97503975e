import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

extension SQLiteStore {
    /// Brings a store of an earlier format up to the current one in the open's transaction: a format-1 store's
    /// entities are renumbered (`Z_ENT` and the to-one entity columns) to Core Data's numbering, and a format-1 or -2
    /// store's version hashes (our own, then) are replaced by Core Data's.
    static func upgradeFormat(_ db: Database, schema: RelationalSchema, model: NSManagedObjectModel) throws {
        let format = try String.fetchOne(db, sql: "SELECT Z_VALUE FROM Z_METADATA WHERE Z_KEY = 'formatVersion'") ?? "1"
        guard format != formatVersion else { return }
        if format == "1" { try renumberEntities(db, schema: schema, model: model) }
        try db.execute(sql: "DELETE FROM Z_METADATA WHERE Z_KEY LIKE 'entityHash.%'")
        for (name, hash) in model.entityVersionHashesByName {
            try db.execute(sql: "INSERT INTO Z_METADATA (Z_KEY, Z_VALUE) VALUES (?, ?)", arguments: ["entityHash." + name, hash.hexString])
        }
        try db.execute(sql: "UPDATE Z_METADATA SET Z_VALUE = ? WHERE Z_KEY = 'modelVersionHash'", arguments: [model.versionHashString])
        try db.execute(sql: "INSERT OR REPLACE INTO Z_METADATA (Z_KEY, Z_VALUE) VALUES ('formatVersion', ?)", arguments: [formatVersion])
    }

    private static func renumberEntities(_ db: Database, schema: RelationalSchema, model: NSManagedObjectModel) throws {
        let old = model.entities.sorted { $0.name < $1.name }
        let cases = old.enumerated().map { "WHEN \($0.offset + 1) THEN \($0.element.entityID)" }.joined(separator: " ")
        for table in schema.tables {
            var columns = [SQLColumns.entity]
            for (name, _) in table.columns where name.hasSuffix("_ENT") { columns.append(name) }
            let sets = columns.map { "\(sqlQuote($0)) = CASE \(sqlQuote($0)) \(cases) ELSE \(sqlQuote($0)) END" }
            try db.execute(sql: "UPDATE \(sqlQuote(table.name)) SET \(sets.joined(separator: ", "))")
        }
    }

    /// The identifier of the store in `db`, nil for an empty database; throws for a database that is not an
    /// OpenCoreData store or was made with another model.
    static func storeIdentifier(in db: Database, model: NSManagedObjectModel, place: String, upgradable: Bool = false) throws -> String? {
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
        var meta: [String: String] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT Z_KEY, Z_VALUE FROM Z_METADATA") { meta[row[0]] = row[1] }
        guard let storeID = meta["identifier"] else {
            throw CoreDataError(.persistentStoreIncompatibleSchema, "\(place) has no store identifier in Z_METADATA.")
        }
        let format = meta["formatVersion"] ?? "1"
        guard ["2", formatVersion].contains(format) || (format == "1" && upgradable) else {
            throw CoreDataError(
                .persistentStoreIncompatibleSchema,
                format == "1"
                    ? "\(place) was written by an earlier OpenCoreData (store format 1); open it once read-write to upgrade it, then read it."
                    : "\(place) was written by a newer OpenCoreData (store format \(format)); this version reads format \(formatVersion).")
        }
        // Formats 1 and 2 recorded hashes of our own; a read-only open checks them as they are.
        let legacy = format != formatVersion
        if (meta["modelVersionHash"] ?? "") != (legacy ? model.legacyVersionHashString : model.versionHashString) {
            var stored: [String: String] = [:]
            for (key, value) in meta where key.hasPrefix("entityHash.") { stored[String(key.dropFirst(11))] = value }
            let current = legacy ? model.legacyEntityVersionHashes : model.entityVersionHashesByName.mapValues(\.hexString)
            throw CoreDataError(
                .persistentStoreIncompatibleVersionHash,
                "The model used to open \(place) is not the one that created it (\(hashDifferences(stored: stored, current: current))). It needs migrating to this model: open it with shouldMigrateStoreAutomatically (the default of a container), or run `coredata migrate`."
            )
        }
        return storeID
    }

    /// What differs between the entity hashes a store recorded and a model's, in words.
    static func hashDifferences(stored: [String: String], current: [String: String]) -> String {
        var differences: [String] = []
        for name in Set(current.keys).union(stored.keys).sorted() {
            switch (stored[name], current[name]) {
            case (nil, _?): differences.append("entity '\(name)' is new in the model")
            case (_?, nil): differences.append("entity '\(name)' is in the store but not the model")
            case (let a?, let b?) where a != b: differences.append("entity '\(name)' changed")
            default: break
            }
        }
        return differences.isEmpty ? "version hashes differ" : differences.joined(separator: "; ")
    }
}

extension SQLiteStore {
    /// Writes an empty store in this project's former layout (format 3), as stores written before it wrote Core Data's
    /// look; for tests of reading and upgrading them.
    package static func createFormerLayoutStore(at url: URL, model: NSManagedObjectModel) throws {
        try model.validate()
        let schema = RelationalSchema(legacyLayoutFor: model)
        let queue = try DatabaseQueue(path: url.path)
        try queue.write { db in
            for statement in schema.creationStatements { try db.execute(sql: statement) }
            try writeModelCache(db, model: model)
            try db.execute(sql: "CREATE TABLE Z_METADATA (Z_KEY TEXT PRIMARY KEY, Z_VALUE TEXT)")
            var meta = [
                ("identifier", UUID().uuidString), ("modelVersionHash", model.versionHashString), ("formatVersion", formatVersion),
                ("changeToken", "0"),
            ]
            for (name, hash) in model.entityVersionHashesByName { meta.append(("entityHash." + name, hash.hexString)) }
            for (key, value) in meta {
                try db.execute(sql: "INSERT INTO Z_METADATA (Z_KEY, Z_VALUE) VALUES (?, ?)", arguments: [key, value])
            }
        }
        try queue.close()
    }
}
