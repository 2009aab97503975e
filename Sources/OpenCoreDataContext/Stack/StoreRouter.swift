import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
@_spi(Engine) import OpenCoreDataStore

/// The stores a coordinator holds for a model's configurations, seen by contexts as one store.
///
/// Each store holds the objects of its configuration's entities. A fetch goes to every store holding the entity (or
/// one of its subentities, when they are included) among the request's affected stores, and their results are merged
/// in the request's order, with its offset and limit applied to the whole; a fetch of an entity no store holds finds
/// nothing, as in Core Data. Rows and relationships are read from the store an object ID names. A save goes to the
/// stores its objects belong to — a new object to the store it was assigned to (`assign(_:to:)`), else to the first
/// store added whose configuration holds its entity — in one transaction per store, nested, so that a save that fails
/// in one store is written to none (only a failure of the disk between two commits could split it). Relationships do
/// not cross stores, as in Core Data: such a save fails with `managedObjectExternalRelationship`.
final class StoreRouter: StoreEngine, @unchecked Sendable {
    let stores: [any StoreEngine]
    let model: NSManagedObjectModel
    /// The stores (by position) whose configuration lists each entity, in the order they were added.
    private let holders: [ObjectIdentifier: [Int]]
    private let positions: [String: Int]
    private let assignments: StoreAssignments

    init(stores: [any StoreEngine], model: NSManagedObjectModel, assignments: StoreAssignments) {
        self.stores = stores
        self.model = model
        self.assignments = assignments
        var holders: [ObjectIdentifier: [Int]] = [:]
        var positions: [String: Int] = [:]
        for (index, store) in stores.enumerated() {
            positions[store.identifier] = positions[store.identifier] ?? index
            for entity in model.entities(forConfigurationName: store.configurationName) ?? [] {
                holders[ObjectIdentifier(entity), default: []].append(index)
            }
        }
        self.holders = holders
        self.positions = positions
        identifier = stores.map(\.identifier).joined(separator: "+")
    }

    /// Every store's identifier: a save's payload names it, and contexts of a coordinator with the same stores merge it.
    let identifier: String
    var type: String { stores.first?.type ?? NSInMemoryStoreType }
    var url: URL? { nil }
    var configurationName: String { defaultConfigurationName }
    /// Moves whenever one of the stores' tokens moves.
    var changeToken: Int64 { get throws { try stores.reduce(0) { $0 &+ (try $1.changeToken) } } }

    /// The router closes nothing: the coordinator closes its stores.
    func close() throws {}

    // MARK: Which store

    /// The identifier of the first store holding `entity` (the router's own when none does).
    func storeIdentifier(for entity: NSEntityDescription) -> String {
        holders[ObjectIdentifier(entity)]?.first.map { stores[$0].identifier } ?? identifier
    }

    func holdsObjects(ofStore storeIdentifier: String) -> Bool { positions[storeIdentifier] != nil }

    /// The store (by position) a stored object's ID names.
    private func position(of objectID: NSManagedObjectID) -> Int? {
        objectID.storeIdentifier.flatMap { positions[$0] }
    }

    /// The stores (by position) a fetch reads: those holding the entity or, when included, one of its subentities,
    /// among the request's affected stores.
    func fetchTargets(_ request: StoreFetchRequest) -> [Int] {
        var entities = [request.entity]
        if request.includesSubentities {
            var index = 0
            while index < entities.count {
                entities += entities[index].subentities
                index += 1
            }
        }
        var targets = Set(entities.flatMap { holders[ObjectIdentifier($0)] ?? [] })
        if let affected = request.affectedStores { targets = targets.filter { affected.contains(stores[$0].identifier) } }
        return targets.sorted()
    }

    /// The store (by position) a new object is saved to: the one it was assigned to, else the first holding its entity.
    func position(forNew objectID: NSManagedObjectID) throws -> Int {
        let entity = objectID.entity
        if !objectID.isTemporaryID {
            guard let position = position(of: objectID) else {
                throw CoreDataError(
                    .persistentStoreOperation, "The object \(objectID) belongs to a store this coordinator does not hold.",
                    entityName: entity.name)
            }
            return position
        }
        let holding = holders[ObjectIdentifier(entity)] ?? []
        if let assigned = assignments[objectID] {
            guard let position = positions[assigned], holding.contains(position) else {
                throw CoreDataError(
                    .persistentStoreOperation,
                    "A new \(entity.name) object was assigned to the store \(assigned), which \(positions[assigned] == nil ? "this coordinator does not hold" : "holds no \(entity.name) objects (its configuration does not list the entity)").",
                    entityName: entity.name)
            }
            return position
        }
        guard let first = holding.first else {
            let configurations = stores.map { "'\($0.configurationName)'" }.joined(separator: ", ")
            throw CoreDataError(
                .persistentStoreOperation,
                "No store of this coordinator holds \(entity.name) objects: none of its stores' configurations (\(configurations)) lists the entity.",
                entityName: entity.name)
        }
        return first
    }

    // MARK: Reading

    func execute(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        let targets = fetchTargets(request)
        if targets.count == 1 { return try stores[targets[0]].execute(request) }
        return try mergedFetch(request, from: targets)
    }

    /// Streams one store's result keys; a fetch reading several stores is merged by `execute` instead (contexts ask
    /// `fetchTargets` first).
    func forEachResultKey(
        _ request: StoreFetchRequest, values keyPaths: [String],
        _ body: (_ entityID: Int, _ primaryKey: Int64, _ values: ResultKeyValues) throws -> Void
    ) throws {
        let targets = fetchTargets(request)
        guard targets.count <= 1 else {
            throw CoreDataError(
                .persistentStoreOperation, "A fetch of \(request.entity.name) reads several stores: fetch objects or IDs instead.",
                entityName: request.entity.name)
        }
        if let only = targets.first { try stores[only].forEachResultKey(request, values: keyPaths, body) }
    }

    func rows(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID: RowSnapshot] {
        var result: [NSManagedObjectID: RowSnapshot] = [:]
        for (position, ids) in Dictionary(grouping: objectIDs.filter { !$0.isTemporaryID }, by: { position(of: $0) }) {
            guard let position else { continue }
            result.merge(try stores[position].rows(for: ids)) { first, _ in first }
        }
        return result
    }

    func relatedObjectIDs(of objectID: NSManagedObjectID, relationship: NSRelationshipDescription) throws -> [NSManagedObjectID] {
        guard let position = position(of: objectID) else { return [] }
        return try stores[position].relatedObjectIDs(of: objectID, relationship: relationship)
    }

    func relatedObjectIDs(ofEach objectIDs: [NSManagedObjectID], relationship: NSRelationshipDescription) throws
        -> [NSManagedObjectID: [NSManagedObjectID]]
    {
        var result: [NSManagedObjectID: [NSManagedObjectID]] = [:]
        for (position, ids) in Dictionary(grouping: objectIDs.filter { !$0.isTemporaryID }, by: { position(of: $0) }) {
            guard let position else { continue }
            result.merge(try stores[position].relatedObjectIDs(ofEach: ids, relationship: relationship)) { first, _ in first }
        }
        return result
    }

    // MARK: Writing

    func save(_ request: StoreSaveRequest) throws -> StoreSaveResult {
        let split = try SplitSave(request, router: self)
        defer { assignments.remove(request.inserts.map(\.objectID)) }
        if split.parts.count == 1, let (position, part) = split.parts.first {
            return try stores[position].save(part)
        }
        // One transaction per store, nested in the order of their identifiers (the same in every process, so two
        // savers never wait for each other's store in opposite orders).
        let order = split.parts.keys.sorted { stores[$0].identifier < stores[$1].identifier }
        var results: [Int: StoreSaveResult] = [:]
        try inTransactions(order[...]) {
            for position in order { results[position] = try stores[position].save(split.parts[position]!) }
        }
        return StoreSaveResult(
            insertedRows: split.insertPlaces.map { results[$0.store]!.insertedRows[$0.index] },
            updatedRows: results.values.reduce(into: [:]) { all, result in all.merge(result.updatedRows) { first, _ in first } })
    }

    /// Runs `body` inside a transaction on each of the stores (by position), the first outermost.
    ///
    /// - Throws: `CoreDataError(.persistentStoreOperation)` when a store cannot take part in a shared transaction:
    ///   the save is then written to none, rather than to some.
    private func inTransactions(_ order: ArraySlice<Int>, _ body: () throws -> Void) throws {
        guard let first = order.first else { return try body() }
        guard let store = stores[first] as? any TransactionalStore else {
            throw CoreDataError(
                .persistentStoreOperation,
                "A save that writes to several stores needs each to join one transaction; the \(stores[first].type) store \(stores[first].identifier) cannot, so nothing was saved."
            )
        }
        try store.joiningTransaction { try inTransactions(order.dropFirst(), body) }
    }

    func reservePermanentIDs(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID] {
        var byStore: [Int: [Int]] = [:]
        for (index, id) in objectIDs.enumerated() { byStore[try position(forNew: id), default: []].append(index) }
        var reserved = objectIDs
        for (position, indexes) in byStore {
            let ids = try stores[position].reservePermanentIDs(for: indexes.map { objectIDs[$0] })
            for (index, id) in zip(indexes, ids) { reserved[index] = id }
        }
        assignments.remove(objectIDs)
        return reserved
    }
}

/// The stores new objects were assigned to with `assign(_:to:)`, until they are saved or get permanent IDs.
final class StoreAssignments: @unchecked Sendable {
    private let lock = NSLock()
    private var storeByObject: [NSManagedObjectID: String] = [:]

    subscript(objectID: NSManagedObjectID) -> String? {
        get { lock.withLock { storeByObject.isEmpty ? nil : storeByObject[objectID] } }
        set { lock.withLock { storeByObject[objectID] = newValue } }
    }

    func remove(_ objectIDs: [NSManagedObjectID]) {
        lock.withLock {
            guard !storeByObject.isEmpty else { return }
            for id in objectIDs { storeByObject[id] = nil }
        }
    }
}
