import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Where an object sits: the values of its sort keys and its section name, as of the last batch reported.
struct Placement: Equatable {
    var values: [AttributeValue]
    var section: String
}

/// A weak reference to an engine that can cross to the context's queue (only dereferenced there).
private final class WeakEngine: @unchecked Sendable {
    weak var engine: ResultsEngine?
    init(_ engine: ResultsEngine) { self.engine = engine }
}

/// The fetched results and their sections, kept up to date from the context's change batches.
///
/// Objects are kept sorted in a `ChunkedArray`; each object's placement (sort values, section name) is remembered, so
/// an object whose values changed is found by binary search on what it *was*, and re-inserted by binary search on
/// what it *is*. Processing k changed objects costs O(k log n) comparisons, plus moving at most one chunk and one
/// integer per chunk and per section for each, and issues no SQL when the objects are in memory. Where the engine
/// cannot place a change (limit and offset windows, a reset, a section that would split in two), it re-fetches and
/// diffs object IDs instead.
final class ResultsEngine {
    let context: NSManagedObjectContext
    let entity: NSEntityDescription
    var predicate: FetchPredicate?
    var sorts: [FetchSortDescriptor] {
        didSet { sortKeyPaths = sorts.map(\.keyPathComponents) }
    }
    /// Each sort's key path, split once (placing an object reads them for every change).
    private var sortKeyPaths: [[String]]
    let sectionKeyPath: String?
    /// Whether the section key path is a single key (read with `value(forKey:)`, no path to split).
    private let sectionKeyIsKey: Bool
    var includesSubentities: Bool
    var fetchLimit: Int
    var fetchOffset: Int
    let makeRequest: () -> NSFetchRequest<NSManagedObject>
    /// The section cache's name, or nil for none.
    var cacheName: String?
    /// Whether the last `performFetch` used the cache (for tests).
    private(set) var usedCache = false
    /// Saves or merges changed the results since the cache was last written; a write is scheduled.
    private(set) var cacheIsDirty = false
    /// How long after a save or merge the cache is written: a burst of saves costs one write.
    static let cacheWriteDelay: DispatchTimeInterval = .milliseconds(500)

    /// The results in order, in chunks so that a change moves a few hundred pointers, not the whole tail.
    private(set) var objects = ChunkedArray<NSManagedObject>()
    private var placements: [ObjectIdentifier: Placement] = [:]
    private(set) var sectionNames: [String] = []
    private(set) var sectionCounts: [Int] = []
    private var sectionStarts: [Int] = []
    private var observation: ContextObservation?
    /// Called with each batch, after the engine's state reflects it.
    var onBatch: ((ChangeBatch<ObjectIdentifier>, [ObjectIdentifier: NSManagedObject]) -> Void)?
    private(set) var isFetched = false
    /// Full re-fetches done because a change could not be placed (for tests and benchmarks).
    private(set) var fullRefetches = 0
    /// Apply every batch in passes over all results (tests drive both paths with the same edits); otherwise only
    /// batches that touch at least 64 objects and a sixteenth of the results.
    var alwaysBulk = false
    /// Batches applied in bulk (for tests).
    private(set) var bulkBatches = 0

    init(
        context: NSManagedObjectContext, entity: NSEntityDescription, request: NSFetchRequest<NSManagedObject>,
        sectionKeyPath: String?, makeRequest: @escaping () -> NSFetchRequest<NSManagedObject>
    ) {
        self.context = context
        self.entity = entity
        self.predicate = request.predicate
        self.sorts = request.sortDescriptors ?? []
        self.sortKeyPaths = sorts.map(\.keyPathComponents)
        self.sectionKeyPath = sectionKeyPath
        self.sectionKeyIsKey = sectionKeyPath.map { !$0.contains(".") && entity.propertiesByName[$0] != nil } ?? false
        self.includesSubentities = request.includesSubentities
        self.fetchLimit = request.fetchLimit
        self.fetchOffset = request.fetchOffset
        self.makeRequest = makeRequest
    }

    // MARK: Batched fetching

    /// Results as the cache or a batched fetch give them: objects in order, their placements, their section names.
    typealias Loaded = (objects: ChunkedArray<NSManagedObject>, placements: [ObjectIdentifier: Placement], names: [String])

    /// With a batch size: objects as faults, and their sort values and section names from one SQL query, so that no
    /// row is read until an object is touched. Nil when this cannot be done (pending changes to merge, a section key
    /// path that ends at a relationship); the caller fetches normally.
    private func fetchBatched(_ request: NSFetchRequest<NSManagedObject>) throws -> Loaded? {
        let sectionType = sectionKeyAttributeType
        if sectionKeyPath != nil, sectionType == nil { return nil }
        var keyPaths = sorts.map(\.key)
        // The section key is usually the first sort key: read it once.
        let sectionColumn = sectionKeyPath.map { path in keyPaths.firstIndex(of: path) ?? keyPaths.count }
        if let sectionKeyPath, sectionColumn == keyPaths.count { keyPaths.append(sectionKeyPath) }
        let sortCount = sorts.count
        var list = ChunkedArray<NSManagedObject>()
        var places: [ObjectIdentifier: Placement] = [:]
        var names: [String] = []
        var previous: (value: AttributeValue, name: String)?
        let handled = try context._fetchFaults(
            request, values: keyPaths,
            count: { n in
                places.reserveCapacity(n)
                names.reserveCapacity(n)
            }
        ) { object, values in
            var section = ""
            if let sectionType, let sectionColumn {
                let value = values[sectionColumn]
                // Rows come in section order: most share the previous row's section value.
                if let previous, previous.value == value {
                    section = previous.name
                } else if case .string(let text) = value {
                    section = text
                } else {
                    section = Self.sectionName(for: NSManagedObjectContext._objectValue(value, type: sectionType))
                }
                previous = (value, section)
            }
            list.append(object)
            names.append(section)
            places[ObjectIdentifier(object)] = Placement(
                values: values.count == sortCount ? values : Array(values.prefix(sortCount)), section: section)
        }
        return handled ? (list, places, names) : nil
    }

    // MARK: Section cache

    /// What the results depend on now, or nil when there is no store to key them to.
    private func cacheKey() -> CachedResults.Key? {
        guard let coordinator = context.persistentStoreCoordinator, let store = coordinator.persistentStores.first,
            let token = try? store.changeToken
        else { return nil }
        return CachedResults.Key(
            storeIdentifier: store.identifier, changeToken: token, modelVersionHash: coordinator.managedObjectModel.versionHashString,
            entity: entity.name, predicate: predicate?.predicateFormat ?? "", sorts: sorts.map(\.description),
            sectionKeyPath: sectionKeyPath, includesSubentities: includesSubentities, fetchLimit: fetchLimit, fetchOffset: fetchOffset)
    }

    /// The cached results as faults and placements, when the cache is valid for the request and the store as they
    /// are now (and the context has no unsaved changes); nil otherwise, with no error: the caller recomputes.
    private func loadCache(named name: String, request: NSFetchRequest<NSManagedObject>) -> Loaded? {
        guard !context.hasChanges, let key = cacheKey(), let cached = SectionCache.load(named: name), cached.key == key,
            let model = context.persistentStoreCoordinator?.managedObjectModel,
            let count = try? context.count(for: request), count == cached.count, cached.rows.count == count
        else { return nil }
        var list = ChunkedArray<NSManagedObject>()
        var places: [ObjectIdentifier: Placement] = [:]
        var names: [String] = []
        places.reserveCapacity(count)
        names.reserveCapacity(count)
        for row in cached.rows {
            guard let rowEntity = model.entity(named: row.entity), row.section >= 0, row.section < cached.sectionNames.count,
                row.values.count == sorts.count
            else { return nil }
            let object = context.object(
                with: NSManagedObjectID(entity: rowEntity, storeIdentifier: key.storeIdentifier, primaryKey: row.primaryKey))
            list.append(object)
            names.append(cached.sectionNames[row.section])
            places[ObjectIdentifier(object)] = Placement(values: row.values, section: cached.sectionNames[row.section])
        }
        return (list, places, names)
    }

    /// Marks the cache stale and, unless a write is already scheduled, writes it after `cacheWriteDelay` on the
    /// context's queue (the results are read there); the encoding and the file write happen off that queue.
    private func scheduleCacheWrite() {
        guard !cacheIsDirty else { return }
        cacheIsDirty = true
        let engine = WeakEngine(self)
        let context = self.context
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + Self.cacheWriteDelay) {
            context.perform { engine.engine?.flushCache() }
        }
    }

    /// Writes the cache now if saves or merges changed the results since it was last written.
    func flushCache() {
        guard cacheIsDirty else { return }
        cacheIsDirty = false
        saveCache()
    }

    /// Writes the results to the cache when they are what the store holds (no unsaved changes in the context).
    /// The rows are gathered here; encoding and writing happen on the cache's writer queue.
    func saveCache() {
        guard let cacheName, !context.hasChanges, let key = cacheKey() else { return }
        var sectionIndex: [String: Int] = [:]
        for (i, name) in sectionNames.enumerated() { sectionIndex[name] = i }
        var rows: [CachedResults.Row] = []
        rows.reserveCapacity(objects.count)
        for object in objects {
            guard !object.objectID.isTemporaryID, let placement = placements[ObjectIdentifier(object)],
                let section = sectionIndex[placement.section]
            else { return }
            rows.append(
                CachedResults.Row(
                    entity: object.entity.name, primaryKey: object.objectID.primaryKey, values: placement.values,
                    section: section))
        }
        SectionCache.save(CachedResults(key: key, count: objects.count, sectionNames: sectionNames, rows: rows), named: cacheName)
    }

    // MARK: Related objects

    /// Chains of relationships from the entity that the predicate, sorts or section key read through
    /// (`department.name` → [department]); a change to an object at the end of a chain can move results.
    private(set) var relatedChains: [[NSRelationshipDescription]] = []

    private func computeRelatedChains() {
        var paths = sorts.map(\.key)
        if let sectionKeyPath { paths.append(sectionKeyPath) }
        if let predicate { paths += predicate.referencedKeyPaths }
        var chains: [[NSRelationshipDescription]] = []
        for path in paths {
            var current: NSEntityDescription? = entity
            var chain: [NSRelationshipDescription] = []
            for key in path.split(separator: ".").map(String.init) {
                guard let relationship = current?.relationshipsByName[key] else { break }
                chain.append(relationship)
                current = relationship.destinationEntity
                if !chains.contains(where: { $0.elementsEqual(chain, by: ===) }) { chains.append(chain) }
            }
        }
        relatedChains = chains
    }

    /// The objects of the controller's entity that reach `object` through one of the chains, found by walking inverse
    /// relationships back; nil when a chain has no inverse (then only a re-fetch can tell).
    private func owners(of object: NSManagedObject) -> [NSManagedObject]? {
        var found: [ObjectIdentifier: NSManagedObject] = [:]
        for chain in relatedChains {
            guard let last = chain.last?.destinationEntity, object.entity.isKindOf(entity: last) else { continue }
            var level: [NSManagedObject] = [object]
            for relationship in chain.reversed() {
                guard let inverse = relationship.inverseRelationship else { return nil }
                var next: [NSManagedObject] = []
                for item in level {
                    switch (try? item.value(forKey: inverse.name)) ?? nil {
                    case let one as NSManagedObject: next.append(one)
                    case let many as Set<NSManagedObject>: next.append(contentsOf: many)
                    default: break
                    }
                }
                level = next
            }
            for owner in level where isCandidateKind(owner) { found[ObjectIdentifier(owner)] = owner }
        }
        return Array(found.values)
    }

    // MARK: Fetching

    func performFetch(tracking: Bool) throws {
        let request = makeRequest()
        predicate = request.predicate
        sorts = request.sortDescriptors ?? []
        includesSubentities = request.includesSubentities
        fetchLimit = request.fetchLimit
        fetchOffset = request.fetchOffset
        usedCache = false
        let names: [String]
        if let cacheName, let cached = loadCache(named: cacheName, request: request) {
            objects = cached.objects
            placements = cached.placements
            names = cached.names
            usedCache = true
        } else if request.fetchBatchSize > 0, let batched = try fetchBatched(request) {
            try checkContiguous(batched.names)
            objects = batched.objects
            placements = batched.placements
            names = batched.names
        } else {
            let fetched = try context.fetch(request)
            var newPlacements: [ObjectIdentifier: Placement] = [:]
            newPlacements.reserveCapacity(fetched.count)
            for object in fetched { newPlacements[ObjectIdentifier(object)] = try placement(of: object) }
            names = fetched.map { newPlacements[ObjectIdentifier($0)]!.section }
            try checkContiguous(names)
            objects = ChunkedArray(fetched)
            placements = newPlacements
        }
        rebuildSections(names: names)
        computeRelatedChains()
        isFetched = true
        cacheIsDirty = false
        if !usedCache { saveCache() }
        observation?.cancel()
        observation = nil
        if tracking {
            observation = context.addChangeObserver { [weak self] change in self?.process(change) }
        }
    }

    /// Whether the engine follows the context's changes.
    var isTracking: Bool { observation != nil }

    func stopTracking() {
        observation?.cancel()
        observation = nil
    }

    /// The sort values and section name of an object now.
    func placement(of object: NSManagedObject) throws -> Placement {
        let values = try sortKeyPaths.map { try object._sortValue(forKeyPath: $0) }
        return Placement(values: values, section: try sectionName(of: object))
    }

    func sectionName(of object: NSManagedObject) throws -> String {
        guard let sectionKeyPath else { return "" }
        if sectionKeyIsKey { return Self.sectionName(for: try object.value(forKey: sectionKeyPath)) }
        return Self.sectionName(for: try object.value(forKeyPath: sectionKeyPath))
    }

    /// The attribute type at the end of the section key path, or nil when it ends at a relationship (or is unset).
    var sectionKeyAttributeType: NSAttributeType? {
        guard let sectionKeyPath else { return nil }
        var current: NSEntityDescription? = entity
        let parts = sectionKeyPath.split(separator: ".").map(String.init)
        for (i, part) in parts.enumerated() {
            guard let property = current?.propertiesByName[part] else { return nil }
            if let attribute = property as? NSAttributeDescription { return i == parts.count - 1 ? attribute.attributeType : nil }
            guard let relationship = property as? NSRelationshipDescription, !relationship.isToMany else { return nil }
            current = relationship.destinationEntity
        }
        return nil
    }

    /// A section's name for the value of the section key path.
    static func sectionName(for value: Any?) -> String {
        switch value {
        case nil: return ""
        case let s as String: return s
        case let n as NSNumber: return n.stringValue
        case let d as Decimal: return "\(d)"
        case let o as NSManagedObject: return o.objectID.uriRepresentation().absoluteString
        default: return "\(value!)"
        }
    }

    private func checkContiguous(_ names: [String]) throws {
        guard let sectionKeyPath else { return }
        var seen: Set<String> = []
        var current: String?
        for (i, name) in names.enumerated() {
            if name == current { continue }
            if seen.contains(name) {
                throw CoreDataError(
                    .invalidFetchRequest,
                    "The section key path '\(sectionKeyPath)' does not follow the sort order: section '\(name)' appears again at row \(i) after other sections. Make the first sort descriptor sort by '\(sectionKeyPath)' (or a key with the same order).",
                    entityName: entity.name, key: sectionKeyPath)
            }
            seen.insert(name)
            current = name
        }
    }

    private func rebuildSections() {
        rebuildSections(names: objects.lazy.map { self.placements[ObjectIdentifier($0)]!.section })
    }

    /// Sections from the objects' section names, in result order.
    private func rebuildSections(names: some Sequence<String>) {
        sectionNames = []
        sectionCounts = []
        for name in names {
            if sectionNames.last == name {
                sectionCounts[sectionCounts.count - 1] += 1
            } else {
                sectionNames.append(name)
                sectionCounts.append(1)
            }
        }
        recomputeStarts()
    }

    private func recomputeStarts() {
        sectionStarts = []
        var start = 0
        for count in sectionCounts {
            sectionStarts.append(start)
            start += count
        }
    }

    // MARK: Positions

    /// Whether `a` (with placement `pa`) sorts before `b` under `sorts`. The descriptors are passed in so that loops
    /// comparing many times read `sorts` (a property of this class, checked for exclusive access on each read) once.
    private static func precedes(
        _ pa: Placement, _ a: NSManagedObject, _ pb: Placement, _ b: NSManagedObject, _ sorts: [FetchSortDescriptor]
    ) -> Bool {
        for i in sorts.indices {  // by index: no copy of each descriptor (and its key string) per comparison
            let c = FetchSortDescriptor.compare(pa.values[i], pb.values[i], sorts[i].comparison)
            if c != 0 { return sorts[i].ascending ? c < 0 : c > 0 }
        }
        return NSManagedObject._precedesInStoreOrder(a, b)
    }

    /// The first index whose object does not precede (`placement`, `object`).
    private func insertionIndex(for placement: Placement, _ object: NSManagedObject) -> Int {
        let (sorts, placements) = (self.sorts, self.placements)
        return objects.partitioningIndex { other in !Self.precedes(placements[ObjectIdentifier(other)]!, other, placement, object, sorts) }
    }

    /// The index of an object in the results, found from its remembered placement.
    func index(of object: NSManagedObject) -> Int? {
        guard let placement = placements[ObjectIdentifier(object)] else { return nil }
        let i = insertionIndex(for: placement, object)
        if i < objects.count, objects[i] === object { return i }
        return objects.firstIndex { $0 === object }  // only if the store order of equal keys changed under us
    }

    func indexPath(forIndex index: Int) -> IndexPath {
        var low = 0, high = sectionStarts.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if sectionStarts[mid] <= index { low = mid } else { high = mid - 1 }
        }
        return IndexPath(row: index - sectionStarts[low], section: low)
    }

    func index(forIndexPath path: IndexPath) -> Int? {
        guard path.count == 2, path.section >= 0, path.section < sectionCounts.count, path.row >= 0,
            path.row < sectionCounts[path.section]
        else { return nil }
        return sectionStarts[path.section] + path.row
    }

    // MARK: Tracking

    private func isCandidateKind(_ object: NSManagedObject) -> Bool {
        includesSubentities ? object.entity.isKindOf(entity: entity) : object.entity === entity
    }

    /// Called when objects in the results get permanent IDs (a save), with old → new IDs and positions.
    var onIDChange: (([(index: Int, old: NSManagedObjectID, new: NSManagedObjectID)]) -> Void)?

    func process(_ change: ContextChange) {
        guard isFetched else { return }
        // After this context's save or a merge, the results are what the store holds: keep the cache current.
        defer { if cacheName != nil, change.didSave || change.origin == .merge { scheduleCacheWrite() } }
        if !change.objectIDChanges.isEmpty, let onIDChange {
            var changed: [(index: Int, old: NSManagedObjectID, new: NSManagedObjectID)] = []
            for (old, new) in change.objectIDChanges {
                guard let object = context.registeredObject(for: new), let i = index(of: object) else { continue }
                changed.append((i, old, new))
            }
            if !changed.isEmpty { onIDChange(changed.sorted { $0.index < $1.index }) }
        }
        if change.invalidatedAll {
            refetchAndDiff(updated: [])
            return
        }
        var touched: [ObjectIdentifier: NSManagedObject] = [:]
        var contentChanged: Set<ObjectIdentifier> = []
        var deleted: Set<ObjectIdentifier> = []
        for object in change.inserted where isCandidateKind(object) { touched[ObjectIdentifier(object)] = object }
        for (object, keys) in change.updated where isCandidateKind(object) && !keys.isEmpty {
            touched[ObjectIdentifier(object)] = object
            contentChanged.insert(ObjectIdentifier(object))
        }
        for object in change.deleted where placements[ObjectIdentifier(object)] != nil {
            touched[ObjectIdentifier(object)] = object
            deleted.insert(ObjectIdentifier(object))
        }
        // Objects of other entities that results reach through relationships (`department.name`).
        if !relatedChains.isEmpty {
            for (object, keys) in change.updated where !isCandidateKind(object) && !keys.isEmpty {
                guard let owners = owners(of: object) else {
                    refetchAndDiff(updated: contentChanged)
                    return
                }
                for owner in owners where touched[ObjectIdentifier(owner)] == nil {
                    touched[ObjectIdentifier(owner)] = owner
                    contentChanged.insert(ObjectIdentifier(owner))
                }
            }
        }
        if fetchLimit > 0 || fetchOffset > 0 {
            // A window over the results moves when any object of the entity comes, goes or changes — even one
            // outside the window.
            let relevant = !touched.isEmpty || change.deleted.contains { isCandidateKind($0) }
            if relevant { refetchAndDiff(updated: contentChanged) }
            return
        }
        guard !touched.isEmpty else { return }
        let sectionsBefore = sectionNames
        // Where each belongs now.
        var after: [ObjectIdentifier: Placement] = [:]
        for (id, object) in touched where !deleted.contains(id) && object._isLive {
            do {
                guard try predicate?.evaluate(with: object) ?? true else { continue }
                after[id] = try placement(of: object)
            } catch {
                continue  // an object whose values cannot be read (its row is gone) is no longer a result
            }
        }
        if alwaysBulk || touched.count >= max(64, objects.count / 16) {
            // Many changes at once: one pass over the results costs less than k searches and k moves.
            processInBulk(touched: touched, after: after, contentChanged: contentChanged, sectionsBefore: sectionsBefore)
            return
        }
        // Where each touched object was, before anything moves.
        var before: [ObjectIdentifier: (index: Int, path: IndexPath)] = [:]
        for (id, object) in touched {
            if let i = index(of: object) { before[id] = (i, indexPath(forIndex: i)) }
        }
        // Take out every touched object that was in, then put back those that are in (keeping an undo log).
        var oldPlacements: [ObjectIdentifier: Placement] = [:]
        var removed: [(index: Int, object: NSManagedObject)] = []
        for (id, position) in before.sorted(by: { $0.value.index > $1.value.index }) {
            oldPlacements[id] = placements[id]
            removed.append((position.index, objects[position.index]))
            objects.remove(at: position.index)
            removeFromSection(at: position.index)
            placements.removeValue(forKey: id)
        }
        var inserted: [NSManagedObject] = []
        /// Puts the state back as it was before this batch, then re-fetches and reports the difference.
        func undoAndRefetch() {
            for object in inserted.reversed() {
                let j = index(of: object)!
                objects.remove(at: j)
                placements.removeValue(forKey: ObjectIdentifier(object))
            }
            for (index, object) in removed.reversed() {
                objects.insert(object, at: index)
                placements[ObjectIdentifier(object)] = oldPlacements[ObjectIdentifier(object)]
            }
            rebuildSections()
            refetchAndDiff(updated: contentChanged)
        }
        // Put back from last to first: each insertion lands at or before the earlier ones, shifting each of them by
        // one, so an object's final index is where it went in plus the number inserted after it (no second search).
        let sorts = self.sorts
        let arriving = after.sorted { a, b in Self.precedes(b.value, touched[b.key]!, a.value, touched[a.key]!, sorts) }
        var finalIndex: [ObjectIdentifier: Int] = [:]
        for (k, (id, placement)) in arriving.enumerated() {
            let object = touched[id]!
            placements[id] = placement
            let i = insertionIndex(for: placement, object)
            finalIndex[id] = i + (arriving.count - 1 - k)
            guard insertIntoSection(at: i, name: placement.section) else {
                // The change would split a section.
                placements.removeValue(forKey: id)
                undoAndRefetch()
                return
            }
            objects.insert(object, at: i)
            inserted.append(object)
        }
        if !BatchBuilder.reorderedSections(sectionsBefore, sectionNames).isEmpty {
            // Sections changed order: every row of a re-inserted section must be reported, which the diff does.
            undoAndRefetch()
            return
        }
        reportMovements(
            of: touched, before: before.mapValues(\.path), finalIndex: finalIndex, oldPlacements: oldPlacements, after: after,
            contentChanged: contentChanged, sectionsBefore: sectionsBefore)
    }

    /// Delivers the batch for touched objects, from where they were (`before`) and where they are now (`finalIndex`).
    private func reportMovements(
        of touched: [ObjectIdentifier: NSManagedObject], before: [ObjectIdentifier: IndexPath], finalIndex: [ObjectIdentifier: Int],
        oldPlacements: [ObjectIdentifier: Placement], after: [ObjectIdentifier: Placement], contentChanged: Set<ObjectIdentifier>,
        sectionsBefore: [String]
    ) {
        var movements: [ItemMovement<ObjectIdentifier>] = []
        for id in touched.keys {
            let newPath = finalIndex[id].map(indexPath(forIndex:))
            let oldPath = before[id]
            if oldPath == nil && newPath == nil { continue }
            let keysChanged = oldPath != nil && newPath != nil && oldPlacements[id] != after[id]
            movements.append(
                ItemMovement(id: id, before: oldPath, after: newPath, keysChanged: keysChanged, contentChanged: contentChanged.contains(id))
            )
        }
        deliver(BatchBuilder.batch(sectionsBefore: sectionsBefore, sectionsAfter: sectionNames, items: movements), touched)
    }

    /// Applies a large batch in passes over the results: take the touched objects out while walking the results once
    /// (which also gives their old paths), sort those that are in now, merge them with the rest, and count sections
    /// again. O(n + k log k) instead of O(k log n) searches, each with a dictionary lookup and a value comparison per
    /// step, plus k moves; worth it once k is a sizeable fraction of n.
    private func processInBulk(
        touched: [ObjectIdentifier: NSManagedObject], after: [ObjectIdentifier: Placement], contentChanged: Set<ObjectIdentifier>,
        sectionsBefore: [String]
    ) {
        bulkBatches += 1
        // The arriving objects in result order, sorted with their placements at hand.
        var arriving: [(id: ObjectIdentifier, placement: Placement, object: NSManagedObject)] = after.map {
            ($0.key, $0.value, touched[$0.key]!)
        }
        let sorts = self.sorts
        arriving.sort { Self.precedes($0.placement, $0.object, $1.placement, $1.object, sorts) }
        // One pass over the results: note where touched objects were, leave them out, and merge the arriving ones in.
        var before: [ObjectIdentifier: IndexPath] = [:]
        var merged = ChunkedArray<NSManagedObject>()
        var names: [String] = []
        names.reserveCapacity(objects.count + arriving.count)
        var finalIndex: [ObjectIdentifier: Int] = [:]
        var next = 0
        var (section, row) = (0, 0)
        do {
            // Local copies: no exclusivity check per read of a property of this class (released before
            // `placements` changes below, so it is not copied on write).
            let (placements, sectionCounts) = (self.placements, self.sectionCounts)
            for object in objects {
                while row == sectionCounts[section] { (section, row) = (section + 1, 0) }
                defer { row += 1 }
                let id = ObjectIdentifier(object)
                if touched[id] != nil {
                    before[id] = IndexPath(row: row, section: section)
                    continue
                }
                let placement = placements[id]!
                while next < arriving.count, !Self.precedes(placement, object, arriving[next].placement, arriving[next].object, sorts) {
                    finalIndex[arriving[next].id] = merged.count
                    merged.append(arriving[next].object)
                    names.append(arriving[next].placement.section)
                    next += 1
                }
                merged.append(object)
                names.append(placement.section)
            }
        }
        for (id, placement, object) in arriving[next...] {
            finalIndex[id] = merged.count
            merged.append(object)
            names.append(placement.section)
        }
        // A section may not come back after another one (the sort would split it), and sections may not change
        // order (every row of a moved section would have to be reported): the re-fetch and diff handles both.
        // Both are checked before anything changes, so the diff starts from what the delegate last saw.
        var seen: Set<String> = []
        var sectionsAfter: [String] = []
        for name in names where name != sectionsAfter.last {
            guard seen.insert(name).inserted else {
                refetchAndDiff(updated: contentChanged)
                return
            }
            sectionsAfter.append(name)
        }
        if !BatchBuilder.reorderedSections(sectionsBefore, sectionsAfter).isEmpty {
            refetchAndDiff(updated: contentChanged)
            return
        }
        var oldPlacements: [ObjectIdentifier: Placement] = [:]
        for id in touched.keys {
            oldPlacements[id] = placements[id]
            placements[id] = after[id]
        }
        objects = merged
        rebuildSections(names: names)
        reportMovements(
            of: touched, before: before, finalIndex: finalIndex, oldPlacements: oldPlacements, after: after, contentChanged: contentChanged,
            sectionsBefore: sectionsBefore)
    }

    private func deliver(_ batch: ChangeBatch<ObjectIdentifier>, _ objects: [ObjectIdentifier: NSManagedObject]) {
        guard !batch.isEmpty else { return }
        onBatch?(batch, objects)
    }

    private func removeFromSection(at index: Int) {
        let s = indexPath(forIndex: index).section
        sectionCounts[s] -= 1
        if sectionCounts[s] == 0 {
            sectionCounts.remove(at: s)
            sectionNames.remove(at: s)
        }
        recomputeStarts()
    }

    /// Counts an object inserted at `index` into the section it belongs to; false if that would split a section.
    private func insertIntoSection(at index: Int, name: String) -> Bool {
        let previous = index > 0 ? placements[ObjectIdentifier(objects[index - 1])]?.section : nil
        let next = index < objects.count ? placements[ObjectIdentifier(objects[index])]?.section : nil
        if let previous, previous == name {
            sectionCounts[indexPath(forIndex: index - 1).section] += 1
        } else if let next, next == name {
            sectionCounts[indexPath(forIndex: index).section] += 1
        } else {
            if let previous, let next, previous == next { return false }  // inside another section
            if sectionNames.contains(name) { return false }  // the section exists elsewhere
            let s = index > 0 ? indexPath(forIndex: index - 1).section + 1 : 0
            sectionNames.insert(name, at: s)
            sectionCounts.insert(1, at: s)
        }
        recomputeStarts()
        return true
    }

    // MARK: Fallback: re-fetch and diff

    /// Re-fetches and reports the difference from what the delegate last saw.
    func refetchAndDiff(updated: Set<ObjectIdentifier>) {
        fullRefetches += 1
        let (oldObjects, oldSections, oldCounts, oldPlacements) = (objects, sectionNames, sectionCounts, placements)
        let request = makeRequest()
        guard let fetched = try? context.fetch(request) else { return }
        var newPlacements: [ObjectIdentifier: Placement] = [:]
        for object in fetched {
            if let p = try? placement(of: object) { newPlacements[ObjectIdentifier(object)] = p }
        }
        objects = ChunkedArray(fetched.lazy.filter { newPlacements[ObjectIdentifier($0)] != nil })
        placements = newPlacements
        rebuildSections()

        func paths(_ list: ChunkedArray<NSManagedObject>, _ counts: [Int]) -> [ObjectIdentifier: IndexPath] {
            var result: [ObjectIdentifier: IndexPath] = [:]
            var iterator = list.makeIterator()
            for (s, count) in counts.enumerated() {
                for r in 0..<count { result[ObjectIdentifier(iterator.next()!)] = IndexPath(row: r, section: s) }
            }
            return result
        }
        let oldPaths = paths(oldObjects, oldCounts)
        let newPaths = paths(objects, sectionCounts)
        var all: [ObjectIdentifier: NSManagedObject] = [:]
        for object in [oldObjects, objects].joined() { all[ObjectIdentifier(object)] = object }
        var movements: [ItemMovement<ObjectIdentifier>] = []
        for (id, _) in all {
            let oldPath = oldPaths[id], newPath = newPaths[id]
            let keysChanged = oldPath != nil && newPath != nil && oldPlacements[id] != newPlacements[id]
            movements.append(
                ItemMovement(id: id, before: oldPath, after: newPath, keysChanged: keysChanged, contentChanged: updated.contains(id)))
        }
        deliver(BatchBuilder.batch(sectionsBefore: oldSections, sectionsAfter: sectionNames, items: movements), all)
    }
}
