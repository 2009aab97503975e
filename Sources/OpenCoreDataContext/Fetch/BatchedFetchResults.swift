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
/// for product in try context.fetchInBatches(request) {   // 20 objects at a time; rows read ahead
///     total += product.price
/// }
/// ```
/// Walking the results in order (either way) reads rows ahead: the first batch alone, then twice as many batches'
/// rows in one statement each time, up to 500 rows. The rows wait as values, not objects (never more than
/// `retainedBatches` batches of objects are alive), and are dropped when the context saves, merges or changes, so an
/// object is never made from a row older than what the context has seen.
///
/// - Complexity: O(1) per access within a retained batch; one SQL statement per batch at random, about one per 500
///   rows in order.
public final class BatchedFetchResults<Result: NSManagedObject>: RandomAccessCollection {
    /// The IDs of every result, in order.
    public let objectIDs: [NSManagedObjectID]
    /// Objects per batch.
    public let batchSize: Int
    /// How many batches of objects are kept alive at most.
    public let retainedBatches: Int
    // Release builds skip the run-time exclusivity checks on the fields below (an access cost about 150 instructions
    // through the runtime's access set, a few per object scrolled): only this class's own code touches them, one access
    // at a time, on the thread that uses the collection. Debug builds, and so the tests, keep the checks.
    /// How many batches have been read from the store so far (one SQL statement each; a statement reading ahead
    /// counts once).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    public private(set) var batchesLoaded = 0

    private weak var context: NSManagedObjectContext?
    /// The batches of objects alive (at most `retainedBatches`), the one used last at the end.
    ///
    /// Held as `NSManagedObject`, not `Result`: code that uses this class from another module runs its generic
    /// methods unspecialized, and a dictionary and arrays of the generic type went through type metadata and value
    /// witnesses on every access (a tenth of scrolling's instructions). Each object is cast once, where it is returned.
    /// A list, not a dictionary by batch number: every access looks its batch up, and hashing an `Int` costs more
    /// than comparing the three numbers of the list.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var alive: [(batch: Int, objects: [NSManagedObject])] = []
    private let preloaded: [Result]?
    /// Rows read ahead of the batches made so far, by primary key (every result is in the fetched entity's table), and
    /// the context's `storeReadEpoch` when they were read.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var readAhead: [Int64: RowSnapshot] = [:]
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var readAheadEpoch = 0
    /// The batch made last, and how many batches the next read in the same direction covers.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var lastBatch: Int?
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    private var span = 1
    /// The most rows one read ahead covers.
    private static var readAheadRows: Int { 500 }  // (a generic class has no stored static properties)

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
        // (Checked for every entity of the request when the results were made.)
        return object(at: position) as! Result
    }

    /// The object at `position`, from its batch (made when it is not alive).
    private func object(at position: Int) -> NSManagedObject {
        let batch = position / batchSize
        if let last = alive.indices.last {
            if alive[last].batch == batch { return alive[last].objects[position - batch * batchSize] }
            if let found = alive.lastIndex(where: { $0.batch == batch }) {
                // Used now: it moves to the end, the last to go.
                let entry = alive.remove(at: found)
                alive.append(entry)
                return entry.objects[position - batch * batchSize]
            }
        }
        guard let context else { preconditionFailure("The context of these results has been released.") }
        // Make room first, so that no more than `retainedBatches` batches are ever alive at once.
        if alive.count >= retainedBatches { alive.removeFirst(alive.count - retainedBatches + 1) }
        return context.withLock { () -> NSManagedObject in
            let range = range(of: batch)
            guard readRows(of: batch, in: context) else { return context.object(with: objectIDs[position]) }
            var objects: [NSManagedObject] = []
            objects.reserveCapacity(range.count)
            for id in objectIDs[range] {
                objects.append(readAhead.removeValue(forKey: id.primaryKey).map { context.materialize($0) } ?? context.object(with: id))
            }
            alive.append((batch, objects))
            return objects[position - batch * batchSize]
        }
    }

    private func range(of batch: Int) -> Range<Int> {
        (batch * batchSize)..<Swift.min((batch + 1) * batchSize, objectIDs.count)
    }

    /// Makes sure `readAhead` holds the rows of `batch`'s objects (those the store has); false when the store cannot
    /// be read.
    ///
    /// They may be there already, if the context has not changed since they were read; else they are read now — with
    /// the next batches' rows too when the walk goes on in the same direction.
    private func readRows(of batch: Int, in context: NSManagedObjectContext) -> Bool {
        let range = range(of: batch)
        if readAheadEpoch != context.storeReadEpoch { readAhead = [:] }
        let step = lastBatch.map { batch - $0 }
        lastBatch = batch
        // Rows are read for whole runs of batches: a batch whose first or last row is here was read with them (a
        // row missing in between is one the store no longer has).
        if !readAhead.isEmpty,
            readAhead[objectIDs[range.lowerBound].primaryKey] != nil || readAhead[objectIDs[range.upperBound - 1].primaryKey] != nil
        {
            return true
        }
        // In order (forward or back): twice the batches of the previous read, up to `readAheadRows` rows.
        let direction = step == 1 || step == -1 ? step! : 0
        span = direction == 0 ? 1 : Swift.min(span * 2, Swift.max(1, Self.readAheadRows / batchSize))
        let last = Swift.max(0, Swift.min(batch + direction * (span - 1), (objectIDs.count - 1) / batchSize))
        let first = Swift.min(batch, last)
        let wanted = objectIDs[self.range(of: first).lowerBound..<self.range(of: Swift.max(batch, last)).upperBound]
        guard let store = context.store, let rows = try? context.readingPinned({ try store.rowsByPrimaryKey(for: Array(wanted)) }) else {
            return false
        }
        batchesLoaded += 1
        readAheadEpoch = context.storeReadEpoch
        readAhead = rows
        return true
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
