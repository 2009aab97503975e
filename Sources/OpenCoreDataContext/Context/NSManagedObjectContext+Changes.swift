import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

/// One processed batch of changes in a context, as observers (fetched results controllers) receive it.
///
/// `updated` carries the keys whose values changed in this batch. Objects are those of the observed context.
///
/// For example:
/// ```swift
/// let observation = context.addChangeObserver { change in print(change.inserted.count, change.origin) }
/// ```
public struct ContextChange {
    /// Where the batch came from.
    ///
    /// For example:
    /// ```swift
    /// if change.origin == .merge { showBanner("Updated elsewhere") }
    /// ```
    public enum Origin: Sendable {
        /// Edits made in the context, reported by `processPendingChanges()`.
        case localEdits
        /// Another context's save, merged with `mergeChanges(fromContextDidSave:)`.
        case merge
        /// `refresh(_:mergeChanges:)`, `rollback()` or `reset()`.
        case refresh
    }

    /// What made the change: edits in this context, a merge of another's save, or a refresh.
    public var origin: Origin
    /// Objects that appeared.
    public var inserted: [NSManagedObject] = []
    /// Objects that changed, with the keys that changed.
    ///
    /// - Complexity: O(k) for k updated objects: the names are made from `updates` each time this is read.
    public var updated: [(object: NSManagedObject, keys: Set<String>)] {
        get { updates.map { ($0.object, $0.keys.names(in: $0.object.entity)) } }
        set { updates = newValue.map { ($0.object, PropertyMask(names: $0.keys, in: $0.object.entity)) } }
    }
    /// What `updated` reports, with the changed properties by index (what observers inside the framework read: no
    /// property name is hashed for them).
    package var updates: [(object: NSManagedObject, keys: PropertyMask)] = []
    /// Objects that went away.
    public var deleted: [NSManagedObject] = []
    /// Objects deleted by a merged save that this context held no object for (observers that keep rows without
    /// objects, as fetched results controllers do, look them up by ID).
    public var deletedObjectIDs: [NSManagedObjectID] = []
    /// Every object ID that changed from temporary to permanent (old → new).
    ///
    /// In a save, or taken on from a parent's save; an ID that stays temporary (a child's new object saved into its
    /// parent) is not listed.
    public var objectIDChanges: [NSManagedObjectID: NSManagedObjectID] = [:]
    /// Set by `reset()`: every object is gone.
    public var invalidatedAll = false
    /// Set by `mergeChangesFromStore()`: the store changed in ways the context cannot place (another process wrote
    /// to it), so observers that hold results re-fetch them; `updated` lists the objects whose values changed.
    public var storeChanged = false
    /// Set when the batch reports a save of this context (the store now holds what the context shows).
    public var didSave = false
    /// For local edits: the values the changed attributes of each updated object held before the edits, by object
    /// and key.
    ///
    /// An observer that finds rows by their values (a fetched results controller) finds where an edited
    /// object was from them, without a table of every row.
    package var _originalAttributeValues: [ObjectIdentifier: ValuesBefore] = [:]
    /// For rows a merged save deleted: every attribute's value as the saving context last knew it (rows it had not
    /// loaded are absent).
    ///
    /// Finds where a deleted row was, as `_originalAttributeValues` does for edits.
    package var _deletedAttributeValues: [NSManagedObjectID: ValuesBefore] = [:]
    /// For merges: objects the merged save wrote that held the saved values here already (read after the save and
    /// before its merge — a fault fired, a page of faults loaded), so `updated` does not list them.
    ///
    /// Observers that placed such an object by the values it had before (a fetched results controller) compare it
    /// with where they hold it.
    package var _refreshed: [NSManagedObject] = []

    /// Whether nothing changed.
    public var isEmpty: Bool {
        inserted.isEmpty && updates.isEmpty && deleted.isEmpty && deletedObjectIDs.isEmpty && !invalidatedAll && !storeChanged
    }
}

extension NSManagedObjectContext {
    /// Posted when pending changes are processed: `userInfo` holds `NSInsertedObjectsKey`, `NSUpdatedObjectsKey`,
    /// `NSDeletedObjectsKey` (sets of `NSManagedObject`), as Core Data's does.
    public static let didChangeObjectsNotification = Notification.Name("NSManagedObjectContextObjectsDidChangeNotification")
    /// Posted before a save.
    public static let willSaveObjectsNotification = Notification.Name("NSManagedObjectContextWillSaveNotification")
    /// Posted after a save: `userInfo` holds the saved objects under `NSInsertedObjectsKey`, `NSUpdatedObjectsKey`,
    /// `NSDeletedObjectsKey` and their IDs under `NSInsertedObjectIDsKey`, `NSUpdatedObjectIDsKey`,
    /// `NSDeletedObjectIDsKey`.
    ///
    /// Pass it to another context's `mergeChanges(fromContextDidSave:)`.
    public static let didSaveObjectsNotification = Notification.Name("NSManagedObjectContextDidSaveNotification")
    /// Posted with the IDs (not the objects) of what a save changed.
    ///
    /// `userInfo` holds them under `NSInsertedObjectIDsKey`, `NSUpdatedObjectIDsKey` and `NSDeletedObjectIDsKey`;
    /// `NSPersistentHistoryTransaction.objectIDNotification()` has this name too. Pass it to
    /// `mergeChanges(fromContextDidSave:)`.
    public static let didSaveObjectIDsNotification = Notification.Name("NSManagedObjectContextDidSaveObjectIDsNotification")

    /// Reports the edits made since the last call: applies delete rules, then notifies observers and posts
    /// `didChangeObjectsNotification`.
    ///
    /// Fetches, saves and the end of every `perform` block call it.
    ///
    /// - Complexity: O(k log k) for k objects changed since the last call (observers such as fetched results
    ///   controllers then cost O(k log n) each).
    public func processPendingChanges() {
        withLock {
            // Not while a batch is being delivered (an observer that fetches would otherwise report a nested batch
            // in the middle of the current one); `deliver` catches up when it finishes.
            guard hasEventChanges, !isDelivering else { return }
            propagateDeletes(from: eventDeleted)
            var change = ContextChange(origin: .localEdits)
            // Objects inserted during the event are already in stable order (insertion order); only the others
            // need sorting before the two lists are merged.
            let edited = Self.inStableOrder(eventObjects)
            let inserted = insertionLog[eventInsertionStart...]
            eventObjects.removeAll()
            eventInsertionStart = insertionLog.count
            let newlyDeleted = eventDeleted
            eventDeleted = []
            let undeleted = eventUndeleted
            eventUndeleted = []
            // Objects inserted and deleted in this event: invalidated once the batch is delivered, so that observers
            // still read their last values (a delegate must be able to tell which row went).
            var vanished: [NSManagedObject] = []
            for object in Self.mergedInStableOrder(edited, inserted) {
                defer { object.eventOriginals = [:] }
                switch object.state {
                case .inserted:
                    if !object.insertionReported {
                        object.insertionReported = true
                        change.inserted.append(object)
                    } else if let keys = changedKeys(object, originals: &change._originalAttributeValues), !keys.isEmpty {
                        change.updates.append((object, keys))
                    }
                case .deleted:
                    guard newlyDeleted.contains(object) else { continue }
                    let wasInserted = object.wasNewWhenDeleted
                    if wasInserted {
                        // Inserted and deleted before saving: it simply goes away.
                        if object.insertionReported {
                            object.insertionReported = false
                            change.deleted.append(object)
                        }
                        deletedSet.remove(object)
                        changedSet.remove(object)
                        unregister(object.objectID)
                        vanished.append(object)
                    } else {
                        change.deleted.append(object)
                    }
                case .stored where undeleted.contains(object):
                    change.inserted.append(object)
                case .stored:
                    if let keys = changedKeys(object, originals: &change._originalAttributeValues), !keys.isEmpty {
                        change.updates.append((object, keys))
                    }
                default: continue
                }
            }
            // The undo of the event is registered before observers hear of it: edits they make form the next event.
            registerEventUndo()
            deliver(change)
            for object in vanished {
                object.state = .invalid
                // An undo may bring it back with its values.
                if undoJournal.manager == nil { object.changes = [:] }
            }
        }
    }

    /// The keys whose value differs from the one at the start of the event; the original values of the attributes
    /// among them go to `originals`.
    private func changedKeys(_ object: NSManagedObject, originals: inout [ObjectIdentifier: ValuesBefore]) -> PropertyMask? {
        var keys = PropertyMask()
        for (index, original) in object.eventOriginals {
            guard let now = try? object.currentValue(at: index) else { continue }
            if object.comparable(now) != original { keys.insert(index) }
        }
        // The event's originals are kept as they are (the caller drops them from the object after this), read only
        // for the keys that changed.
        if !keys.isEmpty {
            originals[ObjectIdentifier(object)] = ValuesBefore(event: object.eventOriginals, known: keys, entity: object.entity)
        }
        return keys
    }

    /// Applies the delete rules of deleted objects to their current destinations: nullify inverses, cascade, (deny is
    /// checked at save).
    ///
    /// Runs for the objects deleted in an event, and again after a merge linked others to them.
    func propagateDeletes(from deleted: Set<NSManagedObject>) {
        var pending = Array(deleted)
        var done: Set<NSManagedObject> = []
        while let object = pending.popLast() {
            guard done.insert(object).inserted else { continue }
            for relationship in object.entity.allRelationships {
                guard let index = object.entity.propertyIndex(named: relationship.name),
                    let value = try? object.currentValue(at: index)
                else { continue }
                let destinations: [NSManagedObject]
                switch value {
                case .toOne(let o): destinations = o.map { [$0] } ?? []
                case .toMany(let s): destinations = Array(s)
                case .attribute: continue
                }
                switch relationship.deleteRule {
                case .nullifyDeleteRule:
                    guard let inverse = relationship.inverseRelationship else { continue }
                    for destination in destinations where destination.state != .deleted {
                        try? destination.unlink(object, via: inverse)
                    }
                case .cascadeDeleteRule:
                    for destination in destinations where destination.state == .stored || destination.state == .inserted {
                        delete(destination)
                        pending.append(destination)
                    }
                    if let inverse = relationship.inverseRelationship {
                        for destination in destinations where destination.state != .deleted {
                            try? destination.unlink(object, via: inverse)
                        }
                    }
                case .denyDeleteRule, .noActionDeleteRule:
                    continue
                }
            }
        }
    }

    /// Notifies observers, then posts `didChangeObjectsNotification`.
    func deliver(_ change: ContextChange) {
        storeReadEpoch &+= 1
        dropPrefetched()
        guard !change.isEmpty || !change.objectIDChanges.isEmpty || change.didSave || !change._refreshed.isEmpty else { return }
        for (object, keys) in change.updates { object.reportedChangedKeys = keys }
        let wasDelivering = isDelivering
        isDelivering = true
        defer {
            for (object, _) in change.updates { object.reportedChangedKeys = PropertyMask() }
            isDelivering = wasDelivering
            // Edits made by observers while the batch was delivered form the next batch.
            if !wasDelivering, hasEventChanges { processPendingChanges() }
        }
        for observer in observers.values { observer(change) }
        guard !change.isEmpty else { return }
        var userInfo: [AnyHashable: Any] = [:]
        userInfo[NSInsertedObjectsKey] = Set(change.inserted)
        userInfo[NSUpdatedObjectsKey] = Set(change.updates.map(\.object))
        userInfo[NSDeletedObjectsKey] = Set(change.deleted)
        if change.invalidatedAll { userInfo[NSInvalidatedAllObjectsKey] = true }
        NotificationCenter.default.post(name: Self.didChangeObjectsNotification, object: self, userInfo: userInfo)
    }
}

/// `userInfo` keys of context notifications, with Core Data's names and values.
public let NSInsertedObjectsKey = "inserted"
/// The objects a change or save updated (a `Set<NSManagedObject>`).
public let NSUpdatedObjectsKey = "updated"
/// The objects a change or save deleted (a `Set<NSManagedObject>`).
public let NSDeletedObjectsKey = "deleted"
/// The objects a merge or refresh gave new values (a `Set<NSManagedObject>`).
public let NSRefreshedObjectsKey = "refreshed"
/// The objects that became invalid (a `Set<NSManagedObject>`).
public let NSInvalidatedObjectsKey = "invalidated"
/// Present (true) when `reset()` invalidated every object of the context.
public let NSInvalidatedAllObjectsKey = "invalidatedAll"
/// The IDs of the objects a save inserted (a `Set<NSManagedObjectID>`).
public let NSInsertedObjectIDsKey = "inserted_objectIDs"
/// The IDs of the objects a save updated (a `Set<NSManagedObjectID>`).
public let NSUpdatedObjectIDsKey = "updated_objectIDs"
/// The IDs of the objects a save deleted (a `Set<NSManagedObjectID>`).
public let NSDeletedObjectIDsKey = "deleted_objectIDs"

extension Notification.Name {
    /// Core Data's name for `NSManagedObjectContext.didChangeObjectsNotification`.
    public static let NSManagedObjectContextObjectsDidChange = NSManagedObjectContext.didChangeObjectsNotification
    /// Core Data's name for `NSManagedObjectContext.willSaveObjectsNotification`.
    public static let NSManagedObjectContextWillSave = NSManagedObjectContext.willSaveObjectsNotification
    /// Core Data's name for `NSManagedObjectContext.didSaveObjectsNotification`.
    public static let NSManagedObjectContextDidSave = NSManagedObjectContext.didSaveObjectsNotification
}
