import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

/// A weak reference to an engine that can cross to the context's queue (only dereferenced there).
private final class WeakEngine: @unchecked Sendable {
    weak var engine: ResultsEngine?
    init(_ engine: ResultsEngine) { self.engine = engine }
}

/// A copy of the rows lent to a background queue to build the lookup table, and the table it gives back. Unchecked:
/// the copy shares storage that the engine only writes after copying it (copy on write), and the builder reads keys
/// and placements only (it hashes unsaved objects by identity and never touches an object). Both are emptied on the
/// context's queue, so no object is released, and so deinitialized, anywhere else.
private final class LookupBuild: @unchecked Sendable {
    var rows: ChunkedArray<ResultRow>
    var table: [RowKey: Placement] = [:]
    /// The rows' version the table is for.
    let version: Int
    /// Signalled once `table` is complete.
    let done = DispatchSemaphore(value: 0)
    init(rows: ChunkedArray<ResultRow>, version: Int) {
        self.rows = rows
        self.version = version
    }
}

/// The fetched results and their sections, kept up to date from the context's change batches.
///
/// Results are kept as rows — which object (entity and primary key, or the unsaved object) and where it sits (sort
/// values, section name) — sorted in a `ChunkedArray`. No object is made by a batched fetch: `object(at:)` makes the
/// objects of a page of `fetchBatchSize` rows as faults that load together, as Core Data's batch-faulting array does,
/// and each row keeps its object from then on. A changed object is found by binary search on where it *was* (its row's placement,
/// found by key in a table built the first time a change needs it) and re-inserted by binary search on where it
/// *is*. Processing k changed objects costs O(k log n) comparisons, plus moving at most one chunk and one integer per
/// chunk and per section for each, and issues no SQL when the objects are in memory. Where the engine cannot place a
/// change (limit and offset windows, a reset, a section that would split in two), it re-fetches and diffs instead.
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

    /// The results in order, in chunks so that a change moves a few hundred rows, not the whole tail.
    private(set) var rows = ChunkedArray<ResultRow>()
    /// Each result's placement by key: how a changed object's row is found. Built the first time a change needs it
    /// (a controller that never sees a change never pays for it), then kept up to date; nil after every fetch.
    private var lookup: [RowKey: Placement]?
    /// The entities that row keys number (`RowKey.stored(entity:)` indexes this table).
    private var entityTable: [NSEntityDescription] = []
    private var entityNumbers: [ObjectIdentifier: Int32] = [:]
    /// The store the rows' primary keys belong to.
    private var storeIdentifier = ""
    /// Objects per page made by `object(at:)` (the request's `fetchBatchSize`, else 20).
    private var pageSize = 20
    /// The sections of `rows`: names, counts and first rows.
    private(set) var sections = SectionLayout()
    var sectionNames: [String] { sections.names }
    var sectionCounts: [Int] { sections.counts }
    private var observation: ContextObservation?
    /// Called with each batch, after the engine's state reflects it, with the objects of its rows.
    var onBatch: ((ChangeBatch<RowKey>, [RowKey: NSManagedObject]) -> Void)?
    /// Called on the context's queue with a failure the engine could not throw, and what it was doing ("re-fetch
    /// the results"): the controller logs it and tells its delegate.
    var onFailure: ((any Error, String) -> Void)?
    /// A re-fetch failed: the rows are what the delegate last saw, and the next change re-fetches and reports the
    /// whole difference instead of being placed on rows that may be stale.
    private(set) var needsRefetch = false
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

    // MARK: Rows and objects

    /// The number of an entity in the entity table, added on first use.
    private func number(of entity: NSEntityDescription) -> Int32 {
        if let n = entityNumbers[ObjectIdentifier(entity)] { return n }
        let n = Int32(entityTable.count)
        entityTable.append(entity)
        entityNumbers[ObjectIdentifier(entity)] = n
        return n
    }

    /// The key of an object's row (whether or not it is a result).
    func key(of object: NSManagedObject) -> RowKey {
        let id = object.objectID
        return id.isTemporaryID ? .unsaved(object) : key(of: id)
    }

    /// The key of a stored object's row.
    private func key(of id: NSManagedObjectID) -> RowKey {
        .stored(entity: number(of: id.entity), primaryKey: id.primaryKey)
    }

    func objectID(for key: RowKey) -> NSManagedObjectID {
        switch key {
        case .stored(let entity, let primaryKey):
            return NSManagedObjectID(entity: entityTable[Int(entity)], storeIdentifier: storeIdentifier, primaryKey: primaryKey)
        case .unsaved(let object): return object.objectID
        }
    }

    /// The object IDs of the results in `range`.
    func objectIDs(in range: Range<Int>) -> [NSManagedObjectID] {
        rows.elements(in: range).map { objectID(for: $0.key) }
    }

    /// The object of the result at `index`: the one its row keeps, else the context's, else a fault made with the
    /// rest of its page (touching any of them loads the page in one SQL statement). The row keeps it from then on.
    func object(at index: Int) -> NSManagedObject {
        if let object = rows[index].object { return object }
        let start = index - index % pageSize
        return objects(in: start..<Swift.min(start + pageSize, rows.count))[index - start]
    }

    /// The objects of the results in `range`; rows without one get the context's object or a fault, made a page at a
    /// time so that each page loads in one SQL statement, and keep it.
    func objects(in range: Range<Int>) -> [NSManagedObject] {
        var result = rows.elements(in: range).map(\.object)
        var missing: [Int] = []
        for (offset, object) in result.enumerated() where object == nil { missing.append(offset) }
        for start in stride(from: 0, to: missing.count, by: pageSize) {
            let page = missing[start..<Swift.min(start + pageSize, missing.count)]
            let made = context._batchFaults(for: page.map { objectID(for: rows[range.lowerBound + $0].key) })
            for (offset, object) in zip(page, made) {
                rows[range.lowerBound + offset].object = object
                result[offset] = object
            }
        }
        return result.map { $0! }
    }

    /// The object for a row key: the context's, or a fault.
    private func object(for key: RowKey) -> NSManagedObject {
        if case .unsaved(let object) = key { return object }
        return context.object(with: objectID(for: key))
    }

    // MARK: Loading

    /// The rows of the results from one SQL query that reads the sort values and section names and no object; nil
    /// when this cannot be done (pending changes to merge in memory, a section key path that ends at a
    /// relationship): the caller fetches objects.
    private func fetchRows(_ request: NSFetchRequest<NSManagedObject>) throws -> LoadedRows? {
        let sectionType = sectionKeyAttributeType
        if sectionKeyPath != nil, sectionType == nil { return nil }
        var keyPaths = sorts.map(\.key)
        // The section key is usually the first sort key: read it once.
        let sectionColumn = sectionKeyPath.map { path in keyPaths.firstIndex(of: path) ?? keyPaths.count }
        if let sectionKeyPath, sectionColumn == keyPaths.count { keyPaths.append(sectionKeyPath) }
        let sortCount = sorts.count
        var loaded = LoadedRows()
        // The previous row's section value and name (`hasPrevious` is false before the first row).
        var (hasPrevious, previousValue, section) = (false, AttributeValue.null, "")
        var lastEntity: (id: Int, number: Int32) = (-1, 0)
        let model = context.persistentStoreCoordinator?.managedObjectModel
        let handled = try context._fetchResultKeys(request, values: keyPaths) { entityID, primaryKey, values in
            var sameSection = sectionType == nil
            if let sectionType, let sectionColumn {
                // Rows come in section order: most share the previous row's section value (and so its name). The
                // store says when it knows the value repeats, which saves comparing values.
                if hasPrevious, values.isUnchanged(sectionColumn) || previousValue == values[sectionColumn] {
                    sameSection = true
                } else {
                    previousValue = values[sectionColumn]
                    hasPrevious = true
                    if case .string(let text) = previousValue {
                        section = text
                    } else {
                        section = Self.sectionName(for: NSManagedObjectContext._objectValue(previousValue, type: sectionType))
                    }
                }
            }
            // Rows of one entity follow one another (usually all are of one): look the entity up when it changes.
            if entityID != lastEntity.id, let entity = model?.entity(withID: entityID) {
                lastEntity = (entityID, self.number(of: entity))
            }
            loaded.appendStored(
                entity: lastEntity.number, primaryKey: primaryKey, values: SortValues(values, count: sortCount), section: section,
                sameSection: sameSection)
        }
        return handled ? loaded : nil
    }

    /// The results as rows: from the row query with a batch size, else from a fetch of objects (which the rows keep,
    /// as Core Data keeps the objects of a fetch without a batch size). With `strict`, an object whose sort or section
    /// values cannot be read makes the load throw; otherwise it is left out (its row is gone).
    private func load(_ request: NSFetchRequest<NSManagedObject>, strict: Bool) throws -> LoadedRows {
        if request.fetchBatchSize > 0, let fetched = try fetchRows(request) { return fetched }
        var loaded = LoadedRows()
        for object in try context.fetch(request) {
            let placement: Placement
            if strict {
                placement = try self.placement(of: object)
            } else {
                guard let readable = try? self.placement(of: object) else { continue }
                placement = readable
            }
            loaded.append(ResultRow(key: key(of: object), placement: placement, object: object))
        }
        return loaded
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

    /// The cached results as rows, when the cache is valid for the request and the store as they are now (and the
    /// context has no unsaved changes); nil otherwise, with no error: the caller recomputes.
    private func loadCache(named name: String, request: NSFetchRequest<NSManagedObject>) -> LoadedRows? {
        guard !context.hasChanges, let key = cacheKey(), let model = context.persistentStoreCoordinator?.managedObjectModel,
            let data = SectionCache.contents(named: name)
        else { return nil }
        var list = LoadedRows()
        var sectionNames: [String] = []
        var entityNumbers: [Int32?] = []  // by the file's entity index, looked up on first use
        let header = CacheFileFormat.decode(data) { header in
            // The rows are read only when the key matches and the store still holds as many results.
            guard header.key == key, let count = try? context.count(for: request), count == header.count else { return false }
            sectionNames = header.sectionNames
            entityNumbers = header.entities.map { model.entity(named: $0).map(number(of:)) }
            return true
        } row: { entity, primaryKey, section, values in
            guard let number = entityNumbers[entity], section >= 0, section < sectionNames.count, values.count == sorts.count else {
                return false
            }
            list.append(
                ResultRow(
                    key: .stored(entity: number, primaryKey: primaryKey),
                    placement: Placement(values: SortValues(values, count: values.count), section: sectionNames[section])))
            return true
        }
        guard header != nil, list.rowCount == header?.count else { return nil }
        return list
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
        var cachedRows: [CachedResults.Row] = []
        cachedRows.reserveCapacity(rows.count)
        for row in rows {
            guard case .stored(let entity, let primaryKey) = row.key, let section = sectionIndex[row.placement.section] else { return }
            cachedRows.append(
                CachedResults.Row(
                    entity: entityTable[Int(entity)].name, primaryKey: primaryKey, values: row.placement.values.array, section: section))
        }
        let engine = WeakEngine(self)
        let context = self.context
        SectionCache.save(CachedResults(key: key, count: rows.count, sectionNames: sectionNames, rows: cachedRows), named: cacheName) {
            error in
            // Only the next fetch is slower without the cache; still, say so.
            context.perform { engine.engine?.onFailure?(error, "write the section cache '\(cacheName)'") }
        }
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
                    switch (try? item.checkedValue(forKey: inverse.name)) ?? nil {
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
        storeIdentifier = context.persistentStoreCoordinator?.persistentStores.first?.identifier ?? ""
        pageSize = request.fetchBatchSize > 0 ? request.fetchBatchSize : 20
        let loaded: LoadedRows
        if let cacheName, let cached = loadCache(named: cacheName, request: request) {
            loaded = cached
            usedCache = true
        } else {
            loaded = try load(request, strict: true)
        }
        if let sectionKeyPath, let (row, name) = loaded.firstRepeat {
            throw CoreDataError(
                .invalidFetchRequest,
                "The section key path '\(sectionKeyPath)' does not follow the sort order: section '\(name)' appears again at row \(row) after other sections. Make the first sort descriptor sort by '\(sectionKeyPath)' (or a key with the same order).",
                entityName: entity.name, key: sectionKeyPath)
        }
        take(loaded)
        computeRelatedChains()
        isFetched = true
        cacheIsDirty = false
        if !usedCache { saveCache() }
        observation?.cancel()
        observation = nil
        if tracking {
            observation = context.addChangeObserver { [weak self] change in self?.process(change) }
            if rows.count >= Self.backgroundLookupThreshold { buildLookupInBackground() }
        }
    }

    /// From how many rows a tracking fetch builds its lookup table in the background (below, the first change builds
    /// it in well under a millisecond).
    static let backgroundLookupThreshold = 2048

    /// Whether the engine follows the context's changes.
    var isTracking: Bool { observation != nil }

    func stopTracking() {
        observation?.cancel()
        observation = nil
    }

    /// The sort values and section name of an object now.
    func placement(of object: NSManagedObject) throws -> Placement {
        let values = try sortKeyPaths.map { try object._sortValue(forKeyPath: $0) }
        return Placement(values: SortValues(values, count: values.count), section: try sectionName(of: object))
    }

    func sectionName(of object: NSManagedObject) throws -> String {
        guard let sectionKeyPath else { return "" }
        if sectionKeyIsKey { return Self.sectionName(for: try object.checkedValue(forKey: sectionKeyPath)) }
        return Self.sectionName(for: try object.checkedValue(forKeyPath: sectionKeyPath))
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

    /// Makes loaded rows the results, with their sections as counted while loading (recounted if a section came
    /// back after another: only a re-fetch's diff takes such rows, and reports them as they are).
    private func take(_ loaded: LoadedRows) {
        rowsVersion += 1
        rows = loaded.rows
        lookup = nil
        pendingBuild = nil
        unsavedRows = loaded.unsaved
        if loaded.firstRepeat == nil {
            sections = SectionLayout(names: loaded.sectionNames, counts: loaded.sectionCounts)
        } else {
            sections = SectionLayout(rowSections: rows.lazy.map(\.placement.section))
        }
    }

    // MARK: Positions

    /// Whether row `a` (placement `pa`, key `ka`) sorts before row `b` under `sorts`. The descriptors are passed in so
    /// that loops comparing many times read `sorts` (a property of this class, checked for exclusive access on each
    /// read) once.
    private static func precedes(_ pa: Placement, _ ka: RowKey, _ pb: Placement, _ kb: RowKey, _ sorts: [FetchSortDescriptor]) -> Bool {
        for i in sorts.indices {  // by index: no copy of each descriptor (and its key string) per comparison
            let c = FetchSortDescriptor.compare(pa.values[i], pb.values[i], sorts[i].comparison)
            if c != 0 { return sorts[i].ascending ? c < 0 : c > 0 }
        }
        return ka.storeOrder < kb.storeOrder
    }

    /// The first index whose row does not precede (`placement`, `key`).
    private func insertionIndex(for placement: Placement, _ key: RowKey) -> Int {
        let sorts = self.sorts
        return rows.partitioningIndex { row in !Self.precedes(row.placement, row.key, placement, key, sorts) }
    }

    /// Where the row of `key` is, given where it sits.
    private func position(of key: RowKey, at placement: Placement) -> Int? {
        let i = insertionIndex(for: placement, key)
        if i < rows.count, rows[i].key == key { return i }
        return rows.firstIndex { $0.key == key }  // only if the store order of equal keys changed under us
    }

    /// The placement of a result's row by key, building the lookup table if this is the first time one is needed.
    private func placement(forKey key: RowKey) -> Placement? {
        if let lookup { return lookup[key] }
        // A table being built for these very rows is waited for rather than built a second time.
        if let build = pendingBuild, rows.isUnchangedCopy(of: build.rows) {
            build.done.wait()
            pendingBuild = nil
            lookup = build.table
            return build.table[key]
        }
        lookupBuilds += 1
        let table = Self.lookupTable(rows)
        lookup = table
        return table[key]
    }

    private static func lookupTable(_ rows: ChunkedArray<ResultRow>) -> [RowKey: Placement] {
        var table: [RowKey: Placement] = [:]
        table.reserveCapacity(rows.count)
        for row in rows { table[row.key] = row.placement }
        return table
    }

    /// Whether the lookup table is built (for tests).
    var hasLookup: Bool { lookup != nil }
    /// How many lookup tables have been built or started, in the background or not (for tests).
    private(set) var lookupBuilds = 0

    /// Counts every change to the rows, so that a lookup table built in the background from a copy of the rows is
    /// taken only if the rows are still what it was built from.
    private var rowsVersion = 0
    /// The lookup table being built in the background, until it is installed or the rows change.
    private var pendingBuild: LookupBuild?

    /// Builds the lookup table off the context's queue from a copy of the rows (a copy of a chunked array shares its
    /// storage until either side writes), and installs it on the context's queue if no change came in the meantime;
    /// otherwise the first change has built it already. A tracking controller over many rows thus has the table before
    /// its first change, without the fetch or the first change paying for it.
    private func buildLookupInBackground() {
        let build = LookupBuild(rows: rows, version: rowsVersion)
        pendingBuild = build
        lookupBuilds += 1
        let engine = WeakEngine(self)
        let context = self.context
        DispatchQueue.global(qos: .utility).async {
            build.table = Self.lookupTable(build.rows)
            build.done.signal()
            context.perform {
                defer { (build.rows, build.table) = (ChunkedArray(), [:]) }
                guard let engine = engine.engine else { return }
                if engine.pendingBuild === build { engine.pendingBuild = nil }
                guard engine.lookup == nil, engine.rowsVersion == build.version else { return }
                engine.lookup = build.table
            }
        }
    }

    /// The index of `key`'s row as `change` begins to apply. Until a change has needed the lookup table, the
    /// object's placement before the change (its values now, with the originals of the attributes the change edited)
    /// is tried first: O(log n) and no table, whenever the row found there is the key's; and an unsaved object that
    /// has no row needs no search. Otherwise the table answers (built on first need).
    private func indexBefore(_ key: RowKey, object: NSManagedObject, _ change: ContextChange) -> Int? {
        guard lookup == nil else { return index(ofKey: key) }
        // A row a merged save deleted can no longer be read (its object is invalid, or a fault of a row that is
        // gone): its values as the saving context knew them come first.
        let deletedValues = change._deletedAttributeValues[object.objectID]
        return indexBefore(
            key,
            guesses: [
                { deletedValues.flatMap(self.placement(fromValues:)) },
                { self.placementBefore(object, originals: change._originalAttributeValues[ObjectIdentifier(object)]) },
            ])
    }

    /// `indexBefore` with guesses of the placement (the first whose row is the key's wins), made only as needed.
    private func indexBefore(_ key: RowKey, guesses: [() -> Placement?]) -> Int? {
        if lookup == nil {
            if case .unsaved(let unsaved) = key, !unsavedRows.contains(ObjectIdentifier(unsaved)) { return nil }
            for guess in guesses {
                guard let placement = guess() else { continue }
                let i = insertionIndex(for: placement, key)
                if i < rows.count, rows[i].key == key { return i }
            }
        }
        return index(ofKey: key)
    }

    /// A placement from attribute values by key (a deleted row's, as the context that deleted it knew them); nil
    /// unless every sort key and the section key are attributes of the entity itself, all present.
    private func placement(fromValues values: [String: AttributeValue]) -> Placement? {
        var sortValues: [AttributeValue] = []
        for path in sortKeyPaths {
            guard path.count == 1, let value = values[path[0]] else { return nil }
            sortValues.append(value)
        }
        var section = ""
        if let sectionKeyPath {
            guard sectionKeyIsKey, let value = values[sectionKeyPath], let type = sectionKeyAttributeType else { return nil }
            section = Self.sectionName(for: NSManagedObjectContext._objectValue(value, type: type))
        }
        return Placement(values: SortValues(sortValues, count: sortValues.count), section: section)
    }

    /// Where an object sat before a change: its placement now, with `originals` in place of the current values of
    /// the attributes the change edited (sort keys and a section key that are the object's own attributes). Nil
    /// when its values cannot be read.
    private func placementBefore(_ object: NSManagedObject, originals: [String: AttributeValue]?) -> Placement? {
        guard var values = try? sortKeyPaths.map({ try object._sortValue(forKeyPath: $0) }) else { return nil }
        if let originals {
            for (i, path) in sortKeyPaths.enumerated() where path.count == 1 {
                if let original = originals[path[0]] { values[i] = original }
            }
        }
        let section: String
        if let originals, sectionKeyIsKey, let sectionKeyPath, let original = originals[sectionKeyPath], let type = sectionKeyAttributeType
        {
            section = Self.sectionName(for: NSManagedObjectContext._objectValue(original, type: type))
        } else {
            guard let now = try? sectionName(of: object) else { return nil }
            section = now
        }
        return Placement(values: SortValues(values, count: values.count), section: section)
    }

    /// The index of a result by key.
    private func index(ofKey key: RowKey) -> Int? {
        guard let placement = placement(forKey: key) else { return nil }
        return position(of: key, at: placement)
    }

    /// The index of an object in the results. Before any change has needed the lookup table, the object's values now
    /// are tried first (they are where its row sits unless it changed since): O(log n), no table built.
    func index(of object: NSManagedObject) -> Int? {
        index(of: object, key: key(of: object))
    }

    private func index(of object: NSManagedObject, key: RowKey) -> Int? {
        if lookup == nil, object._isLive, let now = try? placement(of: object) {
            let i = insertionIndex(for: now, key)
            if i < rows.count, rows[i].key == key { return i }
        }
        return index(ofKey: key)
    }

    /// Checks that the section layout describes the rows, row by row (tests call it after every batch).
    ///
    /// - Complexity: O(n).
    func _checkInvariants() {
        sections._checkInvariants()
        precondition(sections.rowCount == rows.count, "the sections count \(sections.rowCount) rows, the results hold \(rows.count)")
        var iterator = rows.makeIterator()
        for (name, count) in zip(sections.names, sections.counts) {
            for _ in 0..<count {
                let row = iterator.next()
                precondition(row?.placement.section == name, "a row of section '\(row?.placement.section ?? "?")' is counted in '\(name)'")
            }
        }
    }

    func indexPath(forIndex index: Int) -> IndexPath { sections.indexPath(forIndex: index) }

    func index(forIndexPath path: IndexPath) -> Int? { sections.index(forIndexPath: path) }

    // MARK: Tracking

    private func isCandidateKind(_ object: NSManagedObject) -> Bool {
        includesSubentities ? object.entity.isKindOf(entity: entity) : object.entity === entity
    }

    /// Called when objects in the results get permanent IDs (a save), with old → new IDs and positions.
    var onIDChange: (([(index: Int, old: NSManagedObjectID, new: NSManagedObjectID)]) -> Void)?

    /// The unsaved objects that have rows (their keys change when they are saved).
    private var unsavedRows: Set<ObjectIdentifier> = []

    private func noteUnsavedRows() {
        unsavedRows = []
        for row in rows { if case .unsaved(let object) = row.key { unsavedRows.insert(ObjectIdentifier(object)) } }
    }

    /// Saved objects that had rows as unsaved objects get rows keyed by their new IDs, in place.
    private func rekeySaved(_ changes: [NSManagedObjectID: NSManagedObjectID]) {
        var changed: [(index: Int, old: NSManagedObjectID, new: NSManagedObjectID)] = []
        for (old, new) in changes {
            guard let object = context.registeredObject(for: new), unsavedRows.remove(ObjectIdentifier(object)) != nil,
                let i = index(of: object, key: .unsaved(object))
            else { continue }
            let newKey = key(of: new)
            rows[i].key = newKey
            if lookup != nil {
                lookup![newKey] = lookup!.removeValue(forKey: .unsaved(object))
            }
            changed.append((i, old, new))
        }
        if !changed.isEmpty { onIDChange?(changed.sorted { $0.index < $1.index }) }
    }

    func process(_ change: ContextChange) {
        guard isFetched else { return }
        rowsVersion += 1
        // After this context's save or a merge, the results are what the store holds: keep the cache current.
        defer { if cacheName != nil, change.didSave || change.origin == .merge { scheduleCacheWrite() } }
        if !change.objectIDChanges.isEmpty, !unsavedRows.isEmpty { rekeySaved(change.objectIDChanges) }
        if change.invalidatedAll {
            refetchAndDiff(updated: [], known: [:])
            return
        }
        if needsRefetch {
            // The last re-fetch failed: what the delegate saw may be stale, so report the whole difference now.
            let updated = change.updated.filter { isCandidateKind($0.object) }.map { key(of: $0.object) }
            refetchAndDiff(updated: Set(updated), known: [:])
            return
        }
        var touched: [RowKey: NSManagedObject] = [:]
        var contentChanged: Set<RowKey> = []
        var deleted: Set<RowKey> = []
        for object in change.inserted where isCandidateKind(object) { touched[key(of: object)] = object }
        for (object, keys) in change.updated where isCandidateKind(object) && !keys.isEmpty {
            let key = key(of: object)
            touched[key] = object
            contentChanged.insert(key)
        }
        for object in change.deleted where isCandidateKind(object) {
            let key = key(of: object)
            guard indexBefore(key, object: object, change) != nil else { continue }
            touched[key] = object
            deleted.insert(key)
        }
        // Rows deleted by another context's save that no object here stood for.
        for id in change.deletedObjectIDs where includesSubentities ? id.entity.isKindOf(entity: entity) : id.entity === entity {
            let key = key(of: id)
            let values = change._deletedAttributeValues[id]
            guard indexBefore(key, guesses: [{ values.flatMap(self.placement(fromValues:)) }]) != nil else { continue }
            touched[key] = context.object(with: id)
            deleted.insert(key)
        }
        // Objects of other entities that results reach through relationships (`department.name`).
        if !relatedChains.isEmpty {
            for (object, keys) in change.updated where !isCandidateKind(object) && !keys.isEmpty {
                guard let owners = owners(of: object) else {
                    refetchAndDiff(updated: contentChanged, known: touched)
                    return
                }
                for owner in owners {
                    let key = key(of: owner)
                    guard touched[key] == nil else { continue }
                    touched[key] = owner
                    contentChanged.insert(key)
                }
            }
        }
        if fetchLimit > 0 || fetchOffset > 0 {
            // A window over the results moves when any object of the entity comes, goes or changes — even one
            // outside the window.
            let relevant =
                !touched.isEmpty || change.deleted.contains { isCandidateKind($0) }
                || change.deletedObjectIDs.contains { includesSubentities ? $0.entity.isKindOf(entity: entity) : $0.entity === entity }
            if relevant { refetchAndDiff(updated: contentChanged, known: touched) }
            return
        }
        guard !touched.isEmpty else { return }
        let sectionsBefore = sectionNames
        // Where each belongs now.
        var after: [RowKey: Placement] = [:]
        for (key, object) in touched where !deleted.contains(key) && object._isLive {
            do {
                guard try predicate?.evaluate(with: object) ?? true else { continue }
                after[key] = try placement(of: object)
            } catch {
                continue  // an object whose values cannot be read (its row is gone) is no longer a result
            }
        }
        if alwaysBulk || touched.count >= max(64, rows.count / 16) {
            // Many changes at once: one pass over the results costs less than k searches and k moves.
            processInBulk(touched: touched, after: after, contentChanged: contentChanged, sectionsBefore: sectionsBefore)
            return
        }
        // Where each touched object was, before anything moves.
        var before: [RowKey: (index: Int, path: IndexPath)] = [:]
        for (key, object) in touched {
            if let i = indexBefore(key, object: object, change) { before[key] = (i, indexPath(forIndex: i)) }
        }
        // Take out every touched row that was in, then put back those that are in (keeping an undo log).
        var oldPlacements: [RowKey: Placement] = [:]
        var removed: [(index: Int, row: ResultRow)] = []
        for (key, position) in before.sorted(by: { $0.value.index > $1.value.index }) {
            let row = rows.remove(at: position.index)
            oldPlacements[key] = row.placement
            removed.append((position.index, row))
            sections.removeRow(at: position.index)
            lookup?.removeValue(forKey: key)
            if case .unsaved(let object) = key { unsavedRows.remove(ObjectIdentifier(object)) }
        }
        var inserted: [RowKey] = []
        /// Puts the state back as it was before this batch, then re-fetches and reports the difference.
        func undoAndRefetch() {
            for key in inserted.reversed() {
                let j = index(ofKey: key)!
                rows.remove(at: j)
                lookup?.removeValue(forKey: key)
            }
            for (index, row) in removed.reversed() {
                rows.insert(row, at: index)
                lookup?[row.key] = row.placement
            }
            noteUnsavedRows()
            sections = SectionLayout(rowSections: rows.lazy.map(\.placement.section))
            refetchAndDiff(updated: contentChanged, known: touched)
        }
        // Put back from last to first: each insertion lands at or before the earlier ones, shifting each of them by
        // one, so a row's final index is where it went in plus the number inserted after it (no second search).
        let sorts = self.sorts
        let arriving = after.sorted { a, b in Self.precedes(b.value, b.key, a.value, a.key, sorts) }
        var finalIndex: [RowKey: Int] = [:]
        for (k, (key, placement)) in arriving.enumerated() {
            let i = insertionIndex(for: placement, key)
            finalIndex[key] = i + (arriving.count - 1 - k)
            guard insertIntoSection(at: i, name: placement.section) else {
                // The change would split a section.
                undoAndRefetch()
                return
            }
            rows.insert(ResultRow(key: key, placement: placement, object: touched[key]), at: i)
            lookup?[key] = placement
            if case .unsaved(let object) = key { unsavedRows.insert(ObjectIdentifier(object)) }
            inserted.append(key)
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

    /// Delivers the batch for touched rows, from where they were (`before`) and where they are now (`finalIndex`).
    private func reportMovements(
        of touched: [RowKey: NSManagedObject], before: [RowKey: IndexPath], finalIndex: [RowKey: Int],
        oldPlacements: [RowKey: Placement], after: [RowKey: Placement], contentChanged: Set<RowKey>, sectionsBefore: [String]
    ) {
        var movements: [ItemMovement<RowKey>] = []
        for key in touched.keys {
            let newPath = finalIndex[key].map(indexPath(forIndex:))
            let oldPath = before[key]
            if oldPath == nil && newPath == nil { continue }
            let keysChanged = oldPath != nil && newPath != nil && oldPlacements[key] != after[key]
            movements.append(
                ItemMovement(
                    id: key, before: oldPath, after: newPath, keysChanged: keysChanged, contentChanged: contentChanged.contains(key)))
        }
        deliver(BatchBuilder.batch(sectionsBefore: sectionsBefore, sectionsAfter: sectionNames, items: movements), known: touched)
    }

    /// Applies a large batch in passes over the results: take the touched rows out while walking the results once
    /// (which also gives their old paths and placements), sort those that are in now, merge them with the rest, and
    /// count sections again. O(n + k log k) instead of O(k log n) searches plus k moves; worth it once k is a sizeable
    /// fraction of n.
    private func processInBulk(
        touched: [RowKey: NSManagedObject], after: [RowKey: Placement], contentChanged: Set<RowKey>, sectionsBefore: [String]
    ) {
        bulkBatches += 1
        // The arriving rows in result order. Their positions are sorted, not the rows: the sort copies and destroys
        // the elements it moves, and a row costs far more to copy than an index.
        let sorts = self.sorts
        let unsorted = after.map { ResultRow(key: $0.key, placement: $0.value, object: touched[$0.key]) }
        let arriving = unsorted.withUnsafeBufferPointer { rows in
            rows.indices.sorted { a, b in Self.precedes(rows[a].placement, rows[a].key, rows[b].placement, rows[b].key, sorts) }
                .map { rows[$0] }
        }
        // One pass over the results: note where touched rows were, leave them out, and merge the arriving ones in.
        var before: [RowKey: IndexPath] = [:]
        var oldPlacements: [RowKey: Placement] = [:]
        var merged = ChunkedArray<ResultRow>()
        var finalIndex: [RowKey: Int] = [:]
        var next = 0
        var (section, row) = (0, 0)
        do {
            // A local copy: no exclusivity check per read of a property of this class.
            let sectionCounts = self.sectionCounts
            for current in rows {
                while row == sectionCounts[section] { (section, row) = (section + 1, 0) }
                defer { row += 1 }
                if touched[current.key] != nil {
                    before[current.key] = IndexPath(row: row, section: section)
                    oldPlacements[current.key] = current.placement
                    continue
                }
                while next < arriving.count,
                    !Self.precedes(current.placement, current.key, arriving[next].placement, arriving[next].key, sorts)
                {
                    finalIndex[arriving[next].key] = merged.count
                    merged.append(arriving[next])
                    next += 1
                }
                merged.append(current)
            }
        }
        for arrival in arriving[next...] {
            finalIndex[arrival.key] = merged.count
            merged.append(arrival)
        }
        // A section may not come back after another one (the sort would split it), and sections may not change
        // order (every row of a moved section would have to be reported): the re-fetch and diff handles both.
        // Both are checked before anything changes, so the diff starts from what the delegate last saw.
        var seen: Set<String> = []
        var sectionsAfter: [String] = []
        for current in merged where current.placement.section != sectionsAfter.last {
            guard seen.insert(current.placement.section).inserted else {
                refetchAndDiff(updated: contentChanged, known: touched)
                return
            }
            sectionsAfter.append(current.placement.section)
        }
        if !BatchBuilder.reorderedSections(sectionsBefore, sectionsAfter).isEmpty {
            refetchAndDiff(updated: contentChanged, known: touched)
            return
        }
        if lookup != nil {
            for key in touched.keys { lookup![key] = after[key] }
        }
        rows = merged
        noteUnsavedRows()
        sections = SectionLayout(rowSections: rows.lazy.map(\.placement.section))
        reportMovements(
            of: touched, before: before, finalIndex: finalIndex, oldPlacements: oldPlacements, after: after, contentChanged: contentChanged,
            sectionsBefore: sectionsBefore)
    }

    /// Hands a batch to the controller with the objects of its rows: the touched objects, and for other rows (a
    /// re-fetch's diff) the context's objects or faults.
    private func deliver(_ batch: ChangeBatch<RowKey>, known: [RowKey: NSManagedObject]) {
        guard !batch.isEmpty else { return }
        var objects: [RowKey: NSManagedObject] = [:]
        for change in batch.rows where objects[change.id] == nil {
            if let object = known[change.id] {
                objects[change.id] = object
            } else if let to = change.to, let i = index(forIndexPath: to) {
                objects[change.id] = object(at: i)  // the row keeps it: the delegate sees the object the results give
            } else {
                objects[change.id] = object(for: change.id)
            }
        }
        onBatch?(batch, objects)
    }

    /// Counts a row inserted at `index` into the section it belongs to; false if that would split a section.
    private func insertIntoSection(at index: Int, name: String) -> Bool {
        let previous = index > 0 ? rows[index - 1].placement.section : nil
        let next = index < rows.count ? rows[index].placement.section : nil
        return sections.insertRow(at: index, name: name, previous: previous, next: next)
    }

    // MARK: Fallback: re-fetch and diff

    /// Re-fetches and reports the difference from what the delegate last saw. `known` are objects the caller has
    /// for rows (the batch's touched objects); the other rows reported get the context's objects or faults.
    func refetchAndDiff(updated: Set<RowKey>, known: [RowKey: NSManagedObject]) {
        fullRefetches += 1
        let (oldRows, oldSections, oldCounts) = (rows, sectionNames, sectionCounts)
        var loaded: LoadedRows
        do {
            loaded = try load(makeRequest(), strict: false)
            needsRefetch = false
        } catch {
            needsRefetch = true
            onFailure?(error, "re-fetch the results")
            return
        }
        // Rows that stay keep the objects they had; the objects of rows that went are reported with them.
        var objects = known
        for row in oldRows { if let object = row.object, objects[row.key] == nil { objects[row.key] = object } }
        if !objects.isEmpty {
            loaded.rows = ChunkedArray(
                loaded.rows.lazy.map { row in
                    // Not an object the context no longer holds (after a reset, every object it had is invalid).
                    guard row.object == nil, let object = objects[row.key], object._isLive else { return row }
                    return ResultRow(key: row.key, placement: row.placement, object: object)
                })
        }
        take(loaded)

        func paths(_ list: ChunkedArray<ResultRow>, _ counts: [Int]) -> [RowKey: (path: IndexPath, placement: Placement)] {
            var result: [RowKey: (path: IndexPath, placement: Placement)] = [:]
            result.reserveCapacity(list.count)
            var iterator = list.makeIterator()
            for (s, count) in counts.enumerated() {
                for r in 0..<count {
                    let row = iterator.next()!
                    result[row.key] = (IndexPath(row: r, section: s), row.placement)
                }
            }
            return result
        }
        let old = paths(oldRows, oldCounts)
        let new = paths(rows, sectionCounts)
        var movements: [ItemMovement<RowKey>] = []
        for key in Set(old.keys).union(new.keys) {
            let oldEntry = old[key], newEntry = new[key]
            var keysChanged = false
            if let oldEntry, let newEntry { keysChanged = oldEntry.placement != newEntry.placement }
            movements.append(
                ItemMovement(
                    id: key, before: oldEntry?.path, after: newEntry?.path, keysChanged: keysChanged, contentChanged: updated.contains(key))
            )
        }
        deliver(BatchBuilder.batch(sectionsBefore: oldSections, sectionsAfter: sectionNames, items: movements), known: objects)
    }
}
