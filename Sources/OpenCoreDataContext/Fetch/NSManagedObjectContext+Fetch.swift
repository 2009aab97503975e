import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
@_spi(Engine) import OpenCoreDataStore

extension NSManagedObjectContext {
    /// Runs a fetch request.
    ///
    /// Stored rows are filtered and ordered in SQL. With `includesPendingChanges` (the default), objects inserted,
    /// changed or deleted in this context and not yet saved are taken into account by evaluating the same predicate
    /// and sort in memory, so results are what a save followed by the fetch would return; `fetchOffset` and
    /// `fetchLimit` apply to that combined result.
    ///
    /// - Complexity: one SQL query for the stored rows, plus O(p log p) for p pending changes of the entity (evaluated
    ///   and sorted in memory, then merged with the rows).
    /// - Throws: `CoreDataError` for an unknown entity or key, a malformed predicate, a value of the wrong type in
    ///   the predicate, a result type that does not match `ResultType`, or a store failure.
    public func fetch<T>(_ request: NSFetchRequest<T>) throws -> [T] {
        try withLock { try readingPinned { try fetchUnderLock(request) } }
    }

    /// `fetch(_:)`, under the context's lock (and at its query generation, if pinned).
    private func fetchUnderLock<T>(_ request: NSFetchRequest<T>) throws -> [T] {
        processPendingChanges()
        adoptParentsPermanentIDs()
        let entity = try resolveEntity(request)
        switch request.resultType {
        case .countResultType:
            return try [cast(NSNumber(value: count(request, entity: entity)), request)]
        case .dictionaryResultType:
            let store = try requireStore()
            var storeRequest = try makeStoreRequest(request, entity: entity)
            if let query = try request.groupedQuery(for: entity) {
                storeRequest.resultKind = .grouped(query)
                guard case .dictionaries(let rows) = try store.execute(storeRequest) else { return [] }
                return try rows.map { try cast(groupedDictionary($0, query: query, entity: entity), request) }
            }
            storeRequest.resultKind = .dictionaries(try request.propertyKeyPaths(for: entity))
            guard case .dictionaries(let rows) = try store.execute(storeRequest) else { return [] }
            return try rows.map { row in
                let dict = NSMutableDictionary()
                for (key, value) in row {
                    let any: Any?
                    if let attribute = entity.propertiesByName[key] as? NSAttributeDescription {
                        any = try ValueConversion.toAny(value, attribute: attribute, entityName: entity.name)
                    } else {
                        any = try valueForDictionary(value, keyPath: key, entity: entity)
                    }
                    dict[key] = any ?? NSNull()
                }
                return try cast(dict, request)
            }
        case .managedObjectIDResultType:
            return try fetchObjectsOrIDs(request, entity: entity, idsOnly: true).ids.map { try cast($0, request) }
        default:
            let objects = try fetchObjectsOrIDs(request, entity: entity, idsOnly: false).objects
            // A batched fetch's rows load with their batches; the rest prefetch their relationships' rows now.
            if let keyPaths = request.relationshipKeyPathsForPrefetching, !keyPaths.isEmpty, request.fetchBatchSize == 0 {
                try prefetch(keyPaths, of: objects)
            }
            return try objects.map { try cast($0, request) }
        }
    }

    /// The number of objects a fetch would return (pending changes included as in `fetch`).
    public func count<T>(for request: NSFetchRequest<T>) throws -> Int {
        try withLock {
            processPendingChanges()
            adoptParentsPermanentIDs()
            return try readingPinned { try count(request, entity: try resolveEntity(request)) }
        }
    }

    private func count<T>(_ request: NSFetchRequest<T>, entity: NSEntityDescription) throws -> Int {
        if request.includesPendingChanges, mustMergePendingChanges(request, entity: entity) {
            return try fetchObjectsOrIDs(request, entity: entity, idsOnly: true).ids.count
        }
        var storeRequest = try makeStoreRequest(request, entity: entity)
        storeRequest.resultKind = .count
        guard case .count(let n) = try requireStore().execute(storeRequest) else { return 0 }
        return n
    }

    /// A row of computed or grouped columns as Core Data hands it out: attributes' values as `fetch` gives them,
    /// objects as their IDs, computed values as their result type (or their own) has them; `NSNull` for none.
    private func groupedDictionary(
        _ row: [String: AttributeValue], query: StoreFetchRequest.GroupedQuery, entity: NSEntityDescription
    ) throws -> NSMutableDictionary {
        let dict = NSMutableDictionary()
        let coordinator = _parent?.persistentStoreCoordinator ?? _coordinator  // (under this context's lock)
        for column in query.columns {
            let value = row[column.name] ?? .null
            var any: Any?
            if case .keyPath(.evaluatedObject, let path) = column.expression, column.resultType == nil,
                let attribute = try? entity.resolveKeyPath(path.joined(separator: ".")).attribute
            {
                any = try ValueConversion.toAny(value, attribute: attribute, entityName: attribute.entity?.name ?? entity.name)
            } else if case .uri(let url) = value, column.resultType == nil || column.resultType == .objectIDAttributeType {
                // An object (SELF, a to-one relationship): its ID.
                any = coordinator?.managedObjectID(forURIRepresentation: url) ?? url
            } else {
                any = value.foundationValue(as: column.resultType ?? .undefinedAttributeType)
            }
            dict[column.name] = any ?? NSNull()
        }
        return dict
    }

    private func valueForDictionary(_ value: AttributeValue, keyPath: String, entity: NSEntityDescription) throws -> Any? {
        // A key path through relationships: the final attribute's value, or an object ID for a to-one.
        guard let resolution = try? entity.resolveKeyPath(keyPath) else { return nil }
        if let attribute = resolution.attribute {
            return try ValueConversion.toAny(value, attribute: attribute, entityName: attribute.entity?.name ?? entity.name)
        }
        if let relationship = resolution.property as? NSRelationshipDescription, case .integer(let pk) = value,
            let destination = relationship.destinationEntity, let store
        {
            return NSManagedObjectID(entity: destination, storeIdentifier: store.storeIdentifier(for: destination), primaryKey: pk)
        }
        return nil
    }

    private func cast<T>(_ value: some AnyObject, _ request: NSFetchRequest<T>) throws -> T {
        guard let result = value as? T else {
            throw CoreDataError(
                .invalidFetchRequest,
                "The fetch request's result type is \(T.self), but with resultType \(request.resultType.rawValue) it returns \(type(of: value)); declare NSFetchRequest<\(type(of: value))>.",
                entityName: request.entity?.name ?? request.entityName)
        }
        return result
    }

    func resolveEntity<T>(_ request: NSFetchRequest<T>) throws -> NSEntityDescription {
        if let entity = request.entity {
            guard let model, model.entities.contains(where: { $0 === entity }) else {
                throw CoreDataError(
                    .unknownEntity, "The fetch request's entity '\(entity.name)' is not from this context's model.", entityName: entity.name
                )
            }
            return entity
        }
        guard let name = request.entityName else {
            throw CoreDataError(.invalidFetchRequest, "The fetch request names no entity: set entityName or entity.")
        }
        return try self.entity(named: name)
    }

    func makeStoreRequest<T>(_ request: NSFetchRequest<T>, entity: NSEntityDescription) throws -> StoreFetchRequest {
        guard request.fetchLimit >= 0, request.fetchOffset >= 0, request.fetchBatchSize >= 0 else {
            throw CoreDataError(
                .invalidFetchRequest,
                "fetchLimit (\(request.fetchLimit)), fetchOffset (\(request.fetchOffset)) and fetchBatchSize (\(request.fetchBatchSize)) must not be negative.",
                entityName: entity.name)
        }
        var storeRequest = StoreFetchRequest(entity: entity)
        storeRequest.includesSubentities = request.includesSubentities
        storeRequest.predicate = request.predicate
        storeRequest.sortDescriptors = request.sortDescriptors ?? []
        storeRequest.fetchLimit = request.fetchLimit
        storeRequest.fetchOffset = request.fetchOffset
        storeRequest.returnsDistinctResults = request.returnsDistinctResults
        storeRequest.affectedStores = request.affectedStores.map { Set($0.map(\.identifier)) }
        return storeRequest
    }

    private func isKind(_ object: NSManagedObject, of entity: NSEntityDescription, includesSubentities: Bool) -> Bool {
        includesSubentities ? object.entity.isKindOf(entity: entity) : object.entity === entity
    }

    /// Whether a request's predicate or sort descriptors read through a relationship (`department.name`,
    /// `ANY employees.x`, `SUBQUERY(projects, …)`).
    func readsRelationships<T>(_ request: NSFetchRequest<T>, entity: NSEntityDescription) -> Bool {
        var paths = (request.sortDescriptors ?? []).map(\.key)
        if let predicate = request.predicate { paths += predicate.referencedKeyPaths }
        return paths.contains { path in
            guard let first = path.split(separator: ".").first else { return false }
            return entity.relationshipsByName[String(first)] != nil
        }
    }

    /// Whether objects of other entities have pending changes (which a relationship key path may read).
    func hasPendingChangesOutside(_ entity: NSEntityDescription, includesSubentities: Bool) -> Bool {
        insertedSet.contains { !isKind($0, of: entity, includesSubentities: includesSubentities) }
            || deletedSet.contains { !isKind($0, of: entity, includesSubentities: includesSubentities) }
            || changedSet.contains { $0.state == .stored && !isKind($0, of: entity, includesSubentities: includesSubentities) }
    }

    func hasPendingChanges(for entity: NSEntityDescription, includesSubentities: Bool) -> Bool {
        insertedSet.contains { isKind($0, of: entity, includesSubentities: includesSubentities) }
            || deletedSet.contains { isKind($0, of: entity, includesSubentities: includesSubentities) }
            || changedSet.contains { $0.state == .stored && isKind($0, of: entity, includesSubentities: includesSubentities) }
    }

    /// Whether a fetch must combine stored rows with pending changes in memory.
    func mustMergePendingChanges<T>(_ request: NSFetchRequest<T>, entity: NSEntityDescription) -> Bool {
        hasPendingChanges(for: entity, includesSubentities: request.includesSubentities)
            || (readsRelationships(request, entity: entity)
                && hasPendingChangesOutside(entity, includesSubentities: request.includesSubentities))
    }

    struct FetchOutcome {
        var objects: [NSManagedObject] = []
        var ids: [NSManagedObjectID] = []
    }

    func fetchObjectsOrIDs<T>(_ request: NSFetchRequest<T>, entity: NSEntityDescription, idsOnly: Bool) throws -> FetchOutcome {
        let store = try requireStore()
        var storeRequest = try makeStoreRequest(request, entity: entity)
        let sub = request.includesSubentities
        if request.includesPendingChanges, mustMergePendingChanges(request, entity: entity) {
            // Stored rows, minus the objects changed here (they are judged in memory), plus matching pending objects.
            // When the request reads through relationships and related objects have pending changes, a stored row's
            // answer may have changed too: then every row is judged in memory.
            let relatedPending =
                readsRelationships(request, entity: entity) && hasPendingChangesOutside(entity, includesSubentities: sub)
            let excluded = Set(
                changedSet.filter { $0.state == .stored && isKind($0, of: entity, includesSubentities: sub) }.map(\.objectID)
                    + deletedSet.filter { isKind($0, of: entity, includesSubentities: sub) }.map(\.objectID))
            if relatedPending {
                try _ = store.execute(storeRequest.validatingOnly())  // still reject a bad predicate or sort up front
                storeRequest.predicate = nil
                storeRequest.sortDescriptors = []
                storeRequest.fetchLimit = 0
            } else if request.fetchLimit > 0 {
                // Enough rows to fill the window after pending changes are applied; a sum past Int.max means "all".
                let (rows, overflow) = request.fetchOffset.addingReportingOverflow(request.fetchLimit)
                let (limit, overflowAgain) = rows.addingReportingOverflow(excluded.count)
                storeRequest.fetchLimit = overflow || overflowAgain ? 0 : limit
            }
            storeRequest.fetchOffset = 0
            storeRequest.resultKind = .rows
            guard case .rows(let rows) = try store.execute(storeRequest) else { return FetchOutcome() }
            var objects = rows.filter { !excluded.contains($0.objectID) }.map { materialize($0) }
            if relatedPending, let predicate = request.predicate { objects = try objects.filter { try predicate.evaluate(with: $0) } }
            let candidates = insertedSet.filter { isKind($0, of: entity, includesSubentities: sub) }
                .union(changedSet.filter { $0.state == .stored && isKind($0, of: entity, includesSubentities: sub) })
            for object in Self.inStableOrder(candidates) {
                if try request.predicate?.evaluate(with: object) ?? true { objects.append(object) }
            }
            objects = try sortInMemory(objects, by: request.sortDescriptors ?? [])
            var window = objects.dropFirst(request.fetchOffset)
            if request.fetchLimit > 0 { window = window.prefix(request.fetchLimit) }
            let result = Array(window)
            return FetchOutcome(objects: result, ids: result.map(\.objectID))
        }
        if idsOnly {
            storeRequest.resultKind = .objectIDs
            guard case .objectIDs(let ids) = try store.execute(storeRequest) else { return FetchOutcome() }
            return FetchOutcome(ids: ids)
        }
        if request.fetchBatchSize > 0 {
            storeRequest.resultKind = .objectIDs
            guard case .objectIDs(let ids) = try store.execute(storeRequest) else { return FetchOutcome() }
            let group = BatchFaultGroup(objectIDs: ids, batchSize: request.fetchBatchSize)
            reserveRegistryCapacity(ids.count)
            let fresh = holdsNoStoredObjects
            let objects = ids.enumerated().map { position, id in batchFault(for: id, in: group, at: position, fresh: fresh) }
            return FetchOutcome(objects: objects, ids: ids)
        }
        if let keys = try request.partialKeys(for: entity), let objects = try fetchPartially(storeRequest, keys: keys) {
            return FetchOutcome(objects: objects, ids: objects.map(\.objectID))
        }
        storeRequest.resultKind = .rows
        guard case .rows(let rows) = try store.execute(storeRequest) else { return FetchOutcome() }
        let objects = rows.map { materialize($0) }
        return FetchOutcome(objects: objects, ids: objects.map(\.objectID))
    }

    /// The object for a batched fetch's result at `position`: if it is a fault, its row loads with its batch.
    private func batchFault(for id: NSManagedObjectID, in group: BatchFaultGroup, at position: Int, fresh: Bool) -> NSManagedObject {
        let object = fresh ? adoptFault(id) : self.object(with: id)
        if object.snapshot == nil { object.faultSource = .batch(group, position: position) }
        return object
    }

    /// Stored objects by primary key, then unsaved objects in insertion order: the store's tie-break, in memory.
    static func stableOrder(_ a: NSManagedObject, _ b: NSManagedObject) -> Bool {
        stableKey(a) < stableKey(b)
    }

    /// Stored objects by primary key, then unsaved ones in insertion order.
    static func stableKey(_ object: NSManagedObject) -> (Int8, Int64) {
        object.objectID.isTemporaryID ? (1, Int64(object.insertionOrder)) : (0, object.objectID.primaryKey)
    }

    /// The objects in `stableOrder`, sorted by precomputed keys: comparing the objects themselves retains and
    /// releases them at every comparison, which dominated saves of 50,000 objects.
    static func inStableOrder<C: Collection<NSManagedObject>>(_ objects: C) -> [NSManagedObject] {
        let list = Array(objects)
        let keys = list.map(stableKey)
        let order = list.indices.sorted { i, j in
            if keys[i] != keys[j] { return keys[i] < keys[j] }
            return list[i].entity.name < list[j].entity.name
        }
        return order.map { list[$0] }
    }

    /// Merges two lists that are each in stable order (an object in both appears once).
    static func mergedInStableOrder(_ a: [NSManagedObject], _ b: ArraySlice<NSManagedObject>) -> [NSManagedObject] {
        if a.isEmpty { return Array(b) }
        if b.isEmpty { return a }
        var merged: [NSManagedObject] = []
        merged.reserveCapacity(a.count + b.count)
        var (i, j) = (a.startIndex, b.startIndex)
        while i < a.endIndex, j < b.endIndex {
            if a[i] === b[j] {
                merged.append(a[i])
                i += 1
                j += 1
            } else if stableOrder(b[j], a[i]) {
                merged.append(b[j])
                j += 1
            } else {
                merged.append(a[i])
                i += 1
            }
        }
        merged.append(contentsOf: a[i...])
        merged.append(contentsOf: b[j...])
        return merged
    }

    /// Sorts objects in memory exactly as the store's ORDER BY does.
    func sortInMemory(_ objects: [NSManagedObject], by sorts: [FetchSortDescriptor]) throws -> [NSManagedObject] {
        let keyed = try objects.map { object in (object, try sorts.map { try sortValue(of: object, $0.keyPathComponents) }) }
        return keyed.sorted { a, b in
            for (i, sort) in sorts.enumerated() {
                let c = FetchSortDescriptor.compare(a.1[i], b.1[i], sort.comparison)
                if c != 0 { return sort.ascending ? c < 0 : c > 0 }
            }
            return Self.stableOrder(a.0, b.0)
        }.map(\.0)
    }

    /// The value a sort key path has for an object (to-one destinations sort by primary key).
    func sortValue(of object: NSManagedObject, _ components: [String]) throws -> AttributeValue {
        // The usual key, an attribute of the object itself: no walk (and no hold on the object for it).
        if components.count == 1, let index = object.entity.propertyIndex(named: components[0]),
            case .attribute(let value) = try object.currentValue(at: index)
        {
            return value
        }
        var current: NSManagedObject? = object
        for (i, key) in components.enumerated() {
            guard let o = current else { return .null }
            guard let index = o.entity.propertyIndex(named: key) else { throw o.unknownKey(key, in: components.joined(separator: ".")) }
            switch try o.currentValue(at: index) {
            case .attribute(let v):
                if i == components.count - 1 { return v }
                // An element of a composite (`address.number`), as its column sorts it.
                guard o.entity.allProperties[index].isComposite else { return .null }
                let element = try o.compositeElement(named: key, at: components[(i + 1)...])
                return element is [String: Any] ? .null : AttributeValue(any: element) ?? .null
            case .toOne(let next):
                if i == components.count - 1 { return next.map { .integer($0.objectID.primaryKey) } ?? .null }
                current = next
            case .toMany:
                throw CoreDataError(
                    .invalidFetchRequest, "Sort key '\(components.joined(separator: "."))' goes through the to-many relationship '\(key)'.",
                    entityName: o.entity.name, key: components.joined(separator: "."))
            }
        }
        return .null
    }
}

extension NSManagedObject {
    /// The value a sort key path has for this object, as fetches sort it (a to-one destination sorts by primary key).
    ///
    /// For fetched results controllers.
    package func _sortValue(forKeyPath components: [String]) throws -> AttributeValue {
        try withContext {
            guard let context = managedObjectContext else { return .null }
            return try context.sortValue(of: self, components)
        }
    }

    /// `_sortValue(forKeyPath:)` of each key path, read under one hold of the context (a controller places an object
    /// by all its sort keys at once).
    package func _sortValues(forKeyPaths paths: [[String]]) throws -> [AttributeValue] {
        try withContext {
            guard let context = managedObjectContext else { return Array(repeating: .null, count: paths.count) }
            var values: [AttributeValue] = []
            values.reserveCapacity(paths.count)
            for components in paths { values.append(try context.sortValue(of: self, components)) }
            return values
        }
    }

    /// The store's tie-break between objects whose sort keys are equal, as a key: (0, primary key) for a stored
    /// object, (1, insertion order) for an unsaved one.
    package var _storeOrderKey: (Int8, Int64) { NSManagedObjectContext.stableKey(self) }

    /// Whether the object is still alive in its context (not deleted, not invalidated).
    package var _isLive: Bool { withContext { state == .stored || state == .inserted } }
}

extension NSManagedObjectContext {
    /// For fetched results controllers: hands each result's entity number (`NSEntityDescription.entityID`; see
    /// `NSManagedObjectModel.entity(withID:)`) and primary key, with the values of `keyPaths` read in the same SQL
    /// query, to `body` in result order, without making objects or reading whole rows (the values are valid only
    /// during the call: copy what you keep).
    ///
    /// Returns false when pending changes have to be merged in memory; then fetch
    /// normally.
    package func _fetchResultKeys(
        _ request: NSFetchRequest<NSManagedObject>, values keyPaths: [String],
        _ body: (_ entityID: Int, _ primaryKey: Int64, _ values: ResultKeyValues) -> Void
    ) throws -> Bool {
        try withLock {
            processPendingChanges()
            let entity = try resolveEntity(request)
            if request.includesPendingChanges, mustMergePendingChanges(request, entity: entity) { return false }
            // A child's results include its parent's new objects, which have no primary key yet: fetch objects.
            if _parent != nil { return false }
            let storeRequest = try makeStoreRequest(request, entity: entity)
            let store = try requireStore()
            // Results from several stores are merged from whole fetches.
            if let router = store as? StoreRouter, router.fetchTargets(storeRequest).count > 1 { return false }
            try readingPinned { try store.forEachResultKey(storeRequest, values: keyPaths, body) }
            return true
        }
    }

    /// For fetched results controllers: the objects of `ids`, in order.
    ///
    /// Those this context does not hold yet come as
    /// faults that load together: touching one reads every one of them still a fault in one SQL statement.
    package func _batchFaults(for ids: [NSManagedObjectID]) -> [NSManagedObject] {
        withLock {
            let group = BatchFaultGroup(objectIDs: ids, batchSize: Swift.max(1, ids.count))
            return ids.enumerated().map { position, id in batchFault(for: id, in: group, at: position, fresh: false) }
        }
    }

    /// The value `value(forKey:)` returns for an attribute value of the given type (`NSNumber`, `String`, `Date`, …).
    package static func _objectValue(_ value: AttributeValue, type: NSAttributeType) -> Any? {
        ValueConversion.toAny(value, type: type)
    }
}

extension NSManagedObjectContext {
    /// For fetched results controllers: the identifier of the store whose object IDs results of `entity` carry (the
    /// first store holding it, when the coordinator has several).
    package func _storeIdentifier(for entity: NSEntityDescription) -> String {
        store?.storeIdentifier(for: entity) ?? ""
    }

    /// For fetched results controllers: whether a fetch of `entity` reads more than one store.
    package func _readsSeveralStores(entity: NSEntityDescription, includesSubentities: Bool) -> Bool {
        guard let router = _coordinator?.contextStore as? StoreRouter else { return false }
        var request = StoreFetchRequest(entity: entity)
        request.includesSubentities = includesSubentities
        return router.fetchTargets(request).count > 1
    }
}
