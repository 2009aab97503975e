import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// What a save hands to other contexts through `didSaveObjectsNotification`: the rows as stored after the save.
///
/// Immutable and `Sendable`, so any context on any queue can merge it.
final class SavePayload: @unchecked Sendable {
    static let userInfoKey = "OpenCoreData.SavePayload"
    weak var sourceContext: NSManagedObjectContext?
    weak var coordinator: NSPersistentStoreCoordinator?
    /// The context the save went into, for a child context's save (nil: the store).
    weak var target: NSManagedObjectContext?
    /// Whether the save went into a parent context rather than the store.
    let isIntoParent: Bool
    /// The store the save went to; other stores' contexts ignore the payload.
    let storeIdentifier: String
    let inserted: [RowSnapshot]
    let updated: [RowSnapshot]
    let deleted: [NSManagedObjectID]
    /// Objects whose join-table relationships changed (both ends).
    let linkEndpoints: [(NSManagedObjectID, String)]
    /// For updated rows, the committed values their changed attributes held before the save, as the saving context
    /// knew them: a merging context that never loaded a row still learns where its results had it.
    let updatedOriginals: [NSManagedObjectID: ValuesBefore]
    /// For deleted rows, every attribute's last committed value, by key.
    let deletedValues: [NSManagedObjectID: ValuesBefore]

    init(
        source: NSManagedObjectContext?, coordinator: NSPersistentStoreCoordinator?, storeIdentifier: String, inserted: [RowSnapshot],
        updated: [RowSnapshot], deleted: [NSManagedObjectID], linkEndpoints: [(NSManagedObjectID, String)],
        updatedOriginals: [NSManagedObjectID: ValuesBefore] = [:],
        deletedValues: [NSManagedObjectID: ValuesBefore] = [:]
    ) {
        self.updatedOriginals = updatedOriginals
        self.deletedValues = deletedValues
        self.sourceContext = source
        self.target = source?._parent
        self.isIntoParent = source?._parent != nil
        self.storeIdentifier = storeIdentifier
        self.coordinator = coordinator
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
        self.linkEndpoints = linkEndpoints
    }
}

extension CoreDataError.Code {
    /// Several validation errors at once (`underlying` lists them).
    public static let validationMultipleErrors = CoreDataError.Code(1560, "validationMultipleErrors")
}

extension NSManagedObjectContext {
    /// Writes every pending change to the store in one transaction (a child context's, into its parent).
    ///
    /// Validation runs first (required properties, relationship counts, deny rules); on any failure nothing is
    /// written and the context keeps its changes. After the save, inserted objects have permanent IDs (a child's keep
    /// their temporary IDs until the parent saves, as in Core Data; see `obtainPermanentIDs(for:)`), and
    /// `didSaveObjectsNotification` is posted for other contexts to merge.
    ///
    /// - Complexity: O(k) for k changed objects (validation, one SQL transaction that writes new rows 32 to a
    ///   statement, notifications); nothing else the context holds is visited.
    /// - Throws: `CoreDataError` — validation codes 1550–1600 naming the object and key, `.managedObjectMerge` when
    ///   another context changed a row this one changes (under `NSErrorMergePolicy`), or a store error.
    public func save() throws {
        try save(returningInsertedIDs: false)
    }

    /// `save()`, returning the permanent IDs of the objects it inserted when `returningInsertedIDs` is true (none
    /// otherwise).
    ///
    /// For a caller that reports them after the save, as SwiftData's `didSave` does, without holding the objects: they
    /// are let go inside the save, where its registry settles, rather than all at once after it (W6's `@Model`
    /// contender spent 51–61 ms releasing 50,000 objects after the save when `ModelContext` held them).
    @discardableResult
    package func save(returningInsertedIDs: Bool) throws -> [NSManagedObjectID] {
        var insertedIDs: [NSManagedObjectID] = []
        try withLock {
            processPendingChanges()
            // Metadata an app set on the coordinator is written when a context saves into the store.
            if _parent == nil, let coordinator = _coordinator, !coordinator.stagedMetadata.isEmpty { try coordinator.writeStagedMetadata() }
            guard hasChanges else { return }
            adoptParentsPermanentIDs()
            let store = try requireStore()
            NotificationCenter.default.post(name: Self.willSaveObjectsNotification, object: self, userInfo: nil)
            // The changed stored objects in stable order, sorted once for `willSave`, validation and the request
            // (again only if `willSave` edited something, or a conflict's resolution changed the objects).
            var updated = Self.inStableOrder(changedSet.filter { $0.state == .stored })
            for object in insertedInOrder() + updated { object.willSave() }
            if hasEventChanges {
                processPendingChanges()
                updated = Self.inStableOrder(changedSet.filter { $0.state == .stored })
            }
            for object in deletedSet where object.snapshot == nil && !object.wasNewWhenDeleted {
                try object.fulfillFault()
            }
            var inserted = insertedInOrder()  // including any that willSave() inserted
            // New objects that share a uniqueness constraint's values become one, by the merge policy, before the store
            // sees them (under `.error` the store refuses them).
            if mergePolicy != .error, persistentStoreCoordinator?.managedObjectModel._hasUniquenessConstraints == true,
                try mergeDuplicateInserts(inserted)
            {
                inserted = insertedInOrder()
            }
            // Derived values before validation, transformed values after: both only for models that have them.
            let model = persistentStoreCoordinator?.managedObjectModel
            let derived = model?._hasDerivedAttributes == true, archived = model?._hasStoredTransformableAttributes == true
            let saved = derived || archived ? inserted + updated : []
            if derived { try computeDerivedAttributes(saved) }
            try validateForSave(inserted: inserted, updated: updated)
            if archived { try transformPendingValues(saved) }
            var attempts = 0
            while true {
                let (request, deleted, endpoints) = try buildSaveRequest(inserted: inserted, updated: updated)
                let result: StoreSaveResult
                do {
                    result = try store.save(request)
                } catch let error as CoreDataError where error.code == .managedObjectMerge || error.code == .constraintConflict {
                    restoreTakenValues(request.inserts, inserted)
                    // The merge policy resolves the conflicts (or throws them, listed), and the save runs again: a
                    // writer may have changed another row meanwhile, so a few rounds are allowed.
                    attempts += 1
                    try resolveConflicts(error, updated: updated, deleted: deleted, store: store, lastRound: attempts >= 4)
                    inserted = insertedInOrder()
                    updated = Self.inStableOrder(changedSet.filter { $0.state == .stored })
                    continue
                } catch {
                    restoreTakenValues(request.inserts, inserted)
                    throw error
                }
                // A context pinned to a query generation moves to the latest, which holds what it saved.
                if _parent == nil { advanceQueryGeneration() }
                apply(result, inserted: inserted, updated: updated, deleted: deleted, endpoints: endpoints)
                if returningInsertedIDs { insertedIDs = inserted.map(\.objectID) }
                break
            }
        }
        // The save's own references to the saved objects are gone now: register those something else still holds.
        withLock { settleRegistry() }
        return insertedIDs
    }

    /// The store's request for the save of `inserted` and `updated` (the changed stored objects, in stable order)
    /// and the deleted objects, with the deleted objects it names and the to-many endpoints it links.
    private func buildSaveRequest(inserted: [NSManagedObject], updated: [NSManagedObject]) throws -> (
        StoreSaveRequest, [NSManagedObject], [(NSManagedObjectID, String)]
    ) {
        var request = StoreSaveRequest()
        request.historyAuthor = historyAuthor
        // Property-object-trump writes the changed properties whatever the row's version (what resolving would do);
        // the other policies need to see the conflict to resolve it.
        request.conflictPolicy = mergePolicy == .mergeByPropertyObjectTrump ? .overwrite : .fail
        let deleted = deletedSet.filter { !$0.wasNewWhenDeleted }.sorted { $0.objectID < $1.objectID }
        var endpoints: [(NSManagedObjectID, String)] = []
        // Every to-many membership change is sent as link changes; a store that keeps the relationship in the
        // destination's foreign key (the inverse is to-one) has nothing more to write and ignores them.

        request.inserts.reserveCapacity(inserted.count)
        do {
            for object in inserted {
                let entity = object.entity
                let properties = entity.allProperties
                let transient = entity._transientIndexes
                var values: [SnapshotValue] = []
                values.reserveCapacity(properties.count)
                for index in properties.indices {
                    // Moved out of the object (see `takeValueForInsertSave`): put back by `restoreTakenValues` on failure.
                    let value = try object.takeValueForInsertSave(
                        at: index, isStoredAttribute: NSManagedObject.isStoredAttribute(at: index, of: entity, transient: transient))
                    if case .toMany(let set) = value, let r = properties[index] as? NSRelationshipDescription, !r.isTransient {
                        try addNewLinks(of: object, at: index, r, set, to: &request, endpoints: &endpoints)
                    }
                    values.append(snapshotValue(consume value))
                }
                request.inserts.append(.init(objectID: object.objectID, values: values))
            }
        } catch {
            restoreTakenValues(request.inserts, inserted)
            throw error
        }
        for object in updated {
            var changes: [Int: SnapshotValue] = [:]
            for (index, value) in object.changes {
                let property = object.entity.allProperties[index]
                if let r = property as? NSRelationshipDescription, r.isToMany {
                    guard case .toMany(let set) = value, !r.isTransient else { continue }
                    let committedOrder = try object.committedToMany(at: index)
                    let committed = Set(committedOrder)
                    if r.isOrdered {
                        let order = try object.orderedMembers(at: index).map(\.objectID)
                        if order != committedOrder {
                            request.orderChanges.append(.init(relationship: r, source: object.objectID, destinations: order))
                        }
                    }
                    let current = Set(set.map(\.objectID))
                    for added in current.subtracting(committed) {
                        request.linkChanges.append(.init(relationship: r, source: object.objectID, destination: added, isInsert: true))
                        endpoints.append((added, r.inverseRelationship?.name ?? ""))
                    }
                    for removed in committed.subtracting(current) {
                        request.linkChanges.append(.init(relationship: r, source: object.objectID, destination: removed, isInsert: false))
                        endpoints.append((removed, r.inverseRelationship?.name ?? ""))
                    }
                    endpoints.append((object.objectID, r.name))
                    continue
                }
                changes[index] = snapshotValue(value)
            }
            request.updates.append(
                .init(
                    objectID: object.objectID, expectedVersion: object.snapshot?.version ?? 0, changes: changes,
                    base: object.snapshot?.values))
        }
        for object in deleted {
            request.deletes.append(.init(objectID: object.objectID, expectedVersion: object.snapshot?.version ?? 0))
        }
        return (request, deleted, endpoints)
    }

    /// A new object's to-many destinations as link changes (and its order, for an ordered relationship).
    private func addNewLinks(
        of object: NSManagedObject, at index: Int, _ relationship: NSRelationshipDescription, _ set: Set<NSManagedObject>,
        to request: inout StoreSaveRequest, endpoints: inout [(NSManagedObjectID, String)]
    ) throws {
        if relationship.isOrdered, !set.isEmpty {
            let order = try object.orderedMembers(at: index).map(\.objectID)
            request.orderChanges.append(.init(relationship: relationship, source: object.objectID, destinations: order))
        }
        for destination in set {
            request.linkChanges.append(
                .init(relationship: relationship, source: object.objectID, destination: destination.objectID, isInsert: true))
            endpoints.append((destination.objectID, relationship.inverseRelationship?.name ?? ""))
        }
    }

    /// Puts the values a failed save took from its inserted objects back (`inserts` are the first objects').
    private func restoreTakenValues(_ inserts: [StoreSaveRequest.Insert], _ objects: [NSManagedObject]) {
        for (insert, object) in zip(inserts, objects) { object.restoreTakenValues(insert.values) }
    }

    /// The value as a snapshot holds it; consumed, so an attribute's value moves over instead of being copied.
    private func snapshotValue(_ value: consuming PropertyValue) -> SnapshotValue {
        switch consume value {
        case .attribute(let v): return .attribute(v)
        case .toOne(let o): return .toOne(o?.objectID)
        case .toMany: return .toMany
        }
    }

    private func apply(
        _ result: StoreSaveResult, inserted: [NSManagedObject], updated: [NSManagedObject], deleted: [NSManagedObject],
        endpoints: [(NSManagedObjectID, String)]
    ) {
        let savedInserted = insertedSet  // the same objects as `inserted`, already in a set
        // Every pass over the saved objects costs a cache miss per object at W6's sizes: the former IDs are collected
        // in the pass that assigns the new ones. (Committing needs every new ID assigned first: a to-many may hold an
        // object later in the list.)
        var oldIDs: [NSManagedObjectID] = []
        oldIDs.reserveCapacity(inserted.count)
        for (object, row) in zip(inserted, result.insertedRows) {
            oldIDs.append(object.objectID)
            object.objectID = row.objectID
        }
        if hasChildContexts {
            for (old, object) in zip(oldIDs, inserted) where old != object.objectID { formerTemporaryIDs[old] = object.objectID }
        }
        for index in inserted.indices { commitSaved(inserted[index], result.insertedRows[index]) }
        var updatedSnapshots: [RowSnapshot] = []
        var updatedOriginals: [NSManagedObjectID: ValuesBefore] = [:]
        for object in updated {
            if let old = object.snapshot {
                // The old row is kept whole, read only for the keys the save changed.
                let changed = PropertyMask(object.changes.lazy.map(\.key))
                if !changed.isEmpty {
                    updatedOriginals[object.objectID] = ValuesBefore(row: old.values, known: changed, entity: object.entity)
                }
            }
            let snapshot = result.updatedRows[object.objectID]
            commitSaved(object, snapshot)
            if let snapshot { updatedSnapshots.append(snapshot) }
        }
        let deletedValues = forgetDeleted(deleted)
        if _parent == nil { for object in deleted { recentDeletions.insert(object.objectID) } }
        let savedUpdated = Set(updated), savedDeleted = Set(deleted)
        insertedSet = []
        changedSet.removeAll()
        deletedSet = []
        clearInsertionLog()
        for object in inserted { object.didSave() }
        for object in updated { object.didSave() }
        for object in deleted { object.didSave() }
        for object in deleted { object.managedObjectContext = nil }
        // Saved objects are held without a reference from here on (once the registry settles), under the new IDs
        // observers may look up.
        registerSaved(inserted, formerIDs: oldIDs)

        var idChange = ContextChange(origin: .localEdits)
        if !observers.isEmpty {
            // A child's new objects keep their temporary IDs through its save (into the parent): no change to tell.
            idChange.objectIDChanges = Dictionary(uniqueKeysWithValues: zip(oldIDs, inserted.lazy.map(\.objectID)).filter { $0 != $1 })
        }
        idChange.didSave = true
        deliver(idChange)

        let payload = SavePayload(
            source: self, coordinator: persistentStoreCoordinator, storeIdentifier: store?.identifier ?? "",
            inserted: result.insertedRows, updated: updatedSnapshots, deleted: deleted.map(\.objectID), linkEndpoints: endpoints,
            updatedOriginals: updatedOriginals, deletedValues: deletedValues)
        let userInfo: [AnyHashable: Any] = [
            NSInsertedObjectsKey: savedInserted, NSUpdatedObjectsKey: savedUpdated, NSDeletedObjectsKey: savedDeleted,
            NSInsertedObjectIDsKey: Set(result.insertedRows.map(\.objectID)), NSUpdatedObjectIDsKey: Set(savedUpdated.map(\.objectID)),
            NSDeletedObjectIDsKey: Set(payload.deleted), SavePayload.userInfoKey: payload,
        ]
        NotificationCenter.default.post(name: Self.didSaveObjectsNotification, object: self, userInfo: userInfo)
    }

    /// A saved object's new committed state: its row as written (or nil to load on next read), its to-many
    /// memberships, its transient values kept.
    private func commitSaved(_ object: NSManagedObject, _ snapshot: RowSnapshot?) {
        let wasInserted = object.state == .inserted
        // Remember the now-committed to-many memberships (IDs are permanent by now).
        for index in object.entity._toManyIndexes {
            if let pending = object.changes[index], case .toMany(let set) = pending {
                let ordered = (object.entity.allProperties[index] as? NSRelationshipDescription)?.isOrdered == true
                object.toManyCommitted[index] =
                    ordered ? ((try? object.orderedMembers(at: index)) ?? []).map(\.objectID) : set.map(\.objectID).sorted()
            } else if wasInserted {
                object.toManyCommitted[index] = []
            }
        }
        // Transient values stay with the object (the store wrote none): pending ones, else those it held.
        var snapshot = snapshot
        if snapshot != nil {
            for index in object.entity._transientIndexes {
                if let pending = object.changes[index], case .attribute(let value) = pending {
                    snapshot!.values[index] = .attribute(value)
                } else if let held = object.snapshot?.values[index] {
                    snapshot!.values[index] = held
                }
            }
        }
        object.snapshot = snapshot
        object.changes.removeAll()
        object.pendingOrder.removeAll()
        object.state = .stored
    }

    /// Deleted objects leave the context: unregistered and invalid.
    ///
    /// Returns the attribute values each last had (for
    /// observers that place a deleted row by its values).
    private func forgetDeleted(_ deleted: [NSManagedObject]) -> [NSManagedObjectID: ValuesBefore] {
        var deletedValues: [NSManagedObjectID: ValuesBefore] = [:]
        deletedValues.reserveCapacity(deleted.count)
        for object in deleted {
            if let snapshot = object.snapshot {
                let all = PropertyMask(all: snapshot.values.count)
                deletedValues[object.objectID] = ValuesBefore(row: snapshot.values, known: all, entity: object.entity)
            }
            unregister(object.objectID)
            object.state = .invalid
        }
        return deletedValues
    }

    // MARK: Validation

    private func validateForSave(inserted: [NSManagedObject], updated: [NSManagedObject]) throws {
        // Values `setValue(_:forKey:)` refused, first: the object holds its previous value for them.
        var errors: [CoreDataError] = Self.inStableOrder(rejectedValues.values.map(\.object).filter { $0.state != .invalid })
            .flatMap { object in rejectedValues[ObjectIdentifier(object)]!.errors.sorted { $0.key < $1.key }.map(\.value) }
        // Each object's own checks (subclasses add theirs): stored objects by primary key, then new ones in insertion
        // order (as `inStableOrder` would sort them), then the deleted ones.
        func check(_ object: NSManagedObject, _ validation: () throws -> Void) {
            do {
                try validation()
            } catch let error as CoreDataError {
                errors += error.code == .validationMultipleErrors && !error.underlying.isEmpty ? error.underlying : [error]
            } catch {
                errors.append(
                    CoreDataError(
                        .managedObjectValidation, "\(object.entity.name) \(object.objectID) did not validate: \(error)",
                        entityName: object.entity.name, underlyingError: error))
            }
        }
        for object in updated { check(object) { try object.validateForUpdate() } }
        for object in inserted { check(object) { try object.validateForInsert() } }
        for object in Self.inStableOrder(deletedSet) { check(object) { try object.validateForDelete() } }
        if errors.count == 1 { throw errors[0] }
        if errors.count > 1 {
            throw CoreDataError(
                .validationMultipleErrors,
                "\(errors.count) validation errors: " + errors.map(\.message).joined(separator: " | "), underlying: errors)
        }
    }

}

extension NSManagedObject {
    /// The errors of the object's relationships with the Deny rule that still hold objects (for its deletion).
    func denyRuleErrors() throws -> [CoreDataError] {
        var errors: [CoreDataError] = []
        for relationship in entity.allRelationships where relationship.deleteRule == .denyDeleteRule {
            guard let index = entity.propertyIndex(named: relationship.name) else { continue }
            let live: [NSManagedObject]
            switch try currentValue(at: index) {
            case .toOne(let o): live = o.map { [$0] }?.filter { $0.state != .deleted } ?? []
            case .toMany(let s): live = s.filter { $0.state != .deleted }
            case .attribute: live = []
            }
            if !live.isEmpty {
                errors.append(
                    CoreDataError(
                        .validationRelationshipDeniedDelete,
                        "Cannot delete \(entity.name) \(objectID): its relationship '\(relationship.name)' has the Deny rule and still holds \(live.count) object(s).",
                        entityName: entity.name, key: relationship.name))
            }
        }
        return errors
    }

    /// The errors of the object's property values against their descriptions (for its insertion or update).
    func propertyValidationErrors() throws -> [CoreDataError] {
        var errors: [CoreDataError] = []
        let name = entity.name
        let properties = entity.allProperties
        for index in entity._validatedIndexes {
            let property = properties[index]
            let value = try currentValue(at: index)
            switch value {
            case .attribute(let v):
                if v.isNull, !property.isOptional {
                    errors.append(
                        CoreDataError(
                            .validationMissingMandatoryProperty,
                            "\(name) '\(property.name)' is required but is nil (object \(objectID)).", entityName: name,
                            key: property.name))
                }
            case .toOne(let o):
                if (o == nil || o?.state == .deleted), !property.isOptional {
                    errors.append(
                        CoreDataError(
                            .validationMissingMandatoryProperty,
                            "\(name) '\(property.name)' is a required relationship but is nil (object \(objectID)).",
                            entityName: name, key: property.name))
                }
            case .toMany(let set):
                let r = property as! NSRelationshipDescription
                let count = set.filter { $0.state != .deleted }.count
                let minimum = max(r.minCount, r.isOptional ? 0 : 1)
                if count < minimum, !(r.isOptional && count == 0) {
                    errors.append(
                        CoreDataError(
                            .validationRelationshipLacksMinimumCount,
                            "\(name) '\(r.name)' holds \(count) object(s) but needs at least \(minimum) (object \(objectID)).",
                            entityName: name, key: r.name))
                }
                if r.maxCount > 0, count > r.maxCount {
                    errors.append(
                        CoreDataError(
                            .validationRelationshipExceedsMaximumCount,
                            "\(name) '\(r.name)' holds \(count) objects but allows at most \(r.maxCount) (object \(objectID)).",
                            entityName: name, key: r.name))
                }
            }
        }
        return errors
    }
}
