import Foundation
import OpenCoreDataModel

/// The context's objects by ID: stored objects weakly, inserted (unsaved) ones strongly.
///
/// Keyed by the ID's parts as plain values rather than by the `NSManagedObjectID` instances: hashing, comparing and
/// copying a key then touch only the table, never the ID objects or their store string. With instance keys, every
/// probe and every rehash of a growing table dereferenced an ID made long before (a cache miss each) and retained it,
/// which was most of the time of fetching 100,000 faults.
///
/// Objects with a temporary ID are held strongly: the context keeps them until they are saved or discarded anyway (as
/// Core Data does), and an object nobody holds weakly has no side table, so its reference counting stays on the
/// runtime's fast path while it is filled and saved. Saving moves it to the weak table under its permanent ID — but
/// not at once: saved objects wait, held strongly, in `saved` until `settle()`, which the context calls when its save
/// has returned (and the registry calls before anything reads or changes its tables). An object only `saved` holds
/// then is dropped instead of registered: nothing else references it, so it would have been released the moment the
/// save let go of it anyway, and a weak entry would only have cost a side table, its atomic updates, and the entry
/// itself. Those still referenced are registered weakly, as before.
///
/// A class, not a struct: the context looks objects up in it for every fault it makes, and calling a method on a struct
/// stored in a class copied the struct first (retaining and releasing each of its tables), 13% of fetching 100,000 faults.
final class ObjectRegistry {
    /// A permanent ID's identity within one store as a plain value (no reference counting when it is copied).
    struct Key: Hashable {
        let primaryKey: Int64
        let root: ObjectIdentifier

        init(_ id: NSManagedObjectID) {
            primaryKey = id.primaryKey
            root = id.entity._rootEntityIdentity
        }

        func hash(into hasher: inout Hasher) { hasher.combine(primaryKey) }
        func _rawHashValue(seed: Int) -> Int { _IdentityHash.mix(UInt64(bitPattern: primaryKey), seed: seed) }
    }

    /// A temporary ID's token as a plain value.
    struct TemporaryKey: Hashable {
        let high: UInt64
        let low: UInt64

        init(_ token: UUID) {
            (high, low) = withUnsafeBytes(of: token.uuid) {
                ($0.loadUnaligned(fromByteOffset: 0, as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            }
        }

        /// The counter half of the tokens this process makes (`TemporaryTokens`); equality compares both halves.
        func hash(into hasher: inout Hasher) { hasher.combine(low) }
        func _rawHashValue(seed: Int) -> Int { _IdentityHash.mix(low, seed: seed) }
    }

    /// Objects with temporary IDs, held strongly.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var inserted: [TemporaryKey: NSManagedObject] = [:]
    /// The IDs of `store`, by key.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var table: [Key: WeakObject] = [:]
    /// The store of the IDs in `table`: the first one registered.
    private var store: String?
    /// IDs of any other store (a context normally sees one store; these are kept apart so keys never mix stores).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var others: [NSManagedObjectID: WeakObject] = [:]
    /// Saved objects not yet moved to the weak tables (see `settle()`).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var saved: [NSManagedObject] = []
    /// `releasedObjects` when the weak tables were last swept.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var releasesAtSweep = NSManagedObject.releasedObjects

    var count: Int {
        settle()
        return inserted.count + table.count + others.count
    }

    /// The live objects.
    var objects: [NSManagedObject] {
        settle()
        return Array(inserted.values) + table.values.compactMap(\.object) + others.values.compactMap(\.object)
    }

    /// Registers the saved objects something else still references, weakly under their permanent IDs, and lets go of
    /// the others (they are released here, as they would have been when the save let go of them).
    func settle() {
        guard !saved.isEmpty else { return }
        var objects: [NSManagedObject] = []
        swap(&objects, &saved)
        var held: [Int] = []  // positions of the objects something else holds (one pass over the objects' headers)
        for index in objects.indices where !isKnownUniquelyReferenced(&objects[index]) { held.append(index) }
        guard !held.isEmpty else { return }
        reserveCapacity(held.count)
        for index in held {
            let id = objects[index].objectID
            if let idStore = id.storeIdentifier {
                add(WeakObject(object: objects[index]), for: id, store: idStore)
            } else if let token = id._temporaryToken {
                // Saved into a parent context: still known by its temporary ID until the parent saves to the store.
                inserted[TemporaryKey(token)] = objects[index]
            }
        }
    }

    /// Whether the permanent `id` is keyed in `table`; the first one decides the store.
    private func isKeyed(_ id: NSManagedObjectID, store idStore: String) -> Bool {
        if store == nil { store = idStore }
        return idStore == store
    }

    subscript(id: NSManagedObjectID) -> NSManagedObject? {
        settle()
        guard let idStore = id.storeIdentifier else {
            return id._temporaryToken.flatMap { inserted[TemporaryKey($0)] }
        }
        return idStore == store ? table[Key(id)]?.object : others[id]?.object
    }

    /// Whether no object with a permanent ID is registered.
    var holdsNoStoredObjects: Bool {
        settle()
        return table.isEmpty && others.isEmpty
    }

    /// Registers `object`, new and not yet registered, under its permanent ID in one hash-table operation — unless a
    /// live object is registered there already: then that one stays and is returned.
    ///
    /// For making many faults when the
    /// registry is expected not to hold them (a batched fetch into a context holding no stored objects), where
    /// looking each up first would double the cost.
    func adopt(_ object: NSManagedObject) -> NSManagedObject {
        settle()
        let id = object.objectID
        guard let idStore = id.storeIdentifier, isKeyed(id, store: idStore) else {
            if let existing = self[id] { return existing }
            register(object)
            return object
        }
        let key = Key(id)
        guard let previous = Self.insert(WeakObject(object: object), at: key, into: &table, releasesAtSweep: &releasesAtSweep),
            let existing = previous.object
        else { return object }
        table[key] = previous
        return existing
    }

    /// Registers an object under its current ID.
    func register(_ object: NSManagedObject) {
        settle()
        let id = object.objectID
        if let idStore = id.storeIdentifier {
            add(WeakObject(object: object), for: id, store: idStore)
        } else if let token = id._temporaryToken {
            inserted[TemporaryKey(token)] = object
        }
    }

    private func add(_ entry: consuming WeakObject, for id: NSManagedObjectID, store idStore: String) {
        if isKeyed(id, store: idStore) {
            Self.insert(entry, at: Key(id), into: &table, releasesAtSweep: &releasesAtSweep)
        } else {
            Self.insert(entry, at: id, into: &others, releasesAtSweep: &releasesAtSweep)
        }
    }

    /// When a weak table is full, the entries of released objects are swept out instead of growing it, if enough
    /// objects were released since the last sweep (`NSManagedObject.releasedObjects`, counted by every object's
    /// `deinit` in the process) that a sweep may free a quarter of the table; otherwise the table grows as usual.
    ///
    /// Either way registering stays amortized O(1), and the table stays within a small multiple of its live objects.
    /// Returns the entry that was there, if any.
    @discardableResult
    private static func insert<K: Hashable>(
        _ entry: consuming WeakObject, at key: K, into table: inout [K: WeakObject], releasesAtSweep: inout Int
    ) -> WeakObject? {
        if table.count >= max(1024, table.capacity), table[key] == nil {
            let releases = NSManagedObject.releasedObjects
            if releases &- releasesAtSweep >= table.count / 4 {
                releasesAtSweep = releases
                var swept = table.filter { $0.value.object != nil }
                swept.reserveCapacity(max(1024, 2 * swept.count))
                table = swept
            }
        }
        return table.updateValue(consume entry, forKey: key)
    }

    func reserveCapacity(_ additional: Int) {
        table.reserveCapacity(table.count + additional)
    }

    /// Removes the entry of `id`, returning its object if it is alive.
    @discardableResult
    func remove(_ id: NSManagedObjectID) -> NSManagedObject? {
        settle()
        guard let idStore = id.storeIdentifier else {
            return id._temporaryToken.flatMap { inserted.removeValue(forKey: TemporaryKey($0)) }
        }
        return isKeyed(id, store: idStore) ? table.removeValue(forKey: Key(id))?.object : others.removeValue(forKey: id)?.object
    }

    /// Moves saved objects from their temporary IDs (`formerIDs`) to the permanent IDs they now have; from the next
    /// `settle()` on they are held weakly (or not at all, if nothing else holds them).
    func commitInserted(_ objects: [NSManagedObject], formerIDs: [NSManagedObjectID]) {
        settle()
        if objects.count == inserted.count {
            inserted = [:]  // every inserted object was saved (the usual case): no need to remove them one by one
        } else {
            for id in formerIDs { remove(id) }
        }
        saved = objects
    }

    func removeAll() {
        saved = []
        inserted = [:]
        table = [:]
        others = [:]
        store = nil
    }
}

/// Holds an object weakly in the registry.
struct WeakObject {
    weak var object: NSManagedObject?
    // Made with the memberwise initializer and passed on consumed: an explicit initializer, or a borrowed parameter
    // stored into a table, copies the weak reference (an atomic update of the object's side table) and destroys the
    // original (another).
}
