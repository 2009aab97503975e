import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
@_spi(Engine) import OpenCoreDataStore

/// A child context's parent, seen as the store the child reads and saves through (Core Data's nested contexts).
///
/// Every call runs under the parent's lock, on the caller's thread: a child of the main-queue context may then read
/// through it while the main thread waits for the child, which a hop onto the parent's queue would deadlock. What a
/// call returns is the parent's current state, unsaved changes included; a save becomes pending changes of the parent.
final class ParentContextStore: StoreEngine, @unchecked Sendable {
    let parent: NSManagedObjectContext
    let model: NSManagedObjectModel

    init(parent: NSManagedObjectContext) {
        self.parent = parent
        model = parent.persistentStoreCoordinator?.managedObjectModel ?? NSManagedObjectModel()
        parent.withLock { parent.hasChildContexts = true }
    }

    /// The root store's identifier: object IDs are the same along the chain.
    var identifier: String { parent.store?.identifier ?? "" }
    var type: String { parent.store?.type ?? NSInMemoryStoreType }
    var url: URL? { parent.store?.url }
    var changeToken: Int64 { get throws { try parent.store?.changeToken ?? 0 } }

    var configurationName: String { parent.store?.configurationName ?? defaultConfigurationName }

    func storeIdentifier(for entity: NSEntityDescription) -> String {
        parent.store?.storeIdentifier(for: entity) ?? identifier
    }

    func holdsObjects(ofStore storeIdentifier: String) -> Bool {
        parent.store?.holdsObjects(ofStore: storeIdentifier) ?? false
    }

    /// Closing a child's view of its parent closes nothing.
    func close() throws {}

    func execute(_ request: StoreFetchRequest) throws -> StoreFetchResult {
        try parent.withLock { try parent.childFetch(request) }
    }

    /// Not used: a child's fetched results controllers fetch objects (`_fetchResultKeys` declines for children),
    /// because the parent's new objects have no primary key to hand over.
    func forEachResultKey(
        _ request: StoreFetchRequest, values keyPaths: [String],
        _ body: (_ entityID: Int, _ primaryKey: Int64, _ values: ResultKeyValues) throws -> Void
    ) throws {
        throw CoreDataError(
            .persistentStoreOperation,
            "Result keys are read from a store, not through a parent context; fetch objects in a child context.",
            entityName: request.entity.name)
    }

    func rows(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID: RowSnapshot] {
        try parent.withLock { try parent.childRows(objectIDs) }
    }

    func relatedObjectIDs(of objectID: NSManagedObjectID, relationship: NSRelationshipDescription) throws -> [NSManagedObjectID] {
        try parent.withLock { try parent.childRelatedObjectIDs(of: objectID, relationship) }
    }

    func save(_ request: StoreSaveRequest) throws -> StoreSaveResult {
        try parent.withLock { try parent.applyChildSave(request) }
    }

    func reservePermanentIDs(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID] {
        try parent.withLock { try parent.reservePermanentIDsForChild(objectIDs) }
    }
}
