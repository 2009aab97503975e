import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Sort values turned into byte strings that order as the values do: comparing two results is one `memcmp`.
///
/// Sorting k arriving results compares values about k·log k times. Compared as `SortValues`, each comparison matches
/// both enums (which copies them, retaining their strings) and goes through `FetchSortDescriptor.compare` once per
/// key: several hundred instructions. Encoded once, each comparison is a few dozen.
///
/// The encoding, per sort key: a tag byte (1 for nil, 2 for a value, so nil comes first as `compare` has it), then
/// - integers and Booleans: the 64-bit value with its sign bit flipped, big-endian (Booleans as 0 and 1, as `compare`
///   orders them among numbers);
/// - doubles and dates: the IEEE 754 bits made to order as the numbers do (negative: every bit inverted; otherwise the
///   sign bit set), −0 taken as 0;
/// - strings compared `.default` or `.caseInsensitive`: their UTF-8 bytes (case-folded first for the latter), each
///   zero byte written as 0x00 0xFF, ended by 0x00 0x00 — so a string orders before every longer one it begins;
/// and every byte of a descending key inverted. Each key's encoding is prefix-free, so the concatenation orders as
/// the tuple of keys does.
///
/// Not every sort can be encoded: a key whose non-nil values are of different kinds (integers beside doubles, say, or
/// strings beside numbers), a locale-aware comparison, a NaN, or a kind without a byte order here (decimals, UUIDs,
/// URLs, data, transient objects). For those, `init` returns nil and callers compare `SortValues`.
struct SortKeys {
    private var bytes: [UInt8] = []
    /// Where each result's key ends in `bytes` (it starts where the one before ends).
    private var ends: [Int] = []

    private enum Kind: Equatable {
        case integer, double, date, string
    }

    /// The keys of `values` under `sorts`, or nil when some key cannot be encoded (see the type's notes).
    init?(_ values: [SortValues], _ sorts: [FetchSortDescriptor]) {
        guard !values.isEmpty, !sorts.isEmpty, values.allSatisfy({ $0.count == sorts.count }) else { return nil }
        for (column, sort) in sorts.enumerated() {
            var known: Kind?
            for row in values {
                let kind: Kind
                switch row[column] {
                case .null: continue
                case .integer, .bool: kind = .integer
                case .double(let d):
                    guard !d.isNaN else { return nil }
                    kind = .double
                case .date(let d):
                    guard !d.timeIntervalSinceReferenceDate.isNaN else { return nil }
                    kind = .date
                case .string:
                    guard sort.comparison == .default || sort.comparison == .caseInsensitive else { return nil }
                    kind = .string
                default: return nil
                }
                if let known, known != kind { return nil }
                known = kind
            }
        }
        bytes.reserveCapacity(values.count * sorts.count * 10)
        ends.reserveCapacity(values.count)
        for row in values {
            for (column, sort) in sorts.enumerated() {
                let start = bytes.count
                append(row[column], sort)
                if !sort.ascending {
                    for i in start..<bytes.count { bytes[i] = ~bytes[i] }
                }
            }
            ends.append(bytes.count)
        }
    }

    private mutating func append(_ value: AttributeValue, _ sort: FetchSortDescriptor) {
        switch value {
        case .null: bytes.append(1)
        case .integer(let v): appendNumber(UInt64(bitPattern: v) ^ (1 << 63))
        case .bool(let v): appendNumber(UInt64(v ? 1 : 0) ^ (1 << 63))
        case .double(let d): appendFloating(d)
        case .date(let d): appendFloating(d.timeIntervalSinceReferenceDate)
        case .string(let s):
            bytes.append(2)
            let text = sort.comparison == .caseInsensitive ? PredicateSemantics.fold(s, .caseInsensitive) : s
            for byte in text.utf8 {
                bytes.append(byte)
                if byte == 0 { bytes.append(0xFF) }
            }
            bytes.append(0)
            bytes.append(0)
        default: preconditionFailure("SortKeys: \(value.kindName) has no byte order (init checks kinds first)")
        }
    }

    private mutating func appendFloating(_ d: Double) {
        let bits = (d == 0 ? 0 : d).bitPattern  // −0 == 0
        appendNumber(bits >> 63 == 1 ? ~bits : bits | (1 << 63))
    }

    private mutating func appendNumber(_ n: UInt64) {
        bytes.append(2)
        withUnsafeBytes(of: n.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// The positions `0..<count` in the order of their keys, ties (equal values) broken by `tieBreak`.
    func sortedPositions(tieBreak: (Int, Int) -> Bool) -> [Int] {
        var order = Array(ends.indices)
        bytes.withUnsafeBufferPointer { bytes in
            ends.withUnsafeBufferPointer { ends in
                order.sort { a, b in
                    let c = Self.order(a, b, bytes, ends)
                    return c != 0 ? c < 0 : tieBreak(a, b)
                }
            }
        }
        return order
    }

    /// The three-way order of the keys of results `a` and `b` (the sort's comparison; tests check that it agrees with
    /// `SortValues.order`).
    func order(_ a: Int, _ b: Int) -> Int {
        bytes.withUnsafeBufferPointer { bytes in ends.withUnsafeBufferPointer { ends in Self.order(a, b, bytes, ends) } }
    }

    @inline(__always)
    private static func order(_ a: Int, _ b: Int, _ bytes: UnsafeBufferPointer<UInt8>, _ ends: UnsafeBufferPointer<Int>) -> Int {
        let (startA, startB) = (a == 0 ? 0 : ends[a - 1], b == 0 ? 0 : ends[b - 1])
        let (lengthA, lengthB) = (ends[a] - startA, ends[b] - startB)
        let c = memcmp(bytes.baseAddress! + startA, bytes.baseAddress! + startB, min(lengthA, lengthB))
        if c != 0 { return c < 0 ? -1 : 1 }
        return lengthA == lengthB ? 0 : (lengthA < lengthB ? -1 : 1)
    }
}
