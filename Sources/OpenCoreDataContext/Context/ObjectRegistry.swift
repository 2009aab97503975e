import Foundation
import OpenCoreDataModel

/// The context's objects by ID, held weakly.
///
/// Keyed by the ID's parts as plain values (primary key or temporary token, root entity) rather than by the
/// `NSManagedObjectID` instances: hashing, comparing and copying a key then touch only the table, never the ID
/// objects or their store string. With instance keys, every probe and every rehash of a growing table dereferenced an
/// ID made long before (a cache miss each) and retained it, which was most of the time of fetching 100,000 faults.
struct ObjectRegistry {
    /// An object ID's identity within one store as a plain value (no reference counting when it is copied).
    struct Key: Hashable {
        let primaryKey: Int64
        let tokenHigh: UInt64
        let tokenLow: UInt64
        let root: ObjectIdentifier

        init(_ id: NSManagedObjectID) {
            primaryKey = id.primaryKey
            if let token = id._temporaryToken {
                (tokenHigh, tokenLow) = withUnsafeBytes(of: token.uuid) {
                    ($0.loadUnaligned(fromByteOffset: 0, as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                }
            } else {
                (tokenHigh, tokenLow) = (0, 0)
            }
            root = id.entity._rootEntityIdentity
        }

        func hash(into hasher: inout Hasher) {
            // Permanent IDs differ by primary key; temporary ones (primary key 0) by their token's counter half.
            hasher.combine(primaryKey ^ Int64(bitPattern: tokenLow))
        }
    }

    /// Temporary IDs and the IDs of `store`, by key.
    private var table: [Key: WeakObject] = [:]
    /// The store of the permanent IDs in `table`: the first one registered.
    private var store: String?
    /// IDs of any other store (a context normally sees one store; these are kept apart so keys never mix stores).
    private var others: [NSManagedObjectID: WeakObject] = [:]

    var count: Int { table.count + others.count }

    /// The live objects.
    var objects: [NSManagedObject] { table.values.compactMap(\.object) + others.values.compactMap(\.object) }

    /// Whether `id` is keyed in `table`; the first permanent ID decides the store.
    private mutating func isKeyed(_ id: NSManagedObjectID) -> Bool {
        guard let idStore = id.storeIdentifier else { return true }
        if store == nil { store = idStore }
        return idStore == store
    }

    subscript(id: NSManagedObjectID) -> NSManagedObject? {
        guard let idStore = id.storeIdentifier, idStore != store else { return table[Key(id)]?.object }
        return others[id]?.object
    }

    /// Registers an object under its current ID.
    mutating func register(_ object: NSManagedObject) {
        let id = object.objectID
        if isKeyed(id) {
            Self.insert(WeakObject(object), at: Key(id), into: &table)
        } else {
            Self.insert(WeakObject(object), at: id, into: &others)
        }
    }

    /// Entries of released objects are swept out when a table is full, instead of growing it: the live entries go
    /// once into a table with room for as many again, which costs what the growth would have (one pass), keeps
    /// registering amortized O(1), and keeps the table within twice the live objects (plus 1,024).
    private static func insert<K: Hashable>(_ entry: WeakObject, at key: K, into table: inout [K: WeakObject]) {
        if table.count >= max(1024, table.capacity), table[key] == nil {
            var live: [(K, WeakObject)] = []
            live.reserveCapacity(table.count)
            for (key, entry) in table where entry.object != nil { live.append((key, entry)) }
            var swept = [K: WeakObject](minimumCapacity: max(1024, 2 * live.count))
            for (key, entry) in live { swept[key] = entry }
            table = swept
        }
        table[key] = entry
    }

    mutating func reserveCapacity(_ additional: Int) {
        table.reserveCapacity(table.count + additional)
    }

    @discardableResult
    mutating func remove(_ id: NSManagedObjectID) -> WeakObject? {
        isKeyed(id) ? table.removeValue(forKey: Key(id)) : others.removeValue(forKey: id)
    }

    /// Moves entries to new IDs (temporary → permanent after a save), keeping their weak references.
    mutating func rekey(_ changes: [NSManagedObjectID: NSManagedObjectID]) {
        for (old, new) in changes {
            guard let entry = remove(old) else { continue }
            if isKeyed(new) { table[Key(new)] = entry } else { others[new] = entry }
        }
    }

    mutating func removeAll() {
        table = [:]
        others = [:]
        store = nil
    }
}

/// Holds an object weakly in the registry.
struct WeakObject {
    weak var object: NSManagedObject?
    init(_ object: NSManagedObject) { self.object = object }
}
