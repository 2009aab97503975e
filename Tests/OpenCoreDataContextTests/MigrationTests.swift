import Foundation
import GRDB
import OpenCoreData
import OpenCoreDataModel
import Testing
import _TestSupport

/// Lightweight migration: a store follows its model through versions that add, remove, rename and retype
/// attributes and entities, keeping every object, value, relationship and object ID the newer version still has; a
/// migration the model refuses leaves the store byte for byte as it was.
@Suite struct MigrationTests {
    let dir = TemporaryDirectory()

    /// Version 1: folders of items, items tagged many-to-many.
    static let v1 = """
            <entity name="Folder" representedClassName="Folder" syncable="YES">
                <attribute name="title" attributeType="String"/>
                <relationship name="items" optional="YES" toMany="YES" deletionRule="Nullify" ordered="YES" destinationEntity="Item" inverseName="folder"/>
            </entity>
            <entity name="Item" representedClassName="Item" syncable="YES">
                <attribute name="name" attributeType="String"/>
                <attribute name="count" optional="YES" attributeType="Integer 16" defaultValueString="0"/>
                <attribute name="price" optional="YES" attributeType="Double" defaultValueString="0"/>
                <attribute name="badge" optional="YES" attributeType="UUID"/>
                <relationship name="folder" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Folder" inverseName="items"/>
                <relationship name="tags" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Tag" inverseName="items"/>
            </entity>
            <entity name="Tag" representedClassName="Tag" syncable="YES">
                <attribute name="label" optional="YES" attributeType="String"/>
                <relationship name="items" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Item" inverseName="tags"/>
            </entity>
        """

    /// Version 2: `Item.note` added, `Item.count` widened to Integer 64, entity `Note` added.
    static let v2 =
        v1.replacingOccurrences(
            of: #"<attribute name="count" optional="YES" attributeType="Integer 16" defaultValueString="0"/>"#,
            with:
                #"<attribute name="count" optional="YES" attributeType="Integer 64" defaultValueString="0"/><attribute name="note" optional="YES" attributeType="String"/>"#
        )
            + """
                <entity name="Note" representedClassName="Note" syncable="YES"><attribute name="text" optional="YES" attributeType="String"/></entity>
            """

    /// Version 3: `Item.name` renamed `title`, `Item.price` removed, `Folder` renamed `Group`, `Note` removed.
    static let v3 = v1.replacingOccurrences(
        of: #"<attribute name="name" attributeType="String"/>"#, with: #"<attribute name="title" attributeType="String" elementID="name"/>"#
    )
    .replacingOccurrences(
        of: #"<attribute name="count" optional="YES" attributeType="Integer 16" defaultValueString="0"/>"#,
        with:
            #"<attribute name="count" optional="YES" attributeType="Integer 64" defaultValueString="0"/><attribute name="note" optional="YES" attributeType="String"/>"#
    )
    .replacingOccurrences(of: #"<attribute name="price" optional="YES" attributeType="Double" defaultValueString="0"/>"#, with: "")
    .replacingOccurrences(
        of: #"<entity name="Folder" representedClassName="Folder" syncable="YES">"#,
        with: #"<entity name="Group" representedClassName="Group" elementID="Folder" syncable="YES">"#
    )
    .replacingOccurrences(of: #"destinationEntity="Folder""#, with: #"destinationEntity="Group""#)

    /// Version 4: `Item.rank` added, required, default 7; `Tag.label` made required with default "untagged".
    static let v4 = v3.replacingOccurrences(
        of: #"<attribute name="note" optional="YES" attributeType="String"/>"#,
        with:
            #"<attribute name="note" optional="YES" attributeType="String"/><attribute name="rank" attributeType="Integer 32" defaultValueString="7"/>"#
    )
    .replacingOccurrences(
        of: #"<attribute name="label" optional="YES" attributeType="String"/>"#,
        with: #"<attribute name="label" attributeType="String" defaultValueString="untagged"/>"#)

    func model(_ body: String) throws -> NSManagedObjectModel { try dir.loadModel("Versions", body) }

    /// Lightweight migration of the store at `url`, on its back end.
    @discardableResult
    static func migrateStore(at url: URL, to model: NSManagedObjectModel) throws -> MigrationReport {
        StoreKind.isPostgreSQL(url)
            ? try PostgreSQLStore.migrateStore(at: url, to: model) : try SQLiteStore.migrateStore(at: url, to: model)
    }

    func container(_ model: NSManagedObjectModel, at url: URL, migrate: Bool = true) throws -> NSPersistentContainer {
        let description = NSPersistentStoreDescription(url: url)
        description.shouldMigrateStoreAutomatically = migrate
        let container = NSPersistentContainer(name: "Versions", managedObjectModel: model)
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        return container
    }

    func close(_ container: NSPersistentContainer) throws {
        try container.removeStores()
    }

    /// A version-1 store: a folder of three items (one tagged twice, one untagged), two tags, one tag without label.
    func seed(_ url: URL) throws -> (ids: [String: String], badge: UUID) {
        let container = try container(try model(Self.v1), at: url)
        let context = container.newBackgroundContext()
        let badge = UUID()
        var ids: [String: String] = [:]
        try context.performAndWait {
            let folder = try context.make("Folder", ["title": "Inbox"])
            let red = try context.make("Tag", ["label": "red"])
            let blank = try context.make("Tag")
            var items: [NSManagedObject] = []
            for (name, count) in [("pen", 3), ("ink", 300), ("pad", 0)] {
                items.append(try context.make("Item", ["name": name, "count": Int16(count), "price": 1.5, "folder": folder]))
            }
            items[0].setValue(badge, forKey: "badge")
            items[0].setValue(Set([red, blank]), forKey: "tags")
            items[1].setValue(Set([red]), forKey: "tags")
            try context.save()
            for item in items { ids[item.string("name") ?? ""] = item.objectID.uriRepresentation().absoluteString }
            ids["folder"] = folder.objectID.uriRepresentation().absoluteString
        }
        try close(container)
        return (ids, badge)
    }

    @Test func aStoreFollowsItsModelThroughFourVersions() throws { try aStoreFollowsItsModelThroughFourVersions(StorePlaces(.sqlite)) }

    func aStoreFollowsItsModelThroughFourVersions(_ places: StorePlaces) throws {
        let url = try places.url("Versions")
        let (ids, badge) = try seed(url)
        // 1 → 2 by a container (lightweight migration is its default).
        let second = try container(try model(Self.v2), at: url)
        let secondContext = second.newBackgroundContext()
        try secondContext.performAndWait {
            let context = secondContext
            let pen = try #require(try context.objects("Item", "name == 'pen'").first)
            #expect(
                pen.value(forKey: "count") as? Int64 == 3 && pen.value(forKey: "note") == nil
                    && pen.value(forKey: "badge") as? UUID == badge)
            #expect(pen.objectID.uriRepresentation().absoluteString == ids["pen"], "object IDs survive a migration")
            try context.make("Note", ["text": "new entity"])
            try context.save()
        }
        try close(second)
        // 2 → 3: renames (of an attribute and an entity) and removals.
        let report = try Self.migrateStore(at: url, to: try model(Self.v3))
        #expect(
            report.changes.contains("renamed entity Folder to Group") && report.changes.contains("renamed Item.name to title"),
            "\(report.changes)")
        #expect(
            report.changes.contains("removed entity Note and its objects") && report.changes.contains("removed Item.price"),
            "\(report.changes)")
        // 3 → 4: a required attribute with a default, an optional one made required.
        let fourth = try container(try model(Self.v4), at: url)
        let context = fourth.newBackgroundContext()
        try context.performAndWait {
            let items = try context.objects("Item", sort: ["title"])
            #expect(items.map { $0.string("title") } == ["ink", "pad", "pen"])
            #expect(items.map { $0.value(forKey: "rank") as? Int32 } == [7, 7, 7], "a new required attribute takes its default")
            #expect(items.map { $0.value(forKey: "count") as? Int64 } == [300, 0, 3])
            #expect(items.map { $0.objectID.uriRepresentation().absoluteString } == [ids["ink"], ids["pad"], ids["pen"]])
            let group = try #require(try context.objects("Group").first)
            #expect(
                group.string("title") == "Inbox"
                    && group.objectID.uriRepresentation().absoluteString
                        == ids["folder"]?.replacingOccurrences(of: "/Folder/", with: "/Group/")
            )
            #expect(
                (group.value(forKey: "items") as? NSOrderedSet)?.array.map { ($0 as? NSManagedObject)?.string("title") } == [
                    "pen", "ink", "pad",
                ], "order kept")
            let pen = items[2]
            #expect(Set((pen.value(forKey: "tags") as? Set<NSManagedObject>)?.map { $0.string("label") } ?? []) == ["red", "untagged"])
            #expect((items[0].value(forKey: "tags") as? Set<NSManagedObject>)?.map { $0.string("label") } == ["red"])
            #expect(pen.value(forKey: "badge") as? UUID == badge)
        }
        try close(fourth)
        let metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
        #expect(metadata["NSStoreModelVersionHashes"] as? [String: Data] == (try model(Self.v4)).entityVersionHashesByName)
        #expect(try Self.migrateStore(at: url, to: try model(Self.v4)).changes.isEmpty, "already current")
        if places.backend == .sqlite { #expect(!FileManager.default.fileExists(atPath: url.path + ".migrating")) }
    }

    /// A new required attribute without a default, with objects in the store: the migration fails naming entity and
    /// attribute, and the store (its file, WAL and all) is exactly as it was.
    @Test func aMigrationTheModelRefusesLeavesTheStoreAsItWas() throws {
        try aMigrationTheModelRefusesLeavesTheStoreAsItWas(StorePlaces(.sqlite))
    }

    func aMigrationTheModelRefusesLeavesTheStoreAsItWas(_ places: StorePlaces) throws {
        let url = try places.url("Refused")
        _ = try seed(url)
        let files = { try places.contents("Refused") }
        let before = try files()
        let refused = Self.v1.replacingOccurrences(
            of: #"<attribute name="name" attributeType="String"/>"#,
            with: #"<attribute name="name" attributeType="String"/><attribute name="serial" attributeType="String"/>"#)
        let error = #expect(throws: CoreDataError.self) { _ = try Self.migrateStore(at: url, to: try model(refused)) }
        #expect(error?.code == .migration && error?.entityName == "Item" && error?.key == "serial", "\(error?.message ?? "")")
        #expect(error?.message.contains("3 Item object(s)") == true, "\(error?.message ?? "")")
        #expect(try files() == before && !FileManager.default.fileExists(atPath: url.path + ".migrating"))
        // A type change lightweight migration cannot infer: named, nothing written.
        let retyped = Self.v1.replacingOccurrences(
            of: #"<attribute name="name" attributeType="String"/>"#, with: #"<attribute name="name" attributeType="Date"/>"#)
        let inferred = #expect(throws: CoreDataError.self) { _ = try Self.migrateStore(at: url, to: try model(retyped)) }
        #expect(inferred?.code == .inferredMappingModel && inferred?.key == "name", "\(inferred?.message ?? "")")
        #expect(try files() == before)
        // A container told not to migrate refuses, saying the store needs migrating.
        let error2 = #expect(throws: CoreDataError.self) { _ = try container(try model(Self.v2), at: url, migrate: false) }
        #expect(error2?.message.contains("migrat") == true, "\(error2?.message ?? "")")
        #expect(try files() == before)
    }

    /// A store of this project's former layout migrates into Core Data's: values (a UUID kept as text becomes its 16
    /// bytes), links of every kind and object IDs survive.
    @Test func aStoreOfTheFormerLayoutMigratesIntoCoreDatasLayout() throws {
        let url = dir.file("Former.sqlite")
        try SQLiteStore.createFormerLayoutStore(at: url, model: try model(Self.v1))
        let (ids, badge) = try seed(url)
        let report = try SQLiteStore.migrateStore(at: url, to: try model(Self.v2))
        #expect(report.changes.contains("added entity Note"), "\(report.changes)")
        let metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
        #expect(metadata["OpenCoreDataStoreFormat"] as? String == "5" && metadata["NSStoreModelVersionHashesDigest"] != nil)
        let migrated = try container(try model(Self.v2), at: url, migrate: false)
        let context = migrated.newBackgroundContext()
        try context.performAndWait {
            let pen = try #require(try context.objects("Item", "badge == %@", badge).first)
            #expect(pen.string("name") == "pen" && pen.objectID.uriRepresentation().absoluteString == ids["pen"])
            #expect(Set((pen.value(forKey: "tags") as? Set<NSManagedObject>)?.map { $0.string("label") ?? "-" } ?? []) == ["red", "-"])
            let folder = try #require(pen.value(forKey: "folder") as? NSManagedObject)
            #expect(
                (folder.value(forKey: "items") as? NSOrderedSet)?.array.map { ($0 as? NSManagedObject)?.string("name") } == [
                    "pen", "ink", "pad",
                ])
        }
    }

    /// A to-one made to-many (here into a many-to-many) keeps its link; a to-many made to-one keeps its first.
    @Test func toOneAndToManyRelationshipsConvert() throws { try toOneAndToManyRelationshipsConvert(StorePlaces(.sqlite)) }

    func toOneAndToManyRelationshipsConvert(_ places: StorePlaces) throws {
        let one = """
                <entity name="Item" representedClassName="Item" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <relationship name="owner" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Person" inverseName="items"/>
                </entity>
                <entity name="Person" representedClassName="Person" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <relationship name="items" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Item" inverseName="owner"/>
                </entity>
            """
        let many = one.replacingOccurrences(
            of:
                #"<relationship name="owner" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Person" inverseName="items"/>"#,
            with:
                #"<relationship name="owners" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Person" inverseName="items" elementID="owner"/>"#
        ).replacingOccurrences(of: #"inverseName="owner"/>"#, with: #"inverseName="owners"/>"#)
        let url = try places.url("Owners")
        let first = try container(try model(one), at: url)
        let context = first.newBackgroundContext()
        try context.performAndWait {
            let ada = try context.make("Person", ["name": "Ada"])
            try context.make("Item", ["name": "pen", "owner": ada])
            try context.make("Item", ["name": "cup"])
            try context.save()
        }
        try close(first)
        try Self.migrateStore(at: url, to: try model(many))
        let second = try container(try model(many), at: url, migrate: false)
        let reader = second.newBackgroundContext()
        try reader.performAndWait {
            let pen = try #require(try reader.objects("Item", "name == 'pen'").first)
            #expect((pen.value(forKey: "owners") as? Set<NSManagedObject>)?.map { $0.string("name") } == ["Ada"])
            let ada = try #require(try reader.objects("Person").first)
            #expect((ada.value(forKey: "items") as? Set<NSManagedObject>)?.map { $0.string("name") } == ["pen"])
            #expect((try reader.objects("Item", "name == 'cup'").first?.value(forKey: "owners") as? Set<NSManagedObject>)?.isEmpty == true)
        }
        try close(second)
        // And back: the to-many's (only) destination becomes the to-one's.
        let back = one.replacingOccurrences(
            of: #"inverseName="items"/>"#, with: #"inverseName="items" elementID="owners"/>"#)
        try Self.migrateStore(at: url, to: try model(back))
        let third = try container(try model(back), at: url, migrate: false)
        let again = third.newBackgroundContext()
        try again.performAndWait {
            let pen = try #require(try again.objects("Item", "name == 'pen'").first)
            #expect((pen.value(forKey: "owner") as? NSManagedObject)?.string("name") == "Ada")
        }
    }

    /// A mapping model written in code (here: a rename the model does not declare) migrates a store into a new file
    /// through `NSMigrationManager`; the source file stays as it was.
    @Test func aMappingModelInCodeMigratesIntoANewStore() throws {
        let url = dir.file("Source.sqlite")
        _ = try seed(url)
        let before = FileManager.default.contents(atPath: url.path)
        let source = try model(Self.v1)
        let destination = try model(
            Self.v1.replacingOccurrences(
                of: #"<attribute name="name" attributeType="String"/>"#, with: #"<attribute name="label" attributeType="String"/>"#))
        let mapping = try NSMappingModel.inferredMappingModel(forSourceModel: source, destinationModel: destination)
        let item = try #require(mapping.entityMappings.first { $0.destinationEntityName == "Item" })
        #expect(item.mappingType == .transformEntityMappingType)
        #expect(item.attributeMappings.first { $0.name == "label" }?.sourcePropertyName == nil, "inferred: a new attribute")
        item.attributeMappings.first { $0.name == "label" }?.sourcePropertyName = "name"
        let manager = NSMigrationManager(sourceModel: source, destinationModel: destination)
        let target = dir.file("Target.sqlite")
        try manager.migrateStore(
            from: url, sourceType: NSSQLiteStoreType, with: mapping, toDestinationURL: target, destinationType: NSSQLiteStoreType)
        #expect(manager.changes.contains("renamed Item.name to label"), "\(manager.changes)")
        #expect(FileManager.default.contents(atPath: url.path) == before, "the source is not changed")
        let migrated = try container(destination, at: target, migrate: false)
        let context = migrated.newBackgroundContext()
        let labels = try context.performAndWait { try context.objects("Item", sort: ["label"]).map { $0.string("label") } }
        #expect(labels == ["ink", "pad", "pen"])
        let error = #expect(throws: CoreDataError.self) {
            try manager.migrateStore(
                from: url, sourceType: NSSQLiteStoreType, with: mapping, toDestinationURL: target, destinationType: NSSQLiteStoreType)
        }
        #expect(error?.message.contains("already") == true, "\(error?.message ?? "")")
    }

    /// Entities moving into an inheritance tree (two root tables become one) and out of it again: their rows, values
    /// and every link to them (a to-one, a many-to-many) survive, their keys made distinct where the tables meet.
    @Test func entitiesMoveIntoAnInheritanceTreeAndOut() throws { try entitiesMoveIntoAnInheritanceTreeAndOut(StorePlaces(.sqlite)) }

    func entitiesMoveIntoAnInheritanceTreeAndOut(_ places: StorePlaces) throws {
        let separate = """
                <entity name="Car" representedClassName="Car" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <attribute name="speed" optional="YES" attributeType="Integer 32" defaultValueString="0"/>
                    <relationship name="fans" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Person" inverseName="favorite"/>
                </entity>
                <entity name="Bike" representedClassName="Bike" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <attribute name="gears" optional="YES" attributeType="Integer 32" defaultValueString="0"/>
                    <relationship name="riders" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Person" inverseName="rides"/>
                </entity>
                <entity name="Person" representedClassName="Person" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <relationship name="favorite" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Car" inverseName="fans"/>
                    <relationship name="rides" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Bike" inverseName="riders"/>
                </entity>
            """
        let tree =
            separate.replacingOccurrences(
                of: #"<entity name="Car" representedClassName="Car" syncable="YES">"#,
                with: #"<entity name="Car" representedClassName="Car" parentEntity="Vehicle" syncable="YES">"#
            )
            .replacingOccurrences(
                of: #"<entity name="Bike" representedClassName="Bike" syncable="YES">"#,
                with: #"<entity name="Bike" representedClassName="Bike" parentEntity="Vehicle" syncable="YES">"#)
            + #"<entity name="Vehicle" representedClassName="Vehicle" isAbstract="YES" syncable="YES"><attribute name="wheels" optional="YES" attributeType="Integer 16" defaultValueString="2"/></entity>"#
        let url = try places.url("Vehicles")
        let first = try container(try model(separate), at: url)
        let context = first.newBackgroundContext()
        try context.performAndWait {
            var cars: [NSManagedObject] = []
            var bikes: [NSManagedObject] = []
            for n in 0..<3 { cars.append(try context.make("Car", ["name": "car \(n)", "speed": Int32(100 + n)])) }
            for n in 0..<4 { bikes.append(try context.make("Bike", ["name": "bike \(n)", "gears": Int32(n)])) }
            try context.make("Person", ["name": "Ada", "favorite": cars[2], "rides": Set([bikes[0], bikes[3]])])
            try context.make("Person", ["name": "Bo", "favorite": cars[0], "rides": Set([bikes[3]])])
            try context.save()
        }
        try close(first)
        func check(_ model: NSManagedObjectModel) throws {
            let opened = try container(model, at: url, migrate: false)
            let reader = opened.newBackgroundContext()
            try reader.performAndWait {
                #expect(try reader.objects("Car", sort: ["name"]).map { $0.value(forKey: "speed") as? Int32 } == [100, 101, 102])
                #expect(try reader.objects("Bike", sort: ["name"]).map { $0.value(forKey: "gears") as? Int32 } == [0, 1, 2, 3])
                let ada = try #require(try reader.objects("Person", "name == 'Ada'").first)
                #expect((ada.value(forKey: "favorite") as? NSManagedObject)?.string("name") == "car 2")
                #expect(
                    Set((ada.value(forKey: "rides") as? Set<NSManagedObject>)?.compactMap { $0.string("name") } ?? []) == [
                        "bike 0", "bike 3",
                    ])
                let bike = try #require(try reader.objects("Bike", "name == 'bike 3'").first)
                #expect(
                    Set((bike.value(forKey: "riders") as? Set<NSManagedObject>)?.compactMap { $0.string("name") } ?? []) == ["Ada", "Bo"])
            }
            try close(opened)
        }
        let report = try Self.migrateStore(at: url, to: try model(tree))
        #expect(report.changes.contains("added entity Vehicle"), "\(report.changes)")
        try check(try model(tree))
        let vehicles = try container(try model(tree), at: url, migrate: false)
        let all = vehicles.newBackgroundContext()
        #expect(try all.performAndWait { try all.objects("Vehicle").count } == 7, "one table, distinct keys")
        try close(vehicles)
        try Self.migrateStore(at: url, to: try model(separate))
        try check(try model(separate))
    }

    /// A staged migration: a lightweight stage, then a custom stage whose will-migrate handler fills, with the store
    /// open at the current version, what the next version requires (a lightweight migration alone refuses it).
    @Test func aStagedMigrationRunsItsHandlersAroundEachCustomStage() throws {
        try aStagedMigrationRunsItsHandlersAroundEachCustomStage(StorePlaces(.sqlite))
    }

    func aStagedMigrationRunsItsHandlersAroundEachCustomStage(_ places: StorePlaces) throws {
        let v1 = try model(
            #"<entity name="Item" representedClassName="Item" syncable="YES"><attribute name="name" optional="YES" attributeType="String"/><attribute name="price" optional="YES" attributeType="String"/></entity>"#
        )
        let v2 = try model(
            #"<entity name="Item" representedClassName="Item" syncable="YES"><attribute name="name" optional="YES" attributeType="String"/><attribute name="priceText" optional="YES" attributeType="String" elementID="price"/><attribute name="cents" optional="YES" attributeType="Integer 64"/></entity>"#
        )
        let v3 = try model(
            #"<entity name="Item" representedClassName="Item" syncable="YES"><attribute name="name" optional="YES" attributeType="String"/><attribute name="cents" attributeType="Integer 64"/></entity>"#
        )
        let url = try places.url("Staged")
        let first = try container(v1, at: url)
        let context = first.newBackgroundContext()
        try context.performAndWait {
            for (name, price) in [("pen", "1.25"), ("ink", "12.50")] { try context.make("Item", ["name": name, "price": price]) }
            try context.save()
        }
        try close(first)
        // Lightweight alone cannot reach version 3: cents is required and has no default.
        #expect(throws: CoreDataError.self) { _ = try container(v3, at: url) }
        var log: [String] = []
        let custom = NSCustomMigrationStage(
            migratingFrom: NSManagedObjectModelReference(model: v2, versionChecksum: v2.versionChecksum),
            to: NSManagedObjectModelReference(model: v3, versionChecksum: v3.versionChecksum))
        custom.willMigrateHandler = { manager, _ in
            let context = try #require(manager.container).newBackgroundContext()
            try context.performAndWait {
                for item in try context.objects("Item") {
                    let text = item.string("priceText") ?? "0"
                    item.setValue(Int64((Double(text) ?? 0) * 100), forKey: "cents")
                }
                try context.save()
            }
            log.append("will")
        }
        custom.didMigrateHandler = { manager, _ in
            let context = try #require(manager.container).newBackgroundContext()
            log.append("did \(try context.performAndWait { try context.objects("Item").count })")
        }
        let manager = NSStagedMigrationManager([NSLightweightMigrationStage([v1.versionChecksum, v2.versionChecksum]), custom])
        let description = NSPersistentStoreDescription(url: url)
        description.setOption(manager, forKey: NSPersistentStoreStagedMigrationManagerOptionKey)
        let last = NSPersistentContainer(name: "Staged", managedObjectModel: v3)
        last.persistentStoreDescriptions = [description]
        try last.loadPersistentStores()
        #expect(log == ["will", "did 2"])
        let reader = last.newBackgroundContext()
        let cents = try reader.performAndWait { try reader.objects("Item", sort: ["name"]).map { $0.value(forKey: "cents") as? Int64 } }
        #expect(cents == [1250, 125])
    }

    /// A store another connection is reading is not replaced under it: the migration fails, saying so, and the store
    /// is unchanged (and migrates once the other connection is done).
    @Test func aStoreInUseIsNotMigratedUnderItsReaders() throws {
        let url = dir.file("InUse.sqlite")
        _ = try seed(url)
        let reader = try DatabasePool(path: url.path)
        let bytes = FileManager.default.contents(atPath: url.path)
        try reader.read { db in
            _ = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ZITEM")
            let error = #expect(throws: CoreDataError.self) { _ = try SQLiteStore.migrateStore(at: url, to: try model(Self.v2)) }
            #expect(error?.message.contains("another connection") == true, "\(error?.message ?? "")")
        }
        #expect(FileManager.default.contents(atPath: url.path) == bytes)
        try reader.close()
        #expect(try !SQLiteStore.migrateStore(at: url, to: try model(Self.v2)).changes.isEmpty)
    }

    /// Core Data's persistent-history tables survive a migration, the entity numbers of their changes mapped to the
    /// new ones (version 2 adds `Note`, so `Tag` goes from 3 to 4).
    @Test func persistentHistoryTablesComeAlong() throws {
        let url = dir.file("History.sqlite")
        _ = try seed(url)
        try DatabaseQueue(path: url.path).write { db in
            for sql in [
                "CREATE TABLE ATRANSACTION ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZTIMESTAMP FLOAT, ZAUTHOR VARCHAR )",
                "CREATE TABLE ACHANGE ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCHANGETYPE INTEGER, ZENTITY INTEGER, ZENTITYPK INTEGER, ZTRANSACTIONID INTEGER, ZCOLUMNS BLOB )",
                "CREATE INDEX ACHANGE_ZTRANSACTIONID_INDEX ON ACHANGE (ZTRANSACTIONID)",
                "INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (16001, 'CHANGE', 0, 2), (16002, 'TRANSACTION', 0, 1)",
                "INSERT INTO ATRANSACTION VALUES (1, 16002, 1, 700000000.0, 'app')",
                "INSERT INTO ACHANGE VALUES (1, 16001, 1, 0, 3, 1, 1, NULL), (2, 16001, 1, 1, 2, 2, 1, NULL)",
            ] {
                try db.execute(sql: sql)
            }
        }
        try SQLiteStore.migrateStore(at: url, to: try model(Self.v2))
        let (entities, author, keys, indexes) = try DatabaseQueue(path: url.path).read { db in
            (
                try Int.fetchAll(db, sql: "SELECT ZENTITY FROM ACHANGE ORDER BY Z_PK"),
                try String.fetchOne(db, sql: "SELECT ZAUTHOR FROM ATRANSACTION"),
                try Int.fetchAll(db, sql: "SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_ENT >= 16000 ORDER BY Z_ENT"),
                try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ACHANGE'")
            )
        }
        #expect(entities == [4, 2] && author == "app" && keys == [16001, 16002] && indexes == ["ACHANGE_ZTRANSACTIONID_INDEX"])
    }
}
