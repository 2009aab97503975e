internal import OpenCoreData

/// Runs a model context's work: the executor of a `@ModelActor` actor, on the context's own queue.
public protocol ModelExecutor: AnyObject, Sendable {
    /// The context the executor's actor works in.
    var modelContext: ModelContext { get }
}

/// The executor `@ModelActor` gives an actor: its jobs run one at a time on the queue of its model context, so that
/// the actor's methods use the context where it lives.
public final class DefaultSerialModelExecutor: ModelExecutor, SerialExecutor, @unchecked Sendable {
    /// The context.
    public let modelContext: ModelContext

    /// An executor for `modelContext`.
    public init(modelContext: ModelContext) {
        self.modelContext = modelContext
    }

    /// Runs the job on the context's queue.
    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        modelContext.context.perform { unowned.runSynchronously(on: executor) }
    }

    /// This executor, unowned.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

/// An actor that works with models on a context of its own: what `@ModelActor` makes an actor.
///
/// For example:
/// ```swift
/// @ModelActor actor Importer {
///     func importTrips(_ names: [String]) throws {
///         for name in names { modelContext.insert(Trip(name: name, startDate: .now, code: name)) }
///         try modelContext.save()
///     }
/// }
/// let importer = Importer(modelContainer: container)
/// try await importer.importTrips(["LIS", "OPO"])
/// ```
public protocol ModelActor: Actor {
    /// The container the actor's context works in.
    nonisolated var modelContainer: ModelContainer { get }
    /// The actor's executor, which owns its context.
    nonisolated var modelExecutor: any ModelExecutor { get }
}

extension ModelActor {
    /// The actor's context (use it only on the actor).
    public var modelContext: ModelContext { modelExecutor.modelContext }

    /// The model `id` names, in the actor's context.
    public subscript<T: PersistentModel>(id: PersistentIdentifier, as type: T.Type) -> T? {
        modelContext.model(for: id) as? T
    }
}

/// Gives an actor a model context of its own and runs its methods where that context lives: SwiftData's
/// `@ModelActor`.
@attached(member, names: named(modelExecutor), named(modelContainer), named(init), named(unownedExecutor))
@attached(extension, conformances: ModelActor)
public macro ModelActor() = #externalMacro(module: "OpenSwiftDataMacros", type: "ModelActorMacro")
