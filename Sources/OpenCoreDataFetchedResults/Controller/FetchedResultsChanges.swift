import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel

/// The controller's results as identifiers: section names, and object IDs per section.
///
/// The counterpart of the `NSDiffableDataSourceSnapshot` Core Data hands to snapshot delegates; apply it to any
/// list UI that diffs by identifier. `reloadedItemIdentifiers` lists objects that were there before and whose content
/// changed, whether they moved or not (Core Data leaves moved ones out, so their cells show old values).
///
/// For example:
/// ```swift
/// let snapshot = controller.snapshot
/// print(snapshot.numberOfSections, snapshot.numberOfItems)
/// ```
public struct FetchedResultsSnapshot: Sendable, Equatable {
    /// Section names, in order.
    public var sectionIdentifiers: [String]
    /// Object IDs per section, in order.
    public var itemIdentifiersBySection: [[NSManagedObjectID]]
    /// Objects that changed, in place or while moving (reload their cells).
    public var reloadedItemIdentifiers: [NSManagedObjectID]

    /// A snapshot of sections, their objects, and the objects to reload.
    public init(
        sectionIdentifiers: [String], itemIdentifiersBySection: [[NSManagedObjectID]], reloadedItemIdentifiers: [NSManagedObjectID] = []
    ) {
        self.sectionIdentifiers = sectionIdentifiers
        self.itemIdentifiersBySection = itemIdentifiersBySection
        self.reloadedItemIdentifiers = reloadedItemIdentifiers
    }

    /// Every object ID, section after section.
    public var itemIdentifiers: [NSManagedObjectID] { itemIdentifiersBySection.flatMap { $0 } }
    /// The number of objects.
    public var numberOfItems: Int { itemIdentifiersBySection.reduce(0) { $0 + $1.count } }
    /// The number of sections.
    public var numberOfSections: Int { sectionIdentifiers.count }

    /// The object IDs of a section, or an empty array for an unknown section name.
    ///
    /// - Complexity: O(s) for s sections, to find the name.
    public func itemIdentifiers(inSection identifier: String) -> [NSManagedObjectID] {
        sectionIdentifiers.firstIndex(of: identifier).map { itemIdentifiersBySection[$0] } ?? []
    }
}

/// One batch of changes as values that can cross threads: what `changes` yields.
///
/// For example:
/// ```swift
/// for await change in controller.changes { apply(change.rows) }
/// ```
public struct FetchedResultsChangeSet: Sendable {
    /// Section inserts and deletes (indexes as in the delegate calls).
    public var sections: [SectionChange]
    /// Row changes by object ID (index paths as in the delegate calls).
    public var rows: [RowChange<NSManagedObjectID>]
    /// The results after the batch.
    public var snapshot: FetchedResultsSnapshot
    /// Objects whose IDs changed (temporary → permanent, in a save), old → new; their rows did not change.
    public var objectIDChanges: [NSManagedObjectID: NSManagedObjectID] = [:]
}

/// A delegate that receives each batch as one snapshot of the results instead of fine-grained calls.
///
/// When a delegate adopts this protocol, the fine-grained calls (`controllerWillChangeContent`,
/// `controller(_:didChange:…)`, `controllerDidChangeContent`) are not sent, as on Apple's platforms. The snapshot is
/// also delivered once after each `performFetch()`.
///
/// For example:
/// ```swift
/// func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChangeContentWith snapshot: FetchedResultsSnapshot) {
///     dataSource.apply(snapshot)
/// }
/// ```
public protocol NSFetchedResultsControllerSnapshotDelegate: NSFetchedResultsControllerDelegate {
    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChangeContentWith snapshot: FetchedResultsSnapshot)
}

/// A delegate that receives each batch as a `CollectionDifference` of object IDs (for a controller without a
/// section key path).
///
/// The fine-grained calls are not sent to such a delegate.
///
/// For example:
/// ```swift
/// func controller(
///     _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChangeContentWith diff: CollectionDifference<NSManagedObjectID>
/// ) { rows = rows.applying(diff) ?? rows }
/// ```
public protocol NSFetchedResultsControllerDifferenceDelegate: NSFetchedResultsControllerDelegate {
    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>,
        didChangeContentWith diff: CollectionDifference<NSManagedObjectID>)
}

extension NSFetchedResultsController {
    /// The current results as identifiers.
    public var snapshot: FetchedResultsSnapshot {
        var sections: [[NSManagedObjectID]] = []
        var start = 0
        for count in engine.sectionCounts {
            sections.append(engine.objectIDs(in: start..<(start + count)))
            start += count
        }
        return FetchedResultsSnapshot(
            sectionIdentifiers: engine.sectionNames, itemIdentifiersBySection: sections, reloadedItemIdentifiers: [])
    }

    /// The change batches, as an asynchronous sequence of values (object IDs, not objects), for Swift concurrency.
    ///
    /// For example:
    /// ```swift
    /// Task {
    ///     for await change in controller.changes { apply(change.snapshot) }
    /// }
    /// ```
    /// Asking for the sequence turns change tracking on (as setting a delegate does). Each call returns a new
    /// sequence; a sequence ends when its task is cancelled or the controller goes away.
    public var changes: AsyncStream<FetchedResultsChangeSet> {
        let (stream, continuation) = AsyncStream<FetchedResultsChangeSet>.makeStream(bufferingPolicy: .unbounded)
        subscribers.add(continuation)
        if engine.isFetched, !engine.isTracking { startTracking() }
        return stream
    }

    /// Tells identifier-based consumers that saved objects have permanent IDs now.
    func reportIDChanges(_ changes: [(index: Int, old: NSManagedObjectID, new: NSManagedObjectID)]) {
        let snapshotDelegate = delegate as? any NSFetchedResultsControllerSnapshotDelegate
        let differenceDelegate = sectionNameKeyPath == nil ? delegate as? any NSFetchedResultsControllerDifferenceDelegate : nil
        guard !subscribers.isEmpty || snapshotDelegate != nil || differenceDelegate != nil else { return }
        var set = FetchedResultsChangeSet(sections: [], rows: [], snapshot: snapshot)
        set.objectIDChanges = Dictionary(changes.map { ($0.old, $0.new) }, uniquingKeysWith: { a, _ in a })
        subscribers.yield(set)
        snapshotDelegate?.controller(erased, didChangeContentWith: set.snapshot)
        if let differenceDelegate {
            // Replace each ID in place: remove the old one and insert the new one at the same offset.
            var steps: [CollectionDifference<NSManagedObjectID>.Change] = []
            for change in changes {
                steps.append(.remove(offset: change.index, element: change.old, associatedWith: nil))
                steps.append(.insert(offset: change.index, element: change.new, associatedWith: nil))
            }
            if let diff = CollectionDifference(steps) { differenceDelegate.controller(erased, didChangeContentWith: diff) }
        }
    }

    /// Builds the value form of a batch.
    func changeSet(_ batch: ChangeBatch<RowKey>, _ objects: [RowKey: NSManagedObject]) -> FetchedResultsChangeSet {
        var rows: [RowChange<NSManagedObjectID>] = []
        var reloaded: [NSManagedObjectID] = []
        var removed: Set<NSManagedObjectID> = []
        for change in batch.rows {
            guard let object = objects[change.id] else { continue }
            rows.append(RowChange(change.type, id: object.objectID, from: change.from, to: change.to))
            // Every object that stays in the results and changed needs its cell reloaded: updated, moved (its sort
            // or section key changed), or deleted and inserted again (it left a deleted section or entered an
            // inserted one). A diffable data source would otherwise keep the old cell of an item it still has.
            switch change.type {
            case .update, .move: reloaded.append(object.objectID)
            case .delete: removed.insert(object.objectID)
            case .insert: break
            }
        }
        reloaded += rows.filter { $0.type == .insert && removed.contains($0.id) }.map(\.id)
        var snapshot = self.snapshot
        snapshot.reloadedItemIdentifiers = reloaded
        return FetchedResultsChangeSet(sections: batch.sections, rows: rows, snapshot: snapshot)
    }

    /// The batch as a difference of object IDs in a single section (removals at before offsets, insertions at after
    /// offsets, moves paired), or nil when it cannot be one (several sections).
    func difference(_ changes: FetchedResultsChangeSet) -> CollectionDifference<NSManagedObjectID>? {
        var steps: [CollectionDifference<NSManagedObjectID>.Change] = []
        for row in changes.rows {
            switch row.type {
            case .insert: steps.append(.insert(offset: row.to!.row, element: row.id, associatedWith: nil))
            case .delete: steps.append(.remove(offset: row.from!.row, element: row.id, associatedWith: nil))
            case .move:
                steps.append(.remove(offset: row.from!.row, element: row.id, associatedWith: row.to!.row))
                steps.append(.insert(offset: row.to!.row, element: row.id, associatedWith: row.from!.row))
            case .update: continue
            }
        }
        return CollectionDifference(steps)
    }
}

/// The continuations of `changes` sequences, shared safely with their termination handlers.
final class ChangeSubscribers: @unchecked Sendable {
    private let lock = NSLock()
    private var continuations: [UUID: AsyncStream<FetchedResultsChangeSet>.Continuation] = [:]

    var isEmpty: Bool { lock.withLock { continuations.isEmpty } }

    func add(_ continuation: AsyncStream<FetchedResultsChangeSet>.Continuation) {
        let id = UUID()
        lock.withLock { continuations[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.continuations.removeValue(forKey: id) }
        }
    }

    func yield(_ change: FetchedResultsChangeSet) {
        for continuation in lock.withLock({ Array(continuations.values) }) { continuation.yield(change) }
    }

    func finish() {
        for continuation in lock.withLock({ Array(continuations.values) }) { continuation.finish() }
    }
}
