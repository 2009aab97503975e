import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

/// The results of a fetch as a random-access collection that materializes objects one batch at a time and keeps at
/// most `retainedBatches` batches alive.
///
/// `fetch(_:)` must return a Swift array, so with `fetchBatchSize` it returns one fault object per row (rows load a
/// batch at a time, but every fault stays allocated). `fetchInBatches(_:)` returns this collection instead: only the
/// object IDs are held, so iterating a million results keeps a few batches of objects in memory.
///
/// For example:
/// ```swift
/// request.fetchBatchSize = 20
/// for product in try context.fetchInBatches(request) {   // one SELECT per 20 rows
///     total += product.price
/// }
/// ```
/// - Complexity: O(1) per access within a retained batch; one SQL statement per batch otherwise.
public final class BatchedFetchResults<Result: NSManagedObject>: RandomAccessCollection {
    /// The IDs of every result, in order.
    public let objectIDs: [NSManagedObjectID]
    /// Objects per batch.
    public let batchSize: Int
    /// How many batches of objects are kept alive at most.
    public let retainedBatches: Int
    /// How many batches have been read from the store so far (one SQL statement each).
    public private(set) var batchesLoaded = 0

    private weak var context: NSManagedObjectContext?
    private var batches: [Int: [Result]] = [:]
    private var recent: [Int] = []
    private let preloaded: [Result]?

    init(objectIDs: [NSManagedObjectID], batchSize: Int, context: NSManagedObjectContext, retainedBatches: Int = 3) {
        self.objectIDs = objectIDs
        self.batchSize = Swift.max(1, batchSize)
        self.context = context
        self.retainedBatches = Swift.max(1, retainedBatches)
        self.preloaded = nil
    }

    /// Results that were already materialized (a fetch that had to merge pending changes in memory).
    init(objects: [Result], context: NSManagedObjectContext) {
        self.objectIDs = objects.map(\.objectID)
        self.batchSize = Swift.max(1, objects.count)
        self.context = context
        self.retainedBatches = 1
        self.preloaded = objects
    }

    /// Always 0.
    public var startIndex: Int { 0 }
    /// The number of results.
    public var endIndex: Int { objectIDs.count }

    /// The result at `position`, loading its batch when needed.
    ///
    /// If the batch cannot be read (the context is gone,
    /// the store fails), the object comes back as a fault, which throws a clear error when its values are used.
    public subscript(position: Int) -> Result {
        precondition(position >= 0 && position < objectIDs.count, "Index \(position) is out of the results' range 0..<\(objectIDs.count).")
        if let preloaded { return preloaded[position] }
        let batch = position / batchSize
        if let objects = batches[batch] {
            touch(batch)
            return objects[position - batch * batchSize]
        }
        guard let context else { preconditionFailure("The context of these results has been released.") }
        // Make room first, so that no more than `retainedBatches` batches are ever alive at once.
        while recent.count >= retainedBatches {
            batches.removeValue(forKey: recent.removeFirst())
        }
        return context.withLock {
            let range = (batch * batchSize)..<Swift.min((batch + 1) * batchSize, objectIDs.count)
            let ids = Array(objectIDs[range])
            var objects: [Result] = []
            if let store = context.store, let rows = try? store.rows(for: ids) {
                batchesLoaded += 1
                objects = ids.map { id in
                    let object = rows[id].map { context.materialize($0) } ?? context.object(with: id)
                    return object as! Result  // checked for every entity of the request when the results were made
                }
                batches[batch] = objects
                touch(batch)
            } else {
                objects = ids.map { context.object(with: $0) as! Result }
            }
            return objects[position - batch * batchSize]
        }
    }

    private func touch(_ batch: Int) {
        recent.removeAll { $0 == batch }
        recent.append(batch)
        while recent.count > retainedBatches {
            batches.removeValue(forKey: recent.removeFirst())
        }
    }
}

extension NSManagedObjectContext {
    /// Runs a fetch and returns its objects as a collection that loads `fetchBatchSize` rows at a time (20 when the
    /// request has none) and keeps only the last few batches of objects alive.
    ///
    /// - Throws: the same errors as `fetch(_:)`, and `.invalidFetchRequest` when the entity's objects are not of
    ///   class `T`.
    public func fetchInBatches<T: NSManagedObject>(_ request: NSFetchRequest<T>) throws -> BatchedFetchResults<T> {
        try withLock {
            processPendingChanges()
            let entity = try resolveEntity(request)
            for candidate in request.includesSubentities ? entity.selfAndDescendants : [entity] where !candidate.isAbstract {
                let cls = (candidate.managedObjectClass as? NSManagedObject.Type) ?? NSManagedObject.self
                guard cls is T.Type else {
                    throw CoreDataError(
                        .invalidFetchRequest,
                        "Objects of entity '\(candidate.name)' are \(cls), not \(T.self); declare NSFetchRequest<\(cls)>.",
                        entityName: candidate.name)
                }
            }
            if request.includesPendingChanges, hasPendingChanges(for: entity, includesSubentities: request.includesSubentities) {
                let objects = try fetchObjectsOrIDs(request, entity: entity, idsOnly: false).objects
                return BatchedFetchResults(objects: objects.map { $0 as! T }, context: self)
            }
            let ids = try fetchObjectsOrIDs(request, entity: entity, idsOnly: true).ids
            return BatchedFetchResults(objectIDs: ids, batchSize: request.fetchBatchSize > 0 ? request.fetchBatchSize : 20, context: self)
        }
    }
}
