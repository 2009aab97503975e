import Synchronization

/// Package-internal: an implementation detail OpenCoreData's modules share, not API.
///
/// A frozen entity's property indexes by the identity of an accessor's key object: a typed `@Managed` property's
/// storage key path. A typed setter or getter finds its property here with one atomic load and one hash lookup,
/// taking no lock and retaining nothing (a process-wide table behind a mutex cost two atomic operations per access,
/// a third of what a typed property's set cost over `setValue(_:forKey:)`).
///
/// Readers load the current table without a lock. A writer (the first access through each key path, rare) copies the
/// table with the new entry and publishes the copy; tables are never freed while the cache lives, so a reader still
/// holding an older one reads valid memory, and every key object is retained so its identity cannot be reused. The
/// cache stops growing at `limit` entries (further keys are found the slow way each time), which bounds what the kept
/// tables cost: a class's accessors usually make one key path each, so a table rarely grows past a few dozen.
package final class _AccessorIndexCache: Sendable {
    /// An open-addressing table of (key address, index) pairs in one array of words, probed linearly from a
    /// multiplicative hash of the address: a lookup is a multiply, a shift and a compare or two (a `Dictionary` keyed
    /// by identity cost about 160 instructions a lookup, an eighth of a typed setter, in W6's profile).
    private final class Table: Sendable {
        /// Pairs of words: the key's address (0: empty) and its index.
        ///
        /// The capacity is a power of two at least twice the entries, so a probe always reaches an empty slot.
        let words: [UInt]
        /// 64 minus log2 of the capacity: the hash's top bits pick the first slot.
        let shift: UInt
        let entries: [(key: UInt, index: Int)]

        init(_ entries: [(key: UInt, index: Int)]) {
            var capacity = 8
            while capacity < 2 * entries.count { capacity *= 2 }
            shift = UInt(UInt.bitWidth - capacity.trailingZeroBitCount)
            var words = [UInt](repeating: 0, count: 2 * capacity)
            for entry in entries {
                var slot = Table.slot(of: entry.key, shift: shift)
                while words[2 * slot] != 0 { slot = (slot + 1) & (capacity - 1) }
                words[2 * slot] = entry.key
                words[2 * slot + 1] = UInt(bitPattern: entry.index)
            }
            self.words = words
            self.entries = entries
        }

        @inline(__always)
        static func slot(of key: UInt, shift: UInt) -> Int {
            Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> shift)
        }

        @inline(__always)
        func index(for key: UInt) -> Int? {
            words.withUnsafeBufferPointer { words in
                let mask = words.count / 2 - 1
                var slot = Table.slot(of: key, shift: shift)
                while true {
                    let found = words[2 * slot]
                    if found == key { return Int(bitPattern: words[2 * slot + 1]) }
                    if found == 0 { return nil }
                    slot = (slot + 1) & mask
                }
            }
        }
    }

    private struct Kept: @unchecked Sendable {  // key objects are only retained, never read
        var tables: [Table] = []
        var keys: [AnyObject] = []
    }

    /// Most entries one entity's cache holds.
    public static let limit = 256

    /// The newest table's address, unretained (`kept` holds it); 0 before the first.
    private let current = Atomic<UInt>(0)
    private let kept = Mutex(Kept())

    /// An empty cache.
    public init() {}

    /// The property index remembered for `key`, if any.
    @inline(__always)
    public func index(for key: AnyObject) -> Int? {
        guard let raw = UnsafeRawPointer(bitPattern: current.load(ordering: .acquiring)) else { return nil }
        let address = UInt(bitPattern: ObjectIdentifier(key))
        return Unmanaged<Table>.fromOpaque(raw)._withUnsafeGuaranteedRef { $0.index(for: address) }
    }

    /// Remembers `index` for `key` (a no-op when `key` is known or the cache is full); returns whether `key` is
    /// remembered now.
    @discardableResult
    public func remember(_ index: Int, for key: AnyObject) -> Bool {
        kept.withLock { kept in
            let address = UInt(bitPattern: ObjectIdentifier(key))
            if kept.tables.last?.index(for: address) != nil { return true }
            let old = kept.tables.last?.entries ?? []
            guard old.count < Self.limit else { return false }
            let table = Table(old + [(address, index)])
            kept.tables.append(table)
            kept.keys.append(key)
            current.store(UInt(bitPattern: Unmanaged.passUnretained(table).toOpaque()), ordering: .releasing)
            return true
        }
    }

    /// How many keys the cache holds.
    public var count: Int { kept.withLock { $0.keys.count } }
}
