import Dispatch
import Foundation
import OpenCoreDataModel
import Testing

@testable import OpenCoreDataContext

/// A context's lock is recursive for the thread that holds it and excludes every other thread until the holder's last
/// `unlock()`.
@Suite struct ContextLockTests {
    /// A counter only the lock's holder touches.
    private final class Counter: @unchecked Sendable {
        var value = 0
    }

    @Test func theHolderTakesItAgainAndHoldsItUntilTheLastUnlock() {
        let lock = ContextLock()
        #expect(!lock.isHeldByCurrentThread)
        lock.lock()
        lock.lock()
        lock.lock()
        #expect(lock.isHeldByCurrentThread)
        lock.unlock()
        lock.unlock()
        #expect(lock.isHeldByCurrentThread)
        lock.unlock()
        #expect(!lock.isHeldByCurrentThread)
        // Free again: another thread takes it at once.
        let taken = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            lock.lock()
            lock.unlock()
            taken.signal()
        }
        #expect(taken.wait(timeout: .now() + 10) == .success)
    }

    @Test func anotherThreadWaitsForTheHoldersLastUnlock() {
        let lock = ContextLock()
        let counter = Counter()
        let started = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        lock.lock()
        lock.lock()
        Thread.detachNewThread {
            started.signal()
            lock.lock()
            counter.value += 1
            lock.unlock()
            finished.signal()
        }
        started.wait()
        // The other thread is waiting (or about to): it cannot get in while this thread holds the lock.
        Thread.sleep(forTimeInterval: 0.05)
        lock.unlock()
        Thread.sleep(forTimeInterval: 0.05)
        #expect(counter.value == 0, "the other thread got in while the lock was still held once")
        lock.unlock()
        #expect(finished.wait(timeout: .now() + 10) == .success)
        lock.lock()
        #expect(counter.value == 1)
        lock.unlock()
    }

    @Test func threadsTakingItNestedLoseNoIncrement() {
        let lock = ContextLock()
        let counter = Counter()
        let (threads, rounds) = (4, 20_000)
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for round in 0..<rounds {
                lock.lock()
                if round % 2 == 0 {
                    lock.lock()
                    counter.value += 1
                    lock.unlock()
                } else {
                    counter.value += 1
                }
                lock.unlock()
            }
        }
        #expect(counter.value == threads * rounds)
        #expect(!lock.isHeldByCurrentThread)
    }

    @Test func aContextHoldsItForAPerformAndWaitBlockOnly() throws {
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        #expect(!context.lock.isHeldByCurrentThread)
        let held = context.performAndWait { context.lock.isHeldByCurrentThread }
        #expect(held)
        #expect(!context.lock.isHeldByCurrentThread)
        // Nested blocks: still held inside, released after the outer one.
        let nested = context.performAndWait { context.performAndWait { context.lock.isHeldByCurrentThread } }
        #expect(nested)
        #expect(!context.lock.isHeldByCurrentThread)
    }
}
