import Dispatch
import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Core Data's asynchronous fetch: `execute(_:)` returns at once, the fetch runs later on the context's queue and hands
/// its objects (or why there are none) to the completion block there.
@Suite struct AsynchronousFetchTests {
    /// Results a completion block saw, for the test's thread to read.
    final class Seen: @unchecked Sendable {
        let done = DispatchSemaphore(value: 0)
        var titles: [String]?
        var error: (any Error)?
        var onContextQueue = false
    }

    func stack() throws -> TestStack {
        let stack = try TestStack(model: try NestedContextTests.model())
        let context = stack.context()
        for title in ["b", "a", "c"] { try context.make("Item", ["title": title]) }
        try context.save()
        return stack
    }

    @Test func theObjectsReachTheCompletionBlockOnTheContextsQueue() throws {
        let stack = try stack()
        let context = stack.context()
        let fetch = NSFetchRequest<NSManagedObject>(entityName: "Item")
        fetch.sortDescriptors = [FetchSortDescriptor(key: "title")]
        let seen = Seen()
        let request = NSAsynchronousFetchRequest(fetchRequest: fetch) { result in
            seen.titles = result.finalResult?.compactMap { $0.string("title") }
            seen.error = result.operationError
            seen.onContextQueue = result.managedObjectContext === context && result.finalResult?.first?.managedObjectContext === context
            seen.done.signal()
        }
        let pending = try #require(try context.execute(request) as? NSAsynchronousFetchResult<NSManagedObject>)
        #expect(seen.done.wait(timeout: .now() + 10) == .success)
        #expect(seen.titles == ["a", "b", "c"] && seen.error == nil && seen.onContextQueue)
        #expect(pending.finalResult?.count == 3)
        #expect(pending.progress?.isFinished == true)
    }

    @Test func aCancelledFetchReadsNothingAndSaysWhy() throws {
        let stack = try stack()
        let context = stack.context()
        let blocker = DispatchSemaphore(value: 0)
        context.perform { blocker.wait() }  // the queue is busy: the fetch cannot start yet
        let seen = Seen()
        let request = NSAsynchronousFetchRequest(fetchRequest: NSFetchRequest<NSManagedObject>(entityName: "Item")) { result in
            seen.titles = result.finalResult.map { $0.compactMap { $0.string("title") } }
            seen.error = result.operationError
            seen.done.signal()
        }
        let pending = try #require(try context.execute(request) as? NSPersistentStoreAsynchronousResult)
        pending.cancel()
        blocker.signal()
        #expect(seen.done.wait(timeout: .now() + 10) == .success)
        #expect(seen.titles == nil)
        #expect((seen.error as? CoreDataError)?.code == .userCancelled)
    }

    @Test func aFetchThatFailsHandsOverItsError() throws {
        let stack = try stack()
        let context = stack.context()
        let fetch = NSFetchRequest<NSManagedObject>(entityName: "Item")
        fetch.predicate = try FetchPredicate(format: "colour == 'red'")
        let seen = Seen()
        _ = try context.execute(
            NSAsynchronousFetchRequest(fetchRequest: fetch) { result in
                seen.titles = result.finalResult.map { $0.compactMap { $0.string("title") } }
                seen.error = result.operationError
                seen.done.signal()
            })
        #expect(seen.done.wait(timeout: .now() + 10) == .success)
        #expect(seen.titles == nil)
        #expect("\(seen.error.map { "\($0)" } ?? "")".contains("colour"))
    }
}
