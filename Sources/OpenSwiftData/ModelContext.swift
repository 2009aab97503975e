internal import OpenCoreData
import Synchronization

/// Inserts, fetches, changes, deletes and saves models: SwiftData's `ModelContext`, on a managed object context.
///
/// For example:
/// ```swift
/// let context = ModelContext(container)
/// context.insert(Trip(name: "Lisbon", startDate: .now, code: "LIS"))
/// try context.save()
/// let trips = try context.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
/// ```
/// A context is used from one task at a time, as SwiftData's is; `ModelContainer.mainContext` belongs to the main
/// actor.
public final class ModelContext {
    /// The container the context works in.
    public let container: ModelContainer
    let context: NSManagedObjectContext
    /// Whether the context saves by itself.
    ///
    /// A change (an insert, a delete, a set) schedules a save on the context's
    /// queue, which runs when the queue next gets to it (the main context's is the main queue: it saves once the main
    /// thread returns to its run loop or dispatch queue). On for the main context, off for others, as in SwiftData.
    public var autosaveEnabled: Bool {
        get { autosave.load(ordering: .relaxed) }
        set {
            autosave.store(newValue, ordering: .relaxed)
            if newValue { noteChange() }
        }
    }
    /// `autosaveEnabled`'s value: read on every change a model makes, and by the scheduled save on the context's queue
    /// (an atomic, not a checked class property: that cost a run-time exclusivity check on each set of a property).
    private let autosave = Atomic(false)
    /// Whether a save is scheduled.
    private let autosavePending = Mutex(false)
    /// Why inserts were refused since the last save or rollback (the next `save()` throws them).
    let refusals = Mutex<[String]>([])
    /// The rows of models inserted again after their deletion was saved, by their old rows' IDs (so that models deleted
    /// together and inserted again relate again).
    var reinsertedRows: [NSManagedObjectID: NSManagedObject] = [:]
    /// The plan of the last class inserted (inserts come in runs of one class; the container's table of plans takes a
    /// lock and a lookup).
    private var lastInsertPlan: (type: ObjectIdentifier, plan: InsertPlan)?

    /// A new context of `container`, on its own queue.
    public init(_ container: ModelContainer) {
        self.container = container
        context = container.persistentContainer.newBackgroundContext()
        // A model context is used by one owner at a time: its calls run on the caller's thread under the context's
        // lock rather than crossing to the context's queue and back (a dispatch per insert, per property read).
        context.runsBlocksOnCallingThread = true
        Self.configure(context)
    }

    init(container: ModelContainer, context: NSManagedObjectContext) {
        self.container = container
        self.context = context
        Self.configure(context)
    }

    /// SwiftData's semantics on the managed object context: a saved model whose `.unique` attribute equals a stored
    /// row's updates that row (the context's values win, property by property), and other contexts' saves merge in.
    private static func configure(_ context: NSManagedObjectContext) {
        context.performAndWait {
            context.mergePolicy = .mergeByPropertyObjectTrump
            context.automaticallyMergesChangesFromParent = true
        }
    }

    // MARK: Inserting and deleting

    /// Inserts a model, and the models its relationships hold that are in no context yet.
    ///
    /// It is saved with the next `save()`. A model already in this context is left as it is, unless it is deleted
    /// there: the insert undoes the deletion. A model whose deletion was saved (it has left its context) goes in again
    /// as a new model with the values it had. A model that cannot go in — its class is not in the container's schema,
    /// or it belongs to another context — is not inserted, and the next `save()` throws an error that says so (the
    /// insert cannot throw, as SwiftData declares it; SwiftData stops the program there).
    public func insert<T: PersistentModel>(_ model: T) {
        insertIfDetached(model)
    }

    /// Inserts `model` when it is in no context yet.
    func insertIfDetached(_ model: any PersistentModel) {
        let backing = model.persistentBackingData
        if backing.context != nil, let object = backing.object {
            if object.managedObjectContext == nil {
                insertDeparted(model, row: object)
            } else if backing.context === self {
                if object.isDeleted { undelete(object) }
            } else {
                refuse(
                    "\(Swift.type(of: model)) \(model.persistentModelID) belongs to another model context; a context inserts only new "
                        + "models (fetch it in this one with model(for:) or a fetch)")
            }
            return
        }
        guard let plan = plan(for: model) else { return }
        // The models its relationships hold go in first, so that the values below can name their rows.
        for property in plan.properties where property.isRelationship {
            guard case .box(let held) = backing.heldValue(at: property.schemaIndex) else { continue }
            for related in property.accessor.relatedModels(in: held.value) { insertIfDetached(related) }
        }
        context.performAndWait {
            let object = ModelObject(entity: plan.entity, insertInto: context)
            object.model = model
            backing.object = object
            backing.context = self
            backing.layout = plan.layout
            // The values the model holds (what its initializer and later sets left), by position in its metadata;
            // moved out of the model, which reads its row from now on.
            for property in plan.properties {
                switch backing.takeHeld(at: property.schemaIndex) {
                case .none: continue
                case .direct(let value):
                    // A string, number, date… goes in as its attribute value, at its index, as the new object's first
                    // value (it was made just above: nothing observed it yet).
                    if property.isDirect, let index = property.entityIndex, object.setInitialAttributeValue(value, at: index) {
                        continue
                    }
                    object.setValue(ModelBackingData.managedValue(value), forKey: property.name)
                case .box(let held):
                    // Anything else (models, enums, composites, transformed values) by key, encoded by its type.
                    if let encoded = property.accessor.encode(held.value, asStored: property.isTransformed) {
                        object.setValue(encoded, forKey: property.name)
                    }
                }
            }
            backing.discardHeld()
            if liveQueries > 0 { context.processPendingChanges() }
        }
        noteChange()
    }

    /// The insert plan of `model`'s class; nil, with the insert refused, when the class is not in the schema.
    func plan(for model: any PersistentModel) -> InsertPlan? {
        let type = ObjectIdentifier(Swift.type(of: model))
        if let last = lastInsertPlan, last.type == type { return last.plan }
        do {
            let plan = try container.insertPlan(for: Swift.type(of: model))
            lastInsertPlan = (type, plan)
            return plan
        } catch {
            refuse("\(Swift.type(of: model)) was not inserted: \(error)")
            return nil
        }
    }

    /// How many live queries read this context (inserts and deletes then process pending changes at once, so that
    /// they update).
    var liveQueries = 0

    /// Deletes a model.
    ///
    /// The deletion is saved with the next `save()`. A model in no context is left alone.
    public func delete<T: PersistentModel>(_ model: T) {
        guard let object = model.persistentBackingData.object, model.persistentBackingData.context === self else { return }
        context.performAndWait {
            context.delete(object)
            if liveQueries > 0 { context.processPendingChanges() }
        }
        noteChange()
    }

    /// Schedules an autosave when autosave is on and none is pending.
    func noteChange() {
        guard autosaveEnabled,
            autosavePending.withLock({ pending in
                defer { pending = true }
                return !pending
            })
        else { return }
        let box = UncheckedBox(self)
        context.perform {
            let model = box.value
            model.autosavePending.withLock { $0 = false }
            // A refused insert is left for an explicit save to report.
            guard model.autosaveEnabled, model.context.hasChanges, model.refusals.withLock(\.isEmpty) else { return }
            // An autosave that fails leaves the changes in the context for an explicit save to report.
            try? model.save()
        }
    }

    /// Deletes every model of `model` the predicate matches (all when nil), including unsaved ones.
    public func delete<T: PersistentModel>(model: T.Type, where predicate: Predicate<T>? = nil, includeSubclasses: Bool = true) throws {
        let request = try fetchRequest(FetchDescriptor<T>(predicate: predicate))
        // Without subclasses: only the rows of the class's own entity (not its subclasses' subentities).
        request.includesSubentities = includeSubclasses
        let objects = try context.performAndWait { try context.fetch(request) }
        for object in objects { delete(self.model(for: object, as: T.self)) }
    }

    // MARK: Saving

    /// Whether the context has unsaved inserts, changes or deletions.
    public var hasChanges: Bool { context.performAndWait { context.hasChanges } }

    /// Saves the context's inserts, changes and deletions to the store.
    ///
    /// - Throws: why an insert since the last save was refused; the store's errors (a uniqueness or validation failure,
    ///   a store another process holds), with messages naming them. The context keeps its changes.
    public func save() throws {
        let refused = refusals.withLock { refused in
            defer { refused = [] }
            return refused
        }
        if !refused.isEmpty { throw SwiftDataError(refused.joined(separator: "; ")) }
        let readOnly = container.readOnlyEntities
        let observed = NotificationCenter.default
        let changes = try context.performAndWait { () throws -> [NotificationKey: [PersistentIdentifier]] in
            guard context.hasChanges else { return [:] }
            if !readOnly.isEmpty {
                let changed = context.insertedObjects.union(context.updatedObjects).union(context.deletedObjects)
                if let object = changed.first(where: { readOnly.contains($0.entity.name) }) {
                    throw SwiftDataError(
                        "\(object.entity.name) models are kept only in stores whose configuration does not allow saving (allowsSave is false)."
                    )
                }
            }
            observed.post(name: Self.willSave, object: self)
            let updated = context.updatedObjects.map { PersistentIdentifier(objectID: $0.objectID) }
            let deleted = context.deletedObjects.map { PersistentIdentifier(objectID: $0.objectID) }
            // The inserted models' identifiers are the permanent ones the save gave them: the save returns their IDs
            // rather than this holding the rows' objects past it (see `save(returningInsertedIDs:)`).
            let inserted = try context.save(returningInsertedIDs: true).map { PersistentIdentifier(objectID: $0) }
            return [.insertedIdentifiers: inserted, .updatedIdentifiers: updated, .deletedIdentifiers: deleted]
        }
        if !changes.isEmpty {
            observed.post(
                name: Self.didSave, object: self, userInfo: Dictionary(uniqueKeysWithValues: changes.map { ($0.key.rawValue, $0.value) }))
        }
    }

    /// Posted (by the context) before a save that has changes to save.
    public static let willSave = Notification.Name("ModelContext.willSave")
    /// Posted (by the context) after a save; its `userInfo` lists the identifiers of the models the save inserted,
    /// updated and deleted, under `NotificationKey`s' raw values.
    public static let didSave = Notification.Name("ModelContext.didSave")

    /// The keys of a `didSave` notification's `userInfo`.
    public enum NotificationKey: String, Sendable {
        /// The identifiers of the models the save inserted (`[PersistentIdentifier]`).
        case insertedIdentifiers
        /// The identifiers of the models the save updated.
        case updatedIdentifiers
        /// The identifiers of the models the save deleted.
        case deletedIdentifiers
        /// Not posted by OpenSwiftData (SwiftData's query generation).
        case queryGeneration
        /// Not posted by OpenSwiftData (SwiftData's, when every identifier is invalid).
        case invalidatedAllIdentifiers
    }

    /// Tells the context's live queries (and its observers) of the changes made since the last time.
    public func processPendingChanges() {
        context.performAndWait { context.processPendingChanges() }
    }

    /// The undo manager that records the context's changes (nil, the default, records nothing).
    ///
    /// Each time the context processes its changes they become one step to undo, as Core Data's contexts do (see
    /// `NSManagedObjectContext.undoManager`). `rollback()` empties it.
    ///
    /// For example:
    /// ```swift
    /// container.mainContext.undoManager = UndoManager()
    /// ```
    public var undoManager: UndoManager? {
        get { context.undoManager }
        set { context.undoManager = newValue }
    }

    /// Discards the context's unsaved changes: inserted models leave it, changed ones read their saved values again.
    public func rollback() {
        refusals.withLock { $0 = [] }
        context.performAndWait { context.rollback() }
    }

    /// Runs `block` and saves (throwing what the block or the save throws; on error nothing is saved and the context's
    /// changes are rolled back).
    public func transaction(block: () throws -> Void) throws {
        do {
            try block()
            try save()
        } catch {
            rollback()
            throw error
        }
    }

    /// Models inserted and not saved yet.
    public var insertedModelsArray: [any PersistentModel] { models(context.performAndWait { context.insertedObjects }) }
    /// Models changed and not saved yet.
    public var changedModelsArray: [any PersistentModel] { models(context.performAndWait { context.updatedObjects }) }
    /// Models deleted and not saved yet.
    public var deletedModelsArray: [any PersistentModel] { models(context.performAndWait { context.deletedObjects }) }

    private func models(_ objects: Set<NSManagedObject>) -> [any PersistentModel] {
        objects.sorted { $0.objectID < $1.objectID }.compactMap { model(for: $0) }
    }

    // MARK: Fetching

    /// The models the descriptor matches, in its order.
    ///
    /// - Throws: `SwiftDataError` for a sort by something that is not a persisted property, or a predicate with an
    ///   expression OpenSwiftData cannot run in SQL (named in the message); the store's errors.
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [T] {
        let request = try fetchRequest(descriptor)
        let objects = try context.performAndWait { try context.fetch(request) }
        return objects.map { model(for: $0, as: T.self) as! T }
    }

    /// The models `descriptor` matches, as a collection that reads their rows `batchSize` at a time as they are
    /// reached (and makes each model when it is read).
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, batchSize: Int) throws -> FetchResultsCollection<T> {
        let request = try fetchRequest(descriptor)
        request.fetchBatchSize = max(1, batchSize)
        return FetchResultsCollection(context: self, objects: try context.performAndWait { try context.fetch(request) })
    }

    /// Calls `block` with each model the descriptor matches, in its order, reading `batchSize` rows at a time and
    /// letting go of each batch's models once it is done (for walks over more models than memory holds).
    ///
    /// - Parameters:
    ///   - descriptor: The models to walk, in its order.
    ///   - batchSize: How many rows to read at a time.
    ///   - allowEscapingMutations: Whether `block` may change models (unsaved changes keep their models in memory);
    ///     without it, a walk that leaves changes behind throws.
    ///   - block: Called with each model.
    /// - Throws: the descriptor's errors, what `block` throws, and `SwiftDataError` when `block` changed models
    ///   without `allowEscapingMutations`.
    public func enumerate<T: PersistentModel>(
        _ descriptor: FetchDescriptor<T>, batchSize: Int = 5000, allowEscapingMutations: Bool = false, block: (T) throws -> Void
    ) throws {
        let request = try fetchRequest(descriptor)
        request.fetchBatchSize = max(1, batchSize)
        let hadChanges = hasChanges
        let objects = try context.performAndWait { try context.fetchInBatches(request) }
        for object in objects {
            try block(model(for: object, as: T.self) as! T)
        }
        if !allowEscapingMutations, !hadChanges, hasChanges {
            throw SwiftDataError(
                "enumerate's block changed models: pass allowEscapingMutations: true to keep changes made while enumerating.")
        }
    }

    /// How many models the descriptor matches (its limit and offset apply).
    public func fetchCount<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> Int {
        let request = try fetchRequest(descriptor)
        return try context.performAndWait { try context.count(for: request) }
    }

    /// The identifiers of the models the descriptor matches, in its order.
    public func fetchIdentifiers<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [PersistentIdentifier] {
        let request = try fetchRequest(descriptor)
        return try context.performAndWait { try context.fetch(request) }.map { PersistentIdentifier(objectID: $0.objectID) }
    }

    /// The model this context has for `identifier`, if it has it in memory.
    public func registeredModel<T: PersistentModel>(for identifier: PersistentIdentifier) -> T? {
        guard let objectID = objectID(for: identifier),
            let object = context.performAndWait({ context.registeredObject(for: objectID) })
        else { return nil }
        return model(for: object, as: T.self) as? T
    }

    /// The model for `identifier`, read from the store if this context does not have it.
    ///
    /// - Precondition: the identifier names a model of this container.
    public func model(for identifier: PersistentIdentifier) -> any PersistentModel {
        guard let objectID = objectID(for: identifier) else {
            preconditionFailure("\(identifier) does not name a model of this container")
        }
        let object = context.performAndWait { context.object(with: objectID) }
        guard let made = model(for: object) else { preconditionFailure("\(identifier) names an entity that is not a model class") }
        return made
    }

    private func objectID(for identifier: PersistentIdentifier) -> NSManagedObjectID? {
        container.persistentContainer.persistentStoreCoordinator.managedObjectID(forURIRepresentation: identifier.uri)
            ?? context.performAndWait {
                context.registeredObjects.first { PersistentIdentifier(objectID: $0.objectID) == identifier }?.objectID
            }
    }

    /// The model of a managed object of this context, made when the object has none alive.
    func model(for object: NSManagedObject) -> (any PersistentModel)? {
        if let existing = (object as? ModelObject)?.model as? any PersistentModel { return existing }
        guard let type = container.schema.types.first(where: { Schema.entityName(of: $0) == object.entity.name }) else { return nil }
        return model(for: object, as: type)
    }

    /// The model of class `type` for a managed object of this context.
    func model(for object: NSManagedObject, as type: any PersistentModel.Type) -> any PersistentModel {
        let holder = object as? ModelObject
        if let existing = holder?.model as? any PersistentModel { return existing }
        var type = type
        // A row of a class that has subclasses may be a subclass's: its entity says which.
        if container.schema.superclasses.contains(ObjectIdentifier(type)),
            let exact = container.schema.types.first(where: { Schema.entityName(of: $0) == object.entity.name })
        {
            type = exact
        }
        let made = type.init(backingData: ModelBackingData(object: object, context: self))
        holder?.model = made
        return made
    }

    /// The fetch request of a descriptor.
    func fetchRequest<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> NSFetchRequest<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: Schema.entityName(of: T.self))
        if let predicate = descriptor.predicate {
            request.predicate = try PredicateConverter.convert(predicate, schema: container.schema) { [self] in objectID(for: $0) }
        }
        request.sortDescriptors = try descriptor.sortBy.map { sort in
            guard let keyPath = sort.keyPath,
                let key = T.schemaMetadata.first(where: { $0.keyPath == keyPath })?.name ?? CodableStorage.compositeKey(keyPath, in: T.self)
                    ?? CodableStorage.toOneKey(keyPath, in: T.self)
            else {
                throw SwiftDataError(
                    "\(T.self) cannot be sorted by \(sort.keyPath.map { "\($0)" } ?? "a comparator"): sort by a persisted property, a field of one stored as a composite, or an attribute of a to-one relationship's model.",
                    kind: .unsupportedSortDescriptor
                )
            }
            // A string sorts as SwiftData sorts it on Apple's systems, where `SortDescriptor(\.name)` means
            // `comparator: .localizedStandard`. Linux's Foundation makes `.lexical` the default instead, and an explicit
            // `.lexical` cannot be told from it, so both sort Finder-style; `.localized` is the locale's order.
            let comparison: FetchSortDescriptor.Comparison =
                sort.stringComparator.map { String.StandardComparator($0, order: .forward) == .localized ? .localized : .localizedStandard }
                ?? .default
            return FetchSortDescriptor(key: key, ascending: sort.order == .forward, comparison: comparison)
        }
        request.fetchLimit = max(0, descriptor.fetchLimit ?? 0)
        request.fetchOffset = max(0, descriptor.fetchOffset ?? 0)
        request.includesPendingChanges = descriptor.includePendingChanges
        // Relationships read with the results (a statement per relationship, not a fault per model); a key path that
        // is not one of the model's relationships is a hint there is nothing to do for.
        let prefetched = descriptor.relationshipKeyPathsForPrefetching.compactMap { keyPath in
            T.schemaMetadata.first {
                $0.keyPath == keyPath && Schema.modelDestination(Schema.unwrapped(Swift.type(of: $0.keyPath).valueType).0) != nil
            }?.name
        }
        if !prefetched.isEmpty { request.relationshipKeyPathsForPrefetching = prefetched }
        // The attributes read with the models; a key path that is not a persisted property of the model is a hint
        // there is nothing to do for.
        let fetched = descriptor.propertiesToFetch.compactMap { keyPath in T.schemaMetadata.first { $0.keyPath == keyPath }?.name }
        if !fetched.isEmpty { request.propertiesToFetch = fetched }
        return request
    }
}

/// A reference handed to the context's queue (the context is used from one task at a time; its autosave runs on the
/// context's own queue).
struct UncheckedBox<Value: AnyObject>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// The models of a fetch with a batch size (`fetch(_:batchSize:)`), in order: each row is read with its batch, and its
/// model made, when it is first reached.
public struct FetchResultsCollection<Element: PersistentModel>: RandomAccessCollection {
    private let context: ModelContext
    private let objects: [NSManagedObject]

    init(context: ModelContext, objects: [NSManagedObject]) {
        self.context = context
        self.objects = objects
    }

    /// 0.
    public var startIndex: Int { 0 }
    /// The number of models.
    public var endIndex: Int { objects.count }

    /// The model at `position`.
    public subscript(position: Int) -> Element {
        let object = objects[position]
        return context.model(for: object, as: Element.self) as! Element
    }
}
