import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Core Data's store file management on SQLite stores: destroying one, replacing one with another's copy, moving an
/// open store elsewhere — the stores' contents, history, model cache and external values go along, and a file that is
/// not a store is never touched.
@Suite struct StoreFileManagementTests {
    let folder = TemporaryDirectory()

    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string)
                Attribute("photo", .binaryData)
            }
        }
    }

    /// A container on `url` with history, holding notes with `texts` (and a large photo each).
    func container(at url: URL, texts: [String] = []) throws -> NSPersistentContainer {
        let container = NSPersistentContainer(name: "Notes", managedObjectModel: try Self.model())
        let description = NSPersistentStoreDescription(url: url)
        description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey)
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        try context.performAndWait {
            for text in texts { try context.make("Note", ["text": text, "photo": Data(repeating: 7, count: 200_000)]) }
            if context.hasChanges { try context.save() }
        }
        return container
    }

    /// A file where Apple's Core Data keeps an external value of the store at `url`.
    static func addExternalValue(beside url: URL) throws -> URL {
        let folder = url.deletingLastPathComponent().appendingPathComponent(".Notes_SUPPORT/_EXTERNAL_DATA")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data([1, 2, 3]).write(to: folder.appendingPathComponent("value"))
        return folder.appendingPathComponent("value")
    }

    func texts(_ container: NSPersistentContainer) throws -> [String] {
        let context = container.newBackgroundContext()
        return try context.performAndWait { try context.objects("Note", sort: ["text"]).compactMap { $0.string("text") } }
    }

    @Test func destroyingAStoreRemovesItAndItsFilesButNeverAnotherFile() throws {
        let url = folder.file("Notes.sqlite")
        let container = try container(at: url, texts: ["a", "b"])
        let coordinator = container.persistentStoreCoordinator
        #expect(FileManager.default.fileExists(atPath: url.path + "-wal"))
        let external = try Self.addExternalValue(beside: url)
        try coordinator.destroyPersistentStore(at: url, ofType: NSSQLiteStoreType, options: nil)
        #expect(coordinator.persistentStores.isEmpty)
        for suffix in ["", "-wal", "-shm"] { #expect(!FileManager.default.fileExists(atPath: url.path + suffix), "\(suffix)") }
        #expect(!FileManager.default.fileExists(atPath: external.path))
        // Nothing there: nothing to do. A file that is not a store: an error, and the file stays.
        try coordinator.destroyPersistentStore(at: url, ofType: NSSQLiteStoreType)
        let text = folder.file("notes.txt")
        try Data("not a store".utf8).write(to: text)
        #expect(throws: CoreDataError.self) { try coordinator.destroyPersistentStore(at: text, ofType: NSSQLiteStoreType) }
        #expect(FileManager.default.fileExists(atPath: text.path))
        // A new store at the old place starts empty.
        #expect(try texts(try self.container(at: url)) == [])
    }

    @Test func replacingAStoreCopiesAnotherWithItsHistoryAndExternalValues() throws {
        let source = folder.file("Notes.sqlite")
        let open = try container(at: source, texts: ["a", "b", "c"])
        let backup = folder.file("Backup/Notes.sqlite")
        _ = try container(at: backup, texts: ["old"]).persistentStoreCoordinator.persistentStores.first.map { try $0.close() }
        // The source stays open (its last commits still in its WAL) while it is copied.
        try open.persistentStoreCoordinator.replacePersistentStore(
            at: backup, destinationOptions: nil, withPersistentStoreFrom: source, sourceOptions: nil, ofType: NSSQLiteStoreType)
        let copy = try container(at: backup)
        #expect(try texts(copy) == ["a", "b", "c"])
        let reader = copy.newBackgroundContext()
        let photo = try reader.performAndWait { try reader.objects("Note", "text == 'a'").first?.value(forKey: "photo") as? Data }
        #expect(photo?.count == 200_000)
        let history = try copy.viewContext.execute(NSPersistentHistoryChangeRequest.fetchHistory(after: nil as NSPersistentHistoryToken?))
        #expect(((history as? NSPersistentHistoryResult)?.result as? [NSPersistentHistoryTransaction])?.count == 1)
        // The same store: its identifier, so object IDs name it alike.
        #expect(
            copy.persistentStoreCoordinator.persistentStores.first?.identifier
                == open.persistentStoreCoordinator.persistentStores.first?.identifier)
        // Refused: a destination this coordinator holds, a missing source.
        #expect(throws: CoreDataError.self) {
            try open.persistentStoreCoordinator.replacePersistentStore(
                at: source, withPersistentStoreFrom: backup, ofType: NSSQLiteStoreType)
        }
        #expect(throws: CoreDataError.self) {
            try open.persistentStoreCoordinator.replacePersistentStore(
                at: folder.file("Other.sqlite"), withPersistentStoreFrom: folder.file("Missing.sqlite"), ofType: NSSQLiteStoreType)
        }
    }

    @Test func migratingAnOpenStoreMovesItAndItsObjectsKeepTheirIDs() throws {
        let url = folder.file("Notes.sqlite")
        let container = try container(at: url, texts: ["a", "b"])
        let coordinator = container.persistentStoreCoordinator
        let store = try #require(coordinator.persistentStores.first)
        let view = container.viewContext
        let note = try view.performAndWait { try view.objects("Note", "text == 'a'")[0] }
        _ = try Self.addExternalValue(beside: url)
        let group = folder.file("AppGroup/Notes.sqlite")
        let moved = try coordinator.migratePersistentStore(store, to: group, options: nil, withType: NSSQLiteStoreType)
        #expect(coordinator.persistentStores.count == 1 && coordinator.persistentStores.first === moved)
        #expect(moved.url?.standardizedFileURL == group.standardizedFileURL)
        // The old file is left as it was; the objects and their IDs go on in the moved store.
        #expect(FileManager.default.fileExists(atPath: url.path))
        try view.performAndWait {
            #expect(try view.existingObject(with: note.objectID).string("text") == "a")
            try view.make("Note", ["text": "c"])
            try view.save()
        }
        #expect(try texts(container) == ["a", "b", "c"])
        // External values (Apple's `.Notes_SUPPORT/_EXTERNAL_DATA` files) go along.
        #expect(FileManager.default.fileExists(atPath: folder.file("AppGroup/.Notes_SUPPORT/_EXTERNAL_DATA/value").path))
        // An in-memory store moves into a file too.
        let memory = NSPersistentContainer(name: "Memory", managedObjectModel: try Self.model())
        let description = NSPersistentStoreDescription()
        description.type = NSInMemoryStoreType
        memory.persistentStoreDescriptions = [description]
        try memory.loadPersistentStores()
        try memory.viewContext.performAndWait {
            try memory.viewContext.make("Note", ["text": "kept"])
            try memory.viewContext.save()
        }
        let saved = folder.file("Saved.sqlite")
        _ = try memory.persistentStoreCoordinator.migratePersistentStore(
            try #require(memory.persistentStoreCoordinator.persistentStores.first), to: saved, withType: NSSQLiteStoreType)
        #expect(try texts(try self.container(at: saved)) == ["kept"])
        // Refused: another coordinator's store.
        #expect(throws: CoreDataError.self) {
            _ = try memory.persistentStoreCoordinator.migratePersistentStore(
                moved, to: folder.file("X.sqlite"), withType: NSSQLiteStoreType)
        }
    }

    @Test func metadataKeepsTheAppsKeysBesideCoreDatasAndIsWrittenAtTheNextSave() throws {
        try Self.metadataKeepsTheAppsKeysBesideCoreDatasAndIsWrittenAtTheNextSave(StorePlaces(.sqlite))
    }

    /// Core Data's class method: a closed store file's metadata set without adding it (as migration helpers mark
    /// stores), Core Data's keys kept; bad input refused with a message, nothing written.
    @Test func aStoreFilesMetadataIsSetWithoutOpeningIt() throws {
        let url = folder.file("Closed.sqlite")
        let container = try container(at: url, texts: ["a"])
        let store = try #require(container.persistentStoreCoordinator.persistentStores.first)
        try container.persistentStoreCoordinator.remove(store)
        var metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
        let uuid = try #require(metadata["NSStoreUUID"] as? String)
        metadata["MigratedBy"] = "importer 2"
        metadata["NSStoreUUID"] = "forged"
        try NSPersistentStoreCoordinator.setMetadata(metadata, forPersistentStoreOfType: NSSQLiteStoreType, at: url)
        let read = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
        #expect(read["MigratedBy"] as? String == "importer 2")
        #expect(read["NSStoreUUID"] as? String == uuid && read["NSStoreModelVersionHashes"] != nil)
        // The app's keys are replaced as a whole: one left out goes.
        try NSPersistentStoreCoordinator.setMetadata(["Other": 1], forPersistentStoreOfType: NSSQLiteStoreType, at: url)
        let replaced = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
        #expect(replaced["MigratedBy"] == nil && replaced["Other"] as? Int == 1)
        // The store still opens with its objects.
        #expect(try texts(try self.container(at: url)) == ["a"])

        #expect {
            try NSPersistentStoreCoordinator.setMetadata(
                ["Handle": FileHandle.standardError], forPersistentStoreOfType: NSSQLiteStoreType, at: url)
        } throws: { "\($0)".contains("Handle") }
        #expect(try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)["Other"] as? Int == 1)
        let text = folder.file("notes.txt")
        try Data("not a store".utf8).write(to: text)
        #expect(throws: CoreDataError.self) {
            try NSPersistentStoreCoordinator.setMetadata([:], forPersistentStoreOfType: NSSQLiteStoreType, at: text)
        }
        #expect(try String(contentsOf: text, encoding: .utf8) == "not a store")
        #expect(throws: CoreDataError.self) {
            try NSPersistentStoreCoordinator.setMetadata([:], forPersistentStoreOfType: NSSQLiteStoreType, at: folder.file("none.sqlite"))
        }
    }

    static func metadataKeepsTheAppsKeysBesideCoreDatasAndIsWrittenAtTheNextSave(_ places: StorePlaces) throws {
        let url = try places.url("Metadata")
        let container = NSPersistentContainer(name: "Notes", managedObjectModel: try model())
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        try container.loadPersistentStores()
        let coordinator = container.persistentStoreCoordinator
        let store = try #require(coordinator.persistentStores.first)
        var metadata = coordinator.metadata(for: store)
        #expect(metadata["NSStoreUUID"] as? String == store.identifier)
        #expect((metadata["NSStoreModelVersionHashes"] as? [String: Any])?.keys.sorted() == ["Note"])
        // The app's keys; Core Data's cannot be changed or removed.
        metadata["SeedVersion"] = 2
        metadata["Imported"] = ["a", "b"]
        metadata["LastSync"] = Date(timeIntervalSince1970: 1_000)
        metadata["NSStoreUUID"] = "forged"
        metadata.removeValue(forKey: "NSStoreModelVersionHashes")
        coordinator.setMetadata(metadata, for: store)
        #expect(coordinator.metadata(for: store)["SeedVersion"] as? Int == 2)
        #expect(coordinator.metadata(for: store)["NSStoreUUID"] as? String == store.identifier)
        // Written when a context saves (even one with nothing to save), not before; read back after reopening.
        let onDisk = { try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url) }
        #expect(try onDisk()["SeedVersion"] == nil)
        let context = container.newBackgroundContext()
        try context.performAndWait { try context.save() }
        #expect(try onDisk()["SeedVersion"] as? Int == 2)
        try container.persistentStoreCoordinator.remove(store)
        let reopened = NSPersistentContainer(name: "Notes", managedObjectModel: try model())
        reopened.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        try reopened.loadPersistentStores()
        let again = try #require(reopened.persistentStoreCoordinator.persistentStores.first)
        let read = reopened.persistentStoreCoordinator.metadata(for: again)
        #expect(read["SeedVersion"] as? Int == 2 && read["Imported"] as? [String] == ["a", "b"])
        #expect(read["LastSync"] as? Date == Date(timeIntervalSince1970: 1_000))
        #expect(read["NSStoreUUID"] as? String == store.identifier && read["NSStoreModelVersionHashes"] != nil)
        // A key set to what a property list cannot hold fails the save, naming the key; the store works on.
        var bad = read
        bad["Handle"] = FileHandle.standardError
        reopened.persistentStoreCoordinator.setMetadata(bad, for: again)
        let writer = reopened.newBackgroundContext()
        try writer.performAndWait {
            try writer.make("Note", ["text": "kept"])
            #expect {
                try writer.save()
            } throws: { "\($0)".contains("'Handle'") }
            reopened.persistentStoreCoordinator.setMetadata(read, for: again)
            try writer.save()
        }
        #expect(try writer.performAndWait { try writer.objects("Note").count } == 1)
    }
}

/// Store metadata on a PostgreSQL store.
@Suite(.enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLStoreMetadataTests {
    @Test func metadataKeepsTheAppsKeysBesideCoreDatasAndIsWrittenAtTheNextSave() throws {
        try StoreFileManagementTests.metadataKeepsTheAppsKeysBesideCoreDatasAndIsWrittenAtTheNextSave(StorePlaces(.postgreSQL))
    }
}
