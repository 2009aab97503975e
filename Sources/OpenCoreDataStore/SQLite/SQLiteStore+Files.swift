import Foundation
import GRDB
import OpenCoreDataModel

// Whole-store file operations: destroying a store's files, copying one store's contents over another (SQLite's
// online backup, which reads committed pages through the WAL), and copying an open store — the SQLite side of the
// coordinator's `destroyPersistentStore`, `replacePersistentStore` and `migratePersistentStore`.
extension SQLiteStore: CopyableStore {
    /// The files a store at `url` may have beside it: the database, its WAL and shared-memory index, a rollback
    /// journal.
    private static func files(of url: URL) -> [URL] {
        ["", "-wal", "-shm", "-journal"].map { URL(fileURLWithPath: url.path + $0) }
    }

    /// The folder of external binary values beside the store (`.<name>_SUPPORT`).
    private static func supportFolder(of url: URL) -> URL {
        AppleExternalData.folder(url).deletingLastPathComponent()
    }

    /// Deletes the store at `url` and the files that belong to it (WAL, shared memory, journal, external values);
    /// nothing there is fine.
    ///
    /// - Throws: `CoreDataError` when what is there is not a SQLite store (nothing is deleted then) or a file cannot
    ///   be deleted.
    package static func destroyFiles(at url: URL) throws {
        _ = try StoreFile.inspect(url.path)  // (never deletes a file that is not a store)
        for file in files(of: url) + [supportFolder(of: url)] where FileManager.default.fileExists(atPath: file.path) {
            do {
                try FileManager.default.removeItem(at: file)
            } catch {
                throw CoreDataError(
                    .persistentStoreOperation, "Could not delete \(file.path): \(error.localizedDescription)", underlyingError: error)
            }
        }
    }

    /// Replaces the app's metadata keys of the store file at `url` with those of `values` (Core Data's keys stay as the
    /// store has them), in one transaction, without opening it as a store: Core Data's
    /// `setMetadata(_:forPersistentStoreOfType:at:options:)`.
    ///
    /// - Throws: `CoreDataError` when there is no store at `url`, the file is not a Core Data store (or is in this
    ///   project's former layout, which keeps no metadata dictionary), a value a property list cannot hold, or the file
    ///   cannot be written (another connection holding its lock longer than `timeout` seconds).
    package static func setMetadata(_ values: [String: Any], ofStoreAt url: URL, timeout: TimeInterval = 5) throws {
        let path = url.path
        switch try StoreFile.inspect(path) {
        case .sqlite: break
        case .missing: throw CoreDataError(.persistentStoreOpen, "No store at \(path).")
        case .empty: throw CoreDataError(.persistentStoreNotAStore, "\(path) is an empty file, not a store.")
        }
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(timeout)
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            try queue.write { db in
                guard try AppleStoreCatalog.read(db, place: path) != nil else {
                    throw CoreDataError(
                        .persistentStoreIncompatibleSchema,
                        "\(path) keeps no Core Data metadata dictionary (it is not a Core Data store, or is in this project's former layout: open it read-write once to convert it)."
                    )
                }
                let current = try AppleStoreMetadata.read(db, locking: true)
                try AppleStoreMetadata.write(try AppleStoreMetadata.merging(app: values, into: current), db)
            }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw openError(error, path: path)
        }
    }

    /// Makes the store at `destination` a copy of the store at `source` (its rows, metadata, model cache and history;
    /// its external values too), replacing whatever store was there.
    ///
    /// - Throws: `CoreDataError` when `source` is not a SQLite store or is missing, when `destination` holds a file
    ///   that is not a store, when either cannot be read or written.
    package static func replaceFiles(at destination: URL, withStoreAt source: URL) throws {
        guard source.standardizedFileURL.path != destination.standardizedFileURL.path else { return }
        switch try StoreFile.inspect(source.path) {
        case .sqlite: break
        case .missing: throw CoreDataError(.persistentStoreOpen, "There is no store at \(source.path) to copy.")
        case .empty: throw CoreDataError(.persistentStoreNotAStore, "\(source.path) is an empty file, not a store to copy.")
        }
        try destroyFiles(at: destination)
        do {
            var configuration = Configuration()
            configuration.readonly = true
            let from = try DatabaseQueue(path: source.path, configuration: configuration)
            try copy(from, to: destination)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw CoreDataError(
                .persistentStoreOperation, "Could not copy the store at \(source.path) to \(destination.path): \(error)",
                underlyingError: error)
        }
        try copySupportFolder(from: source, to: destination)
    }

    /// Copies this open store's committed contents to a new store at `destination` (replacing a store there).
    ///
    /// - Throws: `CoreDataError` when `destination` holds a file that is not a store, or cannot be written.
    package func copyContents(to destination: URL) throws {
        _ = try checkOpen()
        if let url, url.standardizedFileURL.path == destination.standardizedFileURL.path {
            throw CoreDataError(.persistentStoreOperation, "The store is at \(destination.path) already.")
        }
        try Self.destroyFiles(at: destination)
        do {
            try Self.copy(writer, to: destination)
        } catch {
            throw mapError(error, doing: "copy to \(destination.path)")
        }
        if let url { try Self.copySupportFolder(from: url, to: destination) }
    }

    /// SQLite's backup of `reader` into a new database at `destination`, which keeps the source's journal mode.
    private static func copy(_ reader: some DatabaseReader, to destination: URL) throws {
        try FileManager.default.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        let to = try DatabaseQueue(path: destination.path)
        try reader.backup(to: to)
        try to.close()
    }

    /// Copies the external values' folder of the store at `source`, if it has one, beside `destination`.
    private static func copySupportFolder(from source: URL, to destination: URL) throws {
        let folder = supportFolder(of: source)
        guard FileManager.default.fileExists(atPath: folder.path) else { return }
        do {
            try FileManager.default.copyItem(at: folder, to: supportFolder(of: destination))
        } catch {
            throw CoreDataError(
                .persistentStoreOperation, "Could not copy the external values in \(folder.path): \(error.localizedDescription)",
                underlyingError: error)
        }
    }
}

extension SQLiteStore: MetadataStore {
    /// The metadata in `Z_METADATA` (with `NSStoreUUID`).
    ///
    /// - Throws: `CoreDataError` for a closed store or one in this project's former layout (open it read-write once:
    ///   it is converted to Core Data's).
    package func metadataValues() throws -> [String: Any] {
        try checkAppleLayout()
        return try read { db in
            var metadata = try AppleStoreMetadata.read(db).mapValues(\.foundationObject)
            metadata["NSStoreUUID"] = metadata["NSStoreUUID"] ?? identifier
            return metadata
        }
    }

    /// Replaces the app's metadata keys with `values` in one transaction.
    ///
    /// - Throws: `CoreDataError` for a read-only or closed store, a value a property list cannot hold.
    package func setMetadataValues(_ values: [String: Any]) throws {
        try checkAppleLayout()
        _ = try checkOpen()
        do {
            try writer.write { db in
                let current = try AppleStoreMetadata.read(db, locking: true)
                try AppleStoreMetadata.write(try AppleStoreMetadata.merging(app: values, into: current), db)
            }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "write the metadata of")
        }
    }

    private func checkAppleLayout() throws {
        guard schema.isAppleLayout else {
            throw CoreDataError(
                .persistentStoreOperation,
                "The store is in this project's former layout, which keeps no metadata dictionary; open it read-write once to convert it.")
        }
    }
}
