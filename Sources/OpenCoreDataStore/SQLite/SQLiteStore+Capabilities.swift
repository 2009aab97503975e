import Foundation
import GRDB
import OpenCoreDataModel

// The SQLite store's capabilities and its two registered kinds: a file (`NSSQLiteStoreType`) and memory
// (`NSInMemoryStoreType`, a SQLite database no file backs).
extension SQLiteStore: BatchRequestStore, HistoryStore, RemoteChangeStore, TransactionalStore {
    /// A file other connections can open; an in-memory store has no other writers.
    package var isShared: Bool { url != nil }
}

extension RemoteChangeWatcher: RemoteChangeWatching {}

extension StoreKind {
    /// A SQLite file in Core Data's layout.
    package static let sqlite = StoreKind(
        type: NSSQLiteStoreType, usesFiles: true,
        open: { request in
            guard let url = request.url else {
                throw CoreDataError(.persistentStoreInvalidType, "A SQLite store needs a file URL; pass one, or use NSInMemoryStoreType.")
            }
            // `/dev/null` is Core Data's way to a SQLite store in memory (Xcode's templates use it for previews and tests).
            if url.isFileURL, url.standardizedFileURL.path == "/dev/null" {
                return try SQLiteStore(
                    url: nil, model: request.model, tracksHistory: request.tracksHistory, configurationName: request.configurationName)
            }
            return try SQLiteStore(
                url: url, model: request.model, readOnly: request.readOnly, timeout: request.timeout, tracksHistory: request.tracksHistory,
                configurationName: request.configurationName)
        },
        metadata: { url in try SQLiteStore.metadata(at: url) },
        setMetadata: { url, values, timeout in try SQLiteStore.setMetadata(values, ofStoreAt: url, timeout: timeout) },
        migrate: { url, model, source in try SQLiteStore.migrateStore(at: url, to: model, from: source).changes },
        destroy: { url in
            guard url.standardizedFileURL.path != "/dev/null" else { return }  // (an in-memory store: nothing to delete)
            try SQLiteStore.destroyFiles(at: url)
        },
        replace: { destination, source in try SQLiteStore.replaceFiles(at: destination, withStoreAt: source) })

    /// A SQLite database in memory: gone when the store closes.
    package static let inMemory = StoreKind(
        type: NSInMemoryStoreType, usesFiles: false,
        open: { request in
            try SQLiteStore(
                url: nil, model: request.model, tracksHistory: request.tracksHistory, configurationName: request.configurationName)
        })
}

extension SQLiteStore: GenerationStore {
    /// A snapshot of the file's committed data (a connection holding a read transaction): what a context pinned to a
    /// query generation reads.
    ///
    /// An in-memory store has no other connection to hold one.
    package func openGeneration() throws -> StoreGeneration {
        if try checkOpen() != nil {
            throw CoreDataError(
                .persistentStoreOperation, "A query generation cannot be opened inside a transaction that holds the store \(identifier).")
        }
        guard let pool = writer as? DatabasePool else {
            throw CoreDataError(
                .persistentStoreOperation,
                "Query generations need a SQLite store file (they read a snapshot of it); the store \(identifier) is in memory.")
        }
        do {
            return StoreGeneration(storeIdentifier: identifier, snapshot: try pool.makeSnapshot())
        } catch {
            throw mapError(error, doing: "open a query generation of")
        }
    }
}
