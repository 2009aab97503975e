import Foundation
import GRDB
import OpenCoreDataModel

/// What is at a store's path, found without letting SQLite open (and so change) it: a store must never touch a file
/// that is not one.
///
/// Opening a SQLite file read-write switches it to WAL mode and may write its header, so a file is
/// opened read-write only after it has been read and found to be an OpenCoreData store or an empty database.
enum StoreFile {
    enum State: Equatable {
        /// Nothing at the path (a new store).
        case missing
        /// A regular file of zero bytes (SQLite treats it as a new database).
        case empty
        /// A SQLite database; `walMode` from its header; `sharedFiles` when a `-wal` or `-shm` file lies beside it (a
        /// connection has, or had, it open in WAL mode, and committed pages may wait in the WAL).
        case sqlite(walMode: Bool, sharedFiles: Bool)
    }

    /// SQLite's file header starts with these 16 bytes.
    private static let magic = Array("SQLite format 3\u{0}".utf8)

    /// Looks at the path: its file type, then the first 100 bytes (SQLite's header).
    ///
    /// - Throws: `CoreDataError` naming what is there instead of a store: a folder, a FIFO or device (opening one
    ///   would block or read a stream), a file that cannot be read, a file whose first bytes are not SQLite's.
    static func inspect(_ path: String) throws -> State { try inspect(path, linksFollowed: 0) }

    /// As many links as Linux follows before it gives up with `ELOOP`.
    private static let maximumLinksFollowed = 40

    private static func inspect(_ path: String, linksFollowed: Int) throws -> State {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            guard FileManager.default.fileExists(atPath: path) else { return .missing }
            throw CoreDataError(.persistentStoreOpen, "Cannot read \(path): \(error.localizedDescription)", underlyingError: error)
        }
        switch attributes[.type] as? FileAttributeType {
        case .typeRegular?: break
        case .typeDirectory?: throw CoreDataError(.persistentStoreOpen, "\(path) is a folder, not a store file.")
        case .typeSymbolicLink?:
            // A link to a store is fine; what it points at is checked, unless the links go round in a loop.
            guard linksFollowed < maximumLinksFollowed else {
                throw CoreDataError(.persistentStoreOpen, "\(path) is a symbolic link in a loop of links, not a store file.")
            }
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? ""
            let resolved = URL(fileURLWithPath: target, relativeTo: URL(fileURLWithPath: path).deletingLastPathComponent()).path
            return try inspect(resolved, linksFollowed: linksFollowed + 1)
        default:
            throw CoreDataError(
                .persistentStoreOpen,
                "\(path) is not a regular file (it is a \(describe(attributes[.type] as? FileAttributeType))), so it cannot be a store.")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CoreDataError(.persistentStoreOpen, "Cannot read \(path): permission denied.")
        }
        defer { try? handle.close() }
        let header: Data
        do {
            header = try handle.read(upToCount: 100) ?? Data()
        } catch {
            throw CoreDataError(.persistentStoreOpen, "Cannot read \(path): \(error.localizedDescription)", underlyingError: error)
        }
        if header.isEmpty { return .empty }
        guard header.count >= 20, Array(header.prefix(16)) == magic else {
            throw CoreDataError(
                .persistentStoreNotAStore,
                "\(path) is not a SQLite store: its first bytes are not a SQLite header. The file was not changed.")
        }
        // Bytes 18 and 19 are the write and read format versions: 2 means WAL.
        let walMode = header[18] == 2 || header[19] == 2
        let shared = FileManager.default.fileExists(atPath: path + "-wal") || FileManager.default.fileExists(atPath: path + "-shm")
        return .sqlite(walMode: walMode, sharedFiles: shared)
    }

    private static func describe(_ type: FileAttributeType?) -> String {
        switch type {
        case .typeCharacterSpecial?, .typeBlockSpecial?: return "device"
        case .typeSocket?: return "socket"
        default: return "FIFO or other special file"
        }
    }

    /// The path as a SQLite URI that opens it read-only.
    ///
    /// A WAL-mode database that no connection has open (no `-wal`
    /// or `-shm` beside it) is opened immutable: SQLite then takes no lock and creates no `-wal` or `-shm` file, so
    /// a store on read-only media opens and reading a store leaves no file behind. (Such a connection does not see
    /// what another process writes after it opened.)
    static func readOnlyURI(_ path: String, state: State) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "?#%")
        let escaped = path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
        if case .sqlite(walMode: true, sharedFiles: false) = state { return "file:\(escaped)?mode=ro&immutable=1" }
        return "file:\(escaped)?mode=ro"
    }

    /// Whether a read-only connection cannot read the store where it is.
    ///
    /// Its committed pages wait in a `-wal` with no
    /// `-shm` beside it, and the folder cannot take one (read-only media, a read-only folder), while SQLite needs the
    /// shared-memory index to read a WAL (in exclusive locking mode, which would keep it in memory, SQLite refuses to
    /// read a WAL read-only). Such a store is read from a `TemporaryStoreCopy`.
    static func needsCopyToRead(_ path: String, state: State) -> Bool {
        guard case .sqlite(walMode: true, sharedFiles: true) = state,
            FileManager.default.fileExists(atPath: path + "-wal"), !FileManager.default.fileExists(atPath: path + "-shm")
        else { return false }
        return access(URL(fileURLWithPath: path).deletingLastPathComponent().path, W_OK) != 0
    }

    /// A read-only connection to the store at `path`: in place, or on a temporary copy (see `needsCopyToRead`), which
    /// lives as long as `copy` does.
    static func openReadOnly(_ path: String, state: State, configuration: Configuration) throws -> (
        queue: DatabaseQueue, copy: TemporaryStoreCopy?
    ) {
        var configuration = configuration
        configuration.readonly = true
        guard needsCopyToRead(path, state: state) else {
            return (try DatabaseQueue(path: readOnlyURI(path, state: state), configuration: configuration), nil)
        }
        let copy = try TemporaryStoreCopy(of: path)
        return (try DatabaseQueue(path: readOnlyURI(copy.path, state: state), configuration: configuration), copy)
    }

    /// Runs `body` on a read-only connection to the store at `url`, closed afterwards; the file is never written.
    ///
    /// The path is looked at first, as `inspect` does; SQLite's errors become `CoreDataError`s naming the file.
    static func read<T>(_ url: URL, _ body: (Database, String) throws -> T) throws -> T {
        let path = url.path
        let state = try inspect(path)
        guard state != .missing else { throw CoreDataError(.persistentStoreOpen, "No store at \(path).") }
        do {
            let (queue, copy) = try openReadOnly(path, state: state, configuration: Configuration())
            defer { try? queue.close() }
            return try withExtendedLifetime(copy) { try queue.read { db in try body(db, path) } }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw SQLiteStore.openError(error, path: path)
        }
    }
}

/// A store file and its WAL copied into a new temporary folder, to be read where SQLite can make the WAL's index;
/// the folder is removed when the copy goes.
final class TemporaryStoreCopy: @unchecked Sendable {
    let folder: URL
    /// The copied store file.
    let path: String

    init(of original: String) throws {
        let fm = FileManager.default
        folder = fm.temporaryDirectory.appendingPathComponent("OpenCoreData-read-\(UUID().uuidString)")
        path = folder.appendingPathComponent(URL(fileURLWithPath: original).lastPathComponent).path
        do {
            try fm.createDirectory(at: folder, withIntermediateDirectories: true)
            for suffix in ["", "-wal"] where fm.fileExists(atPath: original + suffix) {
                try fm.copyItem(atPath: original + suffix, toPath: path + suffix)
                try fm.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path + suffix)
            }
        } catch {
            try? fm.removeItem(at: folder)
            throw CoreDataError(
                .persistentStoreOpen,
                "\(original) cannot be read in place (its folder cannot take the WAL's index), and copying it to \(folder.path) failed: \(error.localizedDescription)",
                underlyingError: error)
        }
    }

    deinit { try? FileManager.default.removeItem(at: folder) }
}
