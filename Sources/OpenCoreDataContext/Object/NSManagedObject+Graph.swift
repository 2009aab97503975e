import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

// Reading and writing property values, faulting, and keeping inverse relationships in step.
// Every method here runs under the context's lock (callers take it).
extension NSManagedObject {
    func emptyValue(_ property: NSPropertyDescription) -> PropertyValue {
        if let attribute = property as? NSAttributeDescription {
            return .attribute(state == .unattached || state == .inserted ? .null : attribute.defaultValue)
        }
        guard let relationship = property as? NSRelationshipDescription else { return .attribute(.null) }  // a fetched property
        return relationship.isToMany ? .toMany([]) : .toOne(nil)
    }

    /// The value a property has now: the pending change, else the committed value (firing the fault if needed).
    func currentValue(at index: Int) throws -> PropertyValue {
        if let v = changes[index] { return v }
        // (The property's description only where a value is made up or an error named: an attribute read from the
        // row, the usual case, needs none.)
        if snapshot == nil {
            guard state == .stored || state == .deleted else { return emptyValue(entity.allProperties[index]) }
            try fulfillFault()
        }
        guard let snapshot else { return emptyValue(entity.allProperties[index]) }
        if case .attribute(let v) = snapshot.values[index] { return .attribute(v) }
        let property = entity.allProperties[index]
        guard let context = managedObjectContext else {
            // Deleted and saved (or reset away): it relates to nothing any more, as in Core Data. (A view may still
            // show the object it just deleted.)
            if state == .invalid { return emptyValue(property) }
            throw contextGone(property.name)
        }
        switch snapshot.values[index] {
        case .attribute(let v): return .attribute(v)
        case .toOne(let id): return .toOne(id.map { context.object(with: $0) })
        case .toMany: return .toMany(Set(try committedToMany(at: index).map { context.object(with: $0) }))
        }
    }

    /// The IDs of the objects a relationship of this object's row held when it was last read or saved (the one of a
    /// to-one; a to-many's when they were loaded): what an object deleted and saved was related to.
    package func lastSavedRelatedIDs(forKey key: String) -> [NSManagedObjectID] {
        withContext {
            guard let index = entity.propertyIndex(named: key) else { return [] }
            return rowRelatedIDs(at: index) { toManyCommitted[$0] }
        }
    }

    /// The IDs the relationship at `index` of the object's row holds.
    ///
    /// A to-one's come from the row, a to-many's from `toMany` (nil: none known). Empty without a row.
    func rowRelatedIDs(at index: Int, toMany: (Int) -> [NSManagedObjectID]?) -> [NSManagedObjectID] {
        guard let snapshot, index < snapshot.values.count else { return [] }
        switch snapshot.values[index] {
        case .toOne(let id): return id.map { [$0] } ?? []
        case .toMany: return toMany(index) ?? []
        case .attribute: return []
        }
    }

    /// Every property's current value as a row holds it (a to-one whose destination is deleted as nil), for a child
    /// context reading this one and for conflict snapshots.
    func currentRowValues() throws -> [SnapshotValue] {
        try entity.allProperties.indices.map { index -> SnapshotValue in
            switch try currentValue(at: index) {
            case .attribute(let value): return .attribute(value)
            case .toOne(let destination): return .toOne(destination?.state == .deleted ? nil : destination?.objectID)
            case .toMany: return .toMany
            }
        }
    }

    /// For the save of an inserted object: the value to write, moved out of the pending changes when it is a stored
    /// (not transient) attribute's value other than nil.
    ///
    /// The save's snapshot takes it over, so it is neither copied
    /// here nor destroyed when the changes are cleared; if the save fails, `restoreTakenValues` puts it back.
    /// `isStoredAttribute` is `Self.isStoredAttribute(at:of:transient:)`, computed by the caller once per object.
    func takeValueForInsertSave(at index: Int, isStoredAttribute: Bool) throws -> PropertyValue {
        if isStoredAttribute, let taken = changes.removeValue(forKey: index) {
            if taken.isAttributeOtherThanNull { return taken }
            changes[index] = taken  // nil, or not an attribute: left in place
        }
        return try currentValue(at: index)
    }

    /// After a failed save: puts back the values `takeValueForInsertSave` moved into `values` (the insert's values,
    /// one per property).
    ///
    /// A taken slot is one now empty whose written value is an attribute value other than nil: an
    /// empty slot of an inserted object reads as nil, so no other slot matches.
    func restoreTakenValues(_ values: [SnapshotValue]) {
        let transient = entity._transientIndexes
        for index in values.indices where changes[index] == nil && Self.isStoredAttribute(at: index, of: entity, transient: transient) {
            if case .attribute(let value) = values[index], !value.isNull { changes[index] = .attribute(value) }
        }
    }

    /// Whether the property at `index` of `entity` is an attribute a row stores (not transient); `transient` is the
    /// entity's `_transientIndexes`.
    static func isStoredAttribute(at index: Int, of entity: NSEntityDescription, transient: [Int]) -> Bool {
        entity._attributeType(at: index) != nil && !transient.contains(index)
    }

    /// The committed destinations of a to-many relationship, loaded from the store on first use.
    func committedToMany(at index: Int) throws -> [NSManagedObjectID] {
        if let ids = toManyCommitted[index] { return ids }
        guard state == .stored || state == .deleted, let context = managedObjectContext, let store = context.store else { return [] }
        if let ids = context.prefetchedToMany(for: objectID, at: index) {
            toManyCommitted[index] = ids
            return ids
        }
        let relationship = entity.allProperties[index] as! NSRelationshipDescription
        // A transient relationship's destinations live in memory only.
        let ids =
            relationship.isTransient
            ? [] : try context.readingPinned { try store.relatedObjectIDs(of: objectID, relationship: relationship) }
        toManyCommitted[index] = ids
        return ids
    }

    /// Loads the object's row (and its batch-mates' rows when it came from a batched fetch).
    ///
    /// The error for reaching through an object whose context has been released.
    func contextGone(_ key: String) -> CoreDataError {
        CoreDataError(
            .objectWithoutContext,
            "Cannot load '\(key)' of \(entity.name) \(objectID.uriRepresentation().absoluteString): its context has been released. Keep the context alive while you use its objects.",
            entityName: entity.name, key: key)
    }

    func fulfillFault() throws {
        guard snapshot == nil else { return }
        guard let context = managedObjectContext else { throw contextGone("its values") }
        guard let store = context.store else { return }
        if case .batch(let group, let position)? = faultSource {
            try group.load(at: position, context: context)
            if snapshot != nil { return }
        }
        if let row = context.prefetchedRow(for: objectID) {
            context.fulfill(self, with: row)
            return
        }
        guard let row = try context.readingPinned({ try store.rows(for: [objectID])[objectID] }) else {
            throw CoreDataError(
                .objectNotFound,
                "The \(entity.name) object \(objectID.uriRepresentation().absoluteString) is no longer in the store (deleted by another context?); its values cannot be loaded.",
                entityName: entity.name)
        }
        context.fulfill(self, with: row)
    }

    func comparable(_ value: PropertyValue) -> ComparableValue {
        switch value {
        case .attribute(let v): return .attribute(v)
        case .toOne(let o): return .toOne(o.map(ObjectIdentifier.init))
        case .toMany(let s): return .toMany(Set(s.map(ObjectIdentifier.init)))
        }
    }

    /// The committed value as a comparable, or `nil` for objects with no committed state.
    func committedComparable(at index: Int) throws -> ComparableValue? {
        guard state == .stored || state == .deleted, let snapshot else { return nil }
        switch snapshot.values[index] {
        // (An attribute's needs no context: its weak reference is read only for a relationship's.)
        case .attribute(let v): return .attribute(v)
        case .toOne(let id):
            guard let context = managedObjectContext else { return nil }
            return .toOne(id.map { ObjectIdentifier(context.object(with: $0)) })
        case .toMany:
            guard let context = managedObjectContext else { return nil }
            return .toMany(Set(try committedToMany(at: index).map { ObjectIdentifier(context.object(with: $0)) }))
        }
    }

    /// Sets the attribute at `index` to a value already converted for it.
    final func setAttribute(_ value: consuming AttributeValue, at index: Int) throws {
        // A new object whose insertion is not reported yet, in a process with no undo manager: all `recordChange` would
        // do is keep the value (no event originals, no committed value to compare with, nothing to journal). A tenth of
        // what ten typed sets cost a new object (W6, callgrind).
        if state == .inserted, !insertionReported, !NSManagedObjectContext.someContextHasUndoManager {
            changes[index] = .attribute(consume value)
            return
        }
        try checkChangeable(index)
        try recordChange(.attribute(consume value), at: index)
    }

    /// Throws if the object is deleted (or gone): its properties cannot change.
    private func checkChangeable(_ index: Int) throws {
        switch state {
        case .deleted, .invalid:
            throw CoreDataError(
                .managedObjectReferentialIntegrity,
                "Cannot change '\(entity.allProperties[index].name)' of \(entity.name) \(objectID.uriRepresentation().absoluteString): the object has been deleted.",
                entityName: entity.name, key: entity.allProperties[index].name)
        default: break
        }
    }

    /// Sets a property and, for relationships, its inverse on the other objects (unless `maintainingInverse` is
    /// false: a primitive set).
    func setPropertyValue(_ value: PropertyValue, at index: Int, maintainingInverse: Bool = true) throws {
        try checkChangeable(index)
        let property = entity.allProperties[index]
        guard let relationship = property as? NSRelationshipDescription else {
            try recordChange(value, at: index)
            return
        }
        if managedObjectContext == nil {
            throw CoreDataError(
                .managedObjectReferentialIntegrity,
                "Insert the \(entity.name) object into a context before setting its relationship '\(relationship.name)'.",
                entityName: entity.name, key: relationship.name)
        }
        guard maintainingInverse else { return try recordChange(value, at: index) }
        let inverse = relationship.inverseRelationship
        switch (value, try currentValue(at: index)) {
        case (.toOne(let new), .toOne(let old)):
            try recordChange(value, at: index)
            guard let inverse, old !== new else { return }
            if let old { try old.unlink(self, via: inverse) }
            if let new { try new.link(self, via: inverse, partnerRelationship: relationship) }
        case (.toMany(let new), .toMany(let old)):
            try recordChange(value, at: index)
            guard let inverse else { return }
            for removed in old.subtracting(new) { try removed.unlink(self, via: inverse) }
            for added in new.subtracting(old) { try added.link(self, via: inverse, partnerRelationship: relationship) }
        default:
            throw CoreDataError(
                .wrongValueType, "Internal error: value of the wrong kind for '\(relationship.name)'.", key: relationship.name)
        }
    }

    /// Removes `partner` from this object's `relationship` (the inverse side), without further inverse maintenance.
    func unlink(_ partner: NSManagedObject, via relationship: NSRelationshipDescription) throws {
        guard state != .invalid, let index = entity.propertyIndex(named: relationship.name) else { return }
        switch try currentValue(at: index) {
        case .toOne(let o) where o === partner: try recordChange(.toOne(nil), at: index)
        case .toMany(var set) where set.contains(partner):
            set.remove(partner)
            try recordChange(.toMany(set), at: index)
        default: break
        }
    }

    /// Adds `partner` to this object's `relationship` (the inverse side).
    ///
    /// For a to-one inverse, the object's previous
    /// partner loses it from `partnerRelationship`.
    func link(_ partner: NSManagedObject, via relationship: NSRelationshipDescription, partnerRelationship: NSRelationshipDescription)
        throws
    {
        guard state != .invalid, let index = entity.propertyIndex(named: relationship.name) else { return }
        switch try currentValue(at: index) {
        case .toOne(let previous):
            if previous === partner { return }
            if let previous { try previous.unlink(self, via: partnerRelationship) }
            try recordChange(.toOne(partner), at: index)
        case .toMany(var set):
            guard set.insert(partner).inserted else { return }
            if relationship.isOrdered {
                journalBeforeChange(at: index)
                pendingOrder[index] = try orderedMembers(at: index) + [partner]  // appended, as Core Data does
            }
            try recordChange(.toMany(set), at: index)
        case .attribute: break
        }
    }

    /// Stores a pending value, dropping it when it equals the committed value, and tells the context.
    ///
    /// The value is consumed: it moves into the pending changes (a borrowed one was copied there, and the caller's
    /// copy destroyed: two reference counts per string or data value set).
    func recordChange(_ value: consuming PropertyValue, at index: Int, keepingOrder: Bool = false) throws {
        journalBeforeChange(at: index)
        // The committed value, when the event's original below is that value (read once for both).
        var committedRead: ComparableValue?
        // A new object whose insertion is not reported yet needs no event originals: it is reported as inserted with
        // whatever it holds then. (New objects have no committed value, and the context tracks them by insertion.)
        if state != .inserted || insertionReported, eventOriginals[index] == nil, let context = managedObjectContext {
            // An attribute of a saved object with no pending change holds its committed value. (Not a relationship:
            // a to-many's committed members may take a read.)
            if changes[index] == nil, entity._attributeType(at: index) != nil, let committed = try committedComparable(at: index) {
                committedRead = committed
                eventOriginals[index] = committed
            } else {
                eventOriginals[index] = comparable(try currentValue(at: index))
            }
            context.noteEventChange(self)
        }
        if !keepingOrder, let committed = try committedRead ?? committedComparable(at: index), committed == comparable(value) {
            changes.removeValue(forKey: index)
        } else {
            changes[index] = consume value
        }
        if state != .inserted { managedObjectContext?.noteChangesUpdated(self) }
    }
}

extension NSManagedObject {
    /// Keeps the value the property at `index` has now for the context's undo manager, if the context has one and this
    /// is the property's first change in the event (see `NSManagedObjectContext.undoManager`).
    func journalBeforeChange(at index: Int) {
        guard NSManagedObjectContext.someContextHasUndoManager, let context = managedObjectContext else { return }
        context.journalValue(of: self, at: index)
    }
}

/// Where a fault's values come from before its row is read (`NSManagedObject.faultSource`).
enum FaultSource {
    /// Its place in a batched fetch's group: touching it loads its batch.
    case batch(BatchFaultGroup, position: Int)
    /// The values a fetch with `propertiesToFetch` read for it: row `row` of `rows`.
    case partial(PartialRows, row: Int)
}

/// Faults from one batched fetch: rows are loaded `batchSize` at a time when one of them is first touched.

final class BatchFaultGroup {
    /// The IDs of the objects that load together, in order.
    let objectIDs: [NSManagedObjectID]
    let batchSize: Int
    private var loaded: Set<Int> = []
    /// How many batches have been loaded (for tests and benchmarks).
    private(set) var batchesLoaded = 0

    init(objectIDs: [NSManagedObjectID], batchSize: Int) {
        self.objectIDs = objectIDs
        self.batchSize = max(1, batchSize)
    }

    /// Loads the batch holding the object at `position` (once).
    func load(at position: Int, context: NSManagedObjectContext) throws {
        guard position >= 0, position < objectIDs.count else { return }
        let batch = position / batchSize
        guard !loaded.contains(batch), let store = context.store else { return }
        let range = (batch * batchSize)..<min((batch + 1) * batchSize, objectIDs.count)
        let ids = Array(objectIDs[range])
        let rows = try context.readingPinned { try store.rows(for: ids) }
        loaded.insert(batch)
        batchesLoaded += 1
        for id in ids {
            guard let row = rows[id], let object = context.registeredObject(for: id), object.snapshot == nil else { continue }
            context.fulfill(object, with: row)
        }
    }
}
