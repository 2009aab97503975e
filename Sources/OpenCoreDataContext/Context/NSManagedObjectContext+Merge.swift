import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

extension NSManagedObjectContext {
    /// Brings another context's save into this one, then reports it like local changes (observers and
    /// `didChangeObjectsNotification` see inserted, updated and deleted objects).
    ///
    /// The usual pattern, on Linux as on Apple platforms:
    /// ```swift
    /// NotificationCenter.default.addObserver(forName: .NSManagedObjectContextDidSave, object: nil, queue: nil) { note in
    ///     viewContext.perform { viewContext.mergeChanges(fromContextDidSave: note) }
    /// }
    /// ```
    /// Registered objects take the saved values (pending changes here are kept on top); saved objects this context
    /// had not seen are registered, so that fetched results controllers learn about rows that now match. A save to a
    /// different store is ignored.
    ///
    /// A notification that carries only object IDs (`NSPersistentHistoryTransaction.objectIDNotification()`,
    /// `didSaveObjectIDsNotification`) is merged by reading those objects' rows from the store as they are now.
    ///
    /// - Complexity: O(k) for k saved rows, plus O(h) for h objects here holding loaded to-many memberships.
    public func mergeChanges(fromContextDidSave notification: Notification) {
        if let payload = notification.userInfo?[SavePayload.userInfoKey] as? SavePayload {
            withLock { merge(payload) }
            return
        }
        guard let info = notification.userInfo else { return }
        func ids(_ key: String) -> [NSManagedObjectID] {
            (info[key] as? Set<NSManagedObjectID>).map { $0.sorted() } ?? (info[key] as? [NSManagedObjectID]) ?? []
        }
        withLock {
            mergeObjectIDs(inserted: ids(NSInsertedObjectIDsKey), updated: ids(NSUpdatedObjectIDsKey), deleted: ids(NSDeletedObjectIDsKey))
        }
    }

    /// Drops an object whose row another writer deleted: out of every pending set and the registry, invalid, without
    /// a context (it keeps its last values for whoever reports the delete).
    func forgetDeletedElsewhere(_ object: NSManagedObject) {
        eventDeleted.remove(object)
        eventUndeleted.remove(object)
        insertedSet.remove(object)
        deletedSet.remove(object)
        changedSet.remove(object)
        eventObjects.remove(object)
        unregister(object.objectID)
        object.state = .invalid
        object.changes = [:]
        object.managedObjectContext = nil
    }

    func merge(_ payload: SavePayload) {
        // A context pinned to a query generation moves to the latest when it merges, as in Core Data.
        advanceQueryGeneration()
        storeReadEpoch &+= 1
        // The rows prefetching kept, unless the save was another store's (any save in the process comes here when
        // this context merges automatically); a child context reads its parent, which may have taken the save.
        if _parent != nil || payload.storeIdentifier == store?.identifier { dropPrefetched() }
        // A save to another store (another file, another in-memory store) has nothing to do with this context.
        guard payload.sourceContext !== self, let store, payload.storeIdentifier == store.identifier else { return }
        // A save into a parent context is not in the store: only the parent's other children take it (the parent
        // has it already as pending changes).
        if payload.isIntoParent, payload.target !== _parent || _parent == nil { return }
        var change = ContextChange(origin: .merge)
        var changedIDs: Set<NSManagedObjectID> = []
        // Only a delete in the store is final (a parent can still roll back or undo one a child saved into it).
        let deletesAreFinal = !payload.isIntoParent
        for id in payload.deleted {
            if deletesAreFinal { recentDeletions.insert(id) }
            changedIDs.insert(id)
            if let values = payload.deletedValues[id] { change._deletedAttributeValues[id] = values }
            guard let object = registeredObject(for: id) else {
                change.deletedObjectIDs.append(id)
                continue
            }
            // Report it if observers still see it: stored, or deleted here too but not yet reported.
            let wasVisible = object.state == .stored || (object.state == .deleted && eventDeleted.contains(object))
            forgetDeletedElsewhere(object)
            if wasVisible { change.deleted.append(object) }
        }
        var pointedTo: Set<NSManagedObjectID> = []
        for (snapshots, isInsert) in [(payload.inserted, true), (payload.updated, false)] {
            for snapshot in snapshots {
                // A save's notification can arrive after a later save's (see `RecentDeletions`): a row deleted since
                // stays deleted, and an older version of a row does not replace a newer one.
                if recentDeletions.contains(snapshot.objectID) { continue }
                let registered = registeredObject(for: snapshot.objectID)
                if let current = registered?.snapshot, current.version > snapshot.version { continue }
                changedIDs.insert(snapshot.objectID)
                for case .toOne(let id?) in snapshot.values { pointedTo.insert(id) }
                if let object = registered {
                    guard object.state == .stored || object.state == .deleted else { continue }
                    let wasFault = object.snapshot == nil
                    let keys = refreshSnapshot(of: object, with: snapshot, originals: &change._originalAttributeValues)
                    if wasFault, let originals = payload.updatedOriginals[snapshot.objectID] {
                        change._originalAttributeValues[ObjectIdentifier(object)] = originals
                    }
                    if object.state == .stored {
                        if !keys.isEmpty { change.updates.append((object, keys)) } else { change._refreshed.append(object) }
                    }
                } else {
                    let object = materialize(snapshot)
                    if isInsert {
                        change.inserted.append(object)
                    } else {
                        change.updates.append((object, PropertyMask(all: object.entity.allProperties.count)))
                        // This context never held the old values; the saving context did.
                        if let originals = payload.updatedOriginals[snapshot.objectID] {
                            change._originalAttributeValues[ObjectIdentifier(object)] = originals
                        }
                    }
                }
            }
        }
        let linkKeys = invalidateToManyMemberships(
            payload: payload, pointedTo: pointedTo, changedIDs: changedIDs, change: &change)
        // The other context may have linked objects to ones deleted here but not yet saved (an item put on a shelf
        // deleted here). Left alone, the next save would store a reference to a row that no longer exists; so the
        // deleted objects' rules run again over their members as they are now (reloaded above): nullify unlinks the
        // newcomers, cascade deletes them, deny makes the save fail. The edits form the next batch.
        let relinked = deletedSet.filter { pointedTo.contains($0.objectID) || linkKeys[$0.objectID] != nil }
        if !relinked.isEmpty { propagateDeletes(from: relinked) }
        deliver(change)
    }

    /// Objects holding loaded to-many memberships that the merged save touched forget them (they reload on next
    /// read), and are reported as updated for those keys; returns the to-many keys the save linked or unlinked, by
    /// object.
    ///
    /// Only objects holding loaded memberships can be affected; the context lists them, so this costs
    /// O(holders), not O(registered objects).
    private func invalidateToManyMemberships(
        payload: SavePayload, pointedTo: Set<NSManagedObjectID>, changedIDs: Set<NSManagedObjectID>, change: inout ContextChange
    ) -> [NSManagedObjectID: Set<String>] {
        // Previously seen old to-one values also lose the object from their to-many.
        var linkKeys: [NSManagedObjectID: Set<String>] = [:]
        for (id, name) in payload.linkEndpoints { linkKeys[id, default: []].insert(name) }
        var reported = Set(change.updates.map { ObjectIdentifier($0.object) })
        for entry in takeToManyHolders() where entry.state != .invalid {
            var keys = PropertyMask()
            for (index, ids) in entry.toManyCommitted {
                let name = entry.entity.allProperties[index].name
                let touched =
                    pointedTo.contains(entry.objectID) || ids.contains(where: changedIDs.contains)
                    || linkKeys[entry.objectID]?.contains(name) == true
                if touched {
                    entry.toManyCommitted.removeValue(forKey: index)
                    if entry.changes[index] == nil {
                        keys.insert(index)
                    } else if rebasePendingToMany(of: entry, at: index, oldCommitted: ids) {
                        keys.insert(index)
                    }
                }
            }
            if !keys.isEmpty, entry.state == .stored, reported.insert(ObjectIdentifier(entry)).inserted {
                change.updates.append((entry, keys))
            } else if !keys.isEmpty, let i = change.updates.firstIndex(where: { $0.object === entry }) {
                change.updates[i].keys.formUnion(keys)
            }
        }
        return linkKeys
    }

    /// A to-many relationship with unsaved edits here whose committed members the merge changed: the edits are kept
    /// as what they are — members added and removed here — on top of the new committed members (a member the other
    /// context added stays, as in Core Data).
    ///
    /// Returns whether the visible set changed.
    func rebasePendingToMany(of object: NSManagedObject, at index: Int, oldCommitted: [NSManagedObjectID]) -> Bool {
        guard case .toMany(let pending)? = object.changes[index] else { return false }
        let old = Set(oldCommitted)
        let pendingIDs = Set(pending.map(\.objectID))
        let removedHere = old.subtracting(pendingIDs)
        let addedHere = pending.filter { !old.contains($0.objectID) && $0.state != .invalid }
        guard let committed = try? object.committedToMany(at: index) else { return false }
        var rebased = Set(addedHere)
        for id in committed where !removedHere.contains(id) { rebased.insert(self.object(with: id)) }
        if Set(committed) == Set(rebased.map(\.objectID)) {
            object.changes.removeValue(forKey: index)
        } else {
            object.changes[index] = .toMany(rebased)
        }
        noteChangesUpdated(object)
        return Set(rebased.map(\.objectID)) != pendingIDs
    }

    func registryObjects() -> [NSManagedObject] {
        registeredObjects.sorted { $0.objectID < $1.objectID }
    }

    /// Replaces the object's committed values and returns the properties whose value changed; the values the changed
    /// attributes held before go to `originals` (when the object held any: a fault's are unknown).
    func refreshSnapshot(
        of object: NSManagedObject, with snapshot: RowSnapshot, originals: inout [ObjectIdentifier: ValuesBefore]
    ) -> PropertyMask {
        let old = object.snapshot
        object.snapshot = snapshot
        object.faultSource = nil
        if old == nil, object.changes.isEmpty {
            // A fault: every value is news (the usual case for merged objects nobody has looked at).
            noteChangesUpdated(object)
            return PropertyMask.rowProperties(of: object.entity)
        }
        var keys = PropertyMask()
        // The value arrays read in place (through the optional snapshot, each read copied the whole snapshot).
        let newValues = snapshot.values, oldValues = old?.values
        let properties = object.entity.allProperties
        let hasPending = !object.changes.isEmpty
        for index in properties.indices {
            if case .toMany = newValues[index] { continue }
            if hasPending, let pending = object.changes[index] {
                // A pending change masks the new value; drop it if it now equals the committed value.
                if let committed = try? object.committedComparable(at: index), committed == object.comparable(pending) {
                    object.changes.removeValue(forKey: index)
                }
                continue
            }
            guard let oldValues else {
                keys.insert(index)
                continue
            }
            if oldValues[index] != newValues[index] { keys.insert(index) }
        }
        // The old row is kept whole (no value copied out), read only for the keys that changed.
        if let oldValues, !keys.isEmpty {
            originals[ObjectIdentifier(object)] = ValuesBefore(row: oldValues, known: keys, entity: object.entity)
        }
        noteChangesUpdated(object)
        return keys
    }

    /// Turns an object back into a fault, discarding its changes, or (with `mergeChanges`) reloads its committed
    /// values and keeps its changes on top.
    ///
    /// - Complexity: O(p) for the object's p properties, and one row read by primary key.
    public func refresh(_ object: NSManagedObject, mergeChanges flag: Bool) {
        withLock {
            guard object.managedObjectContext === self, object.state == .stored else { return }
            var change = ContextChange(origin: .refresh)
            var keys = PropertyMask(object.changes.lazy.map(\.key))
            if !flag { object.willTurnIntoFault() }
            defer { if !flag { object.didTurnIntoFault() } }
            if !flag {
                object.changes = [:]
                changedSet.remove(object)
            }
            if let store, let row = try? readingPinned({ try store.rows(for: [object.objectID])[object.objectID] }) {
                // Discarded pending values were where the object's results sat: no originals to report.
                var ignored: [ObjectIdentifier: ValuesBefore] = [:]
                keys.formUnion(refreshSnapshot(of: object, with: row, originals: &ignored))
            } else {
                object.snapshot = nil
                object.faultSource = nil
            }
            object.toManyCommitted = [:]
            object.fetchedPropertyValues = [:]  // fetched properties are fetched again when next read
            if !keys.isEmpty { change.updates.append((object, keys)) }
            deliver(change)
        }
    }

    /// Refreshes every registered object, keeping pending changes.
    ///
    /// - Complexity: O(n) for the n objects the context holds.
    public func refreshAllObjects() {
        withLock {
            for object in registryObjects() { refresh(object, mergeChanges: true) }
        }
    }

    /// Discards every pending change: inserted objects go away, deleted ones come back, changed ones revert.
    ///
    /// - Complexity: O(k) for the k objects with pending changes.
    public func rollback() {
        withLock {
            processPendingChanges()
            var change = ContextChange(origin: .refresh)
            for object in Self.inStableOrder(insertedSet) {
                unregister(object.objectID)
                object.state = .invalid
                // The attribute values it was given stay readable (an object made, inserted and rolled back still
                // reads them, as a SwiftData model does); its relationships go (they would hold other objects).
                for index in Array(object.changes.keys) {
                    if case .attribute = object.changes[index] { continue }
                    object.changes.removeValue(forKey: index)
                }
                object.managedObjectContext = nil
                change.deleted.append(object)
            }
            for object in Self.inStableOrder(deletedSet) where !object.wasNewWhenDeleted {
                object.state = .stored
                object.changes = [:]
                change.inserted.append(object)
            }
            for object in Self.inStableOrder(changedSet) where object.state == .stored {
                let keys = PropertyMask(object.changes.lazy.map(\.key))
                object.changes = [:]
                if !keys.isEmpty, !change.inserted.contains(object) { change.updates.append((object, keys)) }
            }
            clearPendingState()
            // Core Data's rollback empties the undo manager: its steps would undo changes that are gone.
            _ = undoJournal.take()
            undoJournal.manager?.removeAllActions()
            deliver(change)
        }
    }

    /// Drops every record of pending and unreported changes (the objects themselves are updated by the caller).
    private func clearPendingState() {
        insertedSet = []
        deletedSet = []
        changedSet.removeAll()
        for (object, _) in rejectedValues.values { object.hasRejectedValue = false }
        rejectedValues = [:]
        eventObjects.removeAll()
        eventDeleted = []
        eventUndeleted = []
        clearInsertionLog()
    }

    /// Forgets every object: all are invalid afterwards, and pending changes are lost.
    ///
    /// - Complexity: O(n) for the n objects the context holds.
    public func reset() {
        withLock {
            for object in registryObjects() {
                object.state = .invalid
                object.changes = [:]
                object.managedObjectContext = nil
            }
            clearRegistry()
            clearPendingState()
            advanceQueryGeneration()
            // Its steps would act on objects that are no longer this context's.
            _ = undoJournal.take()
            undoJournal.manager?.removeAllActions(withTarget: self)
            var change = ContextChange(origin: .refresh)
            change.invalidatedAll = true
            deliver(change)
        }
    }
}

extension NSManagedObjectContext {
    /// Observes other contexts' saves and other processes' commits when `automaticallyMergesChangesFromParent` is on.
    func updateAutomaticMerging() {
        for observer in mergeObservers { NotificationCenter.default.removeObserver(observer) }
        mergeObservers = []
        guard automaticallyMergesChangesFromParent else { return }
        mergeObservers.append(
            NotificationCenter.default.addObserver(forName: NSManagedObjectContext.didSaveObjectsNotification, object: nil, queue: nil) {
                [weak self] notification in
                guard let self, let payload = notification.userInfo?[SavePayload.userInfoKey] as? SavePayload,
                    payload.sourceContext !== self, self.mergesAutomatically(payload)
                else { return }
                self.perform { self.merge(payload) }
            })
        // Commits by other processes (posted by coordinators whose store has the remote-change option): a context on
        // the coordinator brings its objects and controllers up to the store.
        mergeObservers.append(
            NotificationCenter.default.addObserver(forName: .NSPersistentStoreRemoteChange, object: nil, queue: nil) {
                [weak self] notification in
                guard let self, self.parent == nil, let coordinator = notification.object as? NSPersistentStoreCoordinator,
                    coordinator === self.persistentStoreCoordinator
                else { return }
                // With history: exactly what the other writers' transactions changed.
                if let history = notification.userInfo?[RemoteHistory.userInfoKey] as? RemoteHistory, !history.needsRereading {
                    // (Nothing new, but the store answers: a catch-up owed by a merge that could not read it runs now,
                    // scheduled below.)
                    guard !history.transactions.isEmpty else {
                        guard self.withLock({ self.storeRereadOwed }) else { return }
                        return self.scheduleCatchUp()
                    }
                    self.perform {
                        // An earlier merge that could not read the store (the connection lost, the server restarting)
                        // owes a catch-up, and what it missed is older than these transactions: the catch-up comes
                        // first — the store answers again — and takes their place, as it reads everything as it is now.
                        // Merged first, these transactions would be reported before older ones, out of commit order.
                        if self.withLock({ self.storeRereadOwed }) {
                            self.catchUpOrRetry()
                        } else {
                            self.mergeHistory(history.transactions)
                        }
                    }
                    return
                }
                // No history, or commits among these that left none (another program's SQL): the store is read again,
                // which covers any transactions that came along (merged first, they would be reported before the
                // commits without history that came before them).
                self.scheduleCatchUp()
            })
    }

    /// Schedules a catch-up with the store on the context's queue, unless one is scheduled already: commits faster
    /// than catch-ups run must not queue one each (the queue would grow without end), one covers them all.
    private func scheduleCatchUp() {
        let schedule = withLock {
            defer { storeCatchUpScheduled = true }
            return !storeCatchUpScheduled
        }
        guard schedule else { return }
        perform {
            self.storeCatchUpScheduled = false
            self.catchUpOrRetry()
        }
    }
}
