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
    @usableFromInline var registrar: ObservationRegistrar?

    /// A registrar made on first use.
    public init() {}

    /// Records a read of `keyPath` on `subject` for the observation in progress, if any (making the registrar).
    @inlinable
    public mutating func access<Subject: Observable, Member>(_ subject: Subject, keyPath: KeyPath<Subject, Member>) {
        if registrar == nil { registrar = ObservationRegistrar() }
        registrar!.access(subject, keyPath: keyPath)
    }

    /// Runs `mutation`, telling the observers of `keyPath` on `subject` (none when nothing was ever read).
    @inlinable
    public func withMutation<Subject: Observable, Member, Result>(
        of subject: Subject, keyPath: KeyPath<Subject, Member>, _ mutation: () throws -> Result
    ) rethrows -> Result {
        guard let registrar else { return try mutation() }
        return try registrar.withMutation(of: subject, keyPath: keyPath, mutation)
    }

    /// Tells the observers of `keyPath` on `subject` that it will change.
    @inlinable
    public func willSet<Subject: Observable, Member>(_ subject: Subject, keyPath: KeyPath<Subject, Member>) {
        registrar?.willSet(subject, keyPath: keyPath)
    }

    /// Tells the observers of `keyPath` on `subject` that it changed.
    @inlinable
    public func didSet<Subject: Observable, Member>(_ subject: Subject, keyPath: KeyPath<Subject, Member>) {
        registrar?.didSet(subject, keyPath: keyPath)
    }
}
