import Foundation
import OpenCoreDataModel

/// The context's objects by ID: stored objects without a reference (`StoredObjects`), inserted (unsaved) ones strongly.
///
/// Keyed by the ID's parts as plain values rather than by the `NSManagedObjectID` instances: hashing, comparing and
/// copying a key then touch only the table, never the ID objects or their store string. With instance keys, every
/// probe and every rehash of a growing table dereferenced an ID made long before (a cache miss each) and retained it,
/// which was most of the time of fetching 100,000 faults.
///
/// Objects with a temporary ID are held strongly: the context keeps them until they are saved or discarded anyway (as
/// Core Data does). Saving moves each to the stored table under its permanent ID — but not at once: saved objects
/// wait, held strongly, in `saved` until `settle()`, which the context calls when its save has returned (and the
/// registry calls before anything reads or changes its tables). An object only `saved` holds then is dropped instead
/// of registered: nothing else references it, so it would have been released the moment the save let go of it anyway.
/// Those still referenced are registered.
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
    /// Stored objects, unretained.
    let stored = StoredObjects()
    /// Saved objects not yet moved to the stored table (see `settle()`).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var saved: [NSManagedObject] = []

    var count: Int {
        settle()
        return inserted.count + stored.count
    }

    /// The live objects.
    var objects: [NSManagedObject] {
        settle()
        return Array(inserted.values) + stored.objects
    }

    /// Registers the saved objects something else still references, unretained under their permanent IDs, and lets go of
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
                stored.insert(objects[index], store: idStore, keepingLive: false)
            } else if let token = id._temporaryToken {
                // Saved into a parent context: still known by its temporary ID until the parent saves to the store.
                inserted[TemporaryKey(token)] = objects[index]
            }
        }
    }

    subscript(id: NSManagedObjectID) -> NSManagedObject? {
        settle()
        guard let idStore = id.storeIdentifier else {
            return id._temporaryToken.flatMap { inserted[TemporaryKey($0)] }
        }
        return stored.object(for: id, store: idStore)
    }

    /// Whether no object with a permanent ID is registered.
    var holdsNoStoredObjects: Bool {
        settle()
        return stored.isEmpty
    }

    /// Registers `object`, new and not yet registered, under its permanent ID in one hash-table operation — unless a
    /// live object is registered there already: then that one stays and is returned.
    ///
    /// For making many faults when the
    /// registry is expected not to hold them (a batched fetch into a context holding no stored objects), where
    /// looking each up first would double the cost.
    func adopt(_ object: NSManagedObject) -> NSManagedObject {
        settle()
        guard let idStore = object.objectID.storeIdentifier else {
            if let existing = self[object.objectID] { return existing }
            register(object)
            return object
        }
        return stored.insert(object, store: idStore, keepingLive: true) ?? object
    }

    /// Registers an object under its current ID.
    func register(_ object: NSManagedObject) {
        settle()
        let id = object.objectID
        if let idStore = id.storeIdentifier {
            stored.insert(object, store: idStore, keepingLive: false)
        } else if let token = id._temporaryToken {
            inserted[TemporaryKey(token)] = object
        }
    }

    func reserveCapacity(_ additional: Int) {
        stored.reserveCapacity(additional)
    }

    /// Removes the entry of `id`, returning its object if it is alive.
    @discardableResult
    func remove(_ id: NSManagedObjectID) -> NSManagedObject? {
        settle()
        guard let idStore = id.storeIdentifier else {
            return id._temporaryToken.flatMap { inserted.removeValue(forKey: TemporaryKey($0)) }
        }
        return stored.remove(id, store: idStore)
    }

    /// Moves saved objects from their temporary IDs (`formerIDs`) to the permanent IDs they now have; from the next
    /// `settle()` on they are in the stored table (or not at all, if nothing else holds them).
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
        stored.removeAll()
    }
}

/// Holds an object weakly (the context's list of objects holding loaded to-many relationships).
struct WeakObject {
    weak var object: NSManagedObject?
    // Made with the memberwise initializer and passed on consumed: an explicit initializer, or a borrowed parameter
    // stored into a table, copies the weak reference (an atomic update of the object's side table) and destroys the
    // original (another).
}
