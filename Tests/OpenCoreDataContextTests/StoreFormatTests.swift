import Foundation
import GRDB
import OpenCoreData
import OpenCoreDataModel
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
        let stack = try TestStack(model: model(), formerLayout: true)
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
            try Self.recordFormerHashes(db, model: try model(), format: "1")
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

extension StoreFormatTests {
    /// Rewrites a store's metadata as formats 1 and 2 wrote it: their own version hashes, not Core Data's.
    static func recordFormerHashes(_ db: Database, model: NSManagedObjectModel, format: String) throws {
        try db.execute(sql: "UPDATE Z_METADATA SET Z_VALUE = ? WHERE Z_KEY = 'formatVersion'", arguments: [format])
        try db.execute(
            sql: "UPDATE Z_METADATA SET Z_VALUE = ? WHERE Z_KEY = 'modelVersionHash'", arguments: [model.legacyVersionHashString])
        for (name, hash) in model.legacyEntityVersionHashes {
            try db.execute(sql: "UPDATE Z_METADATA SET Z_VALUE = ? WHERE Z_KEY = ?", arguments: [hash, "entityHash." + name])
        }
    }

    /// A format-2 store (hashes of our own) opens read-only as it is, and a read-write open records Core Data's
    /// hashes; a model that differs from the one that wrote it is still refused, naming the entity.
    @Test func aFormerStoreIsCheckedWithItsOwnHashesAndUpgradedReadWrite() throws {
        let stack = try TestStack(model: model(), formerLayout: true)
        let context = stack.context()
        try context.performAndWait {
            try context.make("apple", ["name": "a"])
            try context.save()
        }
        try stack.container.persistentStoreCoordinator.persistentStores.forEach {
            try stack.container.persistentStoreCoordinator.remove($0)
        }
        let model = try model()
        try DatabaseQueue(path: stack.storeURL.path).write { try Self.recordFormerHashes($0, model: model, format: "2") }
        func metadata() throws -> [String: String] {
            try DatabaseQueue(path: stack.storeURL.path).read { db in
                Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT Z_KEY, Z_VALUE FROM Z_METADATA").map { ($0[0], $0[1]) })
            }
        }
        func open(_ model: NSManagedObjectModel, readOnly: Bool) throws -> NSPersistentContainer {
            let description = NSPersistentStoreDescription(url: stack.storeURL)
            description.isReadOnly = readOnly
            let container = NSPersistentContainer(name: "T", managedObjectModel: model)
            container.persistentStoreDescriptions = [description]
            try container.loadPersistentStores()
            return container
        }
        let reading = try open(try self.model(), readOnly: true)
        try reading.removeStores()
        #expect(try metadata()["formatVersion"] == "2", "a read-only open writes nothing")

        let changed = try NSManagedObjectModel {
            Entity("Cherry") { Attribute("name", .string) }
            Entity("apple") { Attribute("name", .string, optional: false) }
            Entity("Banana") { Attribute("name", .string) }
            Entity("Aardvark", parent: "Cherry")
        }
        let error = #expect(throws: CoreDataError.self) { _ = try open(changed, readOnly: true) }
        #expect(error?.message.contains("entity 'apple' changed") == true, "\(error?.message ?? "")")

        let writing = try open(try self.model(), readOnly: false)
        try writing.removeStores()
        let after = try metadata()
        #expect(after["formatVersion"] == "3" && after["modelVersionHash"] == model.versionHashString)
        #expect(after["entityHash.apple"] == model.entityVersionHashesByName["apple"]?.hexString)
        #expect(after["entityHash.apple"] != model.legacyEntityVersionHashes["apple"])
        _ = try open(try self.model(), readOnly: true)
    }
}

/// A store keeps its model as Core Data does (`Z_MODELCACHE`), and the compiled form reads back as the model.
@Suite struct ModelCacheTests {
    let dir = TemporaryDirectory()

    @Test func aStoreCachesItsModelAndOpensWithIt() throws {
        let model = try dir.loadModel(
            "Cached",
            """
                <entity name="Shelf" representedClassName="Shelf" syncable="YES" versionHashModifier="v2">
                    <attribute name="name" attributeType="String" defaultValueString="main"/>
                    <attribute name="price" optional="YES" attributeType="Decimal" defaultValueString="1.50"/>
                    <attribute name="tags" optional="YES" attributeType="Transformable" valueTransformerName="NSSecureUnarchiveFromData"/>
                    <relationship name="books" optional="YES" toMany="YES" deletionRule="Cascade" ordered="YES" destinationEntity="Book" inverseName="shelf"/>
                    <fetchIndex name="byName"><fetchIndexElement property="name" type="Binary" order="descending"/></fetchIndex>
                    <uniquenessConstraints><uniquenessConstraint><constraint value="name"/></uniquenessConstraint></uniquenessConstraints>
                    <userInfo><entry key="k" value="v"/></userInfo>
                </entity>
                <entity name="Book" representedClassName="Book" syncable="YES" isAbstract="YES">
                    <attribute name="title" optional="YES" attributeType="String"/>
                    <relationship name="shelf" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Shelf" inverseName="books"/>
                </entity>
                <entity name="Novel" representedClassName="Novel" parentEntity="Book" syncable="YES">
                    <attribute name="pages" optional="YES" attributeType="Integer 32" defaultValueString="0"/>
                </entity>
                <configuration name="Local"><memberEntity name="Shelf"/></configuration>
            """)
        let stack = try TestStack(model: model)
        let cached = try NSManagedObjectModel.cachedModel(ofStoreAt: stack.storeURL)
        #expect(cached.entityVersionHashesByName == model.entityVersionHashesByName, "the same stored shape, modifiers included")
        let shelf = try #require(cached.entitiesByName["Shelf"])
        #expect(shelf.attributesByName["name"]?.defaultValue == .string("main") && shelf.attributesByName["name"]?.isOptional == false)
        #expect(shelf.attributesByName["price"]?.defaultValue == .decimal(Decimal(string: "1.50")!))
        #expect(shelf.attributesByName["tags"]?.valueTransformerName == "NSSecureUnarchiveFromData")
        #expect(
            shelf.relationshipsByName["books"]?.isOrdered == true
                && shelf.relationshipsByName["books"]?.inverseRelationship?.name == "shelf")
        #expect(shelf.uniquenessConstraints == [["name"]] && shelf.indexes.map(\.name) == ["byName"] && shelf.userInfo == ["k": "v"])
        #expect(shelf.indexes.first?.elements.first?.isAscending == false)
        #expect(cached.entitiesByName["Novel"]?.superentity?.name == "Book" && cached.entitiesByName["Book"]?.isAbstract == true)
        #expect(cached.entitiesByName["Novel"]?.properties.map(\.name) == ["pages"], "own properties only")
        #expect(cached.entities(forConfigurationName: "Local")?.map(\.name) == ["Shelf"])
        // And the store opens with it.
        try stack.container.persistentStoreCoordinator.persistentStores.forEach {
            try stack.container.persistentStoreCoordinator.remove($0)
        }
        let container = NSPersistentContainer(name: "Cached", managedObjectModel: cached)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: stack.storeURL)]
        try container.loadPersistentStores()
    }
}

/// Stores this project wrote in format 4 recorded hashes of its own for ordered relationships and derived attributes;
/// they open with the same model, and a read-write open records Core Data's hashes.
@Suite struct Format4HashTests {
    @Test func aFormat4StoreIsRecognisedAndGetsCoreDatasHashes() throws {
        let model = try NSManagedObjectModel {
            Entity("List") {
                Attribute("name", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "list", ordered: true)
            }
            Entity("Item") {
                Attribute("title", .string)
                Relationship("list", to: "List", inverse: "items")
            }
        }
        #expect(model.format4EntityVersionHashesByName != model.entityVersionHashesByName, "ordered relationships hash otherwise now")
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            let list = try context.make("List", ["name": "groceries"])
            try context.make("Item", ["title": "milk", "list": list])
            try context.save()
        }
        try stack.container.removeStores()
        // Make it what format 4 wrote: its hashes and format number.
        func metadata() throws -> [String: PropertyListValue] {
            try DatabaseQueue(path: stack.storeURL.path).read { db in
                let plist = try Data.fetchOne(db, sql: "SELECT Z_PLIST FROM Z_METADATA") ?? Data()
                return try BinaryPropertyList.readAnyFormat(plist).dictionary ?? [:]
            }
        }
        func record(format4Hashes hashes: [String: Data]) throws {
            var old = try metadata()
            old["NSStoreModelVersionHashes"] = .dictionary(hashes.mapValues { .data($0) })
            old["OpenCoreDataStoreFormat"] = .string("4")
            try DatabaseQueue(path: stack.storeURL.path).write { db in
                try db.execute(sql: "UPDATE Z_METADATA SET Z_PLIST = ?", arguments: [BinaryPropertyList.write(.dictionary(old))])
            }
        }
        try record(format4Hashes: model.format4EntityVersionHashesByName)
        // Read-only it opens as it is; read-write it opens and records Core Data's hashes.
        let reader = NSPersistentContainer(name: "Format4", managedObjectModel: model)
        let readOnly = NSPersistentStoreDescription(url: stack.storeURL)
        readOnly.isReadOnly = true
        reader.persistentStoreDescriptions = [readOnly]
        try reader.loadPersistentStores()
        try reader.removeStores()
        #expect(try metadata()["OpenCoreDataStoreFormat"] == .string("4"))
        let writer = NSPersistentContainer(name: "Format4", managedObjectModel: model)
        writer.persistentStoreDescriptions = [NSPersistentStoreDescription(url: stack.storeURL)]
        try writer.loadPersistentStores()
        let again = writer.newBackgroundContext()
        #expect(try again.performAndWait { try again.objects("Item").first?.string("title") } == "milk")
        try writer.removeStores()
        let now = try metadata()
        #expect(now["OpenCoreDataStoreFormat"] == .string("5"))
        #expect(now["NSStoreModelVersionHashes"] == .dictionary(model.entityVersionHashesByName.mapValues { .data($0) }))
        // Hashes of another model are not taken for format 4's.
        try record(format4Hashes: ["List": Data(repeating: 1, count: 32), "Item": Data(repeating: 2, count: 32)])
        let refusing = NSPersistentContainer(name: "Format4", managedObjectModel: model)
        let description = NSPersistentStoreDescription(url: stack.storeURL)
        description.shouldMigrateStoreAutomatically = false
        refusing.persistentStoreDescriptions = [description]
        #expect(throws: CoreDataError.self) { try refusing.loadPersistentStores() }
    }
}
