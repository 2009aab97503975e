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

    /// Runs `body` on a read-only connection to the store at `url`, closed afterwards; the file is never written.
    ///
    /// The path is looked at first, as `inspect` does; SQLite's errors become `CoreDataError`s naming the file.
    static func read<T>(_ url: URL, _ body: (Database, String) throws -> T) throws -> T {
        let path = url.path
        let state = try inspect(path)
        guard state != .missing else { throw CoreDataError(.persistentStoreOpen, "No store at \(path).") }
        var config = Configuration()
        config.readonly = true
        do {
            let queue = try DatabaseQueue(path: readOnlyURI(path, state: state), configuration: config)
            defer { try? queue.close() }
            return try queue.read { db in try body(db, path) }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw SQLiteStore.openError(error, path: path)
        }
    }
}
