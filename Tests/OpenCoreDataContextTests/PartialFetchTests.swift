import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// `propertiesToFetch` with managed-object results: the fetch reads the named attributes in the statement that finds
/// the rows; its objects answer those from what it read and read their row for anything else.
@Suite struct PartialFetchTests {
    static let everyType = ["name", "badge", "born", "active", "age", "level", "serial", "salary", "rating", "homepage", "photo"]

    /// A store of employees (and a manager, a subentity) with a value of every attribute type.
    func makeStack() throws -> (TestStack, SQLiteStore) {
        let stack = try TestStack(model: try makeCompanyModel())
        let setup = stack.context()
        let department = try setup.make("Department", ["name": "R&D"])
        for i in 0..<12 {
            try setup.make(
                i == 5 ? "Manager" : "Employee",
                [
                    "name": "E\(i)", "badge": UUID(), "born": Date(timeIntervalSinceReferenceDate: Double(i) * 86_400.5),
                    "active": i % 3 == 0, "age": 20 + i, "level": i * 7, "serial": Int64(i) << 40, "salary": Double(i) * 10.25,
                    "rating": Float(i) / 4, "homepage": URL(string: "https://example.com/\(i)")!,
                    "photo": Data((0..<i).map { UInt8($0) }), "department": department,
                ])
        }
        try setup.make("Employee", ["name": "blank"])  // optional attributes nil, defaults elsewhere
        try setup.save()
        let store = try #require(stack.container.persistentStoreCoordinator.persistentStores.first as? SQLiteStore)
        return (stack, store)
    }

    func request(_ properties: [Any]?) -> NSFetchRequest<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        request.propertiesToFetch = properties
        return request
    }

    /// Every value of each type, read from a partial fetch's objects, equals the one a whole-row fetch reads, and
    /// reading them reads no row; reading an attribute not fetched reads the object's row, once.
    @Test func theNamedAttributesAreReadWithTheFetchAndTheRestWithTheRow() throws {
        let (stack, store) = try makeStack()
        let wholeContext = stack.context()
        let whole = try wholeContext.fetch(request(nil))
        func values(_ objects: [NSManagedObject], _ keys: [String]) -> [String] {
            objects.map { object in keys.map { "\(object.value(forKey: $0) ?? "nil")" }.joined(separator: "|") }
        }
        let expected = values(whole, Self.everyType)
        let context = stack.context()
        let before = store.rowsRead
        let partial = try context.fetch(request(Self.everyType))
        #expect(partial.map(\.objectID) == whole.map(\.objectID))
        #expect(partial.contains { $0.entity.name == "Manager" })
        #expect(values(partial, Self.everyType) == expected)
        #expect(store.rowsRead == before, "rows read by the fetch and the fetched values: \(store.rowsRead - before)")
        #expect(partial.allSatisfy { $0.isFault })

        // Two attributes fetched; reading a third reads the row of that object only.
        let narrowContext = stack.context()
        let narrow = try narrowContext.fetch(request(["name", "salary"]))
        let afterNarrow = store.rowsRead
        #expect(values(narrow, ["name", "salary"]) == values(whole, ["name", "salary"]))
        #expect(store.rowsRead == afterNarrow)
        #expect(narrow[3].value(forKey: "age") as? Int16 == whole[3].value(forKey: "age") as? Int16)
        #expect(store.rowsRead == afterNarrow + 1)
        #expect(!narrow[3].isFault)
        #expect(values(narrow, Self.everyType) == expected)
    }

    /// Relationships, transient attributes and property descriptions may be named; a name the entity does not have
    /// is an error naming it.
    @Test func whatPropertiesToFetchMayHold() throws {
        let (stack, _) = try makeStack()
        let context = stack.context()
        let model = stack.container.managedObjectModel
        let salary = try #require(model.entitiesByName["Employee"]?.propertiesByName["salary"])
        let objects = try context.fetch(request(["department", "nickname", salary]))
        #expect(objects.count == 13)
        #expect((objects[0].value(forKey: "department") as? NSManagedObject)?.value(forKey: "name") as? String == "R&D")
        #expect(objects[1].value(forKey: "salary") as? Double == 10.25)
        let error = #expect(throws: CoreDataError.self) { try context.fetch(self.request(["name", "shoeSize"])) }
        #expect(error?.code == .invalidFetchRequest)
        #expect(error?.message.contains("shoeSize") == true)
    }

    /// Changing a partially read object reads its row first: setting a value it already has is no change, a new value
    /// saves, and the object's other values are the row's.
    @Test func changesReadTheRowFirst() throws {
        let (stack, store) = try makeStack()
        let context = stack.context()
        let objects = try context.fetch(request(["name", "age"]))
        let before = store.rowsRead
        objects[2].setValue(objects[2].value(forKey: "age"), forKey: "age")
        #expect(store.rowsRead == before + 1)
        #expect(!context.hasChanges)
        objects[2].setValue(Int16(99), forKey: "age")
        #expect(objects[2].changedValues().keys.sorted() == ["age"])
        try context.save()
        let checking = stack.context()
        let check = try checking.fetch(request(nil))
        #expect(check[2].value(forKey: "age") as? Int16 == 99)
        #expect(check[2].value(forKey: "salary") as? Double == objects[2].value(forKey: "salary") as? Double)
    }

    /// What another context saves reaches a partially read object: through a merge, and through `refresh`.
    @Test func othersSavesReplaceTheValuesRead() throws {
        let (stack, _) = try makeStack()
        let reader = stack.container.viewContext
        let objects = try reader.fetch(request(["name", "salary"]))
        #expect(objects[4].value(forKey: "name") as? String == "E2" && objects[4].value(forKey: "salary") as? Double == 20.5)
        let writer = stack.container.newBackgroundContext()
        try writer.performAndWait {
            let mine = try writer.fetch(request(nil))
            mine[4].setValue(1234.5, forKey: "salary")
            mine[6].setValue(77.0, forKey: "salary")
            try writer.save()
        }
        // The view context merges its coordinator's saves.
        reader.automaticallyMergesChangesFromParent = true
        let again = stack.container.newBackgroundContext()
        try again.performAndWait {
            let mine = try again.fetch(request(nil))
            mine[4].setValue(2000.0, forKey: "salary")
            try again.save()
        }
        // The merge is scheduled on the view context's queue.
        #expect(eventually { reader.performAndWait { objects[4].value(forKey: "salary") as? Double == 2000 } })
        // Saved before the merges were on: refresh reads the row.
        reader.refresh(objects[6], mergeChanges: false)
        #expect(objects[6].value(forKey: "salary") as? Double == 77)
    }

    /// A fetch that has to weigh this context's unsaved changes (and a child context's fetch) reads whole rows, with
    /// the same results.
    @Test func unsavedChangesAndChildContexts() throws {
        let (stack, _) = try makeStack()
        let context = stack.context()
        let first = try context.fetch(request(["name"]))
        first[1].setValue(5.5, forKey: "salary")
        try context.make("Employee", ["name": "E0a", "salary": 1.0])
        let partial = try context.fetch(request(["name", "salary"]))
        let names = { (objects: [NSManagedObject]) in objects.map { $0.value(forKey: "name") as? String } }
        #expect(names(partial) == names(try context.fetch(request(nil))))
        #expect(partial[1].value(forKey: "name") as? String == "E0a" && partial[1].value(forKey: "salary") as? Double == 1)
        #expect(partial[2].value(forKey: "salary") as? Double == 5.5)
        let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        child.parent = context
        try child.performAndWait {
            let objects = try child.fetch(request(["salary"]))
            #expect(objects.count == 14)
            #expect(objects[2].value(forKey: "salary") as? Double == 5.5)
        }
    }

    /// A transformable attribute read with the fetch comes back through its transformer, as from the row.
    @Test func transformableAttributesAreReadAsTheRowReadsThem() throws {
        let model = try NSManagedObjectModel {
            Entity("Note") {
                Attribute("title", .string)
                Attribute("tags", .transformable, transformer: .secureUnarchiveFromDataTransformerName)
            }
        }
        let stack = try TestStack(model: model)
        let setup = stack.context()
        for i in 0..<4 { try setup.make("Note", ["title": "N\(i)", "tags": (0..<i).map { "t\($0)" } as NSArray]) }
        try setup.save()
        let fetch = NSFetchRequest<NSManagedObject>(entityName: "Note")
        fetch.sortDescriptors = [FetchSortDescriptor(key: "title")]
        let context = stack.context()
        let whole = try context.fetch(fetch).map { $0.value(forKey: "tags") as? [String] }
        fetch.propertiesToFetch = ["tags"]
        let other = stack.context()
        let partial = try other.fetch(fetch).map { $0.value(forKey: "tags") as? [String] }
        #expect(partial == whole)
        #expect(partial.last == ["t0", "t1", "t2"])
    }

    /// A composite attribute named is read with the row (its value spans several columns), the others with the fetch.
    @Test func compositesAreReadWithTheRow() throws {
        let stack = try TestStack(model: try CompositeColumnTests().placeModel())
        let setup = stack.context()
        try setup.make("Place", ["name": "home", "address": ["street": "Main St", "number": 12, "geo": ["lat": 48.5]]])
        try setup.save()
        let store = try #require(stack.container.persistentStoreCoordinator.persistentStores.first as? SQLiteStore)
        let fetch = NSFetchRequest<NSManagedObject>(entityName: "Place")
        fetch.propertiesToFetch = ["name", "address"]
        let context = stack.context()
        let place = try #require(try context.fetch(fetch).first)
        let before = store.rowsRead
        #expect(place.value(forKey: "name") as? String == "home")
        #expect(store.rowsRead == before)
        #expect(place.value(forKeyPath: "address.street") as? String == "Main St")
        #expect(store.rowsRead == before + 1)
    }
}
