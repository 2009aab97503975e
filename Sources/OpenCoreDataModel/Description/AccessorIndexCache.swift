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
    private final class Table: Sendable {
        let indexes: [_IdentityKey: Int]
        init(_ indexes: [_IdentityKey: Int]) { self.indexes = indexes }
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
        return Unmanaged<Table>.fromOpaque(raw)._withUnsafeGuaranteedRef { $0.indexes[_IdentityKey(key)] }
    }

    /// Remembers `index` for `key` (a no-op when `key` is known or the cache is full); returns whether `key` is
    /// remembered now.
    @discardableResult
    public func remember(_ index: Int, for key: AnyObject) -> Bool {
        kept.withLock { kept in
            let old = kept.tables.last?.indexes ?? [:]
            let id = _IdentityKey(key)
            if old[id] != nil { return true }
            guard old.count < Self.limit else { return false }
            var indexes = old
            indexes[id] = index
            let table = Table(indexes)
            kept.tables.append(table)
            kept.keys.append(key)
            current.store(UInt(bitPattern: Unmanaged.passUnretained(table).toOpaque()), ordering: .releasing)
            return true
        }
    }

    /// How many keys the cache holds.
    public var count: Int { kept.withLock { $0.keys.count } }
}
