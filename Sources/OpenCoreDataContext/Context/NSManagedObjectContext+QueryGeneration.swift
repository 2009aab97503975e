import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

/// A query generation: the state of a context's stores that its reads see while it is pinned to it (Core Data's
/// `NSQueryGenerationToken`).
///
/// `NSQueryGenerationToken.current` asks for the stores' state at the moment the context is pinned; a context's
/// `queryGenerationToken` names the generation it reads, and pins another context of the same coordinator to it.
public final class NSQueryGenerationToken: Hashable, Sendable, CustomStringConvertible {
    /// The latest generation, taken when a context is pinned with it.
    public static let current = NSQueryGenerationToken(generations: nil)

    /// The stores' frozen data, by store identifier (nil for `current`).
    let generations: [String: StoreGeneration]?

    init(generations: [String: StoreGeneration]?) { self.generations = generations }

    /// Whether two tokens are the same generation.
    public static func == (a: NSQueryGenerationToken, b: NSQueryGenerationToken) -> Bool { a === b }

    /// Hashes the token's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// "current", or the token's identity.
    public var description: String {
        generations == nil ? "<NSQueryGenerationToken current>" : "<NSQueryGenerationToken \(ObjectIdentifier(self))>"
    }
}

/// The key of a did-save notification's query generation (Core Data's name; this project's notifications do not carry
/// one: a context takes the latest generation when it merges).
public let NSManagedObjectContextQueryGenerationKey = "NSManagedObjectContextQueryGenerationKey"

extension NSManagedObjectContext {
    /// The query generation the context reads, or nil when it reads the latest data (the default).
    public var queryGenerationToken: NSQueryGenerationToken? { withLock { pinnedGeneration } }

    /// Pins the context's reads to a query generation: its fetches and faults see the stores' data as it was then,
    /// whatever other contexts and processes save meanwhile; nil reads the latest data again.
    ///
    /// `.current` takes the stores' state now; another context's `queryGenerationToken` shares its generation. As in
    /// Core Data, the context moves to the latest generation by itself when it saves, merges other saves (also
    /// automatically), catches up with the store, or is reset; its own unsaved changes are always on top.
    ///
    /// For example:
    /// ```swift
    /// try container.viewContext.setQueryGenerationFrom(.current)
    /// ```
    /// - Throws: `CoreDataError(.persistentStoreOperation)` for a context whose stores cannot keep a generation (a
    ///   child context, which reads its parent; an in-memory or PostgreSQL store; Core Data too pins SQLite stores
    ///   only), or a token of another coordinator's stores.
    public func setQueryGenerationFrom(_ token: NSQueryGenerationToken?) throws {
        try withLock {
            guard let token else {
                pinnedGeneration = nil
                return
            }
            if let generations = token.generations {
                let ids = Set(_coordinator?.storeEngines.map(\.identifier) ?? [])
                guard parentStore == nil, Set(generations.keys) == ids else {
                    throw CoreDataError(
                        .persistentStoreOperation, "The query generation token is not one of this context's stores (\(token)).")
                }
                pinnedGeneration = token
            } else {
                pinnedGeneration = try openGenerations()
            }
        }
    }

    /// A generation of every store of the context, taken now.
    private func openGenerations() throws -> NSQueryGenerationToken {
        guard parentStore == nil, let stores = _coordinator?.storeEngines, !stores.isEmpty else {
            throw CoreDataError(
                .persistentStoreOperation,
                parentStore != nil
                    ? "A child context reads through its parent: pin the parent context to a query generation instead."
                    : "The context has no persistent store to pin to a query generation.")
        }
        var generations: [String: StoreGeneration] = [:]
        for store in stores {
            guard let store = store as? any GenerationStore else {
                throw CoreDataError(
                    .persistentStoreOperation,
                    "Query generations need SQLite store files; the store \(store.identifier) is of type \(store.type).")
            }
            generations[store.identifier] = try store.openGeneration()
        }
        return NSQueryGenerationToken(generations: generations)
    }

    /// Moves a pinned context to the latest generation (after it saved, or before it merges or reads everything
    /// again); a context whose stores cannot give one any more reads the latest data.
    func advanceQueryGeneration() {
        guard pinnedGeneration != nil else { return }
        pinnedGeneration = try? openGenerations()
    }

    /// Runs a read of the store at the context's query generation, if it is pinned to one.
    func readingPinned<T>(_ body: () throws -> T) rethrows -> T {
        guard let generations = pinnedGeneration?.generations else { return try body() }
        return try StoreGeneration.reading(generations, body)
    }
}
