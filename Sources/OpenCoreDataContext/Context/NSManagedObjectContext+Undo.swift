import Foundation
import OpenCoreDataModel
import Synchronization

/// How many contexts have an undo manager: while none has, a change to a new object skips the journal entirely (the
/// check is one relaxed load, not a load of the object's weak context reference).
private let contextsWithUndoManagers = Atomic<Int>(0)

/// What one event changed, kept for its undo: the first value each property had in the event, the objects inserted
/// and the objects deleted, in the order it happened.
final class UndoJournal {
    enum Record {
        /// The value (and, for an ordered to-many, the order) the property at `index` had before its first change in
        /// the event.
        case set(NSManagedObject, index: Int, PropertyValue, order: [NSManagedObject]?)
        case inserted(NSManagedObject)
        /// Every property's value when the object was deleted: what it gets back if it has to be inserted anew (it
        /// went away with its insertion, or a save deleted its row).
        case deleted(NSManagedObject, values: [PropertyValue], orders: [Int: [NSManagedObject]])
    }

    private struct Key: Hashable {
        let object: ObjectIdentifier
        let index: Int
    }

    var manager: UndoManager?
    private(set) var records: [Record] = []

    deinit {
        // The context goes with its journal: it no longer counts among those with an undo manager.
        if manager != nil { contextsWithUndoManagers.subtract(1, ordering: .relaxed) }
    }

    private var recorded: Set<Key> = []

    var isRecording: Bool { manager?.isUndoRegistrationEnabled ?? false }

    /// Whether the value of the property at `index` of `object` is still to be recorded in this event.
    func needsValue(of object: NSManagedObject, at index: Int) -> Bool {
        !recorded.contains(Key(object: ObjectIdentifier(object), index: index))
    }

    func record(_ record: Record) {
        if case .set(let object, let index, _, _) = record { recorded.insert(Key(object: ObjectIdentifier(object), index: index)) }
        records.append(record)
    }

    /// The event's records, leaving the journal empty for the next event.
    func take() -> [Record] {
        defer {
            records = []
            recorded = []
        }
        return records
    }
}

extension NSManagedObjectContext {
    /// The undo manager that records this context's changes, one step per event; `nil` (the default, as on iOS)
    /// records nothing.
    ///
    /// Each time the context processes its pending changes (at the end of a `perform` block, before a fetch or a
    /// save, or when asked) it registers one operation that reverses them: inserted objects go, deleted ones come back
    /// with their relationships, changed properties get their previous values. `undo()` and `redo()` (the context's or
    /// the manager's) apply them as changes, which observers such as a fetched results controller see like any other
    /// and which the next save writes. `rollback()` clears the undo manager; `reset()` removes this context's
    /// operations from it.
    ///
    /// For example:
    /// ```swift
    /// container.viewContext.undoManager = UndoManager()
    /// ```
    public var undoManager: UndoManager? {
        get { withLock { undoJournal.manager } }
        set {
            withLock {
                let old = undoJournal.manager
                guard old !== newValue else { return }
                old?.stopObservingCheckpoints(of: self)
                if old == nil { contextsWithUndoManagers.add(1, ordering: .relaxed) }
                if newValue == nil { contextsWithUndoManagers.subtract(1, ordering: .relaxed) }
                undoJournal.manager = newValue
                _ = undoJournal.take()
                // Core Data processes its pending changes at the undo manager's checkpoints, so an undo first
                // registers what happened since the last event.
                newValue?.observeCheckpoints(of: self) { [weak self] in self?.processPendingChanges() }
            }
        }
    }

    /// Undoes the last step of the undo manager (nothing happens without one).
    public func undo() {
        let manager = withLock { undoJournal.manager }
        manager?.undo()
    }

    /// Redoes the last step undone (nothing happens without an undo manager).
    public func redo() {
        let manager = withLock { undoJournal.manager }
        manager?.redo()
    }

    /// Whether any context has an undo manager (if none has, changes need not be journaled).
    static var someContextHasUndoManager: Bool { contextsWithUndoManagers.load(ordering: .relaxed) > 0 }

    /// Records the value the property at `index` of `object` has before its first change in this event.
    func journalValue(of object: NSManagedObject, at index: Int) {
        guard undoJournal.isRecording, undoJournal.needsValue(of: object, at: index) else { return }
        guard let value = try? object.currentValue(at: index) else { return }
        undoJournal.record(.set(object, index: index, value, order: order(of: object, at: index)))
    }

    func journalInsertion(of object: NSManagedObject) {
        guard undoJournal.isRecording else { return }
        undoJournal.record(.inserted(object))
    }

    func journalDeletion(of object: NSManagedObject) {
        guard undoJournal.isRecording else { return }
        let properties = object.entity.allProperties
        let values = properties.indices.map { (try? object.currentValue(at: $0)) ?? object.emptyValue(properties[$0]) }
        var orders: [Int: [NSManagedObject]] = [:]
        for index in properties.indices { orders[index] = order(of: object, at: index) }
        undoJournal.record(.deleted(object, values: values, orders: orders))
    }

    /// The order of the ordered to-many at `index` of `object`; nil for any other property.
    private func order(of object: NSManagedObject, at index: Int) -> [NSManagedObject]? {
        guard let relationship = object.entity.allProperties[index] as? NSRelationshipDescription, relationship.isOrdered else {
            return nil
        }
        return try? object.orderedMembers(at: index)
    }

    /// Registers the event's undo with the undo manager (called when pending changes have been processed), and ends
    /// the undo manager's event.
    func registerEventUndo() {
        guard let manager = undoJournal.manager else { return }
        let records = undoJournal.take()
        if !records.isEmpty {
            manager.registerUndo(withTarget: self) { context in context.applyUndo(records) }
        }
        manager.endEvent()
    }

    /// Applies an event's records backwards, then processes the changes (which registers their own undo: the redo).
    private func applyUndo(_ records: [UndoJournal.Record]) {
        withLock {
            for record in records.reversed() {
                switch record {
                case .set(let object, let index, let value, let order):
                    guard isLive(object) else { continue }
                    if let order {
                        try? object.setOrderedMembers(order, at: index, maintainingInverse: false)
                    } else {
                        try? object.setPropertyValue(value, at: index, maintainingInverse: false)
                    }
                case .inserted(let object):
                    guard isLive(object) else { continue }
                    delete(object)
                case .deleted(let object, let values, let orders):
                    reinsert(object, values: values, orders: orders)
                }
            }
            processPendingChanges()
        }
    }

    /// Whether `object` is this context's and neither deleted nor gone.
    private func isLive(_ object: NSManagedObject) -> Bool {
        object.managedObjectContext === self && (object.state == .inserted || object.state == .stored)
    }

    /// Brings back an object deleted in this context: the deletion is taken back if it is still pending; an object
    /// that went away (a new object deleted, or a deletion saved) is inserted anew with the values it had.
    private func reinsert(_ object: NSManagedObject, values: [PropertyValue], orders: [Int: [NSManagedObject]]) {
        if object.state == .deleted, object.managedObjectContext === self {
            insert(object)
            return
        }
        guard object.state == .invalid, object.managedObjectContext === self || object.managedObjectContext == nil else { return }
        // A new object keeps its temporary ID (observers and child contexts may know it by that); a saved one gets a
        // new one, as any new object.
        let id = object.objectID.isTemporaryID ? object.objectID : NSManagedObjectID(temporaryFor: object.entity)
        object.wasNewWhenDeleted = false
        object.insertionReported = false
        object.snapshot = nil
        object.changes = [:]
        // A new object that went away is still in the insertion log (until the next save): it goes back in at the end,
        // once, to be reported as inserted in this event and saved once.
        if let position = insertionLog.firstIndex(where: { $0 === object }) {
            insertionLog.remove(at: position)
            if position < eventInsertionStart { eventInsertionStart -= 1 }
        }
        attachInserted(object, as: id)
        for (index, value) in values.enumerated() {
            if case .attribute(.null) = value { continue }
            object.changes[index] = value
        }
        object.pendingOrder = orders
        journalInsertion(of: object)
    }
}
