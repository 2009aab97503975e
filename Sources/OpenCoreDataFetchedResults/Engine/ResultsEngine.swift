import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

/// A weak reference to an engine that can cross to the context's queue (only dereferenced there).
final class WeakEngine: @unchecked Sendable {
    weak var engine: ResultsEngine?
    init(_ engine: ResultsEngine) { self.engine = engine }
}

/// A copy of the rows lent to a background queue to build the lookup table, and the table it gives back.
///
/// Unchecked:
/// the copy shares storage that the engine only writes after copying it (copy on write), and the builder reads keys
/// and sort values only (it hashes unsaved objects by identity and never touches an object). Both are emptied on the
/// context's queue, so no object is released, and so deinitialized, anywhere else.
final class LookupBuild: @unchecked Sendable {
    var rows: ChunkedArray<ResultRow>
    var table: [RowKey: SortValues] = [:]
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
/// Results are kept as rows — which object (entity and primary key, or the unsaved object) and its sort values —
/// sorted in a `ChunkedArray`; the sections are counts of consecutive rows (`SectionLayout`), so a row's section
/// follows from its index. No object is made by a batched fetch: `object(at:)` makes the
/// objects of a page of `fetchBatchSize` rows as faults that load together, as Core Data's batch-faulting array does,
/// and each row keeps its object from then on. A changed object is found by binary search on where it *was* (its row's sort
/// values, found by key in a table built the first time a change needs it) and re-inserted by binary search on where it
/// *is*. Processing k changed objects costs O(k log n) comparisons, plus moving at most one chunk and one integer per
/// chunk and per section for each, and issues no SQL when the objects are in memory. Where the engine cannot place a
/// change (limit and offset windows, a reset, a section that would split in two), it re-fetches and diffs instead.
final class ResultsEngine {
    let context: NSManagedObjectContext
    let entity: NSEntityDescription
    var predicate: FetchPredicate?
    var sorts: [FetchSortDescriptor] {
        didSet {
            sortKeyPaths = sorts.map(\.keyPathComponents)
            sectionSortIndex = sectionKeyIsString ? sortKeyPaths.firstIndex(of: sectionKeyComponents) : nil
        }
    }
    /// Each sort's key path, split once (placing an object reads them for every change).
    var sortKeyPaths: [[String]]
    let sectionKeyPath: String?
    /// Whether the section key path is a single key (read with `value(forKey:)`, no path to split).
    let sectionKeyIsKey: Bool
    /// Whether the section key is a string attribute of the entity: its value is the section's name, read as sort
    /// values are read (no `Any` to box and cast back).
    let sectionKeyIsString: Bool
    /// The sort whose value is the section key's (a string attribute sorted on, as sections must be), or nil: placing
    /// an object then reads the section's name once, as a sort value.
    private(set) var sectionSortIndex: Int?
    /// The section key path as a one-key path, for `_sortValue(forKeyPath:)`.
    private let sectionKeyComponents: [String]
    var includesSubentities: Bool
    var fetchLimit: Int
    var fetchOffset: Int
    let makeRequest: () -> NSFetchRequest<NSManagedObject>
    /// The section cache's name, or nil for none.
    var cacheName: String?
    /// Whether the last `performFetch` used the cache (for tests).
    var usedCache = false
    /// Saves or merges changed the results since the cache was last written; a write is scheduled.
    var cacheIsDirty = false
    /// How long after a save or merge the cache is written: a burst of saves costs one write.
    static let cacheWriteDelay: DispatchTimeInterval = .milliseconds(500)

    // Release builds skip the run-time exclusivity checks on the fields below that every handed-out object or placed
    // change reads (`@exclusivity(unchecked)`): the engine is used on its context's queue, as Core Data's controller
    // is, and its own code makes one access at a time (what the checks catch is an overlap on one thread). Debug
    // builds, and so the tests, keep the checks.
    /// The results in order, in chunks so that a change moves a few hundred rows, not the whole tail.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var rows = ChunkedArray<ResultRow>()
    /// Each result's sort values by key: how a changed object's row is found.
    ///
    /// Built the first time a change needs it
    /// (a controller that never sees a change never pays for it), then kept up to date; nil after every fetch.
    var lookup: [RowKey: SortValues]?
    /// The row `object(at:)` handed out last, and where it was: the row an app deletes is usually the one it just
    /// asked for (a swipe, a selection), and this finds it without its values — a fault stays a fault.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var lastHandedOut: (key: RowKey, index: Int)?
    /// The entities that row keys number (`RowKey.stored(entity:)` indexes this table).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var entityTable: [NSEntityDescription] = []
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var entityNumbers: [ObjectIdentifier: Int32] = [:]
    /// The store of each entry of `entityTable`: `storeIdentifier`, or another store holding the entity too.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var entityStores: [String] = []
    /// The numbers of entities in stores other than `storeIdentifier` (an entity of several configurations).
    var otherStoreNumbers: [EntityInStore: Int32] = [:]
    /// The store the rows' primary keys belong to (the first holding the entity, when several do).
    var storeIdentifier = ""
    /// Objects per page made by `object(at:)` (the request's `fetchBatchSize`, else 20).
    var pageSize = 20
    /// The sections of `rows`: names, counts and first rows.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var sections = SectionLayout()
    /// The sections' names as the controller shows them.
    ///
    /// Without a section key path there is always the one section, empty or not, as in Core Data: a table's single
    /// section never comes or goes, so no batch reports it.
    var sectionNames: [String] { sectionKeyPath == nil && sections.names.isEmpty ? [""] : sections.names }
    /// The sections' row counts, aligned with `sectionNames`.
    var sectionCounts: [Int] { sectionKeyPath == nil && sections.names.isEmpty ? [0] : sections.counts }
    var observation: ContextObservation?
    /// Called with each batch, after the engine's state reflects it, with the objects of its rows.
    var onBatch: ((ChangeBatch<RowKey>, [RowKey: NSManagedObject]) -> Void)?
    /// Called on the context's queue with a failure the engine could not throw, and what it was doing ("re-fetch
    /// the results"): the controller logs it and tells its delegate.
    var onFailure: ((any Error, String) -> Void)?
    /// A re-fetch failed: the rows are what the delegate last saw, and the next change re-fetches and reports the
    /// whole difference instead of being placed on rows that may be stale.
    var needsRefetch = false
    var isFetched = false
    /// What tests and benchmarks count and switch, and nothing else reads.
    var diagnostics = Diagnostics()

    /// The engine's counters and test switches: the one seam tests and benchmarks use to see which route a change
    /// took (the results themselves never depend on them).
    struct Diagnostics {
        /// Full re-fetches done because a change could not be placed.
        var fullRefetches = 0
        /// Batches applied in bulk.
        var bulkBatches = 0
        /// How many lookup tables have been built or started, in the background or not.
        var lookupBuilds = 0
        /// Apply every batch in passes over all results (tests drive both routes with the same edits); otherwise
        /// only batches that touch at least 64 objects and a sixteenth of the results.
        var alwaysBulk = false
    }

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
        let sectionKey = sectionKeyPath.flatMap { entity.propertiesByName[$0] } as? NSAttributeDescription
        self.sectionKeyIsString = sectionKeyIsKey && sectionKey?.attributeType == .stringAttributeType
        self.sectionKeyComponents = [sectionKeyPath ?? ""]
        self.sectionSortIndex = sectionKeyIsString ? sortKeyPaths.firstIndex(of: sectionKeyComponents) : nil
        self.includesSubentities = request.includesSubentities
        self.fetchLimit = request.fetchLimit
        self.fetchOffset = request.fetchOffset
        self.makeRequest = makeRequest
    }

    /// Chains of relationships from the entity that the predicate, sorts or section key read through
    /// (`department.name` → [department]); a change to an object at the end of a chain can move results.
    var relatedChains: [[NSRelationshipDescription]] = []
    /// Counts every change to the rows, so that a lookup table built in the background from a copy of the rows is
    /// taken only if the rows are still what it was built from.
    var rowsVersion = 0
    /// The lookup table being built in the background, until it is installed or the rows change.
    var pendingBuild: LookupBuild?
    /// Called when objects in the results get permanent IDs (a save), with old → new IDs and positions.
    var onIDChange: (([(index: Int, old: NSManagedObjectID, new: NSManagedObjectID)]) -> Void)?
    /// The unsaved objects that have rows (their keys change when they are saved).
    var unsavedRows: Set<ObjectIdentifier> = []

    // MARK: Fetching

    func performFetch(tracking: Bool) throws {
        let request = makeRequest()
        predicate = request.predicate
        sorts = request.sortDescriptors ?? []
        includesSubentities = request.includesSubentities
        fetchLimit = request.fetchLimit
        fetchOffset = request.fetchOffset
        usedCache = false
        let store = context._storeIdentifier(for: entity)
        if store != storeIdentifier {
            // Row keys number entities per store: start afresh when the coordinator's stores changed.
            (storeIdentifier, entityTable, entityStores, entityNumbers, otherStoreNumbers) = (store, [], [], [:], [:])
        }
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
        let values = try sortValues(of: object)
        return Placement(values: values, section: try sectionName(of: object, sortValues: values))
    }

    /// The sort values of an object now.
    func sortValues(of object: NSManagedObject) throws -> SortValues {
        let values = try object._sortValues(forKeyPaths: sortKeyPaths)
        return SortValues(values, count: values.count)
    }

    /// The section name of an object now; `sortValues`, its sort values when the caller has them, spares a second
    /// read when the section key is also a sort key.
    func sectionName(of object: NSManagedObject, sortValues: SortValues? = nil) throws -> String {
        guard let sectionKeyPath else { return "" }
        if sectionKeyIsString {
            // The name is the attribute's string, read as sort values are (no `Any` boxed and cast back).
            let value: AttributeValue
            if let sortValues, let index = sectionSortIndex {
                value = sortValues[index]
            } else {
                value = try object._sortValue(forKeyPath: sectionKeyComponents)
            }
            switch value {
            case .string(let name): return name
            case .null: return ""
            default: break
            }
        }
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

    /// Makes loaded rows the results, with their sections as counted while loading (runs of consecutive rows: when a
    /// section came back after another — only a re-fetch's diff takes such rows — each run is a section, and the rows
    /// are reported as they are).
    func take(_ loaded: LoadedRows) {
        rowsVersion += 1
        rows = loaded.rows
        lookup = nil
        pendingBuild = nil
        unsavedRows = loaded.unsaved
        sections = SectionLayout(names: loaded.sectionNames, counts: loaded.sectionCounts)
    }
}
