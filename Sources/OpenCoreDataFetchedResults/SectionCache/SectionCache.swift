import Foundation
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// Section cache files, one per cache name, under the user's caches directory (`$XDG_CACHE_HOME` or `~/.cache`,
/// then `OpenCoreData/FetchedResultsCaches`).
enum SectionCache {
    static var directory: URL {
        let base = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first ?? FileManager.default.temporaryDirectory
        return base.appendingPathComponent("OpenCoreData").appendingPathComponent("FetchedResultsCaches")
    }

    static func url(named name: String) -> URL {
        // Cache names are the app's own strings: keep them to one safe path component.
        let safe = name.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? String($0) : "_" }.joined()
        return directory.appendingPathComponent(safe + ".cache")
    }

    /// Encodes and writes caches off the caller's thread, in order; loads and deletes wait for it, so this process
    /// always sees its own latest write.
    private static let writer = DispatchQueue(label: "OpenCoreData.SectionCache.writer", qos: .utility)

    static func delete(named name: String?) {
        writer.sync {
            if let name {
                try? FileManager.default.removeItem(at: url(named: name))
            } else {
                try? FileManager.default.removeItem(at: directory)
            }
        }
    }

    /// Waits until every scheduled write is on disk.
    static func waitForWrites() { writer.sync {} }

    /// Cache files written by this process, by cache name (only touched on the writer queue).
    nonisolated(unsafe) private static var writes: [String: Int] = [:]
    /// How many times this process has written the cache of this name (for tests).
    static func writeCount(named name: String) -> Int { writer.sync { writes[name, default: 0] } }

    /// The cached results, or nil for a missing, unreadable, corrupt or truncated file.
    static func load(named name: String) -> CachedResults? {
        contents(named: name).flatMap(CacheFileFormat.decode)
    }

    /// The bytes of the cache file, or nil when there is none (after any write this process scheduled).
    static func contents(named name: String) -> Data? {
        waitForWrites()
        return FileManager.default.contents(atPath: url(named: name).path)
    }

    /// Writes the cache atomically (a reader never sees half a file) on the writer queue.
    ///
    /// A failure means no cache
    /// next time, and is handed to `onFailure` (on the writer queue).
    static func save(_ results: CachedResults, named name: String, onFailure: @escaping @Sendable (any Error) -> Void) {
        writer.async {
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                let data = try CacheFileFormat.encode(results)
                try data.write(to: url(named: name), options: .atomic)
                writes[name, default: 0] += 1
            } catch {
                onFailure(error)
            }
        }
    }
}
