import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// A store with departments and employees used by the fetch tests.
func makeStaffStack() throws -> (TestStack, NSManagedObjectContext) {
    let stack = try TestStack(model: try makeCompanyModel())
    let context = stack.context()
    let rd = try context.make("Department", ["name": "R&D"])
    let ops = try context.make("Department", ["name": "Ops"])
    let people: [(String, Int, Double, NSManagedObject?)] = [
        ("ann", 31, 100, rd), ("Bob", 45, 300, rd), ("cy", 28, 200, ops), ("Dee", 52, 300, ops), ("eve", 39, 150, nil),
        ("file10", 20, 50, nil), ("file9", 21, 60, nil),
    ]
    for (name, age, salary, department) in people {
        try context.make("Employee", ["name": name, "age": age, "salary": salary, "department": department])
    }
    try context.make("Manager", ["name": "Max", "age": 60, "salary": 900, "department": rd])
    try context.save()
    return (stack, stack.context())
}

func names(_ objects: [NSManagedObject]) -> [String] { objects.compactMap { $0.string("name") } }

@Suite struct FetchRequestTests {
    /// Thousands of objects or values in an IN list: SQLite refuses expressions deeper than 1,000 levels and (by
    /// default) more than 32,766 parameters, so the list must not be compiled as a flat OR chain of parameters.
    @Test func longInListsFetch() throws {
        let model = try NSManagedObjectModel { Entity("Row") { Attribute("n", .integer64) } }
        let stack = try TestStack(model: model, inMemory: true)
        let context = stack.context()
        for i in 0..<6_000 { try context.make("Row", ["n": i]) }
        try context.save()
        let all = try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Row"))
        let chosen = all.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        let byObject = NSFetchRequest<NSManagedObject>(entityName: "Row")
        byObject.predicate = try FetchPredicate(format: "SELF IN %@", chosen.map(\.objectID))
        #expect(Set(try context.fetch(byObject)) == Set(chosen))
        let byValue = NSFetchRequest<NSManagedObject>(entityName: "Row")
        byValue.predicate = try FetchPredicate(format: "NOT (n IN %@)", Array(0..<5_000))
        #expect(try context.count(for: byValue) == 1_000)
    }

    @Test func sortDescriptorsWithSeveralKeysAndDirections() throws {
        let (_stack, context) = try makeStaffStack()
        _ = _stack
        #expect(
            names(try context.objects("Employee", sort: ["-salary", "name"])) == [
                "Max", "Bob", "Dee", "cy", "eve", "ann", "file9", "file10",
            ])
        #expect(names(try context.objects("Employee", sort: ["name"])) == ["Bob", "Dee", "Max", "ann", "cy", "eve", "file10", "file9"])
    }

    @Test func stringComparisonsInSort() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.sortDescriptors = [FetchSortDescriptor(key: "name", comparison: .caseInsensitive)]
        #expect(names(try context.fetch(request)) == ["ann", "Bob", "cy", "Dee", "eve", "file10", "file9", "Max"])
        request.sortDescriptors = [FetchSortDescriptor(key: "name", comparison: .localizedStandard)]
        #expect(names(try context.fetch(request)) == ["ann", "Bob", "cy", "Dee", "eve", "file9", "file10", "Max"])
        request.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: false, comparison: .localizedCaseInsensitive)]
        #expect(names(try context.fetch(request)).first == "Max")
    }

    @Test func sortThroughAToOneKeyPath() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.predicate = try FetchPredicate(format: "department != nil")
        request.sortDescriptors = [FetchSortDescriptor(key: "department.name"), FetchSortDescriptor(key: "name")]
        #expect(names(try context.fetch(request)) == ["Dee", "cy", "Bob", "Max", "ann"])
    }

    /// The SQL compiler checks key paths with the model's resolver: the same messages as key-value coding, plus what
    /// only SQL refuses (transient properties, an operator with no collection).
    @Test(arguments: [
        (
            "department.nmae == 'R&D'", CoreDataError.Code.unknownKey,
            "Entity 'Department' has no property 'nmae' (in key path 'department.nmae')."
        ),
        (
            "department.employees.nope == 1", .unknownKey,
            "Entity 'Employee' has no property 'nope' (in key path 'department.employees.nope')."
        ),
        ("age.years > 1", .unknownKey, "'Employee.age' is an attribute, so key path 'age.years' cannot go further."),
        ("department.@count > 1", .invalidFetchRequest, "'@count' in key path 'department.@count' must follow a to-many relationship."),
        ("nickname == 'x'", .invalidFetchRequest, "'Employee.nickname' is transient"),
        ("ANY department.employees.nickname == 'x'", .invalidFetchRequest, "'Employee.nickname' is transient"),
    ])
    func keyPathsTheStoreCannotFollowAreNamed(_ format: String, _ code: CoreDataError.Code, _ message: String) throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.predicate = try FetchPredicate(format: format)
        let error = #expect(throws: CoreDataError.self) { _ = try context.fetch(request) }
        #expect(error?.code == code && error?.message.contains(message) == true, "\(String(describing: error))")
    }

    @Test func keyPathsThroughToOneAndToManyStepsFetch() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        request.predicate = try FetchPredicate(format: "department.employees.@count == 3 AND ANY department.employees.age > 50")
        #expect(names(try context.fetch(request)) == ["Bob", "Max", "ann"])
        request.predicate = try FetchPredicate(format: "department.employees.@max.salary == 300 AND department.name == 'Ops'")
        #expect(names(try context.fetch(request)) == ["Dee", "cy"])
    }

    @Test func limitOffsetAndCount() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.sortDescriptors = [FetchSortDescriptor(key: "age")]
        request.fetchLimit = 3
        #expect(names(try context.fetch(request)) == ["file10", "file9", "cy"])
        request.fetchOffset = 2
        #expect(names(try context.fetch(request)) == ["cy", "ann", "eve"])
        #expect(try context.count(for: request) == 3)
        request.fetchLimit = 0
        #expect(try context.count(for: request) == 6)
        request.fetchLimit = -1
        #expect(throws: CoreDataError.self) { _ = try context.fetch(request) }
    }

    @Test func subentitiesAreIncludedByDefault() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        #expect(try context.count(for: request) == 8)
        request.includesSubentities = false
        #expect(try context.count(for: request) == 7)
        #expect(!names(try context.fetch(request)).contains("Max"))
        let people = NSFetchRequest<NSManagedObject>(entityName: "Person")
        #expect(try context.count(for: people) == 8, "an abstract entity fetches its subentities' objects")
        people.includesSubentities = false
        #expect(try context.count(for: people) == 0)
        let managers = try context.objects("Manager")
        #expect(managers.first?.entity.name == "Manager")
    }

    @Test func resultTypes() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let ids = NSFetchRequest<NSManagedObjectID>(entityName: "Department")
        ids.resultType = .managedObjectIDResultType
        ids.sortDescriptors = [FetchSortDescriptor(key: "name")]
        let fetchedIDs = try context.fetch(ids)
        #expect(fetchedIDs.count == 2)
        #expect(try context.existingObject(with: fetchedIDs[0]).string("name") == "Ops")

        let count = NSFetchRequest<NSNumber>(entityName: "Employee")
        count.resultType = .countResultType
        #expect(try context.fetch(count) == [8])

        let dicts = NSFetchRequest<NSDictionary>(entityName: "Employee")
        dicts.resultType = .dictionaryResultType
        dicts.propertiesToFetch = ["name", "department.name", "age"]
        dicts.predicate = try FetchPredicate(format: "age > 50")
        dicts.sortDescriptors = [FetchSortDescriptor(key: "age")]
        let rows = try context.fetch(dicts)
        #expect(rows.count == 2)
        #expect(rows[0]["name"] as? String == "Dee")
        #expect(rows[0]["department.name"] as? String == "Ops")
        #expect((rows[0]["age"] as? NSNumber)?.intValue == 52)

        let distinct = NSFetchRequest<NSDictionary>(entityName: "Employee")
        distinct.resultType = .dictionaryResultType
        distinct.propertiesToFetch = ["salary"]
        distinct.returnsDistinctResults = true
        #expect(try context.fetch(distinct).count == 7, "two employees earn 300")
    }

    /// A distinct dictionary fetch keeps its sort descriptors, as Core Data's does (they were ignored: the SQL had no
    /// ORDER BY), also by a key it does not return, with a nil value first, and windowed after the distinct rows.
    @Test func distinctDictionariesComeInTheSortsOrder() throws {
        let model = try NSManagedObjectModel {
            Entity("Person") {
                Attribute("city", .string)
                Attribute("age", .integer32)
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        for (city, age) in [("X", 30), ("Y", 40), ("X", 50), (nil, 20), ("W", 60)] as [(String?, Int)] {
            try context.make("Person", ["city": city, "age": age])
        }
        try context.save()
        let cities = NSFetchRequest<NSDictionary>(entityName: "Person")
        cities.resultType = .dictionaryResultType
        cities.propertiesToFetch = ["city"]
        cities.returnsDistinctResults = true
        func fetched() throws -> [String] { try context.fetch(cities).map { $0["city"] as? String ?? "nil" } }
        cities.sortDescriptors = [FetchSortDescriptor(key: "city")]
        #expect(try fetched() == ["nil", "W", "X", "Y"])
        cities.sortDescriptors = [FetchSortDescriptor(key: "city", ascending: false)]
        #expect(try fetched() == ["Y", "X", "W", "nil"])
        // By a key not returned: each city where its first row in that order puts it.
        cities.sortDescriptors = [FetchSortDescriptor(key: "age", ascending: false)]
        #expect(try fetched() == ["W", "X", "Y", "nil"])
        cities.fetchOffset = 1
        cities.fetchLimit = 2
        #expect(try fetched() == ["X", "Y"])
    }

    @Test func batchSizeReturnsFaultsThatLoadInBatches() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        for i in 0..<100 { try context.make("Department", ["name": String(format: "D%03d", i)]) }
        try context.save()
        let fresh = stack.context()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Department")
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        request.fetchBatchSize = 10
        let results = try fresh.fetch(request)
        #expect(results.count == 100)
        #expect(results.allSatisfy { $0.isFault })
        #expect(results[15].string("name") == "D015")
        // Touching one object loaded its whole batch (10...19) and nothing else.
        #expect(results[10..<20].allSatisfy { !$0.isFault })
        #expect(results[0..<10].allSatisfy { $0.isFault })
        #expect(results[20...].allSatisfy { $0.isFault })
    }

    /// `relationshipKeyPathsForPrefetching` loads with the fetch what each key path reaches: a to-one's rows, a
    /// to-many's destinations (one-to-many and many-to-many) and their rows, through two relationships; the values
    /// read are those faults would read.
    @Test func prefetchingLoadsTheRelationshipsItNames() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let setup = stack.context()
        let projects = try (0..<3).map { try setup.make("Project", ["title": "P\($0)"]) }
        for d in 0..<4 {
            let department = try setup.make("Department", ["name": "D\(d)"])
            if d % 2 == 0 { try setup.make("Manager", ["name": "H\(d)", "headOf": department, "department": department]) }
            for e in 0..<3 {
                let employee = try setup.make("Employee", ["name": "E\(d)\(e)", "department": department])
                // None, one or two projects each (a project has at most five members).
                let joined = (0..<e).map { projects[(d + e + $0) % 3] }
                employee.mutableSetValue(forKey: "projects").addObjects(from: joined)
            }
        }
        try setup.save()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        func described(_ employees: [NSManagedObject]) -> [String] {
            employees.map { employee in
                let department = employee.value(forKey: "department") as? NSManagedObject
                let head = department?.value(forKey: "head") as? NSManagedObject
                let titles = (employee.value(forKey: "projects") as? Set<NSManagedObject> ?? []).compactMap { $0.string("title") }
                return
                    "\(employee.string("name") ?? "?") \(department?.string("name") ?? "-") \(head?.string("name") ?? "-") \(titles.sorted())"
            }
        }
        let store = try #require(stack.container.persistentStoreCoordinator.persistentStores.first as? SQLiteStore)
        let plain = stack.context()
        let unloaded = try plain.fetch(request)
        #expect(unloaded.count == 14)
        #expect(unloaded.allSatisfy { ($0.value(forKey: "department") as? NSManagedObject)?.isFault == true })
        #expect(unloaded.allSatisfy { $0.hasFault(forRelationshipNamed: "projects") })
        let beforeFaults = store.rowsRead
        let expected = described(unloaded)
        // Without prefetching, reading fires a fault per department, head and project.
        #expect(store.rowsRead - beforeFaults >= 4 + 2 + 3)

        let prefetching = stack.context()
        request.relationshipKeyPathsForPrefetching = ["department.head", "projects"]
        let employees = try prefetching.fetch(request)
        #expect(employees.allSatisfy { !$0.hasFault(forRelationshipNamed: "projects") })
        // Everything the key paths reach was read with the fetch (the objects reached are held by nobody here, so
        // reading makes them again, from the rows the context kept): no row is read from the store after it.
        let afterFetch = store.rowsRead
        #expect(described(employees) == expected)
        #expect(store.rowsRead == afterFetch, "rows read after a prefetching fetch: \(store.rowsRead - afterFetch)")
        // A save (any change delivered) drops what was kept: rows are read again, as they may have changed.
        employees[0].setValue("E00x", forKey: "name")
        try prefetching.save()
        let afterSave = store.rowsRead
        _ = described(employees)
        #expect(store.rowsRead > afterSave)
        // A staleness interval of 0: faults read the store, prefetched rows or not.
        let strict = stack.context()
        strict.stalenessInterval = 0
        let strictEmployees = try strict.fetch(request)
        let afterStrictFetch = store.rowsRead
        _ = described(strictEmployees)
        #expect(store.rowsRead > afterStrictFetch)

        request.relationshipKeyPathsForPrefetching = ["department.budget"]
        let error = #expect(throws: CoreDataError.self) { try stack.context().fetch(request) }
        #expect(error?.code == .invalidFetchRequest && error?.description.contains("budget") == true)
    }

    @Test func pendingChangesShowInResults() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.predicate = try FetchPredicate(format: "salary >= 200")
        request.sortDescriptors = [FetchSortDescriptor(key: "salary", ascending: false), FetchSortDescriptor(key: "name")]
        #expect(names(try context.fetch(request)) == ["Max", "Bob", "Dee", "cy"])
        // Unsaved: an insert that matches, an update that stops matching, one that starts matching, a delete.
        try context.make("Employee", ["name": "new", "salary": 250.0])
        let objects = try context.objects("Employee")
        let bob = try #require(objects.first { $0.string("name") == "Bob" })
        let eve = try #require(objects.first { $0.string("name") == "eve" })
        let max = try #require(objects.first { $0.string("name") == "Max" })
        bob.setValue(10.0, forKey: "salary")
        eve.setValue(1000.0, forKey: "salary")
        context.delete(max)
        #expect(names(try context.fetch(request)) == ["eve", "Dee", "new", "cy"])
        #expect(try context.count(for: request) == 4)
        request.fetchLimit = 2
        request.fetchOffset = 1
        #expect(names(try context.fetch(request)) == ["Dee", "new"])
        request.includesPendingChanges = false
        request.fetchLimit = 0
        request.fetchOffset = 0
        let stored = names(try context.fetch(request))
        #expect(stored.count == 4 && stored.contains("Max") && !stored.contains("new"), "\(stored)")
    }

    @Test func pendingChangesToRelatedObjectsShowInResults() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let rd = try #require(try context.objects("Department", "name == 'R&D'").first)
        rd.setValue("Research", forKey: "name")  // unsaved
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.predicate = try FetchPredicate(format: "department.name == 'Research'")
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        #expect(names(try context.fetch(request)) == ["Bob", "Max", "ann"])
        #expect(try context.count(for: request) == 3)
        let ops = try #require(try context.objects("Department", "name == 'Ops'").first)
        ops.setValue("A-Team", forKey: "name")
        let bySection = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        bySection.predicate = try FetchPredicate(format: "department != nil")
        bySection.sortDescriptors = [FetchSortDescriptor(key: "department.name"), FetchSortDescriptor(key: "name")]
        #expect(names(try context.fetch(bySection)) == ["Dee", "cy", "Bob", "Max", "ann"], "sorted by the unsaved names")
        request.predicate = try FetchPredicate(format: "department.nme == 'x'")
        #expect(throws: CoreDataError.self) { _ = try context.fetch(request) }
    }

    @Test func predicateErrorsSurfaceFromFetch() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.predicate = try FetchPredicate(format: "salery > 3")
        let unknown = #expect(throws: CoreDataError.self) { _ = try context.fetch(request) }
        #expect(unknown?.code == .unknownKey)
        #expect(unknown?.message.contains("no property 'salery'") == true)
        request.predicate = try FetchPredicate(format: "age == 'old'")
        let wrongType = #expect(throws: CoreDataError.self) { _ = try context.fetch(request) }
        #expect(wrongType?.code == .wrongValueType)
        #expect(
            wrongType?.message.contains("age (a Integer 16 attribute) with \"old\" (a string value)") == true, "\(wrongType?.message ?? "")"
        )
        request.predicate = try FetchPredicate(format: "projects.title == 'x'")
        let toMany = #expect(throws: CoreDataError.self) { _ = try context.fetch(request) }
        #expect(toMany?.message.contains("ANY") == true)
        request.predicate = nil
        request.sortDescriptors = [FetchSortDescriptor(key: "nickname")]
        let transient = #expect(throws: CoreDataError.self) { _ = try context.fetch(request) }
        #expect(transient?.message.contains("transient") == true)
        let noEntity = NSFetchRequest<NSManagedObject>()
        #expect(throws: CoreDataError.self) { _ = try context.fetch(noEntity) }
    }

    @Test func objectPredicatesAndToManyQuantifiers() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        let rd = try #require(try context.objects("Department", "name == 'R&D'").first)
        #expect(Set(names(try context.objects("Employee", "department == %@", rd))) == ["ann", "Bob", "Max"])
        #expect(names(try context.objects("Department", "ANY employees.salary > 800")) == ["R&D"])
        #expect(names(try context.objects("Department", "ALL employees.salary >= 200")) == ["Ops"])
        #expect(names(try context.objects("Department", "employees.@count == 3")) == ["R&D"])
        let ann = try #require(try context.objects("Employee", "name == 'ann'").first)
        #expect(names(try context.objects("Department", "%@ IN employees", ann)) == ["R&D"])
        #expect(names(try context.objects("Department", "employees CONTAINS %@", ann)) == ["R&D"])
        #expect(names(try context.objects("Employee", "SELF == %@", ann)) == ["ann"])
    }
}

/// Counts live instances, to check how many objects a batched iteration keeps alive.
final class Tracked: NSManagedObject {
    @Managed var n: Int64
    nonisolated(unsafe) static var alive = 0
    nonisolated(unsafe) static var peak = 0
    static let lock = NSLock()

    required init(entity: NSEntityDescription, insertInto context: NSManagedObjectContext?) {
        super.init(entity: entity, insertInto: context)
        Self.lock.lock()
        Self.alive += 1
        Self.peak = max(Self.peak, Self.alive)
        Self.lock.unlock()
    }

    deinit {
        Self.lock.lock()
        Self.alive -= 1
        Self.lock.unlock()
    }
}

@Suite(.serialized) struct BatchedFetchResultsTests {
    @Test func iteratingKeepsOnlyAFewBatchesAlive() throws {
        let (stack, context, request) = try numbered(5_000, batchSize: 20)
        _ = stack
        Tracked.lock.lock()
        let baseline = Tracked.alive
        Tracked.peak = baseline
        Tracked.lock.unlock()
        let results = try context.fetchInBatches(request)
        var sum: Int64 = 0
        var expected: Int64 = 0
        for (i, object) in results.enumerated() {
            sum += object.n
            expected += Int64(i)
        }
        #expect(results.count == 5_000)
        #expect(sum == expected, "results come back in order")
        // Read ahead in order: 1, 2, 4, 8 and 16 batches, then the other 219 batches 25 (500 rows) a statement.
        #expect(results.batchesLoaded == 5 + 9, "statements: \(results.batchesLoaded)")
        Tracked.lock.lock()
        let peak = Tracked.peak - baseline
        Tracked.lock.unlock()
        #expect(peak <= 3 * 20 + 1, "at most three batches of objects alive at once (peak \(peak))")
    }

    /// A stack of `count` `Tracked` objects numbered in order, a context that has none of them, and a request for
    /// them in order with `batchSize`.
    private func numbered(_ count: Int, batchSize: Int) throws -> (TestStack, NSManagedObjectContext, NSFetchRequest<Tracked>) {
        let model = try NSManagedObjectModel {
            Entity("Tracked", managedObjectClass: Tracked.self) { Attribute("n", .integer64) }
        }
        let stack = try TestStack(model: model)
        let writer = stack.context()
        for i in 0..<count { try writer.make("Tracked", ["n": i]) }
        try writer.save()
        writer.reset()
        let request = NSFetchRequest<Tracked>(entityName: "Tracked")
        request.sortDescriptors = [FetchSortDescriptor(key: "n")]
        request.fetchBatchSize = batchSize
        return (stack, stack.context(), request)
    }

    /// Backwards reads ahead as forwards does; jumping about reads one batch a statement.
    @Test func readingAheadFollowsTheDirectionAndNotJumps() throws {
        let (stack, context, request) = try numbered(1_000, batchSize: 10)
        _ = stack
        let backwards = try context.fetchInBatches(request)
        var seen: [Int64] = []
        for index in backwards.indices.reversed() { seen.append(backwards[index].n) }
        #expect(seen == (0..<1_000).reversed().map(Int64.init))
        // 1, 2, 4, 8, 16 and 32 batches of 10, then the last 37 (at most 500 rows a statement).
        #expect(backwards.batchesLoaded == 7, "statements: \(backwards.batchesLoaded)")
        let jumps = try context.fetchInBatches(request)
        for index in [500, 0, 730, 250, 990, 120] { #expect(jumps[index].n == Int64(index)) }
        #expect(jumps.batchesLoaded == 6, "one statement per batch out of order")
    }

    /// Rows read ahead are not used after the context has saved: an object saved and released in between comes back
    /// with the saved value, not the one read before the save.
    @Test func rowsReadAheadAreDroppedWhenTheContextSaves() throws {
        let (stack, context, request) = try numbered(1_000, batchSize: 10)
        _ = stack
        let results = try context.fetchInBatches(request)
        #expect(results[0].n == 0 && results[10].n == 10, "batch 1 read with batch 2's rows")
        let id = results.objectIDs[25]
        do {
            let object = try #require(context.object(with: id) as? Tracked)
            object.setValue(Int64(-25), forKey: "n")
            try context.save()
        }
        #expect(context.registeredObject(for: id) == nil, "the saved object was released")
        #expect(results[25].n == -25)
    }

    @Test func batchedResultsIncludePendingChanges() throws {
        let (stack, context) = try makeStaffStack()
        _ = stack
        try context.make("Employee", ["name": "zz-new", "salary": 1.0])
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        let results = try context.fetchInBatches(request)
        #expect(results.count == 9)
        #expect(results.last?.string("name") == "zz-new")
        let wrong = NSFetchRequest<Tracked>(entityName: "Employee")
        #expect(throws: CoreDataError.self) { _ = try context.fetchInBatches(wrong) }
    }
}

@Suite struct SaveAtomicityTests {
    @Test func aFailureInsideTheTransactionWritesNothing() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let first = stack.context()
        let d = try first.make("Department", ["name": "Shared"])
        try first.save()
        // Another context changes the row, so the first context's update will conflict *after* its insert ran.
        let second = stack.context()
        try second.objects("Department").first?.setValue("Theirs", forKey: "name")
        try second.save()
        try first.make("Department", ["name": "Inserted before the conflict"])
        d.setValue("Mine", forKey: "name")
        #expect(throws: CoreDataError.self) { try first.save() }
        let names = try stack.context().objects("Department").compactMap { $0.string("name") }
        #expect(names == ["Theirs"], "the insert was rolled back with the failed update")
    }
}
