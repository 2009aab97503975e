import Dispatch
import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

// The registry: one object per ID in a context, faults made on demand, entities by name and class.
extension NSManagedObjectContext {
    // MARK: Registry

    /// Every object the context holds.
    public var registeredObjects: Set<NSManagedObject> {
        withLock { Set(registry.objects) }
    }

    /// Objects inserted and not yet saved.
    public var insertedObjects: Set<NSManagedObject> { withLock { insertedSet } }
    /// Stored objects with unsaved changes.
    public var updatedObjects: Set<NSManagedObject> { withLock { Set(changedSet.filter { $0.state == .stored }) } }
    /// Objects that the next save deletes.
    public var deletedObjects: Set<NSManagedObject> { withLock { deletedSet } }
    /// Whether anything would be saved.
    public var hasChanges: Bool {
        withLock {
            !insertedSet.isEmpty || !deletedSet.isEmpty || !rejectedValues.isEmpty || changedSet.contains { $0.state == .stored }
        }
    }

    /// The object with this ID if the context holds it, else nil (no fault is made, nothing is read).
    ///
    /// - Complexity: O(1): a dictionary lookup; the store is not read.
    public func registeredObject(for id: NSManagedObjectID) -> NSManagedObject? {
        withLock { registry[id] }
    }

    func register(_ object: NSManagedObject) {
        registry.register(object)
    }

    /// Makes room for `additional` more registered objects (before registering many at once).
    func reserveRegistryCapacity(_ additional: Int) {
        registry.reserveCapacity(additional)
    }

    func noteToManyHolder(_ object: NSManagedObject) {
        toManyHolders[ObjectIdentifier(object)] = WeakObject(object: object)
    }

    /// The live objects holding loaded to-many memberships; forgets the ones released or emptied since.
    func takeToManyHolders() -> [NSManagedObject] {
        var live: [NSManagedObject] = []
        toManyHolders = toManyHolders.filter { _, entry in
            guard let object = entry.object, object.managedObjectContext === self, !object.toManyCommitted.isEmpty else { return false }
            live.append(object)
            return true
        }
        return live
    }

    func clearRegistry() {
        registry.removeAll()
        toManyHolders = [:]
    }

    /// Moves saved objects' registry entries from their temporary IDs to their permanent ones.
    func registerSaved(_ objects: [NSManagedObject], formerIDs: [NSManagedObjectID]) {
        registry.commitInserted(objects, formerIDs: formerIDs)
    }

    /// Moves saved objects into the stored table (see `ObjectRegistry.settle()`).
    func settleRegistry() {
        registry.settle()
    }

    func unregister(_ id: NSManagedObjectID) {
        registry.remove(id)
    }

    /// The object with the given ID: the registered one, or a new fault (its row is loaded on first access and must
    /// exist then).
    ///
    /// - Complexity: O(1): a registered object or a new fault; the store is not read.
    public func object(with objectID: NSManagedObjectID) -> NSManagedObject {
        withLock {
            if let object = registry[objectID] { return object }
            let object = makeFault(objectID)
            register(object)
            return object
        }
    }

    /// A new, unregistered object for `objectID`, as a fault (or invalid, for a temporary ID nobody registered).
    func makeFault(_ objectID: NSManagedObjectID) -> NSManagedObject {
        let object = instantiate(objectID.entity)
        object.objectID = objectID
        object.managedObjectContext = self
        // A child sees its parent's new objects by their temporary IDs: to it they are stored (in the parent).
        object.state = objectID.isTemporaryID && _parent == nil ? .invalid : .stored
        return object
    }

    /// The object for the permanent `objectID` when the registry is not expected to hold it: made and registered in
    /// one step, unless a live one is registered after all (then that one is returned).
    func adoptFault(_ objectID: NSManagedObjectID) -> NSManagedObject {
        registry.adopt(makeFault(objectID))
    }

    /// Whether the context holds no object with a permanent ID (a fetch into it makes every object anew).
    var holdsNoStoredObjects: Bool { registry.holdsNoStoredObjects }

    /// The object with the given ID, with its values loaded.
    ///
    /// - Complexity: O(1) for an object whose values are loaded; else one row read by primary key.
    /// - Throws: `CoreDataError(.objectNotFound)` when no such object exists in the context or the store.
    public func existingObject(with objectID: NSManagedObjectID) throws -> NSManagedObject {
        try withLock {
            if let object = registry[objectID], object.state != .invalid {
                if object.state == .stored, object.snapshot == nil { try object.fulfillFault() }
                return object
            }
            guard !objectID.isTemporaryID || _parent != nil else {
                throw CoreDataError(
                    .objectNotFound,
                    "No object with temporary ID \(objectID) is registered in this context; temporary IDs are only valid in the context that made them.",
                    entityName: objectID.entity.name)
            }
            guard let store, objectID.isTemporaryID || store.holdsObjects(ofStore: objectID.storeIdentifier ?? "") else {
                throw CoreDataError(.objectNotFound, "Object ID \(objectID) belongs to another store.", entityName: objectID.entity.name)
            }
            guard let row = try readingPinned({ try store.rows(for: [objectID])[objectID] }) else {
                throw CoreDataError(
                    .objectNotFound, "No \(objectID.entity.name) object \(objectID) exists in the store.", entityName: objectID.entity.name)
            }
            return materialize(row)
        }
    }

    func instantiate(_ entity: NSEntityDescription) -> NSManagedObject {
        let cls = (entity.managedObjectClass as? NSManagedObject.Type) ?? NSManagedObject.self
        return cls.init(entity: entity, insertInto: nil)
    }

    /// The registered object for a row (filling a fault with the row's values), or a new one.
    func materialize(_ row: RowSnapshot) -> NSManagedObject {
        if let object = registry[row.objectID] {
            if object.snapshot == nil, object.state == .stored { fulfill(object, with: row) }
            return object
        }
        let object = instantiate(row.objectID.entity)
        object.objectID = row.objectID
        object.managedObjectContext = self
        object.state = .stored
        register(object)
        fulfill(object, with: row)
        return object
    }

    func fulfill(_ object: NSManagedObject, with row: RowSnapshot) {
        let first = object.snapshot == nil
        object.snapshot = row
        object.faultSource = nil
        if first { object.awakeFromFetch() }
    }
}
