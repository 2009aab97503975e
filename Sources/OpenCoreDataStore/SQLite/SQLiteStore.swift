import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel
import OpenCoreDataPredicate

/// The SQLite persistent store, on GRDB: a `DatabasePool` in WAL mode for a file, a `DatabaseQueue` in memory.
///
/// Opening checks that the file is a Core Data store of the same model (by version hash; a store Apple's Core Data
/// wrote also by its tables) and creates an empty file's tables in Core Data's own layout. Every save is one
/// transaction with optimistic locking (`Z_OPT`).
///
/// For example:
/// ```swift
/// let store = try SQLiteStore(url: URL(fileURLWithPath: "/tmp/app.sqlite"), model: model, readOnly: true)
/// print(try store.changeToken)
/// ```
public final class SQLiteStore: StoreEngine, @unchecked Sendable {
    /// The store's UUID, kept in its metadata; object IDs carry it.
    public let identifier: String
    /// The store file, or nil in memory.
    public let url: URL?
    /// The model the store was opened with.
    public let model: NSManagedObjectModel
    /// The model configuration whose entities the coordinator keeps in this store.
    ///
    /// As in Core Data, the file has the tables of every entity of the model whatever the configuration, and its
    /// metadata records every entity's version hash: the configuration only says which entities' objects go here.
    public let configurationName: String
    /// The store's tables, and the reads every SQL back end shares.
    package let core: RelationalCore
    package var schema: RelationalSchema { core.schema }
    /// `NSSQLiteStoreType`, or `NSInMemoryStoreType` without a URL.
    public var type: String { url == nil ? NSInMemoryStoreType : NSSQLiteStoreType }

    let writer: any DatabaseWriter
    /// A read-only connection of its own for reads of one statement by key (faults, a batch of a batched fetch, a
    /// to-many's destinations), when the store has a pool of readers.
    ///
    /// Taking a reader from GRDB's pool costs three dispatches, a semaphore and a check of the schema's version: a
    /// seventh of the instructions of a fault's batch of 20 rows. This connection costs one dispatch. A read that
    /// finds it busy (another thread's fault) takes a reader of the pool, so faults never wait on each other.
    let keyedReader: DatabaseQueue?
    /// Held while `keyedReader` reads.
    let keyedReaderLock = NSLock()
    /// The copy a read-only store is read from when its own folder cannot take the WAL's index (removed with it).
    let temporaryCopy: TemporaryStoreCopy?
    /// What a store in Core Data's layout says about itself (every new store, and those Apple's Core Data wrote); nil
    /// for a store of this project's former layout.
    package let appleCatalog: AppleStoreCatalog?
    let closedLock = NSLock()
    var closed = false
    var _rowsRead = 0
    /// The transaction `performAsOneTransaction` holds open, and the thread running its body (guarded by `closedLock`).
    var heldTransaction: (database: Database, thread: pthread_t)?
    /// The history transactions saves recorded inside the held transaction, noted as committed when it commits.
    var heldHistoryNumbers: [Int64] = []
    /// Records every write's changes as persistent history; nil when the store keeps none (or is read-only).
    let history: PersistentHistory?
    /// The writer's commits, told apart from other connections' by the remote-change watcher.
    let commitCounter = CommitCounter()
    /// The history transactions this store wrote that no remote-change notification has passed yet (`closedLock`).
    var _ownHistoryTransactions: Set<Int64> = []
    /// Those of them whose write has committed (`closedLock`): the cursor may pass them once it reaches them.
    var _ownCommittedHistory: Set<Int64> = []
    /// The newest history transaction remote-change notifications have passed, when they follow history
    /// (`closedLock`).
    var historyCursor: Int64?

    /// How many rows fetches and faults have read so far (for tests and benchmarks that count work, not time).
    public var rowsRead: Int { closedLock.withLock { _rowsRead } }

    func countRowsRead(_ n: Int) { closedLock.withLock { _rowsRead += n } }

    /// Format of the store's own bookkeeping; bump when the layout changes.
    ///
    /// 2: entities numbered as Core Data numbers them (case-insensitive name order, subentities after their parent);
    /// format 1 numbered them in byte order of their names, and is renumbered on a read-write open.
    /// 3: version hashes computed as Core Data computes them; formats 1 and 2 recorded hashes of our own, which are
    /// checked as they were and rewritten on a read-write open.
    static let formatVersion = "3"

    /// Opens (or creates) a store.
    ///
    /// - Parameters:
    ///   - url: The SQLite file, or `nil` for a store in memory.
    ///   - model: The model; it is validated and frozen.
    ///   - readOnly: Open without writing anything (the file must already be a store).
    ///   - timeout: How long to wait for a lock another connection or process holds before failing.
    ///   - tracksHistory: Record persistent history (`NSPersistentHistoryTrackingKey`), creating its tables when the
    ///     store has none. A store that has them records history whatever this says, so that no writer leaves gaps.
    ///   - configurationName: The model configuration whose objects the store holds (nil: every entity's).
    /// - Throws: `CoreDataError` — `.persistentStoreOpen` for a configuration the model does not have,
    ///   `.persistentStoreNotAStore` for a file that is not SQLite,
    ///   `.persistentStoreIncompatibleVersionHash` for a store made with another model, `.persistentStoreOpen` when
    ///   the file cannot be opened (missing folder, permissions, locked by another process).
    public init(
        url: URL?, model: NSManagedObjectModel, readOnly: Bool = false, timeout: TimeInterval = 5, tracksHistory: Bool = false,
        configurationName: String? = nil
    ) throws {
        try model.validate()
        if let configurationName, model.entities(forConfigurationName: configurationName) == nil {
            let known = model.configurations.isEmpty ? "none" : model.configurations.joined(separator: ", ")
            throw CoreDataError(
                .persistentStoreOpen, "The model has no configuration '\(configurationName)' (its configurations: \(known)).")
        }
        self.url = url
        self.model = model
        self.configurationName = configurationName ?? defaultConfigurationName
        let path = url?.path
        let writer: any DatabaseWriter
        var apple: AppleStoreCatalog?
        var copy: TemporaryStoreCopy?
        do {
            (writer, apple) = try Self.open(path: path, model: model, readOnly: readOnly, timeout: timeout, temporaryCopy: &copy)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw Self.openError(error, path: path)
        }
        self.writer = writer
        temporaryCopy = copy
        if writer is DatabasePool, let path {
            // (Without it, reads of one statement take a reader of the pool, as everything else does.)
            var config = Self.configuration(path: path, readOnly: readOnly, timeout: timeout)
            config.readonly = true
            keyedReader = try? DatabaseQueue(path: path, configuration: config)
        } else {
            keyedReader = nil
        }
        let schema: RelationalSchema
        let storeID: String
        do {
            if apple == nil, let created = try Self.prepare(writer: writer, model: model, path: path, readOnly: readOnly) {
                apple = created
            }
            if let apple {
                schema = try RelationalSchema(model: model, appleStore: apple, place: path ?? "the in-memory store")
                storeID = apple.uuid
            } else {
                // A store of this project's former layout (formats 1–3), checked and upgraded by `prepare`.
                schema = RelationalSchema(legacyLayoutFor: model)
                storeID = try writer.read { db in try Self.storeIdentifier(in: db, model: model, place: path ?? "") } ?? ""
            }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw Self.openError(error, path: path)
        }
        core = RelationalCore(
            identifier: storeID, schema: schema, dialect: SQLiteDialect(), externalData: url.map(AppleExternalData.folder))
        self.appleCatalog = apple
        history = try Self.startHistory(
            writer: writer, schema: schema, model: model, requested: tracksHistory, readOnly: readOnly, path: path)
        if !readOnly, path != nil { writer.writeWithoutTransaction { [commitCounter] db in commitCounter.install(on: db) } }
        identifier = storeID
    }

    /// How the store's connections are configured: its SQL functions, the -wal and -shm files kept, the busy timeout.
    private static func configuration(path: String?, readOnly: Bool, timeout: TimeInterval) -> Configuration {
        var config = Configuration()
        config.prepareDatabase { db in
            SQLiteFunctions.install(in: db)
            // Keep the -wal and -shm files when the last connection closes (as Apple's stores keep them): without a
            // non-empty -wal, GRDB's pool creates and drops a table on every read-write open to make one, which
            // rewrote the store's header and schema cookie each time the store was opened, even to read.
            guard !readOnly, path != nil else { return }
            var persist: CInt = 1
            _ = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
        }
        config.busyMode = .timeout(timeout)
        config.readonly = readOnly
        config.label = "OpenCoreData.SQLiteStore"
        return config
    }

    /// Opens the connections: a file is looked at before SQLite opens it; a store in Core Data's layout is checked by
    /// its version hashes (`checkVersionHashes`) and its catalog returned.
    private static func open(
        path: String?, model: NSManagedObjectModel, readOnly: Bool, timeout: TimeInterval, temporaryCopy: inout TemporaryStoreCopy?
    ) throws -> (any DatabaseWriter, AppleStoreCatalog?) {
        let config = configuration(path: path, readOnly: readOnly, timeout: timeout)
        guard let path else { return (try DatabaseQueue(configuration: config), nil) }
        // Look before opening: a file that is not this project's store must not be switched to WAL mode,
        // written to, or left with -wal and -shm files.
        let state = try StoreFile.inspect(path)
        if readOnly {
            guard state != .missing else { throw CoreDataError(.persistentStoreOpen, "No store at \(path).") }
            let (queue, copy) = try StoreFile.openReadOnly(path, state: state, configuration: config)
            temporaryCopy = copy
            let catalog = try queue.read { db in try AppleStoreCatalog.read(db, place: path) }
            if let catalog { try checkVersionHashes(catalog, model: model, place: path, readOnly: true) }
            return (queue, catalog)
        }
        var catalog: AppleStoreCatalog?
        if case .sqlite = state {
            var inspection = config
            inspection.readonly = true
            let reader = try DatabaseQueue(path: StoreFile.readOnlyURI(path, state: state), configuration: inspection)
            defer { try? reader.close() }
            catalog = try reader.read { db in
                guard let catalog = try AppleStoreCatalog.read(db, place: path) else {
                    _ = try Self.storeIdentifier(in: db, model: model, place: path, upgradable: true)
                    return nil
                }
                return catalog
            }
            if let catalog { try checkVersionHashes(catalog, model: model, place: path, readOnly: false) }
        }
        if state == .missing || state == .empty {
            // Core Data's stores vacuum incrementally (`_NSAutoVacuumLevel`): set before the new file's first page is
            // written (the pool's opening writes it), which spares a VACUUM later.
            let queue = try DatabaseQueue(path: path)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA auto_vacuum = 2")
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            }
            try queue.close()
        }
        let pool = try DatabasePool(path: path, configuration: config)
        if let recorded = catalog, recorded.versionHashes != model.entityVersionHashesByName {
            // A format-4 store of this model (checked above): it records Core Data's hashes from now on.
            try pool.write { db in try AppleStoreMetadata.recordVersionHashes(db, model: model) }
            catalog = try pool.read { db in try AppleStoreCatalog.read(db, place: path) }
        }
        return (pool, catalog)
    }

    /// A store in Core Data's layout that this project wrote opens only with the model whose version hashes it
    /// recorded.
    ///
    /// One Apple's Core Data wrote is checked by its tables instead (this project does not reproduce every hash Core
    /// Data computes, those of ordered relationships for one). It opens read-write when its hashes are the model's, or
    /// when the model it caches (the one that last wrote it) hashes as the model does; when that cached model is
    /// another version, or when it has no cache and a version of the model's bundle has its hashes, the store needs
    /// migrating (and a container does it). A store is never written by a model that may not be the one it was made
    /// with.
    private static func checkVersionHashes(_ catalog: AppleStoreCatalog, model: NSManagedObjectModel, place: String, readOnly: Bool) throws
    {
        let stored = catalog.versionHashes
        let current = model.entityVersionHashesByName
        guard stored != current else { return }
        let differences = hashDifferences(stored: stored.mapValues(\.hexString), current: current.mapValues(\.hexString))
        if case .string(let format)? = catalog.metadata[AppleStoreMetadata.formatKey] {
            // Written by this project before its hashes of ordered relationships and derived attributes were Core
            // Data's: the same model, recognised by those hashes (a read-write open records Core Data's).
            if format == "4", stored == model.format4EntityVersionHashesByName { return }
            throw CoreDataError(
                .persistentStoreIncompatibleVersionHash,
                "The model used to open \(place) is not the one that created it (\(differences)). It needs migrating to this model: open it with shouldMigrateStoreAutomatically (the default of a container), or run `coredata migrate`."
            )
        }
        if catalog.hasModelCache, let cached = try? NSManagedObjectModel.cachedModel(ofStoreAt: URL(fileURLWithPath: place)) {
            if cached.entityVersionHashesByName == current { return }
            guard readOnly else {
                throw CoreDataError(
                    .persistentStoreIncompatibleVersionHash,
                    "\(place) was written by Apple's Core Data with another version of the model (\(differences)). It needs migrating to this model: open it with shouldMigrateStoreAutomatically (the default of a container), or run `coredata migrate`."
                )
            }
        }
        // No cache (stores written before iOS 12), but a version of the model's bundle has the store's hashes: that
        // version wrote it, and the store needs migrating from it.
        if !readOnly, let bundle = model.versionBundleURL,
            NSManagedObjectModel.version(inBundleAt: bundle, withVersionHashes: stored) != nil
        {
            throw CoreDataError(
                .persistentStoreIncompatibleVersionHash,
                "\(place) was written by Apple's Core Data with another version of the model in \(bundle.lastPathComponent) (\(differences)). It needs migrating to this model: open it with shouldMigrateStoreAutomatically (the default of a container), or run `coredata migrate`."
            )
        }
        if !readOnly {
            throw CoreDataError(
                .persistentStoreOpen,
                "\(place) was written by Apple's Core Data, and its version hashes are not this model's (\(differences)); OpenCoreData opens it read-only (NSReadOnlyPersistentStoreOption, or `coredata fetch`). It was not changed."
            )
        }
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

    /// Creates a new store in Core Data's layout and returns its catalog, or checks (and upgrades, read-write) a store
    /// of this project's former layout and returns nil.
    static func prepare(writer: any DatabaseWriter, model: NSManagedObjectModel, path: String?, readOnly: Bool) throws
        -> AppleStoreCatalog?
    {
        let place = path ?? "the in-memory store"
        let check: (Database) throws -> String? = { db in try storeIdentifier(in: db, model: model, place: place, upgradable: !readOnly) }
        if readOnly {
            guard try writer.read(check) != nil else {
                throw CoreDataError(.persistentStoreIncompatibleSchema, "\(place) is empty: it holds no OpenCoreData store.")
            }
            return nil
        }
        if path != nil {
            // Core Data's stores vacuum incrementally (`_NSAutoVacuumLevel`). A new file got it before its first page
            // (`open`); an empty database made by someone else takes a VACUUM for it.
            try writer.writeWithoutTransaction { db in
                guard try !db.tableExists("Z_METADATA"), try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") != 2 else { return }
                try db.execute(sql: "PRAGMA auto_vacuum = 2")
                try db.execute(sql: "VACUUM")
            }
        }
        return try writer.write { db in
            if try check(db) != nil {
                try upgradeFormat(db, schema: RelationalSchema(legacyLayoutFor: model), model: model)
                if try !db.tableExists("Z_MODELCACHE") { try writeModelCache(db, model: model) }
                return nil
            }
            _ = try AppleStoreMetadata.create(db, schema: RelationalSchema(appleLayoutFor: model), model: model)
            return try AppleStoreCatalog.read(db, place: place)
        }
    }

    /// Keeps the model in the store as Core Data does (`Z_MODELCACHE`: the compiled model, DEFLATE-compressed), so
    /// that the store opens without the model file (`NSManagedObjectModel.cachedModel(ofStoreAt:)`, `coredata fetch`),
    /// fetched properties, fetch request templates and derived attributes included.
    static func writeModelCache(_ db: Database, model: NSManagedObjectModel) throws {
        try db.execute(sql: "CREATE TABLE IF NOT EXISTS Z_MODELCACHE (Z_CONTENT BLOB)")
        try db.execute(
            sql: "INSERT INTO Z_MODELCACHE (Z_CONTENT) VALUES (?)",
            arguments: [Inflate.storedDeflate(model.compiledArchive(predicates: PredicateFormatArchiver()))])
    }

    /// Throws when the store is closed; else returns the transaction `performAsOneTransaction` holds when the caller
    /// is the thread running its body (one lock for both: every read and save asks).
    @discardableResult
    func checkOpen() throws -> Database? {
        try closedLock.withLock {
            if closed { throw CoreDataError(.persistentStoreOperation, "The store \(url?.path ?? "in memory") has been closed.") }
            guard let held = heldTransaction, pthread_equal(held.thread, pthread_self()) != 0 else { return nil }
            return held.database
        }
    }

    /// Closes the store's connections; later use throws.
    public func close() throws {
        closedLock.lock()
        closed = true
        closedLock.unlock()
        if let keyedReader { try keyedReaderLock.withLock { try keyedReader.close() } }
        if let pool = writer as? DatabasePool { try pool.close() }
        if let queue = writer as? DatabaseQueue, url != nil { try queue.close() }
    }

    /// A number that grows with every save, by any connection or process (that uses this project: a save by Apple's
    /// Core Data does not change it).
    public var changeToken: Int64 {
        get throws {
            try read { db in
                if schema.isAppleLayout { return try AppleStoreMetadata.changeToken(db) }
                return try Int64.fetchOne(db, sql: "SELECT CAST(Z_VALUE AS INTEGER) FROM Z_METADATA WHERE Z_KEY = 'changeToken'") ?? 0
            }
        }
    }

    /// Runs `body` with a reader, mapping SQLite errors to `CoreDataError`.
    ///
    /// `oneStatement`: `body` runs one statement, which runs on a reader without GRDB's transaction around it: SQLite
    /// runs a lone statement in a read transaction of its own, so it sees one state of the store either way, and
    /// `BEGIN` and `COMMIT` would be two more statements per read (6% of the instructions of an edit that fires a fault,
    /// by callgrind).
    func read<T>(oneStatement: Bool = false, _ body: (Database) throws -> T) throws -> T {
        let held = try checkOpen()
        do {
            // Inside `performAsOneTransaction`, its thread reads what the transaction has written so far.
            if let held { return try body(held) }
            // A context pinned to a query generation reads the data as it was then.
            let pinned = StoreGeneration.pinned
            if !pinned.isEmpty, let generation = pinned[identifier] { return try generation.snapshot.read(body) }
            if oneStatement, let keyedReader, keyedReaderLock.try() {
                defer { keyedReaderLock.unlock() }
                return try keyedReader.unsafeRead(body)
            }
            return try oneStatement ? writer.unsafeRead(body) : writer.read(body)
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
        // A multi-row insert's SQL repeats its row of parameters dozens of times: its first row says what it was.
        var sql = db.sql ?? ""
        if let values = sql.range(of: ") VALUES ("), let end = sql[values.upperBound...].range(of: "), (") {
            let rows = sql.components(separatedBy: "), (").count
            sql = sql[..<end.lowerBound] + "), … (\(rows) rows)"
        }
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

}
