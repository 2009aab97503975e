import Dispatch
import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// How a context runs its work.
///
/// For example:
/// ```swift
/// let background = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
/// ```
public enum NSManagedObjectContextConcurrencyType: Sendable {
    /// Work runs on the main queue (for UI-facing contexts such as `viewContext`).
    case mainQueueConcurrencyType
    /// Work runs on a private serial queue the context owns.
    case privateQueueConcurrencyType
}

/// A scratch pad of managed objects: insert, change, delete and fetch them, then save all at once.
///
/// For example:
/// ```swift
/// let context = container.newBackgroundContext()
/// try await context.perform {
///     let product = NSManagedObject(entity: productEntity, insertInto: context)
///     try product.setValue("Banana", forKey: "name")
///     try context.save()
/// }
/// ```
/// A context and its objects belong to its queue: use `perform` / `performAndWait` from other threads, as in Core
/// Data. State is additionally guarded by a recursive lock, so a mistake costs correctness of ordering, never memory
/// safety.
public final class NSManagedObjectContext: @unchecked Sendable, CustomStringConvertible {
    /// How the context runs its work.
    public let concurrencyType: NSManagedObjectContextConcurrencyType
    /// The coordinator whose store the context reads and writes (for a child context, its parent's).
    ///
    /// Setting it makes the context a root context again (no parent).
    public var persistentStoreCoordinator: NSPersistentStoreCoordinator? {
        get { withLock { _parent?.persistentStoreCoordinator ?? _coordinator } }
        set {
            withLock {
                _coordinator = newValue
                _parent = nil
                parentStore = nil
            }
            mergeLink.withLock { mergeParent = nil }
        }
    }

    /// The context this one reads through and saves into (Core Data's nested contexts), or nil for a context on a
    /// coordinator.
    ///
    /// A child fetches through its parent, so it sees the parent's unsaved changes; its `save()` pushes its changes
    /// into the parent (not the store), where they are pending changes the parent's observers and fetched results
    /// controllers see as changes made there. Set it before the context is used, as in Core Data.
    ///
    /// For example:
    /// ```swift
    /// let editor = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
    /// editor.parent = container.viewContext
    /// try editor.performAndWait {
    ///     let item = NSEntityDescription.insertNewObject(forEntityName: "Item", into: editor)
    ///     item.setValue("draft", forKey: "name")
    ///     try editor.save()   // into viewContext; viewContext.save() writes it to the store
    /// }
    /// ```
    public var parent: NSManagedObjectContext? {
        get { withLock { _parent } }
        set {
            precondition(newValue !== self, "A context cannot be its own parent.")
            withLock {
                _parent = newValue
                _coordinator = newValue?.persistentStoreCoordinator
                parentStore = newValue.map { ParentContextStore(parent: $0) }
            }
            mergeLink.withLock { mergeParent = newValue }
            updateAutomaticMerging()
        }
    }
    /// A name for debugging and notifications, recorded with persistent history (`contextName`).
    public var name: String?
    /// The author persistent history records with this context's saves and batch requests.
    ///
    /// It is `NSPersistentHistoryTransaction.author`, so that a reader can tell its own transactions from others'.
    public var transactionAuthor: String?
    /// How saves treat rows changed elsewhere since they were read (default: fail, as `NSErrorMergePolicy`).
    public var mergePolicy: NSMergePolicy = .error
    /// How old cached row data may be before a fault reads the store again (Core Data's `stalenessInterval`).
    ///
    /// Negative, the default, means any age. The only rows this project keeps for faults are those a fetch's
    /// `relationshipKeyPathsForPrefetching` read, until the context next takes a change (its own, a save, a merge);
    /// they are used while no older than this interval (0: every fault reads the store). Every other fault reads the
    /// store.
    public var stalenessInterval: TimeInterval = -1
    /// Whether a fault whose row is gone from the store is marked deleted when read (Core Data's
    /// `shouldDeleteInaccessibleFaults`, default true).
    ///
    /// When true, `value(forKey:)` reads nil and `isDeleted` becomes true. When
    /// false it reads nil and stays undeleted (where Core Data raises an exception, this project never stops the
    /// program for it). `checkedValue(forKey:)` throws `.objectNotFound` either way.
    public var shouldDeleteInaccessibleFaults = true
    /// Whether the context merges other contexts' saves on its coordinator automatically (as
    /// `automaticallyMergesChangesFromParent` does for a container's `viewContext`).
    public var automaticallyMergesChangesFromParent: Bool = false {
        didSet { updateAutomaticMerging() }
    }

    let queue: DispatchQueue
    let queueKey = DispatchSpecificKey<ObjectIdentifier>()
    let lock = ContextLock()
    /// Whether `performAndWait` runs its block on the calling thread under the context's lock.
    ///
    /// Without waiting for the queue: for a context one owner uses from one thread at a time (SwiftData's
    /// `ModelContext`, which is not `Sendable`), whose every call would otherwise cross to the queue and back (a
    /// dispatch per `insert`). The queue still runs `perform`'s blocks (merges of other contexts' saves, autosaves), under the same lock; no
    /// block waits for the queue while holding the lock, so the two cannot deadlock. Set it before first use.
    package var runsBlocksOnCallingThread = false
    var _coordinator: NSPersistentStoreCoordinator?
    /// The parent context, for a child context.
    var _parent: NSManagedObjectContext?
    /// `_parent` again, under a lock of its own: the save notifications of other contexts read it while their own
    /// lock is held, and taking this context's lock there would deadlock two auto-merging contexts saving at once.
    let mergeLink = NSLock()
    var mergeParent: NSManagedObjectContext?
    /// What a child context reads and saves through: its parent, seen as a store.
    var parentStore: ParentContextStore?
    /// Whether some context has had this one as its parent (then saves remember the temporary IDs they replace).
    var hasChildContexts = false
    /// For child contexts that still know objects by the temporary IDs this context's saves replaced: the permanent
    /// IDs those objects have now.
    var formerTemporaryIDs: [NSManagedObjectID: NSManagedObjectID] = [:]
    /// For a child: how many of its parent's `formerTemporaryIDs` it has taken on (see `adoptParentsPermanentIDs`).
    var seenParentRenames = 0

    // Object registry: saved objects unretained, unsaved (inserted) ones strongly; the change sets below hold every
    // object with pending changes strongly.
    let registry = ObjectRegistry()
    /// Objects that hold loaded to-many memberships (a merge must invalidate those it touches); pruned by merges.
    var toManyHolders: [ObjectIdentifier: WeakObject] = [:]
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var insertedSet: Set<NSManagedObject> = []
    /// The undo manager and what the current event changed, for its undo (see `undoManager`).
    let undoJournal = UndoJournal()
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var deletedSet: Set<NSManagedObject> = []
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var changedSet = MarkedObjects(.changed)
    /// Values `setValue(_:forKey:)` could not set (wrong type, deleted object), by object and property index: the
    /// object kept its previous value, and the next save fails with these errors until the property is set again or
    /// the context rolls back.
    var rejectedValues: [ObjectIdentifier: (object: NSManagedObject, errors: [Int: CoreDataError])] = [:]
    /// Objects inserted since the last save, in insertion order (some may have been deleted since: check `state`).
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var insertionLog: [NSManagedObject] = []
    // The event being built until the next processPendingChanges(): objects inserted from `eventInsertionStart` on
    // in `insertionLog`, and the other objects changed or deleted.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var eventInsertionStart = 0
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var eventObjects = MarkedObjects(.event)
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var eventDeleted: Set<NSManagedObject> = []
    /// Saved objects whose deletion observers have been told of and that were inserted again in this event (an undo,
    /// or `insert(_:)` of a deleted object): reported as inserted.
    var eventUndeleted: Set<NSManagedObject> = []
    /// The query generation the context's reads see (see `setQueryGenerationFrom(_:)`), nil for the latest data.
    var pinnedGeneration: NSQueryGenerationToken?
    var observers: [UUID: (ContextChange) -> Void] = [:]
    /// The observers of other contexts' saves and of other writers' commits, while merging automatically.
    var mergeObservers: [any NSObjectProtocol] = []
    /// Whether a catch-up with the store (for other writers' commits) is scheduled and has not started yet: one is
    /// enough for any number of commits, since it reads the store as it is when it runs.
    var storeCatchUpScheduled = false
    /// Whether a merge of other writers' changes could not read the rows it needed: the context then owes itself a
    /// read of everything it holds (`catchUpWithStore`), retried after `storeRereadDelay` seconds until one succeeds.
    var storeRereadOwed = false
    var storeRereadDelay = 0.0
    /// Counts the events after which rows read from the store earlier may be out of date for this context (a change
    /// delivered — saves and catch-ups included —, a merge): `BatchedFetchResults` drops the rows it read ahead.
    var storeReadEpoch = 0
    /// Rows seen deleted lately, whose late inserts and updates merges drop (see `RecentDeletions`).
    var recentDeletions = RecentDeletions()
    /// What fetches' `relationshipKeyPathsForPrefetching` read, for faults fired later (see `prefetchedRow(for:)`).
    var prefetched = PrefetchedRows()
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var insertionCounter = 0
    /// Whether a change batch is being delivered to observers.
    #if !DEBUG
        @exclusivity(unchecked)
    #endif
    var isDelivering = false

    /// Creates a context of the given concurrency type; set `persistentStoreCoordinator` before use.
    public init(concurrencyType: NSManagedObjectContextConcurrencyType) {
        self.concurrencyType = concurrencyType
        switch concurrencyType {
        case .mainQueueConcurrencyType: queue = .main
        case .privateQueueConcurrencyType: queue = DispatchQueue(label: "OpenCoreData.NSManagedObjectContext")
        }
        if concurrencyType == .privateQueueConcurrencyType {
            queue.setSpecific(key: queueKey, value: ObjectIdentifier(self))
        } else {
            _ = Self.mainQueueKey
        }
    }

    deinit {
        for observer in mergeObservers { NotificationCenter.default.removeObserver(observer) }
    }

    /// The context's name and concurrency type, for logs.
    public var description: String { "<NSManagedObjectContext \(name ?? "") \(concurrencyType)>" }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// The store the context reads and saves through: its parent (for a child context), else its coordinator's store.
    var store: (any StoreEngine)? {
        if let parentStore { return parentStore }
        return _coordinator?.contextStore
    }

    var model: NSManagedObjectModel? { _coordinator?.managedObjectModel }

    func requireStore() throws -> any StoreEngine {
        guard let store else {
            throw CoreDataError(
                .persistentStoreOperation,
                "The context has no persistent store: set its persistentStoreCoordinator and add a store (or load the container's stores) first."
            )
        }
        return store
    }

    func entity(forClass cls: NSManagedObject.Type) -> NSEntityDescription? {
        guard let model else { return nil }
        return model.entities.first { $0.managedObjectClass == cls } ?? model.entity(named: cls.entityName)
    }

    /// The entity of the given name in the context's model.
    ///
    /// - Throws: `CoreDataError(.unknownEntity)` naming the entity and listing the model's entities.
    public func entity(named name: String) throws -> NSEntityDescription {
        guard let model else {
            throw CoreDataError(
                .persistentStoreOperation, "The context has no coordinator, so it has no model to find entity '\(name)' in.")
        }
        guard let entity = model.entity(named: name) else {
            throw CoreDataError(
                .unknownEntity,
                "The model has no entity named '\(name)' (it has: \(model.entities.map(\.name).sorted().joined(separator: ", "))).",
                entityName: name)
        }
        return entity
    }

    // MARK: Queues

    /// Marks the main queue, so that "on the main queue" is recognised even where the main queue is drained by a
    /// thread other than the main thread (as under `swift test` on Linux).
    static let mainQueueKey: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    /// Whether the caller is running on the context's queue.
    public var isOnContextQueue: Bool {
        switch concurrencyType {
        case .mainQueueConcurrencyType: return Thread.isMainThread || DispatchQueue.getSpecific(key: Self.mainQueueKey) == true
        case .privateQueueConcurrencyType: return DispatchQueue.getSpecific(key: queueKey) == ObjectIdentifier(self)
        }
    }

    /// Runs `block` on the context's queue and waits for it; runs it at once when already there.
    ///
    /// - Complexity: O(1) besides `block`: on the context's queue it runs at once; elsewhere it waits for
    ///   the queue.
    public func performAndWait<T>(_ block: () throws -> T) rethrows -> T {
        if runsBlocksOnCallingThread || isOnContextQueue { return try withLock(block) }
        return try withoutActuallyEscaping(block) { escapable in
            try queue.sync { try withLock { try escapable() } }
        }
    }

    /// Schedules `block` on the context's queue and returns at once.
    ///
    /// Pending changes are processed after it.
    public func perform(_ block: @escaping @Sendable () -> Void) {
        queue.async { [self] in
            withLock {
                block()
                processPendingChanges()
            }
        }
    }

    /// Runs `block` on the context's queue under its lock and returns at once, without processing pending changes
    /// after it: for the framework's own housekeeping (installing a controller's lookup table, writing its section
    /// cache), which must not turn edits the app has not processed yet into a change at a moment of its choosing.
    package func performHousekeeping(_ block: @escaping @Sendable () -> Void) {
        queue.async { [self] in withLock { block() } }
    }

    /// When an async `perform(schedule:_:)` runs its block (Core Data's names).
    public enum ScheduledTaskType: Sendable, Hashable {
        /// At once when the caller is already on the context's queue, else as soon as the queue takes it.
        case immediate
        /// Always after what the queue holds already.
        case enqueued
    }

    /// Runs `block` on the context's queue and returns its result, or throws what it throws.
    ///
    /// Pending changes are processed after it. A block that cannot throw needs no `try` (the overload below), as
    /// with Core Data's `perform(schedule:_:)`, whose `rethrows` this pair stands for.
    public func perform<T: Sendable>(schedule: ScheduledTaskType = .immediate, _ block: @escaping @Sendable () throws -> T) async throws
        -> T
    {
        try await run(schedule) { Result<T, any Error> { try block() } }.get()
    }

    /// Runs `block` on the context's queue and returns its result; pending changes are processed after it.
    public func perform<T: Sendable>(schedule: ScheduledTaskType = .immediate, _ block: @escaping @Sendable () -> T) async -> T {
        await run(schedule, block)
    }

    /// Runs `block` under the context's lock on its queue (at once when `schedule` allows and the caller is there),
    /// then processes pending changes.
    private func run<T: Sendable>(_ schedule: ScheduledTaskType, _ block: @escaping @Sendable () -> T) async -> T {
        if schedule == .immediate, runsBlocksOnCallingThread || isOnContextQueue {
            return withLock {
                let value = block()
                processPendingChanges()
                return value
            }
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            queue.async { [self] in
                withLock {
                    let value = block()
                    processPendingChanges()
                    continuation.resume(returning: value)
                }
            }
        }
    }

    // MARK: Inserting and deleting

    /// Inserts an object created with no context (or re-inserts one deleted in this context before saving).
    ///
    /// - Complexity: O(p) for the p attribute defaults of the entity.
    public func insert(_ object: NSManagedObject) {
        withLock {
            switch object.state {
            case .deleted where object.managedObjectContext === self:
                deletedSet.remove(object)
                // Not in this event's deletions: its deletion was reported, so its return is an insertion.
                if eventDeleted.remove(object) == nil, !object.wasNewWhenDeleted { eventUndeleted.insert(object) }
                if object.wasNewWhenDeleted {
                    object.wasNewWhenDeleted = false
                    // Inserted, deleted and inserted again before the deletion was processed: still a new object
                    // (already in the insertion log).
                    object.state = .inserted
                    insertedSet.insert(object)
                } else {
                    object.state = .stored
                }
                noteEventChange(object)
                journalInsertion(of: object)
                return
            case .unattached: break
            default: return
            }
            attachInserted(object, as: NSManagedObjectID(temporaryFor: object.entity))
            for (index, value) in object.entity._attributeDefaults where object.changes[index] == nil {
                object.changes[index] = .attribute(value)
            }
            object.awakeFromInsert()
            journalInsertion(of: object)
        }
    }

    /// Makes `object` (not in a context) one of this context's new objects, under `objectID`.
    func attachInserted(_ object: NSManagedObject, as objectID: NSManagedObjectID) {
        object.managedObjectContext = self
        object.state = .inserted
        object.objectID = objectID
        insertionCounter += 1
        object.insertionOrder = insertionCounter
        register(object)
        insertedSet.insert(object)
        insertionLog.append(object)
        object.changes.reserveWidth(object.entity.allProperties.count)
    }

    /// Marks an object for deletion; its relationships' delete rules apply when pending changes are processed.
    ///
    /// - Complexity: O(1); the delete rules run when pending changes are processed (before a save or
    ///   at the end of the event), O(d) for the d objects they reach.
    public func delete(_ object: NSManagedObject) {
        withLock {
            guard object.managedObjectContext === self else { return }
            switch object.state {
            case .inserted:
                journalDeletion(of: object)
                object.prepareForDeletion()
                insertedSet.remove(object)
                changedSet.remove(object)
                object.state = .deleted
                object.wasNewWhenDeleted = true
                deletedSet.insert(object)
                eventDeleted.insert(object)
                eventObjects.insert(object)
            case .stored:
                journalDeletion(of: object)
                object.prepareForDeletion()
                object.state = .deleted
                deletedSet.insert(object)
                eventDeleted.insert(object)
                eventObjects.insert(object)
            default: return
            }
        }
    }

    // MARK: Change bookkeeping (called by objects under the lock)

    /// Whether anything happened since the last `processPendingChanges()`.
    var hasEventChanges: Bool { !eventObjects.isEmpty || eventInsertionStart < insertionLog.count }

    /// Whether edits wait for `processPendingChanges` (for the controller's invariant checks: until they are
    /// processed, objects hold values their observers have not been told of).
    package var _hasUnprocessedChanges: Bool { hasEventChanges }

    /// The objects inserted and not yet saved, in insertion order.
    func insertedInOrder() -> [NSManagedObject] {
        insertionLog.filter { $0.state == .inserted }
    }

    /// Forgets the insertions (after a save, rollback or reset).
    func clearInsertionLog() {
        insertionLog = []
        eventInsertionStart = 0
    }

    func noteEventChange(_ object: NSManagedObject) {
        eventObjects.insert(object)
    }

    /// Remembers a value `setValue(_:forKey:)` could not set, for the next save to report.
    func rejectValue(of object: NSManagedObject, at index: Int, _ error: CoreDataError, value: String) {
        withLock {
            var entry = rejectedValues[ObjectIdentifier(object)] ?? (object, [:])
            entry.errors[index] = CoreDataError(
                .managedObjectValidation,
                "Validation failed: \(error.message)", entityName: error.entityName ?? object.entity.name,
                key: object.entity.allProperties[index].name, underlying: [error], value: value)
            rejectedValues[ObjectIdentifier(object)] = entry
            object.hasRejectedValue = true
        }
    }

    /// Forgets a rejected value once the property has been set to one it can hold.
    func clearRejectedValue(of object: NSManagedObject, at index: Int) {
        guard var entry = rejectedValues[ObjectIdentifier(object)] else { return }
        entry.errors[index] = nil
        rejectedValues[ObjectIdentifier(object)] = entry.errors.isEmpty ? nil : entry
        object.hasRejectedValue = !entry.errors.isEmpty
    }

    func noteChangesUpdated(_ object: NSManagedObject) {
        // Inserted objects are tracked by `insertedSet`; every reader of `changedSet` looks at stored objects only.
        guard object.state != .inserted else { return }
        if object.changes.isEmpty { changedSet.remove(object) } else { changedSet.insert(object) }
    }
}
