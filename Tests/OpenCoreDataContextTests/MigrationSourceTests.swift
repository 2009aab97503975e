import Foundation
import GRDB
import OpenCoreData
import OpenCoreDataModel
import Testing
import _TestSupport

/// Where a migration starts from, and relationships whose destination changes: a store that keeps no model (written
/// before iOS 12) migrates from the version of the app's bundle whose hashes it recorded, as Core Data finds it; a
/// relationship pointed at another entity keeps the links whose objects are still of its kind.
@Suite struct MigrationSourceTests {
    let dir = TemporaryDirectory()

    static let v1 = """
            <entity name="Item" representedClassName="Item" syncable="YES">
                <attribute name="name" optional="YES" attributeType="String"/>
            </entity>
        """
    static let v2 = """
            <entity name="Item" representedClassName="Item" syncable="YES">
                <attribute name="name" optional="YES" attributeType="String"/>
                <attribute name="rank" attributeType="Integer 32" defaultValueString="3"/>
            </entity>
        """

    /// Writes `Shop.xcdatamodeld` with versions "Shop 1" and "Shop 2", the second current.
    func bundle() throws -> URL {
        let bundle = dir.file("Shop.xcdatamodeld")
        _ = try dir.writeModel("Shop.xcdatamodeld/Shop 1", Self.v1)
        _ = try dir.writeModel("Shop.xcdatamodeld/Shop 2", Self.v2)
        let marker = try PropertyListSerialization.data(
            fromPropertyList: ["_XCCurrentVersionName": "Shop 2.xcdatamodel"], format: .xml, options: 0)
        try marker.write(to: bundle.appendingPathComponent(".xccurrentversion"))
        return bundle
    }

    func open(_ model: NSManagedObjectModel, at url: URL) throws -> NSPersistentContainer {
        let container = NSPersistentContainer(name: "Shop", managedObjectModel: model)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        try container.loadPersistentStores()
        return container
    }

    func close(_ container: NSPersistentContainer) throws {
        try container.removeStores()
    }

    /// A store written with "Shop 1" whose model cache is gone (as in stores written before iOS 12).
    func storeWithoutCache(_ name: String, bundle: URL) throws -> URL {
        let url = dir.file(name)
        let writer = try open(try NSManagedObjectModel(contentsOf: bundle.appendingPathComponent("Shop 1.xcdatamodel")), at: url)
        let context = writer.newBackgroundContext()
        try context.performAndWait {
            for name in ["pen", "ink"] { try context.make("Item", ["name": name]) }
            try context.save()
        }
        try close(writer)
        let queue = try DatabaseQueue(path: url.path)
        try queue.write { db in try db.execute(sql: "DROP TABLE Z_MODELCACHE") }
        try queue.close()
        return url
    }

    @Test func aStoreWithoutAModelCacheMigratesFromTheBundlesVersionThatWroteIt() throws {
        let bundle = try bundle()
        let url = try storeWithoutCache("Shop.sqlite", bundle: bundle)
        let metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
        let found = try #require(NSManagedObjectModel.version(inBundleAt: bundle, forStoreMetadata: metadata))
        #expect(found.entitiesByName["Item"]?.propertiesByName["rank"] == nil, "found version 1")
        let merged = NSManagedObjectModel.mergedModel(from: [try #require(Bundle(path: dir.url.path))], forStoreMetadata: metadata)
        #expect(merged?.versionChecksum == found.versionChecksum)

        // A model built outside the bundle has no versions to look in: the store needs the version that wrote it.
        let loose = try dir.loadModel("Loose", Self.v2)
        let before = FileManager.default.contents(atPath: url.path)
        let error = #expect(throws: CoreDataError.self) { try SQLiteStore.migrateStore(at: url, to: loose) }
        #expect(error?.code == .migrationMissingSourceModel, "\(error?.message ?? "")")
        #expect(FileManager.default.contents(atPath: url.path) == before)

        // The container, given the bundle's current version, migrates as an app does.
        let container = try open(try NSManagedObjectModel(contentsOf: bundle), at: url)
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let items = try context.objects("Item").sorted { ($0.string("name") ?? "") < ($1.string("name") ?? "") }
            #expect(items.map { $0.string("name") } == ["ink", "pen"])
            #expect(items.allSatisfy { ($0.value(forKey: "rank") as? Int32) == 3 })
        }
        try close(container)

        // One version inside the bundle, given as the model (`--to`), looks in the same bundle.
        let other = try storeWithoutCache("Other.sqlite", bundle: bundle)
        let report = try SQLiteStore.migrateStore(
            at: other, to: try NSManagedObjectModel(contentsOf: bundle.appendingPathComponent("Shop 2.xcdatamodel")))
        #expect(report.changes == ["added Item.rank"], "\(report.changes)")
    }

    /// Owners point at animals (dogs are animals) and, in version 2, `pet` and `pets` at dogs only and `favourite` at a
    /// toy: links to dogs stay, links to other animals go, and no link lands on the toy that shares a dog's key.
    static let pets = """
            <entity name="Animal" representedClassName="Animal" syncable="YES">
                <attribute name="name" optional="YES" attributeType="String"/>
            </entity>
            <entity name="Dog" representedClassName="Dog" parentEntity="Animal" syncable="YES">
                <attribute name="breed" optional="YES" attributeType="String"/>
            </entity>
            <entity name="Toy" representedClassName="Toy" syncable="YES">
                <attribute name="name" optional="YES" attributeType="String"/>
            </entity>
            <entity name="Owner" representedClassName="Owner" syncable="YES">
                <attribute name="name" optional="YES" attributeType="String"/>
                <relationship name="pet" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Animal"/>
                <relationship name="pets" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Animal"/>
                <relationship name="favourite" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Animal"/>
            </entity>
        """

    static let petsV2 = pets.replacingOccurrences(
        of: #"name="pet" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Animal""#,
        with: #"name="pet" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Dog""#
    )
    .replacingOccurrences(
        of: #"toMany="YES" deletionRule="Nullify" destinationEntity="Animal""#,
        with: #"toMany="YES" deletionRule="Nullify" destinationEntity="Dog""#
    )
    .replacingOccurrences(
        of: #"name="favourite" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Animal""#,
        with: #"name="favourite" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Toy""#)

    @Test func aRelationshipPointedAtAnotherEntityKeepsTheLinksStillOfItsKind() throws {
        let url = dir.file("Pets.sqlite")
        let writer = try open(try dir.loadModel("Pets", Self.pets), at: url)
        let context = writer.newBackgroundContext()
        try context.performAndWait {
            let rex = try context.make("Dog", ["name": "Rex", "breed": "collie"])
            let tom = try context.make("Animal", ["name": "Tom"])
            try context.make("Toy", ["name": "ball"])
            try context.make("Toy", ["name": "rope"])
            let ada = try context.make("Owner", ["name": "Ada", "pet": rex, "favourite": rex])
            ada.setValue(Set([rex, tom]), forKey: "pets")
            try context.make("Owner", ["name": "Bob", "pet": tom, "favourite": tom])
            try context.save()
        }
        try close(writer)
        let destination = try dir.loadModel("Pets2", Self.petsV2)
        let report = try SQLiteStore.migrateStore(at: url, to: destination)
        #expect(report.changes.contains("Owner.favourite now points to Toy, not Animal: its links were dropped"), "\(report.changes)")
        #expect(report.changes.contains("Owner.pets now points to Dog, not Animal: links to other kinds of object were dropped"))
        let reopened = try open(destination, at: url)
        let reader = reopened.newBackgroundContext()
        try reader.performAndWait {
            let owners = try reader.objects("Owner")
            let ada = try #require(owners.first { $0.string("name") == "Ada" })
            let bob = try #require(owners.first { $0.string("name") == "Bob" })
            #expect((ada.value(forKey: "pet") as? NSManagedObject)?.string("name") == "Rex")
            #expect((ada.value(forKey: "pets") as? Set<NSManagedObject>)?.map { $0.string("name") } == ["Rex"])
            #expect(ada.value(forKey: "favourite") == nil && bob.value(forKey: "favourite") == nil)
            #expect(bob.value(forKey: "pet") == nil)
            #expect(try reader.objects("Animal").count == 2 && reader.objects("Toy").count == 2)
        }
        try close(reopened)
    }

    /// The same change made to a required relationship: the owners left without a value fail the migration, named.
    @Test func aRequiredRelationshipLeftEmptyFailsTheMigration() throws {
        let url = dir.file("Required.sqlite")
        let writer = try open(try dir.loadModel("Pets", Self.pets), at: url)
        let context = writer.newBackgroundContext()
        try context.performAndWait {
            let tom = try context.make("Animal", ["name": "Tom"])
            try context.make("Owner", ["name": "Bob", "favourite": tom])
            try context.save()
        }
        try close(writer)
        let required = Self.petsV2.replacingOccurrences(
            of: #"name="favourite" optional="YES""#, with: #"name="favourite""#)
        let before = FileManager.default.contents(atPath: url.path)
        let error = #expect(throws: CoreDataError.self) { try SQLiteStore.migrateStore(at: url, to: try dir.loadModel("Req", required)) }
        #expect(error?.code == .migration && error?.entityName == "Owner" && error?.key == "favourite", "\(error?.message ?? "")")
        #expect(FileManager.default.contents(atPath: url.path) == before)
    }
}
