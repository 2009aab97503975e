import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

/// Connects contexts to the persistent stores of one model.
///
/// A coordinator holds one store, or one per configuration of the model: each store then keeps the objects of its
/// configuration's entities, fetches read every store holding the entity and merge their results, and a save writes
/// each object to its own store (see `addPersistentStore(ofType:configurationName:at:options:)`). Contexts on the same
/// coordinator see each other's saves (and merge them with `mergeChanges(fromContextDidSave:)`).
///
/// For example:
/// ```swift
/// let coordinator = NSPersistentStoreCoordinator(managedObjectModel: model)
/// try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, at: storeURL)
/// ```
public final class NSPersistentStoreCoordinator: @unchecked Sendable {
    /// The model every store of this coordinator is opened with.
    public let managedObjectModel: NSManagedObjectModel
    private let lock = NSLock()
    private var stores: [any StoreEngine] = []
    /// What contexts read and save through: the one store, or a router over several (or over one configuration).
    private var engine: (any StoreEngine)?
    /// The stores new objects were assigned to (`NSManagedObjectContext.assign(_:to:)`).
    let assignments = StoreAssignments()
    /// The remote-change watchers of the stores added with `NSPersistentStoreRemoteChangeNotificationPostOptionKey`.
    private var watchers: [ObjectIdentifier: any RemoteChangeWatching] = [:]
    /// Metadata set with `setMetadata(_:for:)` and not written yet, by store (written when a context saves).
    var stagedMetadata: [ObjectIdentifier: (store: any MetadataStore, values: [String: Any])] {
        get { lock.withLock { _stagedMetadata } }
        set { lock.withLock { _stagedMetadata = newValue } }
    }
    private var _stagedMetadata: [ObjectIdentifier: (store: any MetadataStore, values: [String: Any])] = [:]

    /// A coordinator for `model`, with no stores yet (add them with `addPersistentStore`).
    public init(managedObjectModel model: NSManagedObjectModel) {
        self.managedObjectModel = model
        // As Core Data finds each entity's class by the name the model gives it: a module-qualified Swift class name
        // (`MyApp.Entry`) resolves here; an unqualified one cannot on Linux (set `managedObjectClass` instead).
        for entity in model.entities where entity.managedObjectClass == nil {
            guard let name = entity.managedObjectClassName, name.contains("."), name != "NSManagedObject",
                let cls = _typeByName(name) as? NSManagedObject.Type
            else { continue }
            entity.managedObjectClass = cls
        }
    }

    /// The stores added so far.
    public var persistentStores: [any PersistentStore] {
        lock.lock()
        defer { lock.unlock() }
        return stores
    }

    /// The stores, as contexts use them.
    var storeEngines: [any StoreEngine] {
        lock.lock()
        defer { lock.unlock() }
        return stores
    }

    /// The store contexts read and save through: the coordinator's one store, or its stores seen as one.
    var contextStore: (any StoreEngine)? {
        lock.lock()
        defer { lock.unlock() }
        return engine
    }

    /// Makes `engine` follow `stores` (under `lock`).
    private func routeStores() {
        if stores.count == 1, stores[0].configurationName == defaultConfigurationName {
            engine = stores[0]
        } else {
            engine = stores.isEmpty ? nil : StoreRouter(stores: stores, model: managedObjectModel, assignments: assignments)
        }
    }

    /// The store added from `url`, if any.
    public func persistentStore(for url: URL) -> (any PersistentStore)? {
        persistentStores.first { $0.url?.standardizedFileURL == url.standardizedFileURL }
    }

    /// Opens a store and adds it.
    ///
    /// - Parameters:
    ///   - storeType: `NSSQLiteStoreType` or `NSInMemoryStoreType`.
    ///   - configuration: The model configuration whose entities' objects the store keeps (nil: every entity's).
    ///     Add one store per configuration to keep entities apart (a cache beside user data, say); an entity listed in
    ///     several configurations is fetched from all of their stores, and its new objects go to the first of them
    ///     added unless `NSManagedObjectContext.assign(_:to:)` says otherwise.
    ///   - storeURL: The SQLite file (created with its folder if missing); ignored in memory.
    ///   - options: `NSReadOnlyPersistentStoreOption: true` opens without writing; `NSPersistentStoreTimeoutOption`
    ///     (seconds, default 5) is how long to wait for a lock another connection or process holds;
    ///     `NSMigratePersistentStoresAutomaticallyOption` and `NSInferMappingModelAutomaticallyOption` (both `true`)
    ///     migrate a store written with an older model version (lightweight migration) before opening it.
    /// - Returns: The store, opened and added.
    /// - Throws: `CoreDataError` for an unknown store type, a configuration the model does not have, a file that is
    ///   not a store, a store made with another model, a file this coordinator already holds, or an invalid model.
    @discardableResult
    public func addPersistentStore(
        ofType storeType: String, configurationName configuration: String? = nil, at storeURL: URL?, options: [String: Any]? = nil
    ) throws -> any PersistentStore {
        let readOnly = (options?[NSReadOnlyPersistentStoreOption] as? Bool) ?? false
        let timeout =
            (options?[NSPersistentStoreTimeoutOption] as? TimeInterval) ?? (options?[NSPersistentStoreTimeoutOption] as? Int).map(
                TimeInterval.init) ?? 5
        let tracksHistory = (options?[NSPersistentHistoryTrackingKey] as? Bool) ?? false
        let kind = try StoreKind.require(storeType, at: storeURL)
        var request = StoreKind.OpenRequest(url: storeURL, model: managedObjectModel)
        request.readOnly = readOnly
        request.timeout = timeout
        request.tracksHistory = tracksHistory
        request.configurationName = configuration
        if kind.usesFiles, let storeURL, !readOnly {
            let folder = storeURL.deletingLastPathComponent()
            if !FileManager.default.fileExists(atPath: folder.path) {
                do {
                    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                } catch {
                    throw CoreDataError(
                        .persistentStoreOpen, "Cannot create the folder \(folder.path) for the store: \(error.localizedDescription)")
                }
            }
        }
        let store: any StoreEngine
        do {
            store = try kind.open(request)
        } catch let error as CoreDataError where error.code == .persistentStoreIncompatibleVersionHash && !readOnly {
            // A store of an older model version: lightweight migration when the options allow it, as Core Data.
            guard options?[NSMigratePersistentStoresAutomaticallyOption] as? Bool == true, let storeURL, let migrate = kind.migrate else {
                throw error
            }
            if let staged = options?[NSPersistentStoreStagedMigrationManagerOptionKey] as? NSStagedMigrationManager {
                try staged.migrate(storeAt: storeURL, to: managedObjectModel, kind: kind)
            }
            // What the stages did not cover (or all of it, without stages): lightweight, when allowed.
            if options?[NSInferMappingModelAutomaticallyOption] as? Bool == true {
                _ = try migrate(storeURL, managedObjectModel, nil)
            }
            store = try kind.open(request)
        }
        lock.lock()
        defer { lock.unlock() }
        if let url = store.url, stores.contains(where: { $0.url?.standardizedFileURL == url.standardizedFileURL }) {
            try? store.close()
            throw CoreDataError(.persistentStoreOperation, "This coordinator already holds the store at \(url.path).")
        }
        stores.append(store)
        routeStores()
        if options?[NSPersistentStoreRemoteChangeNotificationPostOptionKey] as? Bool == true, let shared = store as? any RemoteChangeStore,
            shared.isShared
        {
            _ = try? shared.startFollowingHistory()
            watchers[ObjectIdentifier(store)] = try shared.watchRemoteChanges(every: .milliseconds(5)) { [weak self] commits in
                self?.postRemoteChange(shared, commits: commits)
            }
        }
        return store
    }

    /// Tells observers that another process (or another store on the same file) committed to `store`.
    private func postRemoteChange(_ store: any RemoteChangeStore, commits: RemoteCommits) {
        var info: [AnyHashable: Any] = [NSStoreUUIDKey: store.identifier]
        if let url = store.url { info[NSPersistentStoreURLKey] = url }
        // A store with history: the transactions committed since the last notification go with it, so that contexts
        // merge exactly what changed. None (a writer that records no history) leaves contexts to re-read.
        if let (others, last) = (try? store.takeOthersHistory(through: commits.historyThrough)) ?? nil {
            info[NSPersistentHistoryTokenKey] = NSPersistentHistoryToken(storeIdentifier: store.identifier, transactionNumber: last)
            // Each commit of a writer that keeps history is a transaction; more commits than other writers'
            // transactions means one of them recorded none (a tool writing SQL): re-read as well.
            let unrecorded = commits.count.map { $0 > others.count } ?? true
            info[RemoteHistory.userInfoKey] = RemoteHistory(transactions: others, needsRereading: unrecorded)
        }
        NotificationCenter.default.post(name: .NSPersistentStoreRemoteChange, object: self, userInfo: info)
    }

    /// Closes and removes a store.
    public func remove(_ store: any PersistentStore) throws {
        lock.lock()
        stores.removeAll { $0 === store }
        routeStores()
        let watcher = watchers.removeValue(forKey: ObjectIdentifier(store))
        lock.unlock()
        watcher?.cancel()
        try store.close()
    }

    /// The object ID a URI made by `NSManagedObjectID.uriRepresentation()` stands for, or nil when it names no
    /// entity of the model or another store.
    public func managedObjectID(forURIRepresentation url: URL) -> NSManagedObjectID? {
        guard let parts = NSManagedObjectID.parseURI(url), let entity = managedObjectModel.entity(named: parts.entity) else { return nil }
        if let token = parts.token { return NSManagedObjectID(temporaryFor: entity, token: token) }
        guard let store = persistentStores.first(where: { $0.identifier == parts.store }), let pk = parts.primaryKey else { return nil }
        return NSManagedObjectID(entity: entity, storeIdentifier: store.identifier, primaryKey: pk)
    }
}

extension NSPersistentStoreCoordinator {
    /// A store file's metadata, read without adding the store (Core Data's class method of this name): for a store
    /// Apple's Core Data wrote, its metadata dictionary (`NSStoreUUID`, `NSStoreType`, `NSStoreModelVersionHashes`,
    /// …); for this project's stores, `NSStoreUUID`, `NSStoreType` and this project's version hashes.
    ///
    /// For example:
    /// ```swift
    /// let metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
    /// print(metadata["NSStoreUUID"] ?? "")
    /// ```
    /// - Throws: `CoreDataError` for a store type other than SQLite, a file that is not a store, damaged metadata.
    public static func metadataForPersistentStore(ofType storeType: String, at url: URL, options: [String: Any]? = nil) throws
        -> [String: Any]
    {
        guard let metadata = try StoreKind.require(storeType, at: url).metadata else {
            throw CoreDataError(.persistentStoreInvalidType, "Only stores kept in a file have metadata there; '\(storeType)' has none.")
        }
        return try metadata(url)
    }

    /// Sets a store file's metadata without adding the store (Core Data's class method of this name).
    ///
    /// The keys of `metadata` other than Core Data's own become the app's keys, replacing those the store had (Core
    /// Data's keys, such as `NSStoreUUID` and the version hashes, stay as they are). Written at once, in one
    /// transaction.
    ///
    /// For example:
    /// ```swift
    /// var metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
    /// metadata["importedThrough"] = 42
    /// try NSPersistentStoreCoordinator.setMetadata(metadata, forPersistentStoreOfType: NSSQLiteStoreType, at: url)
    /// ```
    /// - Throws: `CoreDataError` for a store type other than SQLite, no store or not a Core Data store at `url`, a
    ///   value a property list cannot hold, or a file that cannot be written.
    public static func setMetadata(
        _ metadata: [String: Any]?, forPersistentStoreOfType storeType: String, at url: URL, options: [String: Any]? = nil
    ) throws {
        guard let setMetadata = try StoreKind.require(storeType, at: url).setMetadata else {
            throw CoreDataError(
                .persistentStoreInvalidType, "Only stores kept in a file have metadata there to set; '\(storeType)' has none.")
        }
        try setMetadata(url, metadata ?? [:], (options?[NSPersistentStoreTimeoutOption] as? NSNumber)?.doubleValue ?? 5)
    }
}

/// Store option: open the store read-only.
public let NSReadOnlyPersistentStoreOption = "NSReadOnlyPersistentStoreOption"
/// An option of `addPersistentStore`: `true` migrates a store written with an older version of the model (Core
/// Data's key; `NSPersistentStoreDescription.shouldMigrateStoreAutomatically`).
public let NSMigratePersistentStoresAutomaticallyOption = "NSMigratePersistentStoresAutomaticallyOption"
/// An option of `addPersistentStore`: `true` lets that migration infer its mapping model (lightweight migration).
public let NSInferMappingModelAutomaticallyOption = "NSInferMappingModelAutomaticallyOption"
/// Store option: seconds to wait for a lock held by another connection or process (default 5).
public let NSPersistentStoreTimeoutOption = "NSPersistentStoreTimeoutOption"

/// An option of `addPersistentStore` (or `NSPersistentStoreDescription.setOption(_:forKey:)`): `true` makes the
/// coordinator post `NSPersistentStoreRemoteChange` whenever another process (or another store opened on the same
/// file) commits to the store, a few milliseconds after the commit.
///
/// For example:
/// ```swift
/// description.setOption(true as NSNumber, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey)
/// ```
public let NSPersistentStoreRemoteChangeNotificationPostOptionKey = "NSPersistentStoreRemoteChangeNotificationOptionKey"
/// The key of a remote-change notification's store identifier (the store's UUID).
public let NSStoreUUIDKey = "storeUUID"
/// The key of a remote-change notification's store URL.
public let NSPersistentStoreURLKey = "storeURL"

extension Notification.Name {
    /// Posted by a coordinator (the notification's object) when another process committed to one of its stores.
    ///
    /// Only for stores added with `NSPersistentStoreRemoteChangeNotificationPostOptionKey`; `userInfo` holds
    /// `NSStoreUUIDKey` and `NSPersistentStoreURLKey`. A context that `automaticallyMergesChangesFromParent` then brings its objects and
    /// controllers up to the store (`mergeChangesFromStore()`).
    public static let NSPersistentStoreRemoteChange = Notification.Name("NSPersistentStoreRemoteChangeNotification")
}

/// The history transactions a remote-change notification carries to the contexts that merge it.
struct RemoteHistory: @unchecked Sendable {
    static let userInfoKey = "OpenCoreData.remoteHistory"
    let transactions: [StoreHistoryTransaction]
    /// Whether some of the commits left no transaction, so that contexts must re-read the store too.
    let needsRereading: Bool
}
