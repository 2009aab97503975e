public import Observation

/// A model's observation registrar, made when the model is first read.
///
/// `@Model` declares one in each model (SwiftData's `@Model` declares an `ObservationRegistrar`) and its accessors
/// report reads and changes to it, as Observation's do. A registrar costs an allocation to make and a call into it for
/// each change; but an observation of a model starts with a read of one of its properties (`withObservationTracking`
/// records the reads), and the read makes the registrar. So a model that was never read has no observer to tell: its
/// changes skip the registrar, and a model made, filled and inserted without being read — an import, a batch of new
/// rows — never makes one. (Registrar and changes were 1.9k of the 15k instructions W6's `@Model` contender spent on
/// each model, under callgrind; a model whose initializer sets an optional property last changes it once, through its
/// setter, because Swift initializes an optional property to nil first.)
///
/// Like a model, it is used from one thread at a time: the first read makes the registrar without a lock.
public struct ModelObservationRegistrar: Sendable {
    /// The registrar, in a box of its own: `ObservationRegistrar` is a resilient type of a library built for evolution,
    /// so reading it out of an optional copies it through its value witnesses (two copies and two destructions a read,
    /// about 500 instructions, in W6's accessor workload); a class's constant field costs one copy a call. (Kept in
    /// a `ManagedBuffer`'s tail and called through a pointer, it cost more.)
    @usableFromInline var box: Box?

    /// A registrar made on first use.
    public init() {}

    /// The registrar of a model that was read.
    ///
    /// The registrar is called through the box's own methods: a call on `box.registrar` from outside copies the
    /// registrar (a resilient value) out of the box first, while inside a method of the box it is used in place (100 of
    /// the 350 instructions a read cost, in W6's accessor workload).
    @usableFromInline final class Box: Sendable {
        @usableFromInline let registrar = ObservationRegistrar()
        @usableFromInline init() {}

        @inlinable func access<Subject: Observable, Member>(_ subject: Subject, keyPath: KeyPath<Subject, Member>) {
            registrar.access(subject, keyPath: keyPath)
        }

        @inlinable func willSet<Subject: Observable, Member>(_ subject: Subject, keyPath: KeyPath<Subject, Member>) {
            registrar.willSet(subject, keyPath: keyPath)
        }

        @inlinable func didSet<Subject: Observable, Member>(_ subject: Subject, keyPath: KeyPath<Subject, Member>) {
            registrar.didSet(subject, keyPath: keyPath)
        }
    }

    /// Records a read of `keyPath` on `subject` for the observation in progress, if any (making the registrar).
    @inlinable
    public mutating func access<Subject: Observable, Member>(_ subject: Subject, keyPath: KeyPath<Subject, Member>) {
        if box == nil { box = Box() }
        box.unsafelyUnwrapped.access(subject, keyPath: keyPath)
    }

    /// Runs `mutation`, telling the observers of `keyPath` on `subject` (none when nothing was ever read).
    @inlinable
    public func withMutation<Subject: Observable, Member, Result>(
        of subject: Subject, keyPath: KeyPath<Subject, Member>, _ mutation: () throws -> Result
    ) rethrows -> Result {
        guard let box else { return try mutation() }
        // What `ObservationRegistrar.withMutation` does, written here so that it is inlined with the mutation into
        // the model's setter (the library's generic function takes the mutation as a closure it calls).
        box.willSet(subject, keyPath: keyPath)
        defer { box.didSet(subject, keyPath: keyPath) }
        return try mutation()
    }

    /// Tells the observers of `keyPath` on `subject` that it will change.
    @inlinable
    public func willSet<Subject: Observable, Member>(_ subject: Subject, keyPath: KeyPath<Subject, Member>) {
        box?.willSet(subject, keyPath: keyPath)
    }

    /// Tells the observers of `keyPath` on `subject` that it changed.
    @inlinable
    public func didSet<Subject: Observable, Member>(_ subject: Subject, keyPath: KeyPath<Subject, Member>) {
        box?.didSet(subject, keyPath: keyPath)
    }
}
