import Foundation  // pthread
import Synchronization

/// A context's lock: recursive, as `NSRecursiveLock`, but taken again by the thread that holds it for the cost of a
/// compare.
///
/// A context's work runs under its lock (`performAndWait` holds it for the whole block), and every accessor of its
/// objects takes it again (`NSManagedObject.withContext`): taking and releasing Foundation's recursive lock cost 72
/// instructions of the ~670 a typed set of a new object cost (W6, callgrind). Here a re-entry reads the holder's thread
/// and counts.
///
/// Only the holder writes `owner` and `depth`. Another thread may read `owner` while it changes, but can never read
/// its own thread there unless it holds the lock (it cleared the field itself before it last let the lock go), so the
/// compare is exact without ordering; the mutex orders everything else.
final class ContextLock: @unchecked Sendable {
    /// The thread holding the lock, 0 when none does.
    private let owner = Atomic<UInt>(0)
    /// How many times the holder has taken the lock; read and written only by the holder.
    private var depth = 0
    /// The lock threads wait on; allocated once, never moved.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// The calling thread, as a number that is never 0.
    @inline(__always) private static var currentThread: UInt {
        // `pthread_t` is a pointer on Darwin and musl, an integer on glibc and Bionic.
        #if canImport(Darwin) || canImport(Musl)
            UInt(bitPattern: pthread_self())
        #else
            UInt(truncatingIfNeeded: pthread_self())
        #endif
    }

    /// Takes the lock, waiting while another thread holds it; a thread that holds it takes it again at once.
    func lock() {
        let thread = Self.currentThread
        if owner.load(ordering: .relaxed) == thread {
            depth += 1
            return
        }
        pthread_mutex_lock(mutex)
        owner.store(thread, ordering: .relaxed)
        depth = 1
    }

    /// Lets the lock go once; the last of the holder's `lock()` calls lets other threads take it.
    func unlock() {
        assert(isHeldByCurrentThread, "ContextLock unlocked by a thread that does not hold it")
        depth -= 1
        guard depth == 0 else { return }
        owner.store(0, ordering: .relaxed)
        pthread_mutex_unlock(mutex)
    }

    /// Whether the calling thread holds the lock.
    var isHeldByCurrentThread: Bool { owner.load(ordering: .relaxed) == Self.currentThread }
}
