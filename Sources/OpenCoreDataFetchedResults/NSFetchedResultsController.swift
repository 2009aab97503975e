import Foundation
import Logging
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

/// One section of a fetched results controller's results.
public protocol NSFetchedResultsSectionInfo {
    /// The section's name: the value of the section key path for its objects ("" with no key path).
    var name: String { get }
    /// The section's index title.
    var indexTitle: String? { get }
    /// How many objects the section holds.
    var numberOfObjects: Int { get }
    /// The section's objects.
    var objects: [Any]? { get }
}

/// What a controller tells its delegate as the results change, in UITableView batch-update terms.
///
/// Every method has a default that does nothing, so implement only what you use. Delegate methods receive the
/// controller typed as `NSFetchedResultsController<any NSFetchRequestResult>` (as Core Data's Swift API spells it);
/// cast objects to your class.
public protocol NSFetchedResultsControllerDelegate: AnyObject {
    /// A batch of changes is about to be reported (call `beginUpdates()`).
    func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>)
    /// A section was inserted (index after the batch) or deleted (index before the batch).
    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange sectionInfo: any NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType)
    /// An object was inserted (`newIndexPath`), deleted (`indexPath`), moved (`indexPath` → `newIndexPath`) or
    /// updated (`indexPath`, the row's index before the batch).
    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?)
    /// The batch is complete (call `endUpdates()`).
    func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>)
    /// The index title for a section; nil uses the controller's `sectionIndexTitle(forSectionName:)`.
    func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, sectionIndexTitleForSectionName sectionName: String)
        -> String?
    /// The controller could not follow a change: a re-fetch failed (the store could not be read), tracking could not
    /// start, or the section cache could not be written.
    ///
    /// Core Data has no such method; OpenCoreData reports these failures instead of dropping them. The results stay
    /// as the delegate last saw them, and the next change the context reports makes the controller re-fetch and
    /// report the whole difference, so nothing is missed once the store can be read again. The failure is also
    /// logged to the controller's `logger`.
    ///
    /// For example:
    /// ```swift
    /// func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, didFailWith error: any Error) {
    ///     showBanner("The list may be out of date: \(error)")
    /// }
    /// ```
    func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, didFailWith error: any Error)
}

extension NSFetchedResultsControllerDelegate {
    public func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {}
    public func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange sectionInfo: any NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType
    ) {}
    public func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?
    ) {}
    public func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {}
    public func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, sectionIndexTitleForSectionName sectionName: String
    )
        -> String?
    { nil }
    public func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, didFailWith error: any Error) {}
}

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
    private let request: AnyObject
    /// The context the results come from.
    public let managedObjectContext: NSManagedObjectContext
    /// The key path that names each object's section, or nil for one section.
    public let sectionNameKeyPath: String?
    /// The name of the section cache, or nil.
    public let cacheName: String?
    /// Where the controller logs failures it cannot throw (the delegate hears of them too, through
    /// `controller(_:didFailWith:)`). Replace it to route them to your own logging backend's label or metadata.
    public var logger = Logger(label: "OpenCoreData.NSFetchedResultsController")
    private weak var primary: AnyObject?
    private var erasedView: NSFetchedResultsController<any NSFetchRequestResult>?
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
    public var fetchedObjects: [ResultType]? {
        guard engine.isFetched else { return nil }
        return engine.objects(in: 0..<engine.rows.count).compactMap { $0 as? ResultType }
    }

    /// The sections; nil before `performFetch()`.
    public var sections: [any NSFetchedResultsSectionInfo]? {
        guard engine.isFetched else { return nil }
        var start = 0
        var result: [any NSFetchedResultsSectionInfo] = []
        for (i, name) in engine.sectionNames.enumerated() {
            let count = engine.sectionCounts[i]
            result.append(SectionInfo(name: name, indexTitle: indexTitle(forSectionName: name), engine: engine, start: start, count: count))
            start += count
        }
        // Without a section key path there is always the one section, empty or not, as in Core Data (a table's
        // single section never comes or goes).
        if sectionNameKeyPath == nil, result.isEmpty {
            result.append(SectionInfo(name: "", indexTitle: nil, engine: engine, start: 0, count: 0))
        }
        return result
    }

    /// The object at an index path.
    public func object(at indexPath: IndexPath) -> ResultType {
        guard let i = engine.index(forIndexPath: indexPath), let object = engine.object(at: i) as? ResultType else {
            preconditionFailure(
                "Index path \(indexPath) is outside the fetched results (\(engine.sectionCounts.count) sections: \(engine.sectionCounts)).")
        }
        return object
    }

    /// The index path of an object, or nil when it is not in the results.
    public func indexPath(forObject object: ResultType) -> IndexPath? {
        guard let managed = object as? NSManagedObject, let i = engine.index(of: managed) else { return nil }
        return engine.indexPath(forIndex: i)
    }

    // MARK: Section index

    /// The index title for a section name: the delegate's answer, else the capitalized first letter of the name.
    /// Override to customise.
    open func sectionIndexTitle(forSectionName sectionName: String) -> String? {
        guard let first = sectionName.first else { return nil }
        return String(first).uppercased()
    }

    private func indexTitle(forSectionName name: String) -> String? {
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
    open func section(forSectionIndexTitle title: String, at sectionIndex: Int) -> Int {
        for (i, name) in engine.sectionNames.enumerated() where indexTitle(forSectionName: name) == title { return i }
        return max(0, min(sectionIndex, engine.sectionNames.count - 1))
    }

    /// Deletes the named section cache, or every cache when `name` is nil.
    open class func deleteCache(withName name: String?) {
        SectionCache.delete(named: name)
    }

    /// Writes the section cache now if saves or merges changed the results since it was last written, and waits until
    /// every cache file is on disk. (Not in Core Data.) The controller writes its cache by itself half a second after
    /// a save or merge, off the saving thread, so a burst of saves costs one write; call this on the context's queue
    /// before a short-lived process exits. A cache left stale is never wrong, only recomputed.
    public func flushCache() {
        engine.flushCache()
        SectionCache.waitForWrites()
    }

    // MARK: Delegate delivery

    /// The controller as delegates see it.
    var erased: NSFetchedResultsController<any NSFetchRequestResult> {
        if let me = self as? NSFetchedResultsController<any NSFetchRequestResult> { return me }
        if let view = erasedView { return view }
        let view = NSFetchedResultsController<any NSFetchRequestResult>(
            engine: engine, request: request, context: managedObjectContext, sectionNameKeyPath: sectionNameKeyPath, cacheName: cacheName)
        view.primary = self
        erasedView = view
        return view
    }

    /// Starts following the context's changes after a fetch made without tracking (a delegate or a `changes`
    /// sequence arrived later); a failure is reported, not thrown (the setter that starts it cannot throw).
    func startTracking() {
        do {
            try managedObjectContext.performAndWait { try engine.performFetch(tracking: true) }
        } catch {
            reportFailure(error, "start tracking changes")
        }
    }

    /// Logs a failure the controller could not throw and tells the delegate.
    func reportFailure(_ error: any Error, _ activity: String) {
        let primary = (self.primary as? NSFetchedResultsController<ResultType>) ?? self
        primary.logger.error(
            "Could not \(activity) for entity \(engine.entity.name): \(error)",
            metadata: ["entity": .string(engine.entity.name), "cacheName": .string(cacheName ?? "")])
        delegate?.controller(erased, didFailWith: error)
    }

    private func report(_ batch: ChangeBatch<RowKey>, _ objects: [RowKey: NSManagedObject]) {
        let values =
            subscribers.isEmpty && !(delegate is any NSFetchedResultsControllerSnapshotDelegate)
                && !(delegate is any NSFetchedResultsControllerDifferenceDelegate) ? nil : changeSet(batch, objects)
        if let values { subscribers.yield(values) }
        guard let delegate else { return }
        let controller = erased
        if let snapshotDelegate = delegate as? any NSFetchedResultsControllerSnapshotDelegate, let values {
            snapshotDelegate.controller(controller, didChangeContentWith: values.snapshot)
            return
        }
        if sectionNameKeyPath == nil, let differenceDelegate = delegate as? any NSFetchedResultsControllerDifferenceDelegate, let values,
            let diff = difference(values)
        {
            differenceDelegate.controller(controller, didChangeContentWith: diff)
            return
        }
        delegate.controllerWillChangeContent(controller)
        // Without a section key path the one section is always there: its coming and going is not reported.
        for change in batch.sections where sectionNameKeyPath != nil {
            let info = SectionInfo(
                name: change.name, indexTitle: indexTitle(forSectionName: change.name), engine: engine, start: 0, count: 0)
            delegate.controller(controller, didChange: info, atSectionIndex: change.index, for: change.type)
        }
        for change in batch.rows {
            guard let object = objects[change.id] else { continue }
            switch change.type {
            case .insert: delegate.controller(controller, didChange: object, at: nil, for: .insert, newIndexPath: change.to)
            case .delete: delegate.controller(controller, didChange: object, at: change.from, for: .delete, newIndexPath: nil)
            case .move: delegate.controller(controller, didChange: object, at: change.from, for: .move, newIndexPath: change.to)
            case .update: delegate.controller(controller, didChange: object, at: change.from, for: .update, newIndexPath: change.to)
            }
        }
        delegate.controllerDidChangeContent(controller)
    }
}

extension NSFetchedResultsController {
    /// The fetch request; change its predicate or sort descriptors, then call `performFetch()` again.
    public var fetchRequest: NSFetchRequest<ResultType> {
        // The request given at creation; the erased view delegates see is created with the same one.
        request as! NSFetchRequest<ResultType>
    }
}

/// A section's information, read from the engine when asked.
struct SectionInfo: NSFetchedResultsSectionInfo {
    let name: String
    let indexTitle: String?
    let engine: ResultsEngine
    let start: Int
    let count: Int

    var numberOfObjects: Int { count }
    var objects: [Any]? { engine.objects(in: start..<(start + count)) }
}
