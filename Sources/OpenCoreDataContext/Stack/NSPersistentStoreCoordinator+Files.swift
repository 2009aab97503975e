import Foundation
import OpenCoreDataModel
@_spi(Engine) import OpenCoreDataStore

// Core Data's store file management: destroying a store, replacing one with a copy of another, moving an open store
// to a new place (an app group's folder, "save as").
extension NSPersistentStoreCoordinator {
    /// Deletes the store at `url` with the files that belong to it (its WAL and shared-memory files, its external
    /// values).
    ///
    /// A store this coordinator holds there is removed from it first. Nothing at `url` is not an error.
    ///
    /// For example:
    /// ```swift
    /// try coordinator.destroyPersistentStore(at: storeURL, ofType: NSSQLiteStoreType)   // start afresh
    /// ```
    /// - Throws: `CoreDataError` for an unknown store type, a file at `url` that is not a store (it is left alone),
    ///   a file that cannot be deleted, a type whose stores cannot be destroyed this way (PostgreSQL: drop its tables
    ///   with the server's tools).
    public func destroyPersistentStore(at url: URL, ofType storeType: String, options: [AnyHashable: Any]? = nil) throws {
        let kind = try StoreKind.require(storeType, at: url)
        if let held = persistentStore(for: url) { try remove(held) }
        guard kind.usesFiles else { return }  // (in memory: removing it was all)
        guard let destroy = kind.destroy else { throw Self.cannotManageFiles(of: kind, doing: "destroyed") }
        try destroy(url)
    }

    /// Makes the store at `destinationURL` a copy of the store at `sourceURL` (rows, metadata, model cache, history),
    /// replacing what was there; the source is left as it is, and may be open.
    ///
    /// For example:
    /// ```swift
    /// try coordinator.replacePersistentStore(at: backupURL, withPersistentStoreFrom: storeURL, ofType: NSSQLiteStoreType)
    /// ```
    /// - Throws: `CoreDataError` when the destination is a store this coordinator holds (remove it first), when there
    ///   is no store at `sourceURL`, when a file in the way is not a store, for a type whose stores cannot be copied.
    public func replacePersistentStore(
        at destinationURL: URL, destinationOptions: [AnyHashable: Any]? = nil, withPersistentStoreFrom sourceURL: URL,
        sourceOptions: [AnyHashable: Any]? = nil, ofType storeType: String
    ) throws {
        let kind = try StoreKind.require(storeType, at: destinationURL)
        guard persistentStore(for: destinationURL) == nil else {
            throw CoreDataError(
                .persistentStoreOperation,
                "This coordinator holds the store at \(destinationURL.path): remove it before replacing it with another store's copy.")
        }
        guard kind.usesFiles, let replace = kind.replace else { throw Self.cannotManageFiles(of: kind, doing: "replaced") }
        try replace(destinationURL, sourceURL)
    }

    /// Moves `store` to `url`, returning the store there.
    ///
    /// Copies its contents to `url` as a store of `storeType`, removes `store` from this coordinator and adds the
    /// copy with `options`. The original file is left as it was (delete it with `destroyPersistentStore` when it is
    /// no longer wanted). Objects keep their IDs: the copy is the same store.
    ///
    /// For example, moving a store into an app group's folder:
    /// ```swift
    /// let moved = try coordinator.migratePersistentStore(store, to: groupURL, options: nil, withType: NSSQLiteStoreType)
    /// ```
    /// - Throws: `CoreDataError` when `store` is not this coordinator's, when a file at `url` is not a store, when the
    ///   copy cannot be written or opened, for a store or type that cannot be copied this way (SQLite and in-memory
    ///   stores can, into a SQLite file).
    public func migratePersistentStore(
        _ store: any PersistentStore, to url: URL, options: [AnyHashable: Any]? = nil, withType storeType: String
    ) throws -> any PersistentStore {
        guard persistentStores.contains(where: { $0 === store }) else {
            throw CoreDataError(.persistentStoreOperation, "The store to migrate is not one of this coordinator's stores.")
        }
        let kind = try StoreKind.require(storeType, at: url)
        guard kind.type == NSSQLiteStoreType, kind.usesFiles, let source = store as? any CopyableStore else {
            throw Self.cannotManageFiles(of: kind, doing: "the destination of a migrated store")
        }
        guard persistentStore(for: url) == nil else {
            throw CoreDataError(.persistentStoreOperation, "This coordinator holds a store at \(url.path) already.")
        }
        try source.copyContents(to: url)
        let configuration = store.configurationName == defaultConfigurationName ? nil : store.configurationName
        try remove(store)
        var stringOptions: [String: Any] = [:]
        for (key, value) in options ?? [:] {
            if let key = key as? String { stringOptions[key] = value }
        }
        return try addPersistentStore(ofType: storeType, configurationName: configuration, at: url, options: stringOptions)
    }

    private static func cannotManageFiles(of kind: StoreKind, doing what: String) -> CoreDataError {
        CoreDataError(
            .persistentStoreOperation,
            "Stores of type \(kind.type) cannot be \(what) by the coordinator: it copies and deletes SQLite stores' files only.")
    }
}
