import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

// Nested contexts, the parent's side: what a child reads through this context (its current state, unsaved changes
// included) and how a child's save becomes this context's pending changes. Every method runs under the lock (the
// child's `ParentContextStore` takes it).
extension NSManagedObjectContext {
    /// Whether a save posted by another context is one this context merges when it merges automatically: a child
    /// merges its parent's saves and its siblings' saves into the parent; a context on a coordinator merges saves
    /// that reached the store.
    ///
    /// Called while the saving context holds its lock: it takes only `mergeLink`, never this context's lock.
    func mergesAutomatically(_ payload: SavePayload) -> Bool {
        if let parent = mergeLink.withLock({ mergeParent }) { return payload.target === parent || payload.sourceContext === parent }
        return !payload.isIntoParent
    }

    /// The ID under which this context knows an object a child names: a temporary ID this context's save replaced
    /// becomes the permanent one.
    func resolvedForChild(_ id: NSManagedObjectID) -> NSManagedObjectID {
        guard id.isTemporaryID, !formerTemporaryIDs.isEmpty else { return id }
        return formerTemporaryIDs[id] ?? id
    }

    /// A child context's objects that its parent (or a context above it) has saved since, and so knows by permanent
    /// IDs now, take those IDs here too, as a save here would give them: otherwise a fetch here, which gets the
    /// permanent ID from the parent, would make a second object for the same row beside the one the child holds.
    /// (Core Data leaves the child's object under its temporary ID and hands out the duplicate.)
    ///
    /// Called under the lock, before a fetch or a save; costs one look at the parent unless the parent's saves have
    /// replaced temporary IDs since the last call.
    func adoptParentsPermanentIDs() {
        guard let parent = _parent else { return }
        let renamed: [NSManagedObjectID: NSManagedObjectID] = parent.withLock {
            parent.adoptParentsPermanentIDs()
            guard parent.formerTemporaryIDs.count != seenParentRenames else { return [:] }
            seenParentRenames = parent.formerTemporaryIDs.count
            var renamed: [NSManagedObjectID: NSManagedObjectID] = [:]
            for object in registry.objects where object.objectID.isTemporaryID && !object.wasNewWhenDeleted {
                let permanent = parent.resolvedForChild(object.objectID)
                if permanent != object.objectID { renamed[object.objectID] = permanent }
            }
            return renamed
        }
        if !renamed.isEmpty { rename(renamed) }
    }

    /// A child's fetch: the store's answer when nothing pending here can change it, else this context's own fetch
    /// (pending changes merged) in the store's terms.
    func childFetch(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        processPendingChanges()
        let store = try requireStore()
        let fetch = NSFetchRequest<NSManagedObject>(entityName: request.entity.name)
        fetch.entity = request.entity
        fetch.includesSubentities = request.includesSubentities
        fetch.predicate = request.predicate
        fetch.sortDescriptors = request.sortDescriptors
        fetch.fetchLimit = request.fetchLimit
        fetch.fetchOffset = request.fetchOffset
        fetch.returnsDistinctResults = request.returnsDistinctResults
        guard mustMergePendingChanges(fetch, entity: request.entity) else { return try store.execute(request) }
        switch request.resultKind {
        case .grouped:
            // Computed and grouped dictionaries read the store alone (Core Data leaves pending changes out of them).
            return try store.execute(request)
        case .count: return .count(try fetchObjectsOrIDs(fetch, entity: request.entity, idsOnly: true).ids.count)
        case .objectIDs: return .objectIDs(try fetchObjectsOrIDs(fetch, entity: request.entity, idsOnly: true).ids)
        case .rows: return .rows(try fetchObjectsOrIDs(fetch, entity: request.entity, idsOnly: false).objects.map(childSnapshot))
        case .dictionaries(let keyPaths):
            // Every matching object's values, then distinct rows, then the window (as the store applies them).
            fetch.fetchLimit = 0
            fetch.fetchOffset = 0
            var rows: [[String: AttributeValue]] = []
            var seen: Set<[String: AttributeValue]> = []
            for object in try fetchObjectsOrIDs(fetch, entity: request.entity, idsOnly: false).objects {
                var row: [String: AttributeValue] = [:]
                for path in keyPaths { row[path] = try sortValue(of: object, path.split(separator: ".").map(String.init)) }
                if !request.returnsDistinctResults || seen.insert(row).inserted { rows.append(row) }
            }
            var window = rows.dropFirst(request.fetchOffset)
            if request.fetchLimit > 0 { window = window.prefix(request.fetchLimit) }
            return .dictionaries(Array(window))
        }
    }

    /// An object's state here as a row: its stored row when it has no pending change, else its current values.
    func childSnapshot(_ object: NSManagedObject) throws -> RowSnapshot {
        if object.state == .stored, object.changes.isEmpty {
            if object.snapshot == nil { try object.fulfillFault() }
            if let snapshot = object.snapshot { return snapshot }
        }
        return RowSnapshot(objectID: object.objectID, version: object.snapshot?.version ?? 0, values: try object.currentRowValues())
    }

    /// The rows a child asks for, keyed by the IDs it asked with: objects this context holds as they are here (those
    /// deleted here are absent), the others from this context's store.
    func childRows(_ ids: [NSManagedObjectID]) throws -> [NSManagedObjectID: RowSnapshot] {
        var rows: [NSManagedObjectID: RowSnapshot] = [:]
        var unread: [NSManagedObjectID: NSManagedObjectID] = [:]  // by the ID here, the ID the child asked with
        for asked in ids {
            let id = resolvedForChild(asked)
            guard let object = registry[id] else {
                if !id.isTemporaryID || _parent != nil { unread[id] = asked }
                continue
            }
            switch object.state {
            case .stored where object.changes.isEmpty && object.snapshot == nil: unread[id] = asked
            case .stored, .inserted: rows[asked] = try childSnapshot(object).renamed(asked)
            default: continue
            }
        }
        if !unread.isEmpty {
            for (id, row) in try requireStore().rows(for: Array(unread.keys)) {
                if let asked = unread[id] { rows[asked] = row.renamed(asked) }
            }
        }
        return rows
    }

    /// The destinations a child sees for a to-many: the current members here (unsaved changes included, objects
    /// deleted here left out), in order for an ordered relationship.
    func childRelatedObjectIDs(of asked: NSManagedObjectID, _ relationship: NSRelationshipDescription) throws -> [NSManagedObjectID] {
        let id = resolvedForChild(asked)
        guard let object = registry[id], let index = object.entity.propertyIndex(named: relationship.name) else {
            return try requireStore().relatedObjectIDs(of: id, relationship: relationship)
        }
        switch object.state {
        case .stored, .inserted: break
        default: return []
        }
        if object.state == .stored, object.changes[index] == nil {
            return try object.committedToMany(at: index).filter { registry[$0].map { $0.state != .deleted } ?? true }
        }
        let members: [NSManagedObject]
        if relationship.isOrdered {
            members = try object.orderedMembers(at: index)
        } else if case .toMany(let set) = try object.currentValue(at: index) {
            members = set.sorted { $0.objectID < $1.objectID }
        } else {
            members = []
        }
        return members.filter { $0.state != .deleted }.map(\.objectID)
    }

    /// A child's save, applied here as changes made here (this context's observers and fetched results controllers
    /// report them; the next save here writes them): new objects keep the child's IDs, changed properties take the
    /// child's values, inverses are kept, deletions run their rules.
    ///
    /// - Throws: `CoreDataError(.objectNotFound)`, before anything is applied, when an object the child changes or
    ///   deletes is gone here (deleted here, or from the store).
    func applyChildSave(_ request: StoreSaveRequest) throws -> StoreSaveResult {
        processPendingChanges()
        let new = Set(request.inserts.map(\.objectID))
        try requireLiveForChild(
            (request.updates.map(\.objectID) + request.deletes.map(\.objectID) + request.linkChanges.map(\.source)).filter {
                !new.contains($0)
            })
        var inserted: [NSManagedObject] = []
        inserted.reserveCapacity(request.inserts.count)
        for insert in request.inserts {
            let object = instantiate(insert.objectID.entity)
            attachInserted(object, as: insert.objectID)
            inserted.append(object)
        }
        for (insert, object) in zip(request.inserts, inserted) {
            try setChildValues(insert.values.enumerated().map { ($0.offset, $0.element) }, of: object)
        }
        for update in request.updates {
            try setChildValues(update.changes.map { ($0.key, $0.value) }, of: object(with: resolvedForChild(update.objectID)))
        }
        for link in request.linkChanges {
            let source = object(with: resolvedForChild(link.source))
            guard let index = source.entity.propertyIndex(named: link.relationship.name),
                case .toMany(var members) = try source.currentValue(at: index)
            else { continue }
            let destination = object(with: resolvedForChild(link.destination))
            let changed = link.isInsert ? members.insert(destination).inserted : members.remove(destination) != nil
            if changed { try source.setPropertyValue(.toMany(members), at: index) }
        }
        for order in request.orderChanges {
            let source = object(with: resolvedForChild(order.source))
            guard let index = source.entity.propertyIndex(named: order.relationship.name) else { continue }
            try source.setOrderedMembers(order.destinations.map { object(with: resolvedForChild($0)) }, at: index)
        }
        for deletion in request.deletes { delete(object(with: resolvedForChild(deletion.objectID))) }
        processPendingChanges()
        var updatedRows: [NSManagedObjectID: RowSnapshot] = [:]
        for update in request.updates {
            if let object = registry[resolvedForChild(update.objectID)], object.state == .stored || object.state == .inserted {
                updatedRows[update.objectID] = try childSnapshot(object).renamed(update.objectID)
            }
        }
        return StoreSaveResult(insertedRows: try inserted.map(childSnapshot), updatedRows: updatedRows)
    }

    /// Throws, naming the first, when an object of `ids` is neither live here nor stored.
    private func requireLiveForChild(_ ids: [NSManagedObjectID]) throws {
        var unregistered: [NSManagedObjectID] = []
        for asked in Set(ids) {
            let id = resolvedForChild(asked)
            if let object = registry[id] {
                guard object.state == .stored || object.state == .inserted else { throw goneForChild(asked, deletedHere: true) }
            } else if !id.isTemporaryID || _parent != nil {
                unregistered.append(id)
            } else {
                throw goneForChild(asked, deletedHere: false)
            }
        }
        guard !unregistered.isEmpty else { return }
        let found = try requireStore().rows(for: unregistered)
        if let missing = unregistered.first(where: { found[$0] == nil }) { throw goneForChild(missing, deletedHere: false) }
    }

    private func goneForChild(_ id: NSManagedObjectID, deletedHere: Bool) -> CoreDataError {
        CoreDataError(
            .objectNotFound,
            "The child context's save changes \(id.entity.name) \(id.uriRepresentation().absoluteString), which "
                + (deletedHere ? "its parent context has deleted" : "is no longer in its parent context or the store")
                + "; nothing was saved into the parent.",
            entityName: id.entity.name)
    }

    /// Sets properties of an object from a child's save: attributes (transient ones stay in the child), to-ones
    /// (their inverses kept); to-manys arrive as link changes.
    private func setChildValues(_ values: [(Int, SnapshotValue)], of object: NSManagedObject) throws {
        let transient = object.entity._transientIndexes
        for (index, value) in values {
            switch value {
            case .attribute(let attribute):
                if !transient.contains(index) { try object.setAttribute(attribute, at: index) }
            case .toOne(let id):
                let destination = id.map { self.object(with: resolvedForChild($0)) }
                if case .toOne(let current) = try object.currentValue(at: index), current === destination { continue }
                try object.setPropertyValue(.toOne(destination), at: index)
            case .toMany: continue
            }
        }
    }

    /// Permanent IDs a child obtains: reserved in the store (through every parent), and taken on here by the objects
    /// this context holds under those temporary IDs, so the chain keeps one ID per object.
    func reservePermanentIDsForChild(_ ids: [NSManagedObjectID]) throws -> [NSManagedObjectID] {
        let resolved = ids.map(resolvedForChild)
        let reserved = try requireStore().reservePermanentIDs(for: resolved)
        var renamed: [NSManagedObjectID: NSManagedObjectID] = [:]
        for (old, new) in zip(resolved, reserved) where old != new {
            if let object = registry[old], object.state == .inserted { renamed[old] = new }
        }
        if !renamed.isEmpty { rename(renamed) }
        return reserved
    }

    /// Gives objects this context holds new IDs (temporary → permanent), telling observers as a save does.
    func rename(_ ids: [NSManagedObjectID: NSManagedObjectID]) {
        for (old, new) in ids {
            guard let object = registry[old] else { continue }
            unregister(old)
            object.objectID = new
            // The row it holds names it too (a child reads it out as the object's row).
            object.snapshot = object.snapshot?.renamed(new)
            register(object)
            if hasChildContexts { formerTemporaryIDs[old] = new }
        }
        if _parent != nil { renameReferences(ids) }
        var change = ContextChange(origin: .localEdits)
        change.objectIDChanges = ids
        deliver(change)
    }

    /// A child's rows and loaded to-many memberships may name its parent's objects by the IDs just replaced: they
    /// name them by the new ones, so that a save compares like with like (a membership read under a temporary ID
    /// would otherwise look removed, and its new ID added).
    private func renameReferences(_ ids: [NSManagedObjectID: NSManagedObjectID]) {
        for holder in toManyHolders.values {
            guard let object = holder.object else { continue }
            for (index, members) in object.toManyCommitted where members.contains(where: { ids[$0] != nil }) {
                object.toManyCommitted[index] = members.map { ids[$0] ?? $0 }
            }
        }
        for object in registry.objects {
            guard var row = object.snapshot else { continue }
            var changed = false
            for (index, value) in row.values.enumerated() {
                if case .toOne(let id?) = value, let new = ids[id] {
                    row.values[index] = .toOne(new)
                    changed = true
                }
            }
            if changed { object.snapshot = row }
        }
    }

    /// Gives unsaved objects permanent IDs now, reserved in the store, instead of at their save (Core Data's
    /// `obtainPermanentIDs(for:)`): an ID to hand to another context, or to keep, before the object is saved.
    ///
    /// For example:
    /// ```swift
    /// let item = NSEntityDescription.insertNewObject(forEntityName: "Item", into: child)
    /// try child.obtainPermanentIDs(for: [item])
    /// let url = item.objectID.uriRepresentation()   // stays the object's URI after every save
    /// ```
    /// In a child context the IDs are reserved in the root store and the parents' copies of the objects take them too.
    ///
    /// - Throws: `CoreDataError` when the context has no store, or the store cannot reserve keys.
    public func obtainPermanentIDs(for objects: [NSManagedObject]) throws {
        try withLock {
            let temporary = objects.filter { $0.managedObjectContext === self && $0.objectID.isTemporaryID }
            guard !temporary.isEmpty else { return }
            let reserved = try requireStore().reservePermanentIDs(for: temporary.map(\.objectID))
            var renamed: [NSManagedObjectID: NSManagedObjectID] = [:]
            for (object, id) in zip(temporary, reserved) where id != object.objectID { renamed[object.objectID] = id }
            rename(renamed)
        }
    }
}

extension RowSnapshot {
    /// The same row under another ID of the same object (the ID a child knows it by).
    func renamed(_ id: NSManagedObjectID) -> RowSnapshot {
        id == objectID ? self : RowSnapshot(objectID: id, version: version, values: values)
    }
}
