package import OpenCoreData
public import OpenCoreDataChanges

/// A live query without SwiftUI: the models a descriptor matches, kept current as the context changes and as other
/// contexts save, with each change as a batch in UITableView terms — what `@Query` gives a SwiftUI view, for a server
/// or a terminal app.
///
/// For example:
/// ```swift
/// let query = try ModelQuery(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]), sectionedBy: \.country, in: context)
/// print(query.results.count, query.sections.map(\.name))
/// Task {
///     for await change in query.changes { table.apply(change) }   // sections and rows by PersistentIdentifier
/// }
/// ```
/// It stands on the fetched results controller: a change costs what the controller's does (it places the changed rows
/// among the others), not a re-fetch, and `results` reads models a batch at a time as they are asked for. The query
/// updates when its context processes pending changes: after `insert`, `delete`, `save`, `processPendingChanges()`, an
/// autosave, and a save of another context of the container merging in. It is `Observable`: reading `results` or
/// `sections` in `withObservationTracking` is told of each change.
public final class ModelQuery<T: PersistentModel>: Observable {
    /// The context the query reads.
    public let context: ModelContext
    private let controller: NSFetchedResultsController<NSManagedObject>
    private let relay: QueryRelay
    private let registrar = ObservationRegistrar()
    private var counts: [Int] = []
    private var names: [String] = []
    /// The observed properties' key paths, made once (a key path literal is instantiated at each use: a third of a
    /// change's cost in the query, W3 under callgrind).
    private let paths = (results: \ModelQuery<T>.results, sections: \ModelQuery<T>.sections)

    /// A live query of `descriptor` in `context`, in sections by the string `sectionedBy` names when given (rows must
    /// then be sorted by it first, as for a fetched results controller).
    ///
    /// - Throws: the descriptor's errors (a predicate or sort OpenSwiftData cannot run), a descriptor without a sort,
    ///   a section key that is not a persisted property, and the fetch's.
    public init(_ descriptor: FetchDescriptor<T>, sectionedBy: KeyPath<T, String>? = nil, in context: ModelContext) throws {
        self.context = context
        let request = try context.fetchRequest(descriptor)
        guard !(request.sortDescriptors?.isEmpty ?? true) else {
            throw SwiftDataError("A live query of \(T.self) needs an order: give the descriptor's sortBy at least one sort.")
        }
        request.fetchBatchSize = 20
        var sectionKey: String?
        if let sectionedBy {
            guard let property = T.schemaMetadata.first(where: { $0.keyPath == sectionedBy }) else {
                throw SwiftDataError("\(T.self) cannot be sectioned by \(sectionedBy): section by a persisted String property.")
            }
            sectionKey = property.name
        }
        controller = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context.context, sectionNameKeyPath: sectionKey, cacheName: nil)
        relay = QueryRelay()
        relay.onBatch = { [unowned self] batch in self.apply(batch) }
        controller.delegate = relay
        try context.context.performAndWait { try controller.performFetch() }
        refreshCounts()
        context.liveQueries += 1
    }

    /// The models, in order (all sections one after another).
    public var results: ModelQueryResults<T> {
        registrar.access(self, keyPath: paths.results)
        return ModelQueryResults(query: self, count: counts.reduce(0, +))
    }

    /// The sections: each one's name and its models (one section named "" when the query is not sectioned).
    public var sections: [ModelQuerySection<T>] {
        registrar.access(self, keyPath: paths.sections)
        var start = 0
        return zip(names, counts).map { name, count in
            defer { start += count }
            return ModelQuerySection(name: name, results: ModelQueryResults(query: self, count: count, offset: start))
        }
    }

    /// The change batches from now on.
    ///
    /// Each batch lists sections inserted and deleted and rows inserted, deleted, moved and updated, by
    /// `PersistentIdentifier`, with index paths as a table applies them. Each call returns a new sequence.
    public var changes: AsyncStream<ChangeBatch<PersistentIdentifier>> {
        let (stream, continuation) = AsyncStream<ChangeBatch<PersistentIdentifier>>.makeStream(bufferingPolicy: .unbounded)
        relay.subscribers.append(continuation)
        return stream
    }

    /// The model at offset `index` of all sections together.
    func model(at index: Int) -> T {
        var section = 0
        var row = index
        while section < counts.count, row >= counts[section] {
            row -= counts[section]
            section += 1
        }
        let object = context.context.performAndWait { controller.object(at: IndexPath(row: row, section: section)) }
        return context.model(for: object, as: T.self) as! T
    }

    private func refreshCounts() {
        let sections = context.context.performAndWait { controller.sections ?? [] }
        counts = sections.map(\.numberOfObjects)
        names = sections.map(\.name)
    }

    private func apply(_ batch: ChangeBatch<NSManagedObjectID>) {
        registrar.withMutation(of: self, keyPath: paths.results) {
            registrar.withMutation(of: self, keyPath: paths.sections) {
                // Rows inserted, deleted and moved change their sections' counts, which the batch says; a batch that
                // inserts or deletes sections reads the sections again.
                guard batch.sections.isEmpty else { return refreshCounts() }
                for row in batch.rows {
                    if row.type == .delete || row.type == .move, let from = row.from { counts[from.section] -= 1 }
                    if row.type == .insert || row.type == .move, let to = row.to { counts[to.section] += 1 }
                }
            }
        }
        // The identifiers (each a row's URI) are made only for those who listen.
        guard !relay.subscribers.isEmpty else { return }
        let identified = ChangeBatch(
            sections: batch.sections,
            rows: batch.rows.map { RowChange($0.type, id: PersistentIdentifier(objectID: $0.id), from: $0.from, to: $0.to) })
        for subscriber in relay.subscribers { subscriber.yield(identified) }
    }

    deinit {
        context.liveQueries -= 1
        for subscriber in relay.subscribers { subscriber.finish() }
    }
}

extension ModelQuery {
    /// The controller the query stands on, for a live table that draws it (the seed apps').
    package var fetchedResultsController: NSFetchedResultsController<NSManagedObject> { controller }

    /// Hands `delegate` each of the controller's delegate calls, after the query has taken it (held weakly).
    package func forwardChanges(to delegate: any NSFetchedResultsControllerDelegate) {
        relay.followers.append(QueryRelay.Follower(delegate: delegate))
    }

    /// The model of one of the controller's objects.
    package func model(of object: NSManagedObject) -> T { context.model(for: object, as: T.self) as! T }
}

/// A query's models (or one section's), read from the controller by position as they are asked for.
public struct ModelQueryResults<T: PersistentModel>: RandomAccessCollection {
    let query: ModelQuery<T>
    /// How many models.
    public let count: Int
    let offset: Int

    init(query: ModelQuery<T>, count: Int, offset: Int = 0) {
        self.query = query
        self.count = count
        self.offset = offset
    }

    /// 0.
    public var startIndex: Int { 0 }
    /// `count`.
    public var endIndex: Int { count }
    /// The model at `position`.
    public subscript(position: Int) -> T {
        precondition(position >= 0 && position < count, "index \(position) is outside the query's \(count) results")
        return query.model(at: offset + position)
    }
}

/// A section of a query: its name and its models.
public struct ModelQuerySection<T: PersistentModel> {
    /// The section's name (the value of the property the query is sectioned by).
    public let name: String
    /// The section's models, in order.
    public let results: ModelQueryResults<T>
}

/// Turns the controller's delegate calls into one batch per change.
private final class QueryRelay: NSFetchedResultsControllerDelegate {
    var onBatch: (ChangeBatch<NSManagedObjectID>) -> Void = { _ in }
    /// Delegates handed each call after the query.
    var followers: [Follower] = []

    struct Follower {
        weak var delegate: (any NSFetchedResultsControllerDelegate)?
    }
    var subscribers: [AsyncStream<ChangeBatch<PersistentIdentifier>>.Continuation] = []
    private var batch = ChangeBatch<NSManagedObjectID>()

    func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        batch = ChangeBatch()
        for follower in followers { follower.delegate?.controllerWillChangeContent(controller) }
    }

    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange sectionInfo: any NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType
    ) {
        batch.sections.append(SectionChange(type, index: sectionIndex, name: sectionInfo.name))
        for follower in followers {
            follower.delegate?.controller(controller, didChange: sectionInfo, atSectionIndex: sectionIndex, for: type)
        }
    }

    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?
    ) {
        guard let object = anObject as? NSManagedObject else { return }
        batch.rows.append(RowChange(type, id: object.objectID, from: indexPath, to: newIndexPath))
        for follower in followers {
            follower.delegate?.controller(controller, didChange: anObject, at: indexPath, for: type, newIndexPath: newIndexPath)
        }
    }

    func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        onBatch(batch)
        for follower in followers { follower.delegate?.controllerDidChangeContent(controller) }
    }
}
