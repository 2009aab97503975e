import Foundation
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// Which object a result is, without the object: a stored row by entity and primary key, or an unsaved object
/// (held here, as the context holds its inserted objects).
enum RowKey: Hashable {
    /// A stored row: the entity's number in the engine's entity table, and the row's primary key.
    case stored(entity: Int32, primaryKey: Int64)
    /// An object inserted in the context and not saved yet.
    case unsaved(NSManagedObject)

    static func == (a: RowKey, b: RowKey) -> Bool {
        switch (a, b) {
        case (.stored(let e1, let k1), .stored(let e2, let k2)): return e1 == e2 && k1 == k2
        case (.unsaved(let o1), .unsaved(let o2)): return o1 === o2
        default: return false
        }
    }

    func hash(into hasher: inout Hasher) {
        switch self {
        case .stored(let entity, let primaryKey):
            hasher.combine(entity)
            hasher.combine(primaryKey)
        case .unsaved(let object): hasher.combine(ObjectIdentifier(object))
        }
    }

    /// What `Set` and `Dictionary` hash: one word (the primary key with the entity number in its top bits, or the
    /// object's address) mixed by `_IdentityHash`, not SipHash.
    ///
    /// The engine looks rows up by key in every batch (a bulk
    /// batch once per result), so this runs per row.
    func _rawHashValue(seed: Int) -> Int {
        switch self {
        case .stored(let entity, let primaryKey):
            return _IdentityHash.mix(UInt64(bitPattern: primaryKey) ^ (UInt64(UInt32(bitPattern: entity)) &<< 40), seed: seed)
        case .unsaved(let object): return _IdentityHash.mix(ObjectIdentifier(object), seed: seed ^ 1)
        }
    }

    /// The store's tie-break between results whose sort values are equal: stored rows by primary key, then unsaved
    /// objects in insertion order (read from the object, so a just-saved one sorts by its new primary key).
    var storeOrder: (Int8, Int64) {
        switch self {
        case .stored(_, let primaryKey): return (0, primaryKey)
        case .unsaved(let object): return object._storeOrderKey
        }
    }
}

/// The values of a result's sort keys, up to two kept inline: a row costs no allocation of its own.
///
/// An enum over how many there are rather than two inline values, a count and an array: the case needs no byte of its
/// own (it sits in bits the values leave unused), so a row is 8 bytes smaller, and with three or more values one
/// array holds them all.
struct SortValues: Equatable {
    private enum Storage: Equatable {
        case none
        case one(AttributeValue)
        case two(AttributeValue, AttributeValue)
        case many([AttributeValue])
    }
    private let storage: Storage

    /// How many values there are (the number of sort descriptors).
    var count: Int {
        switch storage {
        case .none: return 0
        case .one: return 1
        case .two: return 2
        case .many(let values): return values.count
        }
    }

    /// The first `count` of `values`.
    init(_ values: [AttributeValue], count: Int) {
        self.init(count: count, values.count) { values[$0] }
    }

    /// The first `count` of a row's values, as a batched fetch reads them.
    @inline(__always)
    init(_ values: ResultKeyValues, count: Int) {
        self.init(count: count, values.count) { values[$0] }
    }

    /// One value.
    init(one value: AttributeValue) { storage = .one(value) }

    /// Two values.
    init(two first: AttributeValue, _ second: AttributeValue) { storage = .two(first, second) }

    @inline(__always)
    private init(count: Int, _ available: Int, _ values: (Int) -> AttributeValue) {
        precondition(count <= available, "SortValues needs \(count) values, got \(available)")
        switch count {
        case 0: storage = .none
        case 1: storage = .one(values(0))
        case 2: storage = .two(values(0), values(1))
        default: storage = .many((0..<count).map(values))
        }
    }

    subscript(index: Int) -> AttributeValue {
        switch storage {
        case .one(let value) where index == 0: return value
        case .two(let value, _) where index == 0: return value
        case .two(_, let value) where index == 1: return value
        case .many(let values): return values[index]
        default: preconditionFailure("SortValues index \(index) out of range 0..<\(count)")
        }
    }

    /// The three-way order of these values against `other`'s under `sorts` (directions applied): negative when these
    /// come first, 0 when every value is equal.
    ///
    /// Both storages are matched once, so the values are compared where they are, not copied out one at a time.
    @inline(__always)
    func order(_ other: SortValues, _ sorts: [FetchSortDescriptor]) -> Int {
        switch (storage, other.storage) {
        case (.one(let a0), .one(let b0)):
            return Self.directed(a0, b0, sorts[0])
        case (.two(let a0, let a1), .two(let b0, let b1)):
            let c = Self.directed(a0, b0, sorts[0])
            return c != 0 ? c : Self.directed(a1, b1, sorts[1])
        default:
            for i in sorts.indices {
                let c = Self.directed(self[i], other[i], sorts[i])
                if c != 0 { return c }
            }
            return 0
        }
    }

    @inline(__always)
    static func directed(_ a: AttributeValue, _ b: AttributeValue, _ sort: FetchSortDescriptor) -> Int {
        let c = FetchSortDescriptor.compare(a, b, sort.comparison)
        return sort.ascending ? c : -c
    }

    /// The values as an array (for the section cache).
    var array: [AttributeValue] { (0..<count).map { self[$0] } }
}

/// Where an object sits now: the values of its sort keys and its section name.
///
/// Rows keep only the values: a row's section follows from its index (the engine's `SectionLayout`), so a row does
/// not hold a section name of its own (16 bytes a row).
struct Placement: Equatable {
    var values: SortValues
    var section: String
}

/// One result as the engine keeps it: which object, and the values of its sort keys as of the last batch reported.
///
/// No object is made until one is asked for;
/// once made (asked for, or reported to the delegate), the row keeps it, so the same row always gives the same object,
/// as Core Data's results array does.
///
/// A row is 48 bytes: the key in one word, and `RowBody` (the object slot and the sort values) in 40.
///
/// The key takes one word: a stored row's entity number and primary key packed together (16 and 48 bits). The two
/// keys that do not pack are told by the word's value and keep what they need in the slot: an unsaved object is its
/// own key, and a key too large to pack (a primary key of 2⁴⁸ or more) is boxed with the row's object.
struct ResultRow {
    /// The packed key, or `unsavedTag` / `wideTag`.
    var packedKey: UInt64
    /// The object slot and the sort values.
    var body: RowBody
    // No initializer in the type itself: an explicit one that assigns each property makes the optimizer build the
    // row, copy it and destroy the original (about 300 instructions a row in a batched fetch); the memberwise one
    // builds it in place.

    static let unsavedTag = UInt64.max
    static let wideTag = UInt64.max - 1
    static let primaryKeyBits: UInt64 = 48
    static let primaryKeyMask: UInt64 = (1 << primaryKeyBits) - 1

    /// A stored row's key in one word, or nil when it does not fit (an entity number above 65,534, a primary key
    /// outside 0..<2⁴⁸); never equal to either tag.
    @inline(__always)
    static func pack(entity: Int32, primaryKey: Int64) -> UInt64? {
        // Negative numbers become large ones here, so one comparison each checks both ends.
        let key = UInt64(bitPattern: primaryKey), number = UInt64(UInt32(bitPattern: entity))
        guard key <= primaryKeyMask, number < 0xFFFF else { return nil }
        return number << primaryKeyBits | key
    }

    /// A key too large to pack, with the row's object.
    final class WideKey {
        let key: RowKey
        let object: NSManagedObject?
        init(key: RowKey, object: NSManagedObject?) {
            self.key = key
            self.object = object
        }
    }
}

extension ResultRow {
    init(key: RowKey, values: SortValues, object: NSManagedObject? = nil) {
        switch key {
        case .stored(let entity, let primaryKey):
            if let packed = Self.pack(entity: entity, primaryKey: primaryKey) {
                self.init(packedKey: packed, body: RowBody(values, slot: object ?? RowBody.empty))
            } else {
                self.init(packedKey: Self.wideTag, body: RowBody(values, slot: WideKey(key: key, object: object)))
            }
        case .unsaved(let unsaved): self.init(packedKey: Self.unsavedTag, body: RowBody(values, slot: unsaved))
        }
    }

    /// Which object the row is.
    var key: RowKey {
        get {
            switch packedKey {
            case Self.unsavedTag: return .unsaved(unsafeDowncast(body.slot, to: NSManagedObject.self))
            case Self.wideTag: return unsafeDowncast(body.slot, to: WideKey.self).key
            default:
                return .stored(
                    entity: Int32(truncatingIfNeeded: packedKey >> Self.primaryKeyBits), primaryKey: Int64(packedKey & Self.primaryKeyMask))
            }
        }
        set { self = ResultRow(key: newValue, values: values, object: object) }
    }

    /// The row's object, once made (an unsaved row's is its key).
    var object: NSManagedObject? {
        get {
            let slot = body.slot
            if slot === RowBody.empty { return nil }
            return packedKey == Self.wideTag
                ? unsafeDowncast(slot, to: WideKey.self).object : unsafeDowncast(slot, to: NSManagedObject.self)
        }
        set {
            switch packedKey {
            case Self.unsavedTag: break  // the object is the key
            case Self.wideTag: body.slot = WideKey(key: key, object: newValue)
            default: body.slot = newValue ?? RowBody.empty
            }
        }
    }

    /// The values of the row's sort keys.
    var values: SortValues {
        get { body.values }
        set { body = RowBody(newValue, slot: body.slot) }
    }

    /// The store's tie-break between equal sort values (`RowKey.storeOrder`), without making the key.
    @inline(__always)
    var storeOrder: (Int8, Int64) {
        packedKey < Self.wideTag ? (0, Int64(packedKey & Self.primaryKeyMask)) : key.storeOrder
    }
}

/// A row's object slot and sort values in 40 bytes, with no allocation for up to two values of the common types.
///
/// Every case starts with the slot, a class reference that is never nil (`empty` stands for "no object"), so the
/// case sits in bits the reference leaves unused and takes no byte of its own. A pair of values is kept by kind: two
/// strings (32 bytes), or a string and a scalar, or two scalars (a scalar is a number, a date, a Boolean or null, in
/// 9 bytes). A `SortValues` with its `.two(AttributeValue, AttributeValue)` would need 48 bytes for the pair and a
/// byte for its case.
enum RowBody {
    case none(AnyObject)
    case one(AnyObject, AttributeValue)
    case strings(AnyObject, String, String)
    case stringScalar(AnyObject, String, Scalar)
    case scalarString(AnyObject, Scalar, String)
    case scalars(AnyObject, Scalar, Scalar)
    case many(AnyObject, [AttributeValue])

    /// What a row without an object holds in its slot.
    static var empty: AnyObject { Empty.shared }
    private final class Empty: Sendable { static let shared = Empty() }

    /// A sort value of 8 bytes or none, with its kind.
    struct Scalar {
        enum Kind: UInt8 { case null, integer, double, date, bool }
        var bits: UInt64
        var kind: Kind

        @inline(__always)
        init?(_ value: AttributeValue) {
            switch value {
            case .null: (bits, kind) = (0, .null)
            case .integer(let v): (bits, kind) = (UInt64(bitPattern: v), .integer)
            case .double(let v): (bits, kind) = (v.bitPattern, .double)
            case .date(let v): (bits, kind) = (v.timeIntervalSinceReferenceDate.bitPattern, .date)
            case .bool(let v): (bits, kind) = (v ? 1 : 0, .bool)
            default: return nil
            }
        }

        @inline(__always)
        var value: AttributeValue {
            switch kind {
            case .null: return .null
            case .integer: return .integer(Int64(bitPattern: bits))
            case .double: return .double(Double(bitPattern: bits))
            case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits)))
            case .bool: return .bool(bits != 0)
            }
        }
    }

    init(_ values: SortValues, slot: AnyObject) {
        self.init(count: values.count, slot: slot) { values[$0] }
    }

    /// The first `count` of a row's values, as a batched fetch reads them.
    @inline(__always)
    init(_ values: ResultKeyValues, count: Int, slot: AnyObject) {
        precondition(count <= values.count, "a row needs \(count) sort values, got \(values.count)")
        self.init(count: count, slot: slot) { values[$0] }
    }

    @inline(__always)
    private init(count: Int, slot: AnyObject, _ values: (Int) -> AttributeValue) {
        switch count {
        case 0: self = .none(slot)
        case 1: self = .one(slot, values(0))
        case 2:
            let a = values(0), b = values(1)
            if case .string(let x) = a {
                if case .string(let y) = b {
                    self = .strings(slot, x, y)
                    return
                }
                if let y = Scalar(b) {
                    self = .stringScalar(slot, x, y)
                    return
                }
            } else if let x = Scalar(a) {
                if case .string(let y) = b {
                    self = .scalarString(slot, x, y)
                    return
                }
                if let y = Scalar(b) {
                    self = .scalars(slot, x, y)
                    return
                }
            }
            self = .many(slot, [a, b])
        default: self = .many(slot, (0..<count).map(values))
        }
    }

    /// The row's object slot (`empty` when it has none).
    var slot: AnyObject {
        get {
            switch self {
            case .none(let slot), .one(let slot, _), .strings(let slot, _, _), .stringScalar(let slot, _, _),
                .scalarString(let slot, _, _), .scalars(let slot, _, _), .many(let slot, _):
                return slot
            }
        }
        set {
            switch self {
            case .none: self = .none(newValue)
            case .one(_, let a): self = .one(newValue, a)
            case .strings(_, let a, let b): self = .strings(newValue, a, b)
            case .stringScalar(_, let a, let b): self = .stringScalar(newValue, a, b)
            case .scalarString(_, let a, let b): self = .scalarString(newValue, a, b)
            case .scalars(_, let a, let b): self = .scalars(newValue, a, b)
            case .many(_, let values): self = .many(newValue, values)
            }
        }
    }

    /// How many sort values there are.
    var count: Int {
        switch self {
        case .none: return 0
        case .one: return 1
        case .strings, .stringScalar, .scalarString, .scalars: return 2
        case .many(_, let values): return values.count
        }
    }

    /// Sort value `index`.
    @inline(__always)
    subscript(index: Int) -> AttributeValue {
        switch self {
        case .one(_, let value) where index == 0: return value
        case .strings(_, let a, let b): return .string(index == 0 ? a : b)
        case .stringScalar(_, let a, let b): return index == 0 ? .string(a) : b.value
        case .scalarString(_, let a, let b): return index == 0 ? a.value : .string(b)
        case .scalars(_, let a, let b): return index == 0 ? a.value : b.value
        case .many(_, let values): return values[index]
        default: preconditionFailure("RowBody index \(index) out of range 0..<\(count)")
        }
    }

    /// The values as `SortValues`.
    var values: SortValues {
        switch self {
        case .none: return SortValues([], count: 0)
        case .one(_, let value): return SortValues(one: value)
        case .many(_, let values): return SortValues(values, count: values.count)
        default: return SortValues(two: self[0], self[1])
        }
    }

    /// Two pairs of the same kinds, in order.
    @inline(__always)
    private static func order<A: PairValue, B: PairValue>(_ a: (A, B), _ b: (A, B), _ sorts: [FetchSortDescriptor]) -> Int {
        let c = A.directed(a.0, b.0, sorts[0])
        return c != 0 ? c : B.directed(a.1, b.1, sorts[1])
    }

    /// The three-way order of these values against `other`'s under `sorts` (as `SortValues.order`).
    @inline(__always)
    func order(_ other: SortValues, _ sorts: [FetchSortDescriptor]) -> Int {
        order(sorts) { other[$0] }
    }

    /// The three-way order of these values against `other(i)` for each sort key `i`.
    @inline(__always)
    private func order(_ sorts: [FetchSortDescriptor], _ other: (Int) -> AttributeValue) -> Int {
        for i in sorts.indices {
            let c = SortValues.directed(self[i], other(i), sorts[i])
            if c != 0 { return c }
        }
        return 0
    }

    /// The three-way order of these values against another row's under `sorts`.
    ///
    /// Rows of one fetch mostly share a case (the values of a sort key have one type): pairs of the same case compare
    /// their payloads as they are, without building an `AttributeValue` for each.
    @inline(__always)
    func order(_ other: RowBody, _ sorts: [FetchSortDescriptor]) -> Int {
        switch (self, other) {
        case (.stringScalar(_, let a0, let a1), .stringScalar(_, let b0, let b1)): return Self.order((a0, a1), (b0, b1), sorts)
        case (.strings(_, let a0, let a1), .strings(_, let b0, let b1)): return Self.order((a0, a1), (b0, b1), sorts)
        case (.scalars(_, let a0, let a1), .scalars(_, let b0, let b1)): return Self.order((a0, a1), (b0, b1), sorts)
        case (.scalarString(_, let a0, let a1), .scalarString(_, let b0, let b1)): return Self.order((a0, a1), (b0, b1), sorts)
        case (.one(_, let a), .one(_, let b)): return SortValues.directed(a, b, sorts[0])
        default: return order(sorts) { other[$0] }
        }
    }
}

/// A value a row keeps as it is in a pair (a string or a scalar), compared without making an `AttributeValue`.
protocol PairValue {
    static func directed(_ a: Self, _ b: Self, _ sort: FetchSortDescriptor) -> Int
}

extension String: PairValue {
    @inline(__always)
    static func directed(_ a: String, _ b: String, _ sort: FetchSortDescriptor) -> Int {
        let c = FetchSortDescriptor.compareStrings(a, b, sort.comparison)
        return sort.ascending ? c : -c
    }
}

extension RowBody.Scalar: PairValue {
    /// Integers and Booleans compare as they are; other scalars as their values.
    @inline(__always)
    static func directed(_ a: Self, _ b: Self, _ sort: FetchSortDescriptor) -> Int {
        guard a.kind == b.kind, a.kind == .integer || a.kind == .bool else { return SortValues.directed(a.value, b.value, sort) }
        let x = Int64(bitPattern: a.bits), y = Int64(bitPattern: b.bits)
        let c = x == y ? 0 : (x < y ? -1 : 1)
        return sort.ascending ? c : -c
    }
}

/// Rows as a load produces them, in result order, with their sections counted as they come (no second pass).
///
/// A load appends up to millions of rows, so the row being filled and the section being counted are kept apart from
/// the finished ones: appending costs one array append and one addition.
struct LoadedRows {
    /// The rows, in order.
    var rows: ChunkedArray<ResultRow> {
        get {
            guard !tail.isEmpty else { return full }
            var all = full
            all.appendChunk(tail)
            return all
        }
        set { (full, tail) = (newValue, []) }
    }
    /// How many rows there are (without assembling `rows`).
    var rowCount: Int { full.count + tail.count }
    /// The finished chunks of rows, then the chunk being filled.
    private var full = ChunkedArray<ResultRow>()
    private var tail: [ResultRow] = []
    private(set) var sectionNames: [String] = []
    /// The number of rows of each section (aligned with `sectionNames`).
    var sectionCounts: [Int] { lastCount > 0 ? finishedCounts + [lastCount] : finishedCounts }
    /// The counts of every section but the last, and the last one's.
    private var finishedCounts: [Int] = []
    private var lastCount = 0
    private var seen: Set<String> = []
    /// The first row whose section already appeared before another one (the sort does not order the sections).
    private(set) var firstRepeat: (row: Int, section: String)?
    /// The unsaved objects among the rows (only a fetch of objects has any).
    private(set) var unsaved: Set<ObjectIdentifier> = []

    /// Adds a row of `section`.
    ///
    /// `sameSection` says the caller knows it is in the previous row's section (no name comparison).
    mutating func append(_ row: consuming ResultRow, section: String, sameSection: Bool = false) {
        count(section: section, sameSection: sameSection)
        if case .unsaved(let object) = row.key { unsaved.insert(ObjectIdentifier(object)) }
        makeRoom()
        tail.append(consume row)
    }

    /// Adds a stored row without an object (a batched fetch's), built in place.
    @inline(__always)
    mutating func appendStored(
        entity: Int32, primaryKey: Int64, values: ResultKeyValues, sortCount: Int, empty: AnyObject, section: String, sameSection: Bool
    ) {
        count(section: section, sameSection: sameSection)
        makeRoom()
        guard let packed = ResultRow.pack(entity: entity, primaryKey: primaryKey) else {
            appendWide(entity: entity, primaryKey: primaryKey, values: SortValues(values, count: sortCount))
            return
        }
        tail.append(ResultRow(packedKey: packed, body: RowBody(values, count: sortCount, slot: empty)))
    }

    /// Appends a stored row whose key does not pack (kept out of the loop above: it never runs in practice).
    @inline(never)
    private mutating func appendWide(entity: Int32, primaryKey: Int64, values: SortValues) {
        tail.append(ResultRow(key: .stored(entity: entity, primaryKey: primaryKey), values: values))
    }

    /// Moves a full tail into the chunks, giving the next one its capacity up front.
    @inline(__always)
    private mutating func makeRoom() {
        guard tail.count == tail.capacity else { return }
        if !tail.isEmpty { full.appendChunk(tail) }
        tail = []
        tail.reserveCapacity(ChunkedArray<ResultRow>.loadedChunk)
    }

    /// Counts a row of `section`; `sameSection` says it is the previous row's (no name comparison).
    @inline(__always)
    private mutating func count(section: String, sameSection: Bool) {
        if lastCount > 0, sameSection || sectionNames.last == section {
            lastCount += 1
            return
        }
        if !seen.insert(section).inserted, firstRepeat == nil { firstRepeat = (rowCount, section) }
        if lastCount > 0 { finishedCounts.append(lastCount) }
        sectionNames.append(section)
        lastCount = 1
    }
}
