import Observation

/// Whether reading inside `read` and then running `change` tells the observation of that read (`withObservationTracking`'s
/// `onChange` fires): how a test checks that a model property's change reaches its observers.
public func changeIsObserved(reading read: () -> Void, after change: () -> Void) -> Bool {
    final class Flag: @unchecked Sendable { var fired = false }
    let flag = Flag()
    withObservationTracking(read) { flag.fired = true }
    change()
    return flag.fired
}
