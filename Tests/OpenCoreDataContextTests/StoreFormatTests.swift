import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// Entity numbers (`Z_ENT`) follow Core Data's order, and a store written with the former order is renumbered on a
/// read-write open.
@Suite struct StoreFormatTests {
    /// Names whose byte order (`Banana`, `Cherry`, `apple`) differs from Core Data's (`apple`, `Banana`, `Cherry`), and
    /// a subentity numbered right after its parent.
    func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Cherry") { Attribute("name", .string) }
            Entity("apple") { Attribute("name", .string) }
            Entity("Banana") { Attribute("name", .string) }
            Entity("Aardvark", parent: "Cherry")
        }
    }

    @Test func entitiesAreNumberedAsCoreDataNumbersThem() throws {
        let model = try model()
        let numbers = Dictionary(uniqueKeysWithValues: model.entities.map { ($0.name, $0.entityID) })
        #expect(numbers == ["apple": 1, "Banana": 2, "Cherry": 3, "Aardvark": 4])
        #expect(model.entity(withID: 4)?.name == "Aardvark" && model.entity(withID: 5) == nil)
    }

    @Test func aStoreWrittenWithTheFormerNumberingIsRenumberedOnAReadWriteOpen() throws {
        let stack = try TestStack(model: model())
        let context = stack.context()
        try context.performAndWait {
            for name in ["apple", "Banana", "Cherry", "Aardvark"] { try context.make(name, ["name": name.lowercased()]) }
            try context.save()
        }
        try stack.container.persistentStoreCoordinator.persistentStores.forEach {
            try stack.container.persistentStoreCoordinator.remove($0)
        }
        // Rewrite it as format 1 wrote it: entities numbered in byte order of their names.
        let former = ["Aardvark": 1, "Banana": 2, "Cherry": 3, "apple": 4]
        try DatabaseQueue(path: stack.storeURL.path).write { db in
            for (table, name) in [("ZAPPLE", "apple"), ("ZBANANA", "Banana")] {
                try db.execute(sql: "UPDATE \(table) SET Z_ENT = ?", arguments: [former[name]!])
            }
            try db.execute(sql: "UPDATE ZCHERRY SET Z_ENT = CASE Z_ENT WHEN 3 THEN 3 ELSE 1 END")
            try db.execute(sql: "UPDATE Z_METADATA SET Z_VALUE = '1' WHERE Z_KEY = 'formatVersion'")
        }
        let readOnly = NSPersistentStoreDescription(url: stack.storeURL)
        readOnly.isReadOnly = true
        let refusing = NSPersistentContainer(name: "T", managedObjectModel: try model())
        refusing.persistentStoreDescriptions = [readOnly]
        let error = #expect(throws: CoreDataError.self) { try refusing.loadPersistentStores() }
        #expect(error?.message.contains("store format 1") == true && error?.message.contains("read-write") == true)

        let upgrading = NSPersistentContainer(name: "T", managedObjectModel: try model())
        upgrading.persistentStoreDescriptions = [NSPersistentStoreDescription(url: stack.storeURL)]
        try upgrading.loadPersistentStores()
        let reader = upgrading.newBackgroundContext()
        try reader.performAndWait {
            for name in ["apple", "Banana", "Cherry", "Aardvark"] {
                let request = NSFetchRequest<NSManagedObject>(entityName: name)
                request.includesSubentities = false
                let objects = try reader.fetch(request)
                #expect(objects.map(\.entity.name) == [name] && objects.first?.string("name") == name.lowercased(), "\(name)")
            }
        }
    }
}
