import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

extension NSManagedObjectContext {
    /// Brings the context up to what the store holds now, after a writer the context cannot hear from (another
    /// process, or a tool that records no history) changed it.
    ///
    /// Every object whose values the context holds reloads them from the store, keeping its pending changes on top
    /// (as `refresh(_:mergeChanges:)` with `true` does); one change then tells observers that the store changed, with
    /// the objects whose values differ. Each fetched results controller on the context re-fetches and reports the
    /// whole difference from what its delegate last saw: rows inserted, deleted and moved, and the updates of the
    /// objects that changed. An object whose row is gone is deleted from the context, as a merged delete is: the
    /// change reports it, and it keeps reading its last values.
    ///
    /// This is an OpenCoreData addition (Apple's platforms use persistent history for it); call it when the store's
    /// `changeToken` moves without a save of yours.
    ///
    /// For example:
    /// ```swift
    /// let token = try store.changeToken
    /// if token != lastToken { context.mergeChangesFromStore(); lastToken = token }
    /// ```
    ///
    /// - Complexity: O(n) for the n objects the context holds (one batched read of their rows), plus one re-fetch per
    ///   controller.
    public func mergeChangesFromStore() { catchUpWithStore() }

    /// Reads again every object the context holds (what `mergeChangesFromStore()` documents); false when the store
    /// could not be read, leaving every object as it was.
    @discardableResult
    func catchUpWithStore() -> Bool {
        withLock {
            processPendingChanges()
            advanceQueryGeneration()
            var change = ContextChange(origin: .refresh)
            change.storeChanged = true
            // Objects deleted here but not saved are refreshed too: a rollback brings them back with the stored values.
            // (A child's objects may have temporary IDs: its parent's unsaved objects, which the parent reads out.)
            let stored = registryObjects().filter { $0.state == .stored || ($0.state == .deleted && !$0.wasNewWhenDeleted) }
            // A store that cannot be read now leaves every object as it was (nothing is taken for deleted); the
            // controllers' re-fetch meets the same failure and reports it.
            guard let rows = try? store?.rows(for: stored.map(\.objectID)) else {
                deliver(change)
                return false
            }
            storeRereadOwed = false
            var ignored: [ObjectIdentifier: ValuesBefore] = [:]
            for object in stored {
                guard let row = rows[object.objectID] else {
                    // Its row is gone: deleted, as a merged save's delete is (it keeps reading its last values); reported
                    // if observers still see it.
                    let wasVisible = object.state == .stored || eventDeleted.contains(object)
                    forgetDeletedElsewhere(object)
                    if wasVisible { change.deleted.append(object) }
                    continue
                }
                var keys = reloadToManyMemberships(of: object)
                // A fault stays one: nobody has seen its values, so none of them is news. (One a fetch with
                // `propertiesToFetch` read some values of forgets them: its next read reads the row.)
                if object.snapshot != nil {
                    keys.formUnion(refreshSnapshot(of: object, with: row, originals: &ignored))
                } else if case .partial? = object.faultSource {
                    object.faultSource = nil
                }
                if !keys.isEmpty, object.state == .stored { change.updates.append((object, keys)) }
            }
            deliver(change)
            return true
        }
    }

    /// Catches up with the store now; when it cannot be read, a catch-up stays owed (retried with backoff).
    func catchUpOrRetry() {
        if catchUpWithStore() {
            withLock { storeRereadDelay = 0 }
        } else {
            withLock { if !storeRereadOwed { owesStoreReread() } }  // (an owed one has its retry scheduled already)
        }
    }

    /// Records that a merge could not read what it needed, and schedules a catch-up with the store.
    ///
    /// The catch-up runs on the context's queue after half a second, then after twice as long each time (at most
    /// 30 s) until the store answers; a remote-change notification in between runs it at once. Called under the
    /// context's lock.
    func owesStoreReread() {
        storeRereadOwed = true
        storeRereadDelay = min(max(storeRereadDelay * 2, 0.5), 30)
        DispatchQueue.global().asyncAfter(deadline: .now() + storeRereadDelay) { [weak self] in
            guard let self else { return }
            self.perform {
                guard self.withLock({ self.storeRereadOwed }) else { return }
                if self.catchUpWithStore() {
                    self.withLock { self.storeRereadDelay = 0 }
                } else {
                    self.withLock { self.owesStoreReread() }
                }
            }
        }
    }
}

extension NSManagedObjectContext {
    /// Reads again the to-many memberships `object` holds loaded, keeping its unsaved edits of them on top (as a
    /// merge does); returns those whose visible members changed.
    private func reloadToManyMemberships(of object: NSManagedObject) -> PropertyMask {
        var keys = PropertyMask()
        for (index, old) in object.toManyCommitted {
            object.toManyCommitted.removeValue(forKey: index)
            if object.changes[index] != nil {
                if rebasePendingToMany(of: object, at: index, oldCommitted: old) { keys.insert(index) }
            } else if let now = try? object.committedToMany(at: index), Set(now) != Set(old) {
                keys.insert(index)
            }
        }
        return keys
    }
}
