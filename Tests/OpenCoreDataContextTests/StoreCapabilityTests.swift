import Foundation
import OpenCoreData
@_spi(Engine) import OpenCoreDataStore
import Testing
import _TestSupport

/// Store types are registered, and what a context asks beyond fetching and saving (batch requests, history,
/// transactions shared among stores, remote changes) is a capability a store adopts: a store without one is named in
/// the error, never skipped silently.
@Suite struct StoreCapabilityTests {
    let dir = TemporaryDirectory()

    /// A store engine that passes fetches and saves to a SQLite store and adopts no capability: what a minimal third
    /// store engine offers.
    final class PlainStore: StoreEngine, @unchecked Sendable {
        let inner: SQLiteStore
        init(_ inner: SQLiteStore) { self.inner = inner }
        var identifier: String { inner.identifier }
        var type: String { "Plain" }
        var url: URL? { inner.url }
        var model: NSManagedObjectModel { inner.model }
        var configurationName: String { inner.configurationName }
        var changeToken: Int64 { get throws { try inner.changeToken } }
        func close() throws { try inner.close() }
        func execute(_ request: StoreFetchRequest) throws -> StoreFetchResult { try inner.execute(request) }
        func forEachResultKey(
            _ request: StoreFetchRequest, values keyPaths: [String], _ body: (Int, Int64, ResultKeyValues) throws -> Void
        ) throws { try inner.forEachResultKey(request, values: keyPaths, body) }
        func rows(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID: RowSnapshot] { try inner.rows(for: objectIDs) }
        func relatedObjectIDs(of objectID: NSManagedObjectID, relationship: NSRelationshipDescription) throws -> [NSManagedObjectID] {
            try inner.relatedObjectIDs(of: objectID, relationship: relationship)
        }
        func save(_ request: StoreSaveRequest) throws -> StoreSaveResult { try inner.save(request) }
        func reservePermanentIDs(for objectIDs: [NSManagedObjectID]) throws -> [NSManagedObjectID] {
            try inner.reservePermanentIDs(for: objectIDs)
        }
    }

    static let registered: Void = {
        StoreKind.register(
            StoreKind(
                type: "Plain", usesFiles: true,
                open: { request in
                    PlainStore(
                        try SQLiteStore(
                            url: request.url, model: request.model, readOnly: request.readOnly, configurationName: request.configurationName
                        ))
                }))
    }()

    func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel(configurations: ["Main": ["Note"], "Side": ["Tag"]]) {
            Entity("Note") { Attribute("title", .string) }
            Entity("Tag") { Attribute("label", .string) }
        }
    }

    @Test func aRegisteredStoreTypeOpensAndWorksForFetchesAndSaves() throws {
        _ = Self.registered
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: try model())
        let store = try coordinator.addPersistentStore(ofType: "Plain", at: dir.file("plain/notes.sqlite"))
        #expect(store.type == "Plain" && FileManager.default.fileExists(atPath: dir.file("plain/notes.sqlite").path), "its folder was made")
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        context.persistentStoreCoordinator = coordinator
        let titles = try context.performAndWait {
            try context.make("Note", ["title": "hello"])
            try context.save()
            return try context.objects("Note").compactMap { $0.string("title") }
        }
        #expect(titles == ["hello"])
        let unknown = #expect(throws: CoreDataError.self) { try coordinator.addPersistentStore(ofType: "Elsewhere", at: dir.file("x.db")) }
        #expect(
            unknown?.code == .persistentStoreInvalidType && unknown?.message.contains("Plain") == true
                && unknown?.message.contains("SQLite") == true)
    }

    @Test func aStoreWithoutACapabilityIsNamedInsteadOfSkipped() throws {
        _ = Self.registered
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: try model())
        let plain = try coordinator.addPersistentStore(ofType: "Plain", at: dir.file("notes.sqlite"))
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        context.persistentStoreCoordinator = coordinator
        context.performAndWait {
            let batch = #expect(throws: CoreDataError.self) {
                try context.execute(NSBatchDeleteRequest(fetchRequest: NSFetchRequest<NSManagedObject>(entityName: "Note")))
            }
            #expect(batch?.message.contains("Plain store \(plain.identifier) cannot run a batch delete") == true, "\(batch?.message ?? "")")
            let history = #expect(throws: CoreDataError.self) {
                try context.execute(NSPersistentHistoryChangeRequest.fetchHistory(after: Date.distantPast))
            }
            #expect(history?.message.contains("keeps persistent history") == true, "\(history?.message ?? "")")
        }
        #expect(coordinator.currentPersistentHistoryToken(fromStores: nil) == nil)
    }

    @Test func aSaveAcrossStoresThatCannotShareATransactionWritesNothing() throws {
        _ = Self.registered
        let model = try model()
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: model)
        _ = try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, configurationName: "Main", at: dir.file("main.sqlite"))
        _ = try coordinator.addPersistentStore(ofType: "Plain", configurationName: "Side", at: dir.file("side.sqlite"))
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        context.persistentStoreCoordinator = coordinator
        try context.performAndWait {
            try context.make("Note", ["title": "n"])
            try context.make("Tag", ["label": "t"])
            let refused = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(refused?.message.contains("nothing was saved") == true, "\(refused?.message ?? "")")
            // Each store alone saves as usual.
            context.rollback()
            try context.make("Tag", ["label": "alone"])
            try context.save()
        }
        let reader = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        reader.persistentStoreCoordinator = coordinator
        let (notes, tags) = try reader.performAndWait {
            (try reader.objects("Note").count, try reader.objects("Tag").compactMap { $0.string("label") })
        }
        #expect(notes == 0 && tags == ["alone"], "the refused save wrote to neither store")
    }
}
