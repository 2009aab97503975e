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
