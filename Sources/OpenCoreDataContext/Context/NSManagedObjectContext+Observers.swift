import Foundation

// Observers of a context's processed batches of changes, and the tokens that keep them registered.
extension NSManagedObjectContext {
    /// Registers a callback for every processed batch of changes (local edits, saves, merges); returns a token that
    /// removes it when cancelled or released.
    public func addChangeObserver(_ observer: @escaping (ContextChange) -> Void) -> ContextObservation {
        withLock {
            let id = UUID()
            observers[id] = observer
            return ContextObservation { [weak self] in
                guard let self else { return }
                self.withLock { _ = self.observers.removeValue(forKey: id) }
            }
        }
    }
}

/// A token for a change observer: the observer stays registered until the token is cancelled or released.
///
/// For example:
/// ```swift
/// let observation = context.addChangeObserver { change in log(change) }
/// observation.cancel()   // no more calls
/// ```
public final class ContextObservation: @unchecked Sendable {
    var onCancel: (() -> Void)?
    let lock = NSLock()

    init(_ onCancel: @escaping () -> Void) { self.onCancel = onCancel }

    /// Stops the observation.
    public func cancel() {
        lock.lock()
        let action = onCancel
        onCancel = nil
        lock.unlock()
        action?()
    }

    deinit { cancel() }
}
