import OpenCoreDataModel
import OpenCoreDataPredicate
@_spi(Engine) import OpenCoreDataStore

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
