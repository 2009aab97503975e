import Foundation
import Logging
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Manages the results of a fetch request for a table: sections, index titles, and — with a delegate — live change
/// tracking that reports exactly which sections and rows were inserted, deleted, moved or updated.
///
/// For example:
/// ```swift
/// let request = NSFetchRequest<Products>(entityName: "Products")
/// request.sortDescriptors = [FetchSortDescriptor(key: "name"), FetchSortDescriptor(key: "price")]
/// let controller = NSFetchedResultsController(
///     fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "name", cacheName: nil)
/// controller.delegate = self
/// try controller.performFetch()
/// let product = controller.object(at: IndexPath(row: 0, section: 0))
/// ```
/// Changes are reported when the context processes pending changes (made, not only saved) and when it merges
/// another context's save. With no delegate the controller does not track changes.
///
/// Rule for bad index paths: `object(at:)` with an index path outside the results stops with a precondition failure
/// naming it (as Core Data raises); `indexPath(forObject:)` returns nil for an object that is not in the results.
open class NSFetchedResultsController<ResultType> {
    let engine: ResultsEngine
    let request: AnyObject
    /// The context the results come from.
    public let managedObjectContext: NSManagedObjectContext
    /// The key path that names each object's section, or nil for one section.
    public let sectionNameKeyPath: String?
    /// The name of the section cache, or nil.
    public let cacheName: String?
    /// Where the controller logs failures it cannot throw (the delegate hears of them too, through
    /// `controller(_:didFailWith:)`).
    ///
    /// Replace it to route them to your own logging backend's label or metadata.
    public var logger = Logger(label: "OpenCoreData.NSFetchedResultsController")
    weak var primary: AnyObject?
    var erasedView: NSFetchedResultsController<any NSFetchRequestResult>?
    let subscribers = ChangeSubscribers()

    deinit { subscribers.finish() }

    /// The object told about changes; setting it starts (or, with nil, stops) change tracking.
    public weak var delegate: (any NSFetchedResultsControllerDelegate)? {
        didSet {
            guard engine.isFetched else { return }
            if delegate == nil, subscribers.isEmpty {
                engine.stopTracking()
            } else if !engine.isTracking {
                startTracking()
            }
        }
    }

    /// Creates a controller for a fetch request in a context.
    ///
    /// - Parameters:
    ///   - fetchRequest: The request; it must have at least one sort descriptor. If `sectionNameKeyPath` is set, the
    ///     first sort descriptor must order objects as the section key does.
    ///   - context: The context to fetch in and to track.
    ///   - sectionNameKeyPath: A key path (through to-one relationships) naming each object's section, or nil.
    ///   - name: A cache name, or nil.
    public init(
        fetchRequest: NSFetchRequest<ResultType>, managedObjectContext context: NSManagedObjectContext, sectionNameKeyPath: String?,
        cacheName name: String?
    ) {
        let entity =
            fetchRequest.entity ?? fetchRequest.entityName.flatMap { try? context.entity(named: $0) }
            ?? NSEntityDescription(name: fetchRequest.entityName ?? "?")
        let makeRequest = { () -> NSFetchRequest<NSManagedObject> in
            let copy = NSFetchRequest<NSManagedObject>(entityName: fetchRequest.entityName ?? entity.name)
            copy.entity = fetchRequest.entity
            copy.predicate = fetchRequest.predicate
            copy.sortDescriptors = fetchRequest.sortDescriptors
            copy.fetchLimit = fetchRequest.fetchLimit
            copy.fetchOffset = fetchRequest.fetchOffset
            copy.fetchBatchSize = fetchRequest.fetchBatchSize
            copy.affectedStores = fetchRequest.affectedStores
            copy.includesSubentities = fetchRequest.includesSubentities
            copy.includesPendingChanges = true
            copy.resultType = fetchRequest.resultType
            return copy
        }
        let engine = ResultsEngine(
            context: context, entity: entity, request: makeRequest(), sectionKeyPath: sectionNameKeyPath, makeRequest: makeRequest)
        self.engine = engine
        engine.cacheName = name
        self.request = fetchRequest
        self.managedObjectContext = context
        self.sectionNameKeyPath = sectionNameKeyPath
        self.cacheName = name
    }

    init(engine: ResultsEngine, request: AnyObject, context: NSManagedObjectContext, sectionNameKeyPath: String?, cacheName: String?) {
        self.engine = engine
        engine.cacheName = cacheName
        self.request = request
        self.managedObjectContext = context
        self.sectionNameKeyPath = sectionNameKeyPath
        self.cacheName = cacheName
    }

    // MARK: Fetching

    /// Runs the fetch request (again, after you change its predicate or sort descriptors).
    ///
    /// For example:
    /// ```swift
    /// controller.fetchRequest.predicate = try FetchPredicate(format: "price < %d", 500)
    /// try controller.performFetch()
    /// ```
    /// - Complexity: one SQL query and O(n) for n results; with `fetchBatchSize` no object is made (rows keep keys,
    ///   sort values and sections); a valid section cache reads no row at all.
    /// - Throws: `CoreDataError(.invalidFetchRequest)` when the request has no sort descriptor, when the section key
    ///   path does not follow the first sort descriptor's order, or for any error of the fetch itself.
    open func performFetch() throws {
        try managedObjectContext.performAndWait {
            let request = engine.makeRequest()
            guard let sorts = request.sortDescriptors, !sorts.isEmpty else {
                throw CoreDataError(
                    .invalidFetchRequest,
                    "A fetched results controller needs a fetch request with at least one sort descriptor (entity '\(engine.entity.name)').",
                    entityName: engine.entity.name)
            }
            guard request.resultType == .managedObjectResultType else {
                throw CoreDataError(
                    .invalidFetchRequest,
                    "A fetched results controller fetches managed objects; set resultType to .managedObjectResultType.",
                    entityName: engine.entity.name)
            }
            try engine.performFetch(tracking: delegate != nil || !subscribers.isEmpty)
            engine.onBatch = { [weak self] batch, objects in self?.report(batch, objects) }
            engine.onFailure = { [weak self] error, activity in self?.reportFailure(error, activity) }
            engine.onIDChange = { [weak self] changes in self?.reportIDChanges(changes) }
            if let snapshotDelegate = delegate as? any NSFetchedResultsControllerSnapshotDelegate {
                snapshotDelegate.controller(erased, didChangeContentWith: snapshot)
            }
        }
    }

    /// Every fetched object, in order; nil before `performFetch()`.
    ///
    /// - Complexity: O(n); with `fetchBatchSize`, makes the objects not yet made, a batch per SQL query.
    public var fetchedObjects: [ResultType]? {
        guard engine.isFetched else { return nil }
        return engine.objects(in: 0..<engine.rows.count).compactMap { $0 as? ResultType }
    }

    /// The sections; nil before `performFetch()`.
    ///
    /// - Complexity: O(s) for s sections (a section's `objects` makes its objects when asked for).
    public var sections: [any NSFetchedResultsSectionInfo]? {
        guard engine.isFetched else { return nil }
        var start = 0
        var result: [any NSFetchedResultsSectionInfo] = []
        for (i, name) in engine.sectionNames.enumerated() {
            let count = engine.sectionCounts[i]
            result.append(SectionInfo(name: name, indexTitle: indexTitle(forSectionName: name), engine: engine, start: start, count: count))
            start += count
        }
        return result
    }

    /// The object at an index path.
    ///
    /// For example:
    /// ```swift
    /// let product = controller.object(at: IndexPath(row: 0, section: 0))
    /// ```
    /// - Complexity: O(log s) to find the row; a row without an object makes the objects of its batch in one query.
    public func object(at indexPath: IndexPath) -> ResultType {
        guard let i = engine.index(forIndexPath: indexPath), let object = engine.object(at: i) as? ResultType else {
            preconditionFailure(
                "Index path \(indexPath) is outside the fetched results (\(engine.sectionCounts.count) sections: \(engine.sectionCounts)).")
        }
        return object
    }

    /// The index path of an object, or nil when it is not in the results.
    ///
    /// - Complexity: O(log n) by binary search on the object's sort values (the key lookup when it changed since).
    public func indexPath(forObject object: ResultType) -> IndexPath? {
        guard let managed = object as? NSManagedObject, let i = engine.index(of: managed) else { return nil }
        return engine.indexPath(forIndex: i)
    }

    // MARK: Section index

    /// The index title for a section name: the delegate's answer, else the capitalized first letter of the name.
    ///
    /// Override to customise.
    ///
    /// - Complexity: O(1).
    open func sectionIndexTitle(forSectionName sectionName: String) -> String? {
        guard let first = sectionName.first else { return nil }
        return String(first).uppercased()
    }

    func indexTitle(forSectionName name: String) -> String? {
        if let delegate, let title = delegate.controller(erased, sectionIndexTitleForSectionName: name) { return title }
        return (primary as? NSFetchedResultsController<ResultType>)?.sectionIndexTitle(forSectionName: name)
            ?? sectionIndexTitle(forSectionName: name)
    }

    /// The index titles of all sections, in order, without repeats.
    open var sectionIndexTitles: [String] {
        var titles: [String] = []
        for name in engine.sectionNames {
            if let title = indexTitle(forSectionName: name), !titles.contains(title) { titles.append(title) }
        }
        return titles
    }

    /// The section a table should jump to for an index title (the first section with that title).
    ///
    /// - Complexity: O(s) for s sections (a delegate's title is asked once per section).
    open func section(forSectionIndexTitle title: String, at sectionIndex: Int) -> Int {
        for (i, name) in engine.sectionNames.enumerated() where indexTitle(forSectionName: name) == title { return i }
        return max(0, min(sectionIndex, engine.sectionNames.count - 1))
    }

    /// Deletes the named section cache, or every cache when `name` is nil.
    open class func deleteCache(withName name: String?) {
        SectionCache.delete(named: name)
    }

    /// Writes the section cache now if saves or merges changed the results since it was last written, and waits until
    /// every cache file is on disk.
    ///
    /// (Not in Core Data.) The controller writes its cache by itself half a second after
    /// a save or merge, off the saving thread, so a burst of saves costs one write; call this on the context's queue
    /// before a short-lived process exits. A cache left stale is never wrong, only recomputed.
    ///
    /// - Complexity: O(n) for the n results when the cache is stale (the rows are gathered here and written on the
    ///   cache's queue); O(1) otherwise.
    public func flushCache() {
        engine.flushCache()
        SectionCache.waitForWrites()
    }
}

extension NSFetchedResultsController {
    /// The fetch request; change its predicate or sort descriptors, then call `performFetch()` again.
    public var fetchRequest: NSFetchRequest<ResultType> {
        // The request given at creation; the erased view delegates see is created with the same one.
        request as! NSFetchRequest<ResultType>
    }
}
