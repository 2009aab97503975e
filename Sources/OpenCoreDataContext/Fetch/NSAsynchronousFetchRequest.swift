import Foundation
import OpenCoreDataModel

/// A fetch that runs after `execute(_:)` returns and hands its objects to a completion block on the context's queue
/// (Core Data's `NSAsynchronousFetchRequest`).
///
/// For example:
/// ```swift
/// let request = NSAsynchronousFetchRequest(fetchRequest: NSFetchRequest<NSManagedObject>(entityName: "Item")) { result in
///     show(result.finalResult ?? [])
/// }
/// let pending = try context.execute(request) as? NSPersistentStoreAsynchronousResult
/// pending?.cancel()   // if the objects are no longer wanted
/// ```
/// The fetch runs as `fetch(_:)` does (pending changes included), in a block of its own on the context's queue;
/// `progress` completes when it has; `cancel()` before then skips it, and the completion block gets no objects and
/// `operationError` saying so.
public final class NSAsynchronousFetchRequest<ResultType>: NSPersistentStoreRequest, @unchecked Sendable {
    /// The fetch to run.
    public let fetchRequest: NSFetchRequest<ResultType>
    /// Called on the context's queue with the result.
    public let completionBlock: ((NSAsynchronousFetchResult<ResultType>) -> Void)?
    /// How many results are expected, for `progress` (0: unknown).
    public var estimatedResultCount = 0

    /// A request running `fetchRequest`, calling `completionBlock` with the result.
    public init(fetchRequest: NSFetchRequest<ResultType>, completionBlock: ((NSAsynchronousFetchResult<ResultType>) -> Void)?) {
        self.fetchRequest = fetchRequest
        self.completionBlock = completionBlock
    }
}

/// A request running after `execute(_:)` returned (Core Data's `NSPersistentStoreAsynchronousResult`).
public class NSPersistentStoreAsynchronousResult: NSPersistentStoreResult, @unchecked Sendable {
    /// The context the request runs in.
    public let managedObjectContext: NSManagedObjectContext
    private let state = NSLock()
    private var _operationError: (any Error)?
    private var _cancelled = false

    /// Why the request did not finish (a cancellation, a failed fetch); nil until then, and after a success.
    public var operationError: (any Error)? { state.withLock { _operationError } }
    /// The request's progress: complete when it has finished.
    public let progress: Progress?

    init(context: NSManagedObjectContext, expected: Int) {
        managedObjectContext = context
        progress = Progress(totalUnitCount: Int64(max(1, expected)))
    }

    /// Stops the request if it has not run yet: it then reads nothing, and its completion block gets no results and an
    /// `operationError` saying it was cancelled.
    public func cancel() {
        state.withLock { _cancelled = true }
        progress?.cancel()
    }

    var isCancelled: Bool { state.withLock { _cancelled } }

    func fail(_ error: any Error) { state.withLock { _operationError = error } }
}

/// What an asynchronous fetch found (Core Data's `NSAsynchronousFetchResult`).
public final class NSAsynchronousFetchResult<ResultType>: NSPersistentStoreAsynchronousResult, @unchecked Sendable {
    /// The request that ran.
    public let fetchRequest: NSAsynchronousFetchRequest<ResultType>
    private let lock = NSLock()
    private var _finalResult: [ResultType]?

    /// The objects fetched, once the fetch has run (nil before, and when it failed or was cancelled).
    public var finalResult: [ResultType]? { lock.withLock { _finalResult } }

    init(_ request: NSAsynchronousFetchRequest<ResultType>, context: NSManagedObjectContext) {
        fetchRequest = request
        super.init(context: context, expected: request.estimatedResultCount)
    }

    func finish(_ objects: [ResultType]) {
        lock.withLock { _finalResult = objects }
        if let progress { progress.completedUnitCount = progress.totalUnitCount }
    }
}

/// An asynchronous fetch, whatever its result type: what `execute(_:)` starts.
protocol AsynchronousFetch {
    func start(in context: NSManagedObjectContext) -> NSPersistentStoreResult
}

extension NSAsynchronousFetchRequest: AsynchronousFetch {
    func start(in context: NSManagedObjectContext) -> NSPersistentStoreResult {
        let result = NSAsynchronousFetchResult(self, context: context)
        context.perform {
            if result.isCancelled {
                result.fail(CoreDataError(.userCancelled, "The asynchronous fetch of \(self.fetchRequest) was cancelled before it ran."))
            } else {
                do {
                    result.finish(try context.fetch(self.fetchRequest))
                } catch {
                    result.fail(error)
                }
            }
            self.completionBlock?(result)
        }
        return result
    }
}
