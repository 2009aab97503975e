import Foundation
import OpenCoreDataModel
import Testing

@testable import OpenCoreDataContext

/// The registry finds an object exactly by its ID's value, holds stored objects without a reference (each leaves it
/// in its `deinit`, on whatever thread) and unsaved ones strongly, and
/// never mixes IDs that differ only in their store or entity tree.
@Suite struct ObjectRegistryTests {
    let model: NSManagedObjectModel
    let item: NSEntityDescription
    let other: NSEntityDescription

    init() throws {
        model = try NSManagedObjectModel {
            Entity("Item") { Attribute("n", .integer64) }
            Entity("Other") { Attribute("n", .integer64) }
        }
        item = try #require(model.entity(named: "Item"))
        other = try #require(model.entity(named: "Other"))
    }

    func object(_ id: NSManagedObjectID) -> NSManagedObject {
        let object = NSManagedObject(entity: id.entity, insertInto: nil)
        object.objectID = id
        return object
    }

    @Test func findsByValueAndKeepsStoresAndEntitiesApart() {
        let registry = ObjectRegistry()
        let ids = [
            NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 7),
            NSManagedObjectID(entity: item, storeIdentifier: "B", primaryKey: 7),  // same row number, another store
            NSManagedObjectID(entity: other, storeIdentifier: "A", primaryKey: 7),  // same row number, another table
            NSManagedObjectID(temporaryFor: item),
            NSManagedObjectID(temporaryFor: item),
        ]
        let objects = ids.map(object)
        for object in objects { registry.register(object) }
        #expect(registry.count == ids.count)
        for (id, object) in zip(ids, objects) {
            // A different instance equal to the ID finds the same object.
            let copy =
                id.isTemporaryID
                ? NSManagedObjectID(temporaryFor: id.entity, token: id._temporaryToken!)
                : NSManagedObjectID(entity: id.entity, storeIdentifier: id.storeIdentifier!, primaryKey: id.primaryKey)
            #expect(registry[copy] === object, "\(id)")
        }
        #expect(registry[NSManagedObjectID(entity: item, storeIdentifier: "C", primaryKey: 7)] == nil)
        #expect(registry[NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 8)] == nil)
        #expect(Set(registry.objects.map(ObjectIdentifier.init)) == Set(objects.map(ObjectIdentifier.init)))

        // Removing one leaves the others; re-keying moves the entry of a saved object to its permanent ID, in
        // either store.
        registry.remove(ids[1])
        #expect(registry[ids[1]] == nil && registry[ids[0]] === objects[0])
        let saved = [
            NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 9),
            NSManagedObjectID(entity: item, storeIdentifier: "B", primaryKey: 9),
        ]
        objects[3].objectID = saved[0]
        objects[4].objectID = saved[1]
        registry.commitInserted([objects[3], objects[4]], formerIDs: [ids[3], ids[4]])
        #expect(registry[ids[3]] == nil && registry[ids[4]] == nil)
        #expect(registry[saved[0]] === objects[3] && registry[saved[1]] === objects[4])
        #expect(registry.count == 4)
    }

    /// Both tables: the first store's (by value) and any other store's (by ID instance).
    @Test(arguments: ["A", "B"]) func releasedObjectsAreNotFoundAndLeaveTheTableAtOnce(store: String) {
        let registry = ObjectRegistry()
        registry.register(object(NSManagedObjectID(entity: other, storeIdentifier: "A", primaryKey: 1)))  // "A" is keyed by value
        func id(_ pk: Int) -> NSManagedObjectID { NSManagedObjectID(entity: item, storeIdentifier: store, primaryKey: Int64(pk)) }
        let kept = (1...10).map { object(id($0)) }
        for object in kept { registry.register(object) }
        for pk in 11...5000 { registry.register(object(id(pk))) }  // released at once
        #expect(registry[id(4000)] == nil)
        #expect(registry.count == kept.count, "a released object's entry goes with it (count \(registry.count))")
        #expect(registry.stored.entryCount < 2500, "released entries are dropped as the table fills (\(registry.stored.entryCount))")
        for (i, object) in kept.enumerated() { #expect(registry[id(i + 1)] === object) }
        let alive = (5001...8000).map { object(id($0)) }
        for object in alive { registry.register(object) }
        #expect(registry.count == alive.count + kept.count)
        #expect(alive.allSatisfy { registry[$0.objectID] === $0 })
        #expect(Set(registry.objects.map(ObjectIdentifier.init)) == Set((kept + alive).map(ObjectIdentifier.init)))
        // An object removed from the registry, then released, leaves the entry of its successor alone.
        let successor = object(id(3))
        #expect(registry.remove(id(3)) === kept[2])
        registry.register(successor)
        _ = consume kept
        #expect(registry[id(3)] === successor)
        #expect(registry.count == alive.count + 1)
    }

    /// An object whose last reference goes on another thread is never handed out once its `deinit` has begun, and the
    /// object that then takes its ID keeps its entry when the dying one's `deinit` finishes.
    @Test func anObjectDyingOnAnotherThreadIsNotHandedOutAndLeavesItsSuccessorRegistered() throws {
        let registry = ObjectRegistry()
        let id = NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 1)
        let gate = DeinitGate()
        var dying: GatedObject? = GatedObject(entity: item, insertInto: nil)
        dying!.objectID = id
        dying!.gate = gate
        registry.register(dying!)
        #expect(registry[id] === dying)
        let holder = ObjectHolder(dying.take()!)
        let released = Thread { holder.release() }
        released.start()
        gate.dying.wait()  // the object's deinit has begun (its subclass part runs first) and waits
        #expect(registry[id] == nil, "a dying object is not handed out")
        let successor = object(NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 1))
        #expect(registry.adopt(successor) === successor, "the dying object does not keep its ID")
        gate.proceed.signal()
        holder.released.wait()  // the dying object's deinit is over, the base class's part included
        #expect(registry[id] === successor)
        #expect(registry.count == 1)
    }

    /// Objects released on many threads while the registry looks them up, adopts their IDs anew and lists its
    /// objects: every object handed out is alive and has the ID asked for, and the table ends with what is held.
    @Test func lookupsRaceReleasesOnOtherThreads() throws {
        let registry = ObjectRegistry()
        let ids = (1...2000).map { NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: Int64($0)) }
        for round in 0..<20 {
            let objects = ids.map(object)
            for object in objects { registry.register(object) }
            let holders = stride(from: 0, to: objects.count, by: 250).map {
                ObjectHolders(Array(objects[$0..<min($0 + 250, objects.count)]))
            }
            _ = consume objects
            let threads = holders.map { holders in Thread { holders.releaseAll() } }
            for thread in threads { thread.start() }
            var handedOut = 0
            for (index, id) in ids.enumerated() {
                if let found = registry[id] {
                    #expect(found.objectID == id, "round \(round)")
                    handedOut += 1
                }
                if index.isMultiple(of: 7) {
                    let fresh = object(id)
                    #expect(registry.adopt(fresh).objectID == id)
                }
                if index.isMultiple(of: 500) { #expect(registry.objects.allSatisfy { $0.objectID.storeIdentifier == "A" }) }
            }
            for holders in holders { holders.finished.wait() }
            #expect(registry.count == 0, "round \(round): every object was released (\(handedOut) handed out while alive)")
        }
    }
    /// An inserted object stays registered while only the registry holds it (the context keeps unsaved objects, as
    /// Core Data does); once saved it is held without a reference and goes when its last user lets go.
    ///
    /// Saving only some of the
    /// inserted objects keeps the others.
    @Test func unsavedObjectsAreHeldUntilSavedThenUnretained() {
        let registry = ObjectRegistry()
        let temporary = (0..<3).map { _ in NSManagedObjectID(temporaryFor: item) }
        for id in temporary { registry.register(object(id)) }  // nobody else holds them
        #expect(temporary.allSatisfy { registry[$0] != nil })
        var saved: NSManagedObject? = registry[temporary[0]]
        let permanent = NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 1)
        saved?.objectID = permanent
        registry.commitInserted([saved!], formerIDs: [temporary[0]])
        #expect(registry[temporary[0]] == nil && registry[permanent] === saved)
        #expect(registry[temporary[1]] != nil && registry[temporary[2]] != nil, "the unsaved ones stay")
        saved = nil
        #expect(registry[permanent] == nil, "a saved object is not kept alive by the registry")
        #expect(registry.count == 2, "its entry went with it")
    }

    /// Saved objects wait, held strongly, until `settle()`: then the ones something else holds are registered
    /// under their permanent IDs and the others are let go (released at once), never found again.
    @Test func settlingRegistersTheSavedObjectsStillHeldAndReleasesTheOthers() {
        let registry = ObjectRegistry()
        let temporary = (0..<4).map { _ in NSManagedObjectID(temporaryFor: item) }
        for id in temporary { registry.register(object(id)) }
        var objects = temporary.map { registry[$0]! }
        let permanent = (0..<4).map { NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: Int64($0 + 1)) }
        for (object, id) in zip(objects, permanent) { object.objectID = id }
        registry.commitInserted(objects, formerIDs: temporary)
        weak let dropped = objects[1]
        let kept = [objects[0], objects[2]]
        objects = []
        #expect(dropped != nil, "held until settled")
        registry.settle()
        #expect(dropped == nil, "nothing else held it: released")
        #expect(registry[permanent[0]] === kept[0] && registry[permanent[2]] === kept[1])
        #expect(registry[permanent[1]] == nil && registry[permanent[3]] == nil)
        #expect(temporary.allSatisfy { registry[$0] == nil })
        #expect(registry.count == 2)
        // A lookup before `settle()` settles first: a saved object is found by its new ID while a caller holds it.
        let another = object(NSManagedObjectID(temporaryFor: item))
        registry.register(another)
        another.objectID = NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 9)
        registry.commitInserted([another], formerIDs: [NSManagedObjectID(temporaryFor: item)])
        #expect(registry[another.objectID] === another)
    }

    /// `adopt` registers a new object in one step, but never replaces a live object registered under the same ID
    /// (uniquing holds even when the caller's guess that the ID is new was wrong); a released entry is replaced.
    @Test func adoptKeepsTheLiveObjectAlreadyRegistered() {
        let registry = ObjectRegistry()
        let id = NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 1)
        let first = object(id)
        #expect(registry.adopt(first) === first)
        let second = object(NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 1))
        #expect(registry.adopt(second) === first, "the registered object wins")
        #expect(registry[id] === first)
        // Another store's ID and a temporary ID go through the same rule.
        let elsewhere = object(NSManagedObjectID(entity: item, storeIdentifier: "B", primaryKey: 1))
        #expect(registry.adopt(elsewhere) === elsewhere)
        #expect(registry.adopt(object(NSManagedObjectID(entity: item, storeIdentifier: "B", primaryKey: 1))) === elsewhere)
        // Once the registered object is released, a new one takes its place.
        var released: NSManagedObject? = object(NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 2))
        _ = registry.adopt(released!)
        released = nil
        let replacement = object(NSManagedObjectID(entity: item, storeIdentifier: "A", primaryKey: 2))
        #expect(registry.adopt(replacement) === replacement)
        #expect(registry[replacement.objectID] === replacement)
        // `register` (an object renamed to a permanent ID, a new fault after a lookup missed) takes the ID even from a
        // live object, in either table; the one it displaced leaves the entry alone when it is released.
        for store in ["A", "B"] {
            var displaced: NSManagedObject? = object(NSManagedObjectID(entity: item, storeIdentifier: store, primaryKey: 3))
            registry.register(displaced!)
            let renamed = object(NSManagedObjectID(entity: item, storeIdentifier: store, primaryKey: 3))
            registry.register(renamed)
            #expect(registry[renamed.objectID] === renamed, "store \(store)")
            displaced = nil
            #expect(registry[renamed.objectID] === renamed, "store \(store)")
        }
    }
}

/// A managed object whose `deinit` stops, after it has begun, until the test lets it go on.
final class GatedObject: NSManagedObject {
    var gate: DeinitGate?

    deinit {
        guard let gate else { return }
        gate.dying.signal()
        gate.proceed.wait()
    }
}

final class DeinitGate: Sendable {
    let dying = DispatchSemaphore(value: 0)
    let proceed = DispatchSemaphore(value: 0)
}

/// Hands one object to another thread, which releases the last reference (its whole `deinit` runs there), then signals.
final class ObjectHolder: @unchecked Sendable {
    private var object: NSManagedObject?
    let released = DispatchSemaphore(value: 0)
    init(_ object: NSManagedObject) { self.object = object }
    func release() {
        object = nil
        released.signal()
    }
}

/// Hands objects to another thread, which releases them one by one, then signals.
final class ObjectHolders: @unchecked Sendable {
    private var objects: [NSManagedObject]
    let finished = DispatchSemaphore(value: 0)
    init(_ objects: [NSManagedObject]) { self.objects = objects }
    func releaseAll() {
        while !objects.isEmpty { objects.removeLast() }
        finished.signal()
    }
}
