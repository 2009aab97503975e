import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// Composite attributes in the store as Core Data keeps them: a column per element (nested composites flattened), named
/// after the element, the composite itself without a column; stores this project wrote with the composite archived in
/// one column are still read and written.
@Suite struct CompositeColumnTests {
    let dir = TemporaryDirectory()

    func placeModel() throws -> NSManagedObjectModel {
        try dir.loadModel(
            "Places",
            """
                <entity name="Place" representedClassName="Place" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <attribute name="street" optional="YES" attributeType="String"/>
                    <attribute name="address" optional="YES" attributeType="Composite" composite="Address"/>
                </entity>
                <composite name="Address">
                    <attribute name="street" optional="YES" attributeType="String"/>
                    <attribute name="number" optional="YES" attributeType="Integer 32" defaultValueString="0"/>
                    <attribute name="geo" optional="YES" attributeType="Composite" composite="Geo"/>
                </composite>
                <composite name="Geo">
                    <attribute name="lat" optional="YES" attributeType="Double" defaultValueString="0.0"/>
                    <attribute name="checked" optional="YES" attributeType="Date"/>
                </composite>
            """)
    }

    /// The columns of ZPLACE, and its rows by the place's name.
    func storedRows(_ url: URL) throws -> (columns: [String], rows: [String: Row]) {
        let queue = try DatabaseQueue(path: url.path)
        return try queue.read { db in
            let columns = try db.columns(in: "ZPLACE").map(\.name)
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM ZPLACE")
            return (columns, Dictionary(uniqueKeysWithValues: rows.map { (($0["ZNAME"] as String?) ?? "", $0) }))
        }
    }

    func address(_ object: NSManagedObject?) -> [String: Any]? { object?.value(forKey: "address") as? [String: Any] }

    /// A stored cell as text: `NULL`, a number, or the string itself.
    func cell(_ rows: [String: Row], _ name: String, _ column: String) -> String {
        guard let row = rows[name] else { return "no row" }
        switch (row[column] as DatabaseValue).storage {
        case .null: return "NULL"
        case .int64(let i): return "\(i)"
        case .double(let d): return "\(d)"
        case .string(let text): return text
        case .blob(let data): return "\(data.count) bytes"
        }
    }

    @Test func compositesAreStoredInAColumnPerElementAsCoreDataStoresThem() throws {
        let model = try placeModel()
        let stack = try TestStack(model: model)
        let checked = Date(timeIntervalSinceReferenceDate: 700_000_000)
        let context = stack.context()
        try context.performAndWait {
            try context.make(
                "Place",
                [
                    "name": "home", "street": "own",
                    "address": ["street": "Main St", "number": 12, "geo": ["lat": 48.5, "checked": checked]],
                ])
            try context.make("Place", ["name": "nowhere"])
            try context.make("Place", ["name": "partial", "address": ["street": "Side St"]])
            try context.save()
        }
        // Core Data's columns: one per element, named after the element (a clash numbered), none for the composite.
        var (columns, rows) = try storedRows(stack.storeURL)
        #expect(Set(columns).isSuperset(of: ["ZSTREET", "ZNUMBER", "ZLAT", "ZCHECKED", "ZSTREET1", "ZNAME"]), "\(columns)")
        #expect(!columns.contains("ZADDRESS") && !columns.contains("ZGEO"), "\(columns)")
        #expect(cell(rows, "home", "ZSTREET") == "Main St" && cell(rows, "home", "ZNUMBER") == "12" && cell(rows, "home", "ZLAT") == "48.5")
        #expect(cell(rows, "home", "ZCHECKED") == "700000000" && cell(rows, "home", "ZSTREET1") == "own")
        #expect(cell(rows, "nowhere", "ZSTREET") == "NULL" && cell(rows, "nowhere", "ZLAT") == "NULL")
        #expect(cell(rows, "partial", "ZSTREET") == "Side St" && cell(rows, "partial", "ZNUMBER") == "NULL")

        let reader = stack.context()
        try reader.performAndWait {
            let places = Dictionary(uniqueKeysWithValues: try reader.objects("Place").map { ($0.string("name")!, $0) })
            let home = try #require(address(places["home"]))
            #expect(home["street"] as? String == "Main St" && home["number"] as? Int == 12)
            let geo = home["geo"] as? [String: Any]
            #expect(geo?["lat"] as? Double == 48.5 && geo?["checked"] as? Date == checked)
            #expect(places["nowhere"]?.value(forKey: "address") == nil)
            let partial = address(places["partial"])
            #expect(partial?["street"] as? String == "Side St" && partial?["number"] == nil && partial?["geo"] == nil)
            // An update rewrites the element columns; clearing the composite clears them all.
            places["partial"]?.setValue(["number": 7, "geo": ["lat": -1.25]], forKey: "address")
            places["home"]?.setValue(nil, forKey: "address")
            try reader.save()
        }
        (_, rows) = try storedRows(stack.storeURL)
        #expect(
            cell(rows, "partial", "ZSTREET") == "NULL" && cell(rows, "partial", "ZNUMBER") == "7"
                && cell(rows, "partial", "ZLAT") == "-1.25")
        #expect(cell(rows, "home", "ZSTREET") == "NULL" && cell(rows, "home", "ZLAT") == "NULL" && cell(rows, "home", "ZSTREET1") == "own")

        // A batch update sets the composite as a whole.
        try reader.performAndWait {
            let update = NSBatchUpdateRequest(entityName: "Place")
            update.predicate = try FetchPredicate(format: "name == 'nowhere'")
            update.propertiesToUpdate = ["address": ["street": "Far Rd", "number": 3]]
            _ = try reader.execute(update)
        }
        (_, rows) = try storedRows(stack.storeURL)
        #expect(cell(rows, "nowhere", "ZSTREET") == "Far Rd" && cell(rows, "nowhere", "ZNUMBER") == "3")

        // Another coordinator opening the file reads the same columns.
        let other = NSPersistentContainer(name: "Other", managedObjectModel: model)
        other.persistentStoreDescriptions = [NSPersistentStoreDescription(url: stack.storeURL)]
        try other.loadPersistentStores()
        let again = other.newBackgroundContext()
        let nowhere = try again.performAndWait { address(try again.objects("Place", "name == 'nowhere'").first) }
        #expect(nowhere?["street"] as? String == "Far Rd" && nowhere?["number"] as? Int == 3)
    }

    @Test func aStoreThatKeptCompositesInOneArchivedColumnStillReadsAndWritesThem() throws {
        let model = try placeModel()
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            try context.make("Place", ["name": "home", "address": ["street": "Main St", "number": 12]])
            try context.save()
        }
        // Turn the file into what this project wrote before: the composite archived in one column of its name (and
        // the entity's own `street` in ZSTREET, no element claiming it first).
        let attribute = try #require(model.entitiesByName["Place"]?.attributesByName["address"])
        let archive = try attribute.storeData(for: ["street": "Old Rd", "number": 5] as [String: Any], entityName: "Place")
        let coordinator = stack.container.persistentStoreCoordinator
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        let queue = try DatabaseQueue(path: stack.storeURL.path)
        try queue.write { db in
            for column in ["ZSTREET", "ZNUMBER", "ZLAT", "ZCHECKED"] { try db.execute(sql: "ALTER TABLE ZPLACE DROP COLUMN \(column)") }
            try db.execute(sql: "ALTER TABLE ZPLACE RENAME COLUMN ZSTREET1 TO ZSTREET")
            try db.execute(sql: "ALTER TABLE ZPLACE ADD COLUMN ZADDRESS BLOB")
            try db.execute(sql: "UPDATE ZPLACE SET ZADDRESS = ?", arguments: [archive])
        }
        try queue.close()
        let reopened = NSPersistentContainer(name: "Reopened", managedObjectModel: model)
        reopened.persistentStoreDescriptions = [NSPersistentStoreDescription(url: stack.storeURL)]
        try reopened.loadPersistentStores()
        let reader = reopened.newBackgroundContext()
        try reader.performAndWait {
            let home = try #require(try reader.objects("Place").first)
            #expect(address(home)?["street"] as? String == "Old Rd" && address(home)?["number"] as? Int == 5)
            home.setValue(["street": "New Rd"], forKey: "address")
            try reader.save()
            reader.reset()
            #expect(address(try reader.objects("Place").first)?["street"] as? String == "New Rd")
        }
        #expect(try storedRows(stack.storeURL).columns.contains("ZADDRESS"))
    }

    @Test func aLightweightMigrationCarriesEveryElementColumn() throws {
        func model(_ extra: String) throws -> NSManagedObjectModel {
            try dir.loadModel(
                "Moving",
                """
                    <entity name="Place" representedClassName="Place" syncable="YES">
                        <attribute name="name" optional="YES" attributeType="String"/>
                        <attribute name="address" optional="YES" attributeType="Composite" composite="Address"/>
                    </entity>
                    <composite name="Address">
                        <attribute name="street" optional="YES" attributeType="String"/>
                        <attribute name="number" optional="YES" attributeType="Integer 32" defaultValueString="0"/>
                        \(extra)
                    </composite>
                """)
        }
        let url = dir.file("Moving.sqlite")
        let oldModel = try model("")
        // The compiled form (a store's model cache, which the migration reads its source model from) keeps the
        // composite's elements, as Core Data's `NSCompositeElements`.
        let compiled = try NSManagedObjectModel(compiledModel: oldModel.compiledArchive, source: "test")
        let cachedAddress = compiled.entitiesByName["Place"]?.attributesByName["address"]
        #expect(cachedAddress?.elements.map(\.name) == ["street", "number"])
        #expect(compiled.entityVersionHashesByName == oldModel.entityVersionHashesByName)
        let old = NSPersistentStoreCoordinator(managedObjectModel: oldModel)
        try old.addPersistentStore(ofType: NSSQLiteStoreType, at: url)
        let writer = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        writer.persistentStoreCoordinator = old
        try writer.performAndWait {
            try writer.make("Place", ["name": "home", "address": ["street": "Main St", "number": 12]])
            try writer.save()
        }
        for store in old.persistentStores { try old.remove(store) }

        let newModel = try model(#"<attribute name="zip" optional="YES" attributeType="String"/>"#)
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: newModel)
        try coordinator.addPersistentStore(
            ofType: NSSQLiteStoreType, at: url,
            options: [NSMigratePersistentStoresAutomaticallyOption: true, NSInferMappingModelAutomaticallyOption: true])
        let reader = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        reader.persistentStoreCoordinator = coordinator
        try reader.performAndWait {
            let home = try #require(try reader.objects("Place").first)
            #expect(address(home)?["street"] as? String == "Main St" && address(home)?["number"] as? Int == 12)
            #expect(address(home)?["zip"] == nil)
            home.setValue(["street": "Main St", "zip": "75001"], forKey: "address")
            try reader.save()
        }
        #expect(cell(try storedRows(url).rows, "home", "ZZIP") == "75001")
    }
}

/// Key paths into composites (`address.street`), as Core Data allows them: in fetch predicates and sort descriptors
/// (on the element's column), in memory (unsaved objects, `evaluate(with:)`) and in key-value coding.
@Suite struct CompositeKeyPathTests {
    @Test func predicatesAndSortsReachIntoCompositeElementsInTheStoreAndInMemory() throws {
        let model = try CompositeColumnTests().placeModel()
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            for (name, street, number, lat) in [("a", "Main St", 12, 48.5), ("b", "Side St", 3, -2.0), ("c", "Main St", 7, 10.0)] {
                try context.make("Place", ["name": name, "address": ["street": street, "number": number, "geo": ["lat": lat]]])
            }
            try context.make("Place", ["name": "d"])
            try context.save()
            func names(_ format: String, sort: [String] = ["name"]) throws -> [String] {
                try context.objects("Place", format, sort: sort).compactMap { $0.string("name") }
            }
            #expect(try names("address.street == 'Main St'") == ["a", "c"])
            #expect(try names("address.number > 5 AND address.geo.lat > 0", sort: ["-address.number"]) == ["a", "c"])
            #expect(try names("address.geo.lat < 0") == ["b"])
            #expect(try names("address.street == nil") == ["d"])
            // The whole composite is nil when every element is.
            #expect(try names("address == nil") == ["d"])
            #expect(try names("address != nil") == ["a", "b", "c"])
            #expect(try names("address.number != nil", sort: ["address.number"]) == ["b", "c", "a"])
            // Unsaved objects are matched in memory, by the same key paths.
            try context.make("Place", ["name": "e", "address": ["street": "Main St", "number": 1]])
            let pending = try names("address.street == 'Main St'", sort: ["address.number"])
            #expect(pending == ["e", "c", "a"], "\(pending)")
            let e = try #require(try context.objects("Place", "name == 'e'").first)
            #expect(try FetchPredicate(format: "address.street BEGINSWITH 'Ma' AND address.number < 2").evaluate(with: e))
            #expect(e.value(forKeyPath: "address.street") as? String == "Main St")
            #expect(try context.objects("Place", "name == 'a'").first?.value(forKeyPath: "address.geo.lat") as? Double == 48.5)
            // An element the composite lacks is an error naming it.
            let unknown = #expect(throws: CoreDataError.self) { try names("address.city == 'Paris'") }
            #expect(unknown?.message.contains("no element 'city'") == true, "\(unknown?.message ?? "")")
        }
    }
}
