import Foundation
import OpenCoreDataCompatibility
import Testing
import _TestSupport

/// A stack written for Apple platforms in the manner of Xcode's Core Data + CloudKit app template (an
/// `NSPersistentCloudKitContainer`, `/dev/null` for an in-memory preview store, CloudKit options, history and remote
/// notifications on), and a container subclass that moves the stores (an app group's folder): only the import changed.
struct CloudPersistence {
    let container: NSPersistentCloudKitContainer

    init(model: NSManagedObjectModel, inMemory: Bool = false, url: URL? = nil) {
        container = NSPersistentCloudKitContainer(name: "Groceries", managedObjectModel: model)
        guard let description = container.persistentStoreDescriptions.first else {
            fatalError("Failed to retrieve a persistent store description.")
        }
        if inMemory {
            description.url = URL(fileURLWithPath: "/dev/null")
        } else if let url {
            description.url = url
        }
        description.cloudKitContainerOptions = NSPersistentCloudKitContainerOptions(containerIdentifier: "iCloud.com.example.Groceries")
        description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey)
        description.setOption(true as NSNumber, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey)
        container.loadPersistentStores { _, error in
            if let error = error as NSError? {
                fatalError("Unresolved error \(error), \(error.userInfo)")
            }
        }
        container.viewContext.automaticallyMergesChangesFromParent = true
        container.viewContext.mergePolicy = NSMergeByPropertyObjectTrumpMergePolicy
        // As Apple's samples write it (Earthquakes, the CloudKit demo): no undo for the view context.
        container.viewContext.undoManager = nil
        // Pinned to a query generation, as Apple's CloudKit demo does (an in-memory store cannot be: `try?`).
        try? container.viewContext.setQueryGenerationFrom(.current)
    }
}

/// Stores in a folder of the app's choosing, as apps sharing a store with extensions write it.
final class SharedContainer: NSPersistentContainer, @unchecked Sendable {
    nonisolated(unsafe) static var folder = URL(fileURLWithPath: NSTemporaryDirectory())

    override class func defaultDirectoryURL() -> URL { folder }
}

@Suite(.serialized) struct CloudKitContainerTests {
    let folder = TemporaryDirectory()

    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("timestamp", .date)
            }
        }
    }

    @Test func aCloudKitContainerIsALocalContainerAndSaysWhyItCannotSync() throws {
        // In memory through /dev/null: saved objects read back, and no file is written there.
        let preview = CloudPersistence(model: try Self.model(), inMemory: true)
        let context = preview.container.viewContext
        for name in ["Milk", "Bread"] {
            let item = NSEntityDescription.insertNewObject(forEntityName: "Item", into: context)
            item.setValue(name, forKey: "name")
            item.setValue(Date(), forKey: "timestamp")
        }
        try context.save()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [NSSortDescriptor(key: "name", ascending: true)]
        #expect(try context.fetch(request).map { $0.value(forKey: "name") as? String } == ["Bread", "Milk"])
        #expect(preview.container.persistentStoreCoordinator.persistentStores.first?.url == nil)
        #expect((try? FileManager.default.attributesOfItem(atPath: "/dev/null")[.type] as? FileAttributeType) == .typeCharacterSpecial)
        // Two previews do not share their objects.
        let other = CloudPersistence(model: try Self.model(), inMemory: true)
        #expect(try other.container.viewContext.count(for: request) == 0)
        // The schema cannot be initialized: an error naming CloudKit, not a crash.
        #expect(throws: CoreDataError.self) { try preview.container.initializeCloudKitSchema(options: [.dryRun]) }
        do {
            try preview.container.initializeCloudKitSchema()
        } catch {
            #expect("\(error)".contains("CloudKit is not available on Linux"))
        }
        // On a file, with the CloudKit options kept on the description and history recorded.
        let url = folder.file("Groceries.sqlite")
        let onDisk = CloudPersistence(model: try Self.model(), url: url)
        let description = try #require(onDisk.container.persistentStoreDescriptions.first)
        #expect(description.cloudKitContainerOptions?.containerIdentifier == "iCloud.com.example.Groceries")
        let background = onDisk.container.newBackgroundContext()
        try background.performAndWait {
            NSEntityDescription.insertNewObject(forEntityName: "Item", into: background).setValue("Eggs", forKey: "name")
            try background.save()
        }
        // The view context is pinned; pinned again to the current generation, it reads the background save.
        let viewContext = onDisk.container.viewContext
        #expect(viewContext.queryGenerationToken != nil)
        try viewContext.setQueryGenerationFrom(.current)
        #expect(
            try viewContext.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item")).map { $0.value(forKey: "name") as? String } == [
                "Eggs"
            ])
        let history = try onDisk.container.viewContext.execute(
            NSPersistentHistoryChangeRequest.fetchHistory(after: nil as NSPersistentHistoryToken?))
        #expect(((history as? NSPersistentHistoryResult)?.result as? [NSPersistentHistoryTransaction])?.count == 1)
        #expect(FileManager.default.fileExists(atPath: url.path))
    }

    @Test func aContainerSubclassPicksTheStoresFolder() throws {
        SharedContainer.folder = folder.file("AppGroup")
        let container = SharedContainer(name: "Shared", managedObjectModel: try Self.model())
        #expect(container.persistentStoreDescriptions.first?.url == folder.file("AppGroup").appendingPathComponent("Shared.sqlite"))
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        try context.performAndWait {
            NSEntityDescription.insertNewObject(forEntityName: "Item", into: context).setValue("Tea", forKey: "name")
            try context.save()
        }
        #expect(FileManager.default.fileExists(atPath: folder.file("AppGroup").appendingPathComponent("Shared.sqlite").path))
    }
}
