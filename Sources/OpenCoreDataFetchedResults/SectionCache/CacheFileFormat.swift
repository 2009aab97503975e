import Foundation
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// A controller's results as saved under its cache name: what they were computed from, and each row's ID, sort values
/// and section, so that a warm start needs no rows from the store.

/// A controller's results as saved under its cache name: what they were computed from, and each row's ID, sort values
/// and section, so that a warm start needs no rows from the store.
struct CachedResults: Equatable, Sendable {
    static let currentFormat = 3

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

    struct Row: Equatable, Sendable {
        var entity: String
        var primaryKey: Int64
        var values: [AttributeValue]
        var section: Int
    }

    var key: Key
    var count: Int
    var sectionNames: [String]
    var rows: [Row]
}

/// The cache file format: a small JSON header (key, section names, entity names) and a binary body, one record per
/// row.
///
/// JSON for the rows cost about 10 µs each to decode, which made a warm start at 100,000 rows barely faster
/// than a cold one; this reads a row in well under a microsecond. Every read is bounds-checked: a truncated or
/// damaged file decodes to nil (then the controller recomputes), never to a crash.
enum CacheFileFormat {
    static let magic: [UInt8] = Array("OCDCACHE".utf8)

    struct Header: Codable {
        var key: CachedResults.Key
        var count: Int
        var sectionNames: [String]
        var entities: [String]
    }

    /// `repeated`: the same text as this column held in the previous row.
    ///
    /// Rows come in sort order, so the leading
    /// sort key (often the section key) mostly repeats: written once per run, read back as one shared string.
    private enum Tag: UInt8 { case null, integer, double, decimal, boolFalse, boolTrue, string, date, data, uuid, uri, repeated }

    static func encode(_ results: CachedResults) throws -> Data {
        var entities: [String] = []
        var entityIndex: [String: Int] = [:]
        for row in results.rows where entityIndex[row.entity] == nil {
            entityIndex[row.entity] = entities.count
            entities.append(row.entity)
        }
        let header = try JSONEncoder().encode(
            Header(key: results.key, count: results.count, sectionNames: results.sectionNames, entities: entities))
        var out: [UInt8] = magic
        out.reserveCapacity(magic.count + 4 + header.count + results.rows.count * 24)
        append(UInt32(header.count), to: &out)
        out.append(contentsOf: header)
        var previous: [AttributeValue] = []
        for row in results.rows {
            append(UInt32(entityIndex[row.entity]!), to: &out)
            append(UInt64(bitPattern: row.primaryKey), to: &out)
            append(UInt32(row.section), to: &out)
            append(UInt16(row.values.count), to: &out)
            for (i, value) in row.values.enumerated() {
                // Text only, compared by bytes: `==` would also match other spellings of the same characters.
                if i < previous.count, case .string(let text) = value, case .string(let last) = previous[i],
                    text.utf8.elementsEqual(last.utf8)
                {
                    out.append(Tag.repeated.rawValue)
                } else {
                    append(value, to: &out)
                }
            }
            previous = row.values
        }
        return Data(out)
    }

    static func decode(_ data: Data) -> CachedResults? {
        var rows: [CachedResults.Row] = []
        var entities: [String] = []
        let header = decode(data) { header in
            entities = header.entities
            rows.reserveCapacity(min(header.count, data.count / 17))
            return true
        } row: { entity, primaryKey, section, values in
            rows.append(CachedResults.Row(entity: entities[entity], primaryKey: primaryKey, values: values, section: section))
            return true
        }
        guard let header else { return nil }
        return CachedResults(key: header.key, count: header.count, sectionNames: header.sectionNames, rows: rows)
    }

    /// Reads a file without building `CachedResults`: `accept` sees the header first and can stop there (a stale
    /// key); `row` then gets each row, with an entity index into `header.entities` that is in range and the row's
    /// values in an array reused from row to row; returning false stops.
    ///
    /// The header, or nil if a callback stopped or
    /// the file is damaged anywhere (rows already handed over are then to be discarded).
    static func decode(
        _ data: Data, accept: (Header) -> Bool,
        row: (_ entity: Int, _ primaryKey: Int64, _ section: Int, _ values: [AttributeValue]) -> Bool
    ) -> Header? {
        data.withUnsafeBytes { raw -> Header? in
            var reader = Reader(bytes: raw)
            guard reader.bytes(magic.count).map(Array.init) == magic, let headerLength = reader.uint32(),
                let headerBytes = reader.bytes(Int(headerLength)),
                let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)), header.count >= 0, accept(header)
            else { return nil }
            var values: [AttributeValue] = []
            var previous: [AttributeValue] = []
            for _ in 0..<header.count {
                guard let e = reader.uint32(), Int(e) < header.entities.count, let pk = reader.uint64(), let section = reader.uint32(),
                    let n = reader.uint16()
                else { return nil }
                swap(&values, &previous)
                values.removeAll(keepingCapacity: true)
                for i in 0..<Int(n) {
                    guard let value = reader.value(repeating: i < previous.count ? previous[i] : nil) else { return nil }
                    values.append(value)
                }
                guard row(Int(e), Int64(bitPattern: pk), Int(section), values) else { return nil }
            }
            guard reader.isAtEnd else { return nil }  // trailing bytes: not a file this code wrote
            return header
        }
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }

    private static func appendBytes(_ bytes: some Collection<UInt8>, to out: inout [UInt8]) {
        append(UInt32(bytes.count), to: &out)
        out.append(contentsOf: bytes)
    }

    private static func append(_ value: AttributeValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(Tag.null.rawValue)
        case .integer(let v):
            out.append(Tag.integer.rawValue)
            append(UInt64(bitPattern: v), to: &out)
        case .double(let v):
            out.append(Tag.double.rawValue)
            append(v.bitPattern, to: &out)
        case .decimal(let v):
            out.append(Tag.decimal.rawValue)
            appendBytes(Array(NSDecimalNumber(decimal: v).stringValue.utf8), to: &out)
        case .bool(let v): out.append(v ? Tag.boolTrue.rawValue : Tag.boolFalse.rawValue)
        case .string(let v):
            out.append(Tag.string.rawValue)
            appendBytes(Array(v.utf8), to: &out)
        case .date(let v):
            out.append(Tag.date.rawValue)
            append(v.timeIntervalSinceReferenceDate.bitPattern, to: &out)
        case .data(let v):
            out.append(Tag.data.rawValue)
            appendBytes(Array(v), to: &out)
        case .uuid(let v):
            out.append(Tag.uuid.rawValue)
            withUnsafeBytes(of: v.uuid) { out.append(contentsOf: $0) }
        case .uri(let v):
            out.append(Tag.uri.rawValue)
            appendBytes(Array(v.absoluteString.utf8), to: &out)
        // Sort and section values come from stored attributes; a transient attribute's object is never one.
        case .object: out.append(Tag.null.rawValue)
        }
    }

    /// Reads little-endian values from a buffer; every read returns nil past the end.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        var isAtEnd: Bool { offset == bytes.count }

        mutating func bytes(_ n: Int) -> UnsafeRawBufferPointer.SubSequence? {
            guard n >= 0, n <= bytes.count - offset else { return nil }
            defer { offset += n }
            return bytes[offset..<(offset + n)]
        }

        mutating func integer<T: FixedWidthInteger>(_: T.Type) -> T? {
            guard let slice = bytes(MemoryLayout<T>.size) else { return nil }
            var value: T = 0
            withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: slice) }
            return T(littleEndian: value)
        }

        mutating func uint8() -> UInt8? { integer(UInt8.self) }
        mutating func uint16() -> UInt16? { integer(UInt16.self) }
        mutating func uint32() -> UInt32? { integer(UInt32.self) }
        mutating func uint64() -> UInt64? { integer(UInt64.self) }

        mutating func text() -> String? {
            guard let n = uint32(), let slice = bytes(Int(n)) else { return nil }
            return String(validating: slice, as: UTF8.self)
        }

        /// The next value; `previous` is the column's value in the previous row (nil in the first row, which a
        /// `repeated` tag then makes a damaged file).
        mutating func value(repeating previous: AttributeValue?) -> AttributeValue? {
            guard let raw = uint8(), let tag = Tag(rawValue: raw) else { return nil }
            switch tag {
            case .repeated: return previous
            case .null: return .null
            case .integer: return uint64().map { .integer(Int64(bitPattern: $0)) }
            case .double: return uint64().map { .double(Double(bitPattern: $0)) }
            case .decimal:
                guard let text = text(), let d = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { return nil }
                return .decimal(d)
            case .boolFalse: return .bool(false)
            case .boolTrue: return .bool(true)
            case .string: return text().map { .string($0) }
            case .date: return uint64().map { .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: $0))) }
            case .data:
                guard let n = uint32(), let slice = bytes(Int(n)) else { return nil }
                return .data(Data(slice))
            case .uuid:
                guard let slice = bytes(16) else { return nil }
                var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                withUnsafeMutableBytes(of: &uuid) { $0.copyBytes(from: slice) }
                return .uuid(UUID(uuid: uuid))
            case .uri: return text().flatMap { URL(string: $0) }.map { .uri($0) }
            }
        }
    }
}
