internal import Logging
internal import OpenCoreData

// Inserts of models that are not new: deleted ones, ones whose deletion was saved, ones of other contexts.
extension ModelContext {
    /// Undoes the unsaved deletion of `object`, one of this context's rows (`insert` of a model deleted here).
    func undelete(_ object: NSManagedObject) {
        context.performAndWait {
            context.insert(object)
            if liveQueries > 0 { context.processPendingChanges() }
        }
        noteChange()
    }

    /// Inserts again a model whose deletion was saved: a new row with the values the model had (its old row's, which
    /// it still reads), related to the rows its old row was related to that are still stored or were inserted again
    /// in this context.
    ///
    /// The app pattern this serves is undoing a delete: `context.delete(item)`, a save, then `context.insert(item)`.
    /// Models deleted with it by a cascade rule are not brought back by it; inserted too, they relate again (when the
    /// relationship's rows were read before the deletion, from one side or the other).
    func insertDeparted(_ model: any PersistentModel, row old: NSManagedObject) {
        let backing = model.persistentBackingData
        backing.object = nil
        backing.context = nil
        guard let plan = plan(for: model) else { return }
        let object = context.performAndWait { () -> ModelObject in
            let object = ModelObject(entity: plan.entity, insertInto: context)
            object.model = model
            for attribute in plan.entity.allAttributes where !attribute.isTransient {
                object.setValue(old.value(forKey: attribute.name), forKey: attribute.name)
            }
            for relationship in plan.entity.allRelationships where !relationship.isTransient {
                let related = old.lastSavedRelatedIDs(forKey: relationship.name).compactMap { id -> NSManagedObject? in
                    if let row = reinsertedRows[id], !row.isDeleted { return row }
                    guard !id.isTemporaryID, let row = try? context.existingObject(with: id), !row.isDeleted else { return nil }
                    return row
                }
                if relationship.isToMany {
                    object.setValue(Set(related), forKey: relationship.name)
                } else {
                    object.setValue(related.first, forKey: relationship.name)
                }
            }
            reinsertedRows[old.objectID] = object
            if liveQueries > 0 { context.processPendingChanges() }
            return object
        }
        backing.object = object
        backing.context = self
        noteChange()
    }

    /// Refuses an insert: the next `save()` throws `reason` (and it is logged now, for a program that does not save).
    func refuse(_ reason: String) {
        Logger(label: "OpenSwiftData").error("\(reason)")
        refusals.withLock { $0.append(reason) }
    }
}
