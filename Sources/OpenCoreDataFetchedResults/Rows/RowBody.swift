import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
@_spi(Engine) import OpenCoreDataStore

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
            let (x, y) = (Scalar(a), Scalar(b))
            if case .string(let s) = a, case .string(let t) = b {
                self = .strings(slot, s, t)
            } else if case .string(let s) = a, let y {
                self = .stringScalar(slot, s, y)
            } else if let x, case .string(let t) = b {
                self = .scalarString(slot, x, t)
            } else if let x, let y {
                self = .scalars(slot, x, y)
            } else {
                self = .many(slot, [a, b])
            }
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

extension RowBody {
    /// A row's values without its object slot, as `order(_:_:_:)` compares them.
    enum Values {
        case one(AttributeValue)
        case strings(String, String)
        case stringScalar(String, Scalar)
        case scalarString(Scalar, String)
        case scalars(Scalar, Scalar)
        case other
    }

    /// The values, copied out of the row without the slot.
    ///
    /// Not inlined on purpose: matching a row read from memory
    /// in the caller copies the whole row first (the compiler cannot tell that the comparisons that follow, calls into
    /// other modules, leave that memory alone), retaining its object, a slow retain for a managed object (its
    /// refcount lives in a side table). Here the row is borrowed, and only the payloads returned are retained.
    @inline(never)
    var comparedValues: Values {
        switch self {
        case .one(_, let a): return .one(a)
        case .strings(_, let a, let b): return .strings(a, b)
        case .stringScalar(_, let a, let b): return .stringScalar(a, b)
        case .scalarString(_, let a, let b): return .scalarString(a, b)
        case .scalars(_, let a, let b): return .scalars(a, b)
        case .none, .many: return .other
        }
    }

    /// The three-way order of the values at `a` against those at `b` (whose `comparedValues` are `bValues`, read
    /// once by the caller for a search's many comparisons) under `sorts`, for searches that compare rows where they
    /// are (see `comparedValues`).
    @inline(__always)
    static func order(
        _ a: UnsafePointer<RowBody>, _ b: UnsafePointer<RowBody>, _ bValues: Values, _ sorts: [FetchSortDescriptor]
    ) -> Int {
        switch a.pointee.comparedValues {
        case .stringScalar(let a0, let a1):
            if case .stringScalar(let b0, let b1) = bValues { return order((a0, a1), (b0, b1), sorts) }
        case .strings(let a0, let a1):
            if case .strings(let b0, let b1) = bValues { return order((a0, a1), (b0, b1), sorts) }
        case .scalars(let a0, let a1):
            if case .scalars(let b0, let b1) = bValues { return order((a0, a1), (b0, b1), sorts) }
        case .scalarString(let a0, let a1):
            if case .scalarString(let b0, let b1) = bValues { return order((a0, a1), (b0, b1), sorts) }
        case .one(let x):
            if case .one(let y) = bValues { return SortValues.directed(x, y, sorts[0]) }
        case .other: break
        }
        return mixedOrder(a, b, sorts)
    }

    /// `order` for rows of different cases or of three or more values.
    @inline(never)
    private static func mixedOrder(_ a: UnsafePointer<RowBody>, _ b: UnsafePointer<RowBody>, _ sorts: [FetchSortDescriptor]) -> Int {
        a.pointee.order(b.pointee, sorts)
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
