import Foundation
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// A controller's results as saved under its cache name: what they were computed from, and each row's ID, sort values
/// and section, so that a warm start needs no rows from the store.
struct CachedResults: Codable, Equatable, Sendable {
    static let currentFormat = 1

    /// What the results depend on; all of it must match for the cache to be used.
    struct Key: Codable, Equatable, Sendable {
        var format = CachedResults.currentFormat
        var storeIdentifier: String
        var changeToken: Int64
        var modelVersionHash: String
        var entity: String
        var predicate: String
        var sorts: [String]
        var sectionKeyPath: String?
        var includesSubentities: Bool
        var fetchLimit: Int
        var fetchOffset: Int
    }

    struct Row: Codable, Equatable, Sendable {
        var entity: String
        var primaryKey: Int64
        var values: [CodedValue]
        var section: Int
    }

    var key: Key
    var count: Int
    var sectionNames: [String]
    var rows: [Row]
}

/// An attribute value in a cache file.
struct CodedValue: Codable, Equatable, Sendable {
    var value: AttributeValue

    init(_ value: AttributeValue) { self.value = value }

    private enum Kind: String, Codable { case null, integer, double, decimal, bool, string, date, data, uuid, uri }
    private enum CodingKeys: String, CodingKey { case k, v }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        switch try c.decode(Kind.self, forKey: .k) {
        case .null: value = .null
        case .integer: value = .integer(try c.decode(Int64.self, forKey: .v))
        case .double: value = .double(try c.decode(Double.self, forKey: .v))
        case .decimal:
            let text = try c.decode(String.self, forKey: .v)
            guard let d = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
                throw DecodingError.dataCorruptedError(forKey: .v, in: c, debugDescription: "bad decimal")
            }
            value = .decimal(d)
        case .bool: value = .bool(try c.decode(Bool.self, forKey: .v))
        case .string: value = .string(try c.decode(String.self, forKey: .v))
        case .date: value = .date(Date(timeIntervalSinceReferenceDate: try c.decode(Double.self, forKey: .v)))
        case .data: value = .data(try c.decode(Data.self, forKey: .v))
        case .uuid: value = .uuid(try c.decode(UUID.self, forKey: .v))
        case .uri: value = .uri(try c.decode(URL.self, forKey: .v))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch value {
        case .null: try c.encode(Kind.null, forKey: .k)
        case .integer(let v): try c.encode(Kind.integer, forKey: .k); try c.encode(v, forKey: .v)
        case .double(let v): try c.encode(Kind.double, forKey: .k); try c.encode(v, forKey: .v)
        case .decimal(let v): try c.encode(Kind.decimal, forKey: .k); try c.encode(NSDecimalNumber(decimal: v).stringValue, forKey: .v)
        case .bool(let v): try c.encode(Kind.bool, forKey: .k); try c.encode(v, forKey: .v)
        case .string(let v): try c.encode(Kind.string, forKey: .k); try c.encode(v, forKey: .v)
        case .date(let v): try c.encode(Kind.date, forKey: .k); try c.encode(v.timeIntervalSinceReferenceDate, forKey: .v)
        case .data(let v): try c.encode(Kind.data, forKey: .k); try c.encode(v, forKey: .v)
        case .uuid(let v): try c.encode(Kind.uuid, forKey: .k); try c.encode(v, forKey: .v)
        case .uri(let v): try c.encode(Kind.uri, forKey: .k); try c.encode(v, forKey: .v)
        }
    }
}

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
        waitForWrites()
        guard let data = FileManager.default.contents(atPath: url(named: name).path) else { return nil }
        return try? JSONDecoder().decode(CachedResults.self, from: data)
    }

    /// Writes the cache atomically (a reader never sees half a file) on the writer queue; failures only mean no
    /// cache next time.
    static func save(_ results: CachedResults, named name: String) {
        writer.async {
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                let data = try JSONEncoder().encode(results)
                try data.write(to: url(named: name), options: .atomic)
                writes[name, default: 0] += 1
            } catch {
                return
            }
        }
    }
}
