import Foundation
import GRDB
import OpenCoreData
import OpenCoreDataModel
import Testing
import _TestSupport

/// New stores are written in the layout Apple's Core Data writes (the hand-made store of `AppleLayoutTests` is its
/// specification here; `AppleLayoutShapeTests` compares with Apple's own files when the corpus is there), and a
/// store Apple wrote opens read-write when its version hashes are the model's.
@Suite struct AppleLayoutWriterTests {
    let layout = AppleLayoutTests()

    func columns(_ url: URL) throws -> [String: Set<String>] {
        try DatabaseQueue(path: url.path).read { db in
            var tables: [String: Set<String>] = [:]
            for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") {
                tables[table] = Set(try db.columns(in: table).map(\.name))
            }
            return tables
        }
    }

    func metadata(_ url: URL) throws -> [String: PropertyListValue] {
        try DatabaseQueue(path: url.path).read { db in
            let plist = try #require(try Data.fetchOne(db, sql: "SELECT Z_PLIST FROM Z_METADATA"))
            return try #require(try BinaryPropertyList.read(plist).dictionary)
        }
    }

    @Test func aNewStoreHasCoreDatasTablesColumnsAndMetadata() throws {
        let model = try layout.model()
        let stack = try TestStack(model: model)
        try stack.container.persistentStoreCoordinator.persistentStores.forEach {
            try stack.container.persistentStoreCoordinator.remove($0)
        }
        let ours = try columns(stack.storeURL)
        let apple = try columns(try layout.writeStore())
        #expect(ours == apple, "ours \(ours.sorted { $0.key < $1.key }) Apple \(apple.sorted { $0.key < $1.key })")
        let (names, supers, vacuum, uuid, types) = try DatabaseQueue(path: stack.storeURL.path).read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT")
            let info = try Row.fetchAll(db, sql: "PRAGMA table_info(ZPERSON)")
            return (
                rows.map { $0["Z_NAME"] as String }, rows.map { $0["Z_SUPER"] as Int }, try Int.fetchOne(db, sql: "PRAGMA auto_vacuum"),
                try String.fetchOne(db, sql: "SELECT Z_UUID FROM Z_METADATA"),
                Dictionary(uniqueKeysWithValues: info.map { ($0["name"] as String, $0["type"] as String) })
            )
        }
        #expect(names == ["Person", "Employee", "Project", "tag"] && supers == [0, 1, 0, 0])
        #expect(vacuum == 2, "incremental auto-vacuum, as Core Data's stores")
        #expect(uuid?.count == 36)
        #expect(types["ZID"] == "BLOB" && types["ZSALARY"] == "FLOAT" && types["ZNAME"] == "VARCHAR")
        let meta = try metadata(stack.storeURL)
        let hashes = model.entityVersionHashesByName.mapValues { PropertyListValue.data($0) }
        #expect(meta["NSStoreModelVersionHashes"] == .dictionary(hashes))
        #expect(meta["NSStoreType"] == .string("SQLite") && meta["NSStoreModelVersionHashesVersion"] == .integer(3))
        #expect(meta["NSStoreModelVersionHashesDigest"] == .string(model.versionHashesDigest))
        #expect(meta["NSStoreModelVersionChecksumKey"] == .string(model.versionHashesChecksum))
        #expect(
            try NSManagedObjectModel.cachedModel(ofStoreAt: stack.storeURL).entityVersionHashesByName == model.entityVersionHashesByName)
    }

    /// Saves advance the change token in the metadata property list from what the file holds now: the dictionary a
    /// save decoded is reused only for the same bytes, so a token another writer recorded in between is not lost.
    @Test func aSaveAdvancesTheChangeTokenTheFileHoldsNow() throws {
        let stack = try TestStack(model: try layout.model())
        let context = stack.context()
        let store = try #require(stack.container.persistentStoreCoordinator.persistentStores.first as? SQLiteStore)
        try context.performAndWait {
            try context.make("Person", ["name": "Ada"])
            try context.save()
        }
        #expect(try store.changeToken == 1)
        // Another writer records token 41 (the rest of the metadata as it was).
        let queue = try DatabaseQueue(path: stack.storeURL.path)
        try queue.write { db in
            let plist = try #require(try Data.fetchOne(db, sql: "SELECT Z_PLIST FROM Z_METADATA"))
            var metadata = try #require(try PropertyListSerialization.propertyList(from: plist, format: nil) as? [String: Any])
            metadata["OpenCoreDataChangeToken"] = 41
            let changed = try PropertyListSerialization.data(fromPropertyList: metadata, format: .binary, options: 0)
            try db.execute(sql: "UPDATE Z_METADATA SET Z_PLIST = ?", arguments: [changed])
        }
        try queue.close()
        try context.performAndWait {
            try context.make("Person", ["name": "Grace"])
            try context.save()
        }
        #expect(try store.changeToken == 42)
    }

    @Test func everyKindOfLinkIsWrittenWhereCoreDataKeepsItAndReadsBack() throws {
        let stack = try TestStack(model: try layout.model())
        let context = stack.context()
        let badge = UUID()
        try context.performAndWait {
            let ada = try context.make("Person", ["name": "Ada"])
            let grace = try context.make("Employee", ["name": "Grace", "salary": 1.5, "id": badge, "boss": ada])
            let project = try context.make("Project", ["title": "Engine"])
            project.setValue(Set([grace]), forKey: "members")
            project.setValue(Set([try context.make("tag", ["label": "math"])]), forKey: "tags")
            try context.make("tag", ["label": "loose"])
            try context.save()
        }
        let token = try #require(stack.container.persistentStoreCoordinator.persistentStores.first as? SQLiteStore).changeToken
        let raw = try DatabaseQueue(path: stack.storeURL.path).read { db in
            (
                boss: try Row.fetchOne(db, sql: "SELECT ZBOSS, Z1_BOSS FROM ZPERSON WHERE ZNAME = 'Grace'").map {
                    [$0[0], $0[1]] as [Int]
                },
                id: try Data.fetchOne(db, sql: "SELECT ZID FROM ZPERSON WHERE ZNAME = 'Grace'"),
                tags: try Int?.fetchAll(db, sql: "SELECT Z3TAGS FROM ZTAG ORDER BY ZLABEL"),
                join: try Row.fetchOne(db, sql: "SELECT Z_2MEMBERS, Z_3PROJECTS FROM Z_2PROJECTS").map { [$0[0], $0[1]] as [Int] },
                maxima: try Int.fetchAll(db, sql: "SELECT Z_MAX FROM Z_PRIMARYKEY ORDER BY Z_ENT")
            )
        }
        #expect(raw.boss == [1, 1], "the boss's key and entity number (Person has a subentity)")
        #expect(raw.id == withUnsafeBytes(of: badge.uuid) { Data($0) }, "a UUID as its 16 bytes")
        #expect(raw.tags == [nil, 1], "a to-many without inverse in a hidden column of the destination")
        #expect(raw.join == [2, 1])
        #expect(raw.maxima == [2, 0, 1, 2], "each root's largest key")
        #expect(token == 1)
        // Another container reads it all back, and finds by UUID (bound as 16 bytes).
        let again = NSPersistentContainer(name: "Again", managedObjectModel: try layout.model())
        again.persistentStoreDescriptions = [NSPersistentStoreDescription(url: stack.storeURL)]
        try again.loadPersistentStores()
        let reader = again.newBackgroundContext()
        try reader.performAndWait {
            let grace = try #require(try reader.objects("Person", "id == %@", badge).first)
            #expect(grace.entity.name == "Employee" && grace.string("name") == "Grace" && grace.value(forKey: "id") as? UUID == badge)
            #expect((grace.value(forKey: "boss") as? NSManagedObject)?.string("name") == "Ada")
            let project = try #require((grace.value(forKey: "projects") as? Set<NSManagedObject>)?.first)
            #expect((project.value(forKey: "tags") as? Set<NSManagedObject>)?.map { $0.string("label") } == ["math"])
            #expect(try reader.objects("Employee", "ANY projects.title == 'Engine'").count == 1)
            // Keys continue after Z_MAX.
            let next = try reader.make("tag", ["label": "new"])
            try reader.save()
            #expect(next.objectID.uriRepresentation().lastPathComponent == "p3")
        }
        let maximum = try DatabaseQueue(path: stack.storeURL.path).read { db in
            try Int.fetchOne(db, sql: "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'tag'")
        }
        #expect(maximum == 3)
    }

    /// Ordered relationships (one side of a to-many, and a many-to-many within one entity) keep their order in
    /// Core Data's `Z_FOK_` columns; a binary value that may live outside the row is written with Core Data's
    /// "inline" marker and reads back as it was.
    @Test func orderAndExternalBinaryDataAreWrittenAsCoreDataWritesThem() throws {
        let model = try TemporaryDirectory().loadModel(
            "Ordered",
            """
                <entity name="Shelf" representedClassName="Shelf" syncable="YES">
                    <relationship name="books" optional="YES" toMany="YES" deletionRule="Nullify" ordered="YES" destinationEntity="Book" inverseName="shelf"/>
                </entity>
                <entity name="Book" representedClassName="Book" syncable="YES">
                    <attribute name="title" optional="YES" attributeType="String"/>
                    <relationship name="shelf" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Shelf" inverseName="books"/>
                    <relationship name="favorites" optional="YES" toMany="YES" deletionRule="Nullify" ordered="YES" destinationEntity="Book" inverseName="favoredBy"/>
                    <relationship name="favoredBy" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Book" inverseName="favorites"/>
                </entity>
                <entity name="Scan" representedClassName="Scan" syncable="YES">
                    <attribute name="pixels" optional="YES" attributeType="Binary" allowsExternalBinaryDataStorage="YES"/>
                </entity>
            """)
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            let shelf = try context.make("Shelf")
            var books: [NSManagedObject] = []
            for title in ["c", "a", "b"] { books.append(try context.make("Book", ["title": title])) }
            for book in books { shelf.mutableOrderedSetValue(forKey: "books").add(book) }
            for book in [books[2], books[1]] { books[0].mutableOrderedSetValue(forKey: "favorites").add(book) }
            try context.make("Scan", ["pixels": Data([1, 2, 3])])
            try context.save()
        }
        let tables = try columns(stack.storeURL)
        #expect(tables["ZBOOK"]?.contains("Z_FOK_SHELF") == true)
        #expect(tables["Z_1FAVORITES"] == ["Z_1FAVOREDBY", "Z_1FAVORITES", "Z_FOK_1FAVORITES"], "\(tables.keys.sorted())")
        let pixels = try DatabaseQueue(path: stack.storeURL.path).read { db in try Data.fetchOne(db, sql: "SELECT ZPIXELS FROM ZSCAN") }
        #expect(pixels == Data([1, 1, 2, 3]), "Core Data's marker for a value kept in the row")
        let reader = stack.context()
        try reader.performAndWait {
            let shelf = try #require(try reader.objects("Shelf").first)
            #expect(
                (shelf.value(forKey: "books") as? NSOrderedSet)?.array.map { ($0 as? NSManagedObject)?.string("title") } == ["c", "a", "b"])
            let c = try #require(try reader.objects("Book", "title == 'c'").first)
            #expect((c.value(forKey: "favorites") as? NSOrderedSet)?.array.map { ($0 as? NSManagedObject)?.string("title") } == ["b", "a"])
            #expect(try reader.objects("Scan").first?.value(forKey: "pixels") as? Data == Data([1, 2, 3]))
        }
    }

    /// A store Apple's Core Data wrote whose version hashes are the model's opens read-write: new rows take keys after
    /// its `Z_MAX`, and Core Data's metadata stays (this project adds its change token beside it).
    @Test func anAppleStoreWithTheModelsHashesOpensReadWrite() throws {
        let model = try layout.model()
        let hashes = model.entityVersionHashesByName.mapValues { PropertyListValue.data($0) }
        let plist = BinaryPropertyList.write(
            .dictionary(["NSStoreType": .string("SQLite"), "NSStoreModelVersionHashes": .dictionary(hashes), "AppKey": .string("kept")]))
        let url = try layout.writeStore(plist: .some(plist))
        let container = try layout.open(url, readOnly: false)
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let tag = try context.make("tag", ["label": "new"])
            try context.save()
            #expect(tag.objectID.uriRepresentation().absoluteString == "x-coredata://5B7D1E2A-1111-2222-3333-444455556666/tag/p3")
        }
        let meta = try metadata(url)
        #expect(meta["AppKey"] == .string("kept") && meta["NSStoreModelVersionHashes"] == .dictionary(hashes))
        #expect(meta["OpenCoreDataChangeToken"] == .integer(1))
        let reader = try layout.open(url).newBackgroundContext()
        let labels = try reader.performAndWait { try reader.objects("tag", sort: ["label"]).map { $0.string("label") } }
        #expect(labels == ["loose", "math", "new"])
    }
}
