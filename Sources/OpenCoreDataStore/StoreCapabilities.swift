import Foundation
import GRDB
import OpenCoreDataModel

// What the context layer asks of a store beyond fetching and saving. Each capability is a protocol a store engine
// adopts; the context asks `store as? BatchRequestStore` and so on, and never names a store class. A store that
// lacks one answers with an error naming what it cannot do.

/// Batch requests (Core Data's `NSBatchInsertRequest`, `NSBatchUpdateRequest`, `NSBatchDeleteRequest`): rows written,
/// changed and deleted in the store's own query language, one transaction each, without objects.
package protocol BatchRequestStore: StoreEngine {
    /// Inserts rows of `entity` in one transaction, the chunks `next` hands over (one value per property of the
    /// entity, as a save's inserts) until it returns nil; returns how many, and their IDs when `collectingIDs`.
    func batchInsert(
        _ entity: NSEntityDescription, collectingIDs: Bool, author: HistoryAuthor, next: () throws -> [[SnapshotValue]]?
    ) throws -> (count: Int, ids: [NSManagedObjectID])

    /// Sets attributes of every row a fetch matches, each row's version advancing; returns how many, and their IDs
    /// when `collectingIDs`.
    func batchUpdate(
        _ request: StoreFetchRequest, values: [(index: Int, value: AttributeValue)], collectingIDs: Bool, author: HistoryAuthor
    ) throws -> (count: Int, ids: [NSManagedObjectID])

    /// Deletes the rows `targets` names, with the model's delete rules; returns the IDs deleted.
    func batchDelete(_ targets: StoreBatchTargets, author: HistoryAuthor) throws -> [NSManagedObjectID]
}

/// A store whose metadata dictionary apps read and add keys to (`NSPersistentStoreCoordinator.metadata(for:)`,
/// `setMetadata(_:for:)`).
package protocol MetadataStore: StoreEngine {
    /// The metadata: Core Data's keys (`NSStoreUUID`, `NSStoreType`, `NSStoreModelVersionHashes`…) and the app's.
    func metadataValues() throws -> [String: Any]
    /// Replaces the app's keys with `values` (Core Data's keys stay as they are), at once, in a transaction of its own.
    func setMetadataValues(_ values: [String: Any]) throws
}

/// A store whose committed contents can be copied into a new SQLite store file
/// (`NSPersistentStoreCoordinator.migratePersistentStore(_:to:options:withType:)`).
package protocol CopyableStore: StoreEngine {
    /// Copies the store's committed contents to a new store at `destination`, replacing a store there.
    func copyContents(to destination: URL) throws
}

/// Persistent history (Core Data's `NSPersistentHistoryTrackingKey`): the transactions every write recorded.
package protocol HistoryStore: StoreEngine {
    /// Whether the store records history.
    var keepsHistory: Bool { get }
    /// The number of the newest history transaction, or nil when there is none (or no history).
    func lastHistoryTransaction() throws -> Int64?
    /// The transactions after `bound`, oldest first, with their changes when `withChanges`.
    func historyTransactions(after bound: StoreHistoryBound, withChanges: Bool) throws -> [StoreHistoryTransaction]
    /// Deletes the transactions up to `bound`; returns how many.
    func deleteHistory(through bound: StoreHistoryBound) throws -> Int
}

/// Commits other writers make to the same store (Core Data's `NSPersistentStoreRemoteChangeNotificationPostOptionKey`).
package protocol RemoteChangeStore: StoreEngine {
    /// Whether other writers can reach the store at all (an in-memory store has none).
    var isShared: Bool { get }
    /// Starts remembering which history transactions are this store's own, so that `takeOthersHistory(through:)` can hand
    /// over the others'; returns the newest transaction number, nil without history.
    func startFollowingHistory() throws -> Int64?
    /// Other writers' transactions since the last call, up to transaction `bound` when given (the newest a watcher's
    /// report covers: `RemoteCommits.historyThrough`), and the newest transaction number handed over; nil when the
    /// store is not followed (or keeps no history).
    func takeOthersHistory(through bound: Int64?) throws -> (transactions: [StoreHistoryTransaction], last: Int64)?
    /// How many own transactions wait to be told apart from other writers' (they must not pile up).
    var pendingOwnHistoryTransactions: Int { get }
    /// Calls `onChange` for other writers' commits until the returned watcher is cancelled.
    func watchRemoteChanges(every interval: DispatchTimeInterval, _ onChange: @escaping @Sendable (RemoteCommits) -> Void) throws
        -> any RemoteChangeWatching
}

/// A watcher of other writers' commits; it stops when cancelled.
package protocol RemoteChangeWatching: AnyObject, Sendable {
    /// Stops watching; no call-back starts after it returns.
    func cancel()
}

/// Transactions that other stores' work can join: a save split among a coordinator's stores runs each part inside
/// every store's transaction, so that all of it is written or none.
package protocol TransactionalStore: StoreEngine {
    /// Runs `body` inside a transaction of this store (joining one already open on this thread), committing when it
    /// returns and rolling back when it throws.
    func joiningTransaction<T>(_ body: () throws -> T) throws -> T
    /// Runs `body` — saves of contexts on this store included — as one transaction: all of it is written when it
    /// returns, none of it when it throws (an import of a whole file, say).
    func performAsOneTransaction<T>(_ body: () throws -> T) throws -> T
}

// MARK: - Store types

/// One kind of store a coordinator can add, registered under its type name (`NSSQLiteStoreType`, …): how to open it,
/// and, for stores kept in files, how to read a file's metadata and migrate a file to another model.
///
/// For example:
/// ```swift
/// guard let kind = StoreKind.named(NSSQLiteStoreType) else { … }
/// let store = try kind.open(StoreKind.OpenRequest(url: url, model: model))
/// ```
package struct StoreKind: Sendable {
    /// What a store is opened with.
    package struct OpenRequest {
        package var url: URL?
        package var model: NSManagedObjectModel
        package var readOnly = false
        package var timeout: TimeInterval = 5
        package var tracksHistory = false
        package var configurationName: String?

        package init(url: URL?, model: NSManagedObjectModel) {
            self.url = url
            self.model = model
        }
    }

    /// The type name coordinators are asked for.
    package let type: String
    /// Whether the store lives at a file URL (then the coordinator creates its folder and may migrate it).
    package let usesFiles: Bool
    /// Opens (or creates) a store.
    package let open: @Sendable (OpenRequest) throws -> any StoreEngine
    /// A store file's metadata, read without opening the store; nil for stores that keep none in a file.
    package let metadata: (@Sendable (URL) throws -> [String: Any])?
    /// Sets the app's keys of a store file's metadata without opening the store (waiting up to the given seconds for
    /// another connection's lock); nil for stores that keep none in a file.
    package let setMetadata: (@Sendable (URL, [String: Any], TimeInterval) throws -> Void)?
    /// Migrates the store at a URL to a model (from a given source model, or the one the store records) by
    /// lightweight migration, returning what changed, one line each (none: already at that version); nil for stores
    /// that cannot be migrated.
    package let migrate: (@Sendable (URL, NSManagedObjectModel, NSManagedObjectModel?) throws -> [String])?
    /// Deletes the store at a URL with what belongs to it; nil for stores that cannot be destroyed this way.
    package let destroy: (@Sendable (URL) throws -> Void)?
    /// Makes the store at the first URL a copy of the store at the second; nil for stores that cannot be copied.
    package let replace: (@Sendable (URL, URL) throws -> Void)?

    package init(
        type: String, usesFiles: Bool, open: @escaping @Sendable (OpenRequest) throws -> any StoreEngine,
        metadata: (@Sendable (URL) throws -> [String: Any])? = nil,
        setMetadata: (@Sendable (URL, [String: Any], TimeInterval) throws -> Void)? = nil,
        migrate: (@Sendable (URL, NSManagedObjectModel, NSManagedObjectModel?) throws -> [String])? = nil,
        destroy: (@Sendable (URL) throws -> Void)? = nil, replace: (@Sendable (URL, URL) throws -> Void)? = nil
    ) {
        self.type = type
        self.usesFiles = usesFiles
        self.open = open
        self.metadata = metadata
        self.setMetadata = setMetadata
        self.migrate = migrate
        self.destroy = destroy
        self.replace = replace
    }

    private static let registry = Registry()

    /// The kind registered under `type`, or nil.
    package static func named(_ type: String) -> StoreKind? { registry.kind(type) }

    /// The type names registered, sorted (for messages that list them).
    package static var registeredTypes: [String] { registry.types() }

    /// Registers (or replaces) the kind for its type name.
    package static func register(_ kind: StoreKind) { registry.add(kind) }

    /// The kind of `type`, or an error naming the types there are.
    package static func require(_ type: String) throws -> StoreKind {
        guard let kind = named(type) else {
            throw CoreDataError(
                .persistentStoreInvalidType,
                "Unknown store type '\(type)'; the registered types are \(registeredTypes.joined(separator: ", ")).")
        }
        return kind
    }

    /// The kinds by type name, starting with the ones this module provides.
    private final class Registry: @unchecked Sendable {
        private let lock = NSLock()
        private var kinds: [String: StoreKind] = [:]

        init() {
            for kind in [StoreKind.sqlite, StoreKind.inMemory, StoreKind.postgreSQL] { kinds[kind.type] = kind }
        }

        func kind(_ type: String) -> StoreKind? { lock.withLock { kinds[type] } }
        func types() -> [String] { lock.withLock { kinds.keys.sorted() } }
        func add(_ kind: StoreKind) { lock.withLock { kinds[kind.type] = kind } }
    }
}

/// A store whose data can be read as it was at one moment while others write (Core Data's query generations).
package protocol GenerationStore: StoreEngine {
    /// A read-only view of the store's committed data as it is now, kept until released.
    func openGeneration() throws -> StoreGeneration
}

/// One store's data as it was when the generation was opened; reads that run inside `StoreGeneration.reading(_:_:)`
/// with it see that data and nothing committed since.
package final class StoreGeneration: @unchecked Sendable {
    /// The store it belongs to.
    package let storeIdentifier: String
    /// A connection holding a read transaction open on the data as it was (SQLite's WAL keeps it until released).
    let snapshot: DatabaseSnapshot

    init(storeIdentifier: String, snapshot: DatabaseSnapshot) {
        self.storeIdentifier = storeIdentifier
        self.snapshot = snapshot
    }

    /// The generations reads on this thread (or task) use, by store identifier: empty outside `reading`.
    @TaskLocal package static var pinned: [String: StoreGeneration] = [:]

    /// Runs `body` with the stores of `generations` reading at those generations.
    package static func reading<T>(_ generations: [String: StoreGeneration], _ body: () throws -> T) rethrows -> T {
        try $pinned.withValue(generations, operation: body)
    }
}
