import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// What a save writes reads back as it was set, and what the saving context keeps as committed is what a read gives.
@Suite struct SaveRoundTripTests {
    static var values: [String: Any] {
        [
            "name": "Zoë — 東京",
            "badge": UUID(uuidString: "0C7A3E1B-7E41-4E0B-9C33-2F5D1A6B8C90")!,
            "born": Date(timeIntervalSinceReferenceDate: 123_456.789),
            "active": false,
            "age": Int16(-7),
            "level": Int32(2_000_000_000),
            "serial": Int64.max,
            "salary": 1234.5,
            "rating": Float(0.25),
            "homepage": URL(string: "https://example.com/a?b=c")!,
            "photo": Data([0, 1, 2, 255]),
        ]
    }

    /// Compares two attribute values of any supported kind.
    static func same(_ a: Any?, _ b: Any?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (let a as NSNumber, let b as NSNumber): return a == b
        case (let a as String, let b as String): return a == b
        case (let a as Data, let b as Data): return a == b
        case (let a as Date, let b as Date): return a == b
        case (let a as UUID, let b as UUID): return a == b
        case (let a as URL, let b as URL): return a == b
        case (let a as Decimal, let b as Decimal): return a == b
        default: return false
        }
    }

    @Test func everyAttributeTypeReadsBackAsSetAndAsTheSavingContextKeepsIt() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let department = try context.make("Department", ["name": "R&D", "budget": Decimal(string: "12.50")!])
        let employee = try context.make("Employee", Self.values.merging(["department": department]) { a, _ in a })
        try context.save()
        let committed = employee.committedValues(forKeys: Array(Self.values.keys))
        let reader = stack.context()
        let read = try #require(try reader.objects("Employee").first)
        for (key, value) in Self.values {
            let fresh = read.value(forKey: key)
            #expect(Self.same(fresh, value), "\(key): read \(String(describing: fresh)), set \(value)")
            #expect(Self.same(committed[key], fresh), "\(key): the saving context keeps \(String(describing: committed[key]))")
        }
        let readDepartment = try #require(read.value(forKey: "department") as? NSManagedObject)
        #expect(readDepartment.value(forKey: "budget") as? Decimal == Decimal(string: "12.5"))
        #expect(Self.same(department.committedValues(forKeys: ["budget"])["budget"], readDepartment.value(forKey: "budget")))
    }

    /// After an update the saving context keeps, as committed, what a read of the row gives (the store builds the
    /// saved row from the values it was read with and the changes, instead of reading it back), with the version the
    /// row now has: the next update's version check passes, and another context's stale update is still refused.
    @Test func anUpdatesCommittedValuesAreWhatAReadGivesAndItsVersionIsTheRows() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let first = try context.make("Department", ["name": "First"])
        let employee = try context.make("Employee", Self.values.merging(["department": first]) { a, _ in a })
        try context.save()
        let staleContext = stack.context()
        let stale = try #require(try staleContext.objects("Employee").first)
        _ = stale.value(forKey: "name")  // read at the first version
        let changed: [String: Any] = [
            "name": "Ünïcode ✓", "born": Date(timeIntervalSinceReferenceDate: -5.25), "active": true, "age": Int16(3),
            "salary": 0.1, "rating": 0.1,  // a Double for a Float attribute: stored rounded to Float
            "homepage": URL(string: "file:///tmp/x")!, "photo": Data(repeating: 7, count: 100), "nickname": "Kept here",
        ]
        for (key, value) in changed { employee.setValue(value, forKey: key) }
        let second = try context.make("Department", ["name": "Second"])  // new: its ID becomes permanent in the save
        employee.setValue(second, forKey: "department")
        try context.save()
        let keys = Array(Self.values.keys) + ["nickname"]
        let committed = employee.committedValues(forKeys: keys)
        let reader = stack.context()
        let read = try #require(try reader.objects("Employee").first)
        for key in keys where key != "nickname" {
            let fresh = read.value(forKey: key)
            #expect(
                Self.same(committed[key], fresh), "\(key): kept \(String(describing: committed[key])), read \(String(describing: fresh))")
        }
        #expect(committed["nickname"] as? String == "Kept here", "the transient value stays with the saving context's object")
        #expect(read.value(forKey: "nickname") == nil)
        #expect((read.value(forKey: "department") as? NSManagedObject)?.string("name") == "Second")
        #expect((employee.value(forKey: "department") as? NSManagedObject)?.objectID.isTemporaryID == false)
        // The version kept is the row's: a second update saves, a stale one from another context is refused.
        employee.setValue("Again", forKey: "name")
        try context.save()
        stale.setValue("Stale", forKey: "name")
        let error = #expect(throws: CoreDataError.self) { try staleContext.save() }
        #expect(error?.code == .managedObjectMerge)
        #expect(try stack.context().objects("Employee").first?.string("name") == "Again")
    }

    /// A transient attribute is not written, but the saving context's object keeps its value (as Core Data does: a
    /// save does not turn objects into faults); another context reads the default.
    ///
    /// After a save the context still finds every saved object something references — the caller, another object's
    /// relationship, an observer of the did-save notification — as the same instance under its new ID; an object
    /// nothing references is let go, and its ID then gives a fault that reads what was saved.
    @Test func afterASaveTheContextKeepsTheObjectsStillReferencedAndLetsTheOthersGo() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let department = try context.make("Department", ["name": "R&D"])
        try context.make("Employee", ["name": "Ann", "department": department])  // held by the department's to-many
        weak let office = try context.make("Office", ["city": "Oslo"])  // held by nothing but the context
        let seen = Seen()
        let token = NotificationCenter.default.addObserver(
            forName: NSManagedObjectContext.didSaveObjectsNotification, object: context, queue: nil
        ) { note in
            let ids = note.userInfo?[NSInsertedObjectIDsKey] as? Set<NSManagedObjectID> ?? []
            for id in ids { seen.found[id] = context.registeredObject(for: id) != nil }
        }
        defer { NotificationCenter.default.removeObserver(token) }
        try context.save()
        let seenByObserver = seen.found
        #expect(seenByObserver.count == 3 && seenByObserver.values.allSatisfy { $0 }, "observers find every saved object")
        #expect(office == nil, "an object nothing references is released by the save")
        #expect(context.registeredObject(for: department.objectID) === department)
        let employee = try #require((department.value(forKey: "employees") as? Set<NSManagedObject>)?.first)
        #expect(context.registeredObject(for: employee.objectID) === employee)
        #expect(!employee.objectID.isTemporaryID)
        let officeID = try #require(seenByObserver.keys.first { $0.entity.name == "Office" })
        #expect(context.registeredObject(for: officeID) == nil)
        let reread = context.object(with: officeID)
        #expect(reread.isFault && reread.string("city") == "Oslo")
        #expect(context.object(with: officeID) === reread, "the new fault is registered")
        #expect(try context.objects("Employee").first === employee, "a fetch returns the registered instance")
        // With nobody observing, the save itself lets go of what nothing references, before it returns.
        NotificationCenter.default.removeObserver(token)
        weak let another = try context.make("Office", ["city": "Rome"])
        try context.save()
        #expect(another == nil)
        #expect(try context.objects("Office", "city == 'Rome'").count == 1)
    }

    /// What the did-save observer saw (the notification is posted on the saving thread).
    private final class Seen: @unchecked Sendable {
        var found: [NSManagedObjectID: Bool] = [:]
    }

    @Test func aTransientValueStaysOnTheSavedObjectAndIsNotStored() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let employee = try context.make("Employee", ["name": "Ada", "nickname": "Countess"])
        try context.save()
        #expect(employee.value(forKey: "nickname") as? String == "Countess")
        #expect(!employee.hasChanges)
        let read = try #require(try stack.context().objects("Employee").first)
        #expect(read.value(forKey: "nickname") == nil)
        employee.setValue("Ada L.", forKey: "name")
        try context.save()
        #expect(employee.value(forKey: "nickname") as? String == "Countess")
    }

    /// Text and blobs are bound from a buffer reused statement after statement (a multi-row insert binds many rows'
    /// bytes before it runs); values too big for what is left of it are bound by copy.
    ///
    /// Rows of every mix (small,
    /// large, over the buffer's size, several large ones in one row), inserted (in multi-row statements and one by
    /// one) and then updated in one save each, must read back byte for byte, none taking another row's bytes.
    @Test func textAndDataOfEverySizeReadBackExactlyRowByRow() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let sizes = [0, 1, 7, 15, 16, 300, 5_000, 40_000, 70_000, 33_000, 2, 65_536]
        func name(_ row: Int, _ round: Int) -> String {
            let size = sizes[(row + round) % sizes.count]
            return String(repeating: Character(UnicodeScalar(UInt8(97 + (row + round) % 26))), count: size) + "#\(row).\(round)"
        }
        func photo(_ row: Int, _ round: Int) -> Data {
            let size = sizes[(row * 5 + round) % sizes.count]
            return Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ row &+ round) })
        }
        func url(_ row: Int, _ round: Int) -> URL {
            URL(string: "https://example.com/\(String(repeating: "p", count: row * 100))/\(round)")!
        }
        let rows = 75  // two multi-row inserts of 32 rows, and 11 rows one by one
        var employees: [NSManagedObject] = []
        for row in 0..<rows {
            employees.append(
                try context.make("Employee", ["age": Int16(row), "name": name(row, 0), "photo": photo(row, 0), "homepage": url(row, 0)]))
        }
        try context.save()
        for row in stride(from: 0, to: rows, by: 2) {
            employees[row].setValue(name(row, 1), forKey: "name")
            employees[row].setValue(photo(row, 1), forKey: "photo")
            employees[row].setValue(url(row, 1), forKey: "homepage")
        }
        try context.save()
        let read = try stack.context().objects("Employee", sort: ["age"])
        #expect(read.count == rows)
        for (row, object) in read.enumerated() {
            let round = row % 2 == 0 ? 1 : 0
            #expect(object.value(forKey: "name") as? String == name(row, round), "row \(row): name")
            #expect(object.value(forKey: "photo") as? Data == photo(row, round), "row \(row): photo")
            #expect(object.value(forKey: "homepage") as? URL == url(row, round), "row \(row): homepage")
        }
    }

    /// A save writes runs of new objects of one entity several rows per statement, and the rest one by one.
    ///
    /// Runs of
    /// every length, entities of one table interleaved (each run's rows must get the keys the save gave them, in the
    /// order of the request), relationships between new objects in both directions, and values that read back
    /// differently (decimals, which the saving context keeps as a read gives them) must all read back as saved.
    @Test func runsOfNewObjectsOfEveryLengthReadBackAsSaved() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        var expected: [String: (entity: String, age: Int, department: String, mentor: String?)] = [:]
        var departments: [NSManagedObject] = []
        var previous: NSManagedObject?
        // Run lengths around the batch size (32): one row, a batch less one, a batch, a batch and one, two batches.
        for (run, length) in [1, 31, 32, 33, 64, 5, 70].enumerated() {
            let department = try context.make("Department", ["name": "d\(run)", "budget": Decimal(string: "\(run).10")!])
            departments.append(department)
            for i in 0..<length {
                let entity = run % 2 == 0 ? "Employee" : "Manager"
                let name = "p\(run).\(i)"
                let person = try context.make(entity, ["name": name, "age": Int16(i), "department": department])
                // Every third person's mentor is the person made just before, which may be in an earlier run or statement.
                var mentor: String?
                if i % 3 == 0, let previous {
                    person.setValue(previous, forKey: "mentor")
                    mentor = previous.value(forKey: "name") as? String
                }
                expected[name] = (entity, i, "d\(run)", mentor)
                previous = person
            }
        }
        try context.save()
        for (run, department) in departments.enumerated() {
            #expect(department.committedValues(forKeys: ["budget"])["budget"] as? Decimal == Decimal(string: "\(run).1"))
        }
        let reader = stack.context()
        let people = try reader.objects("Person")
        #expect(people.count == expected.count)
        var keys: Set<Int64> = []
        for person in people {
            let name = try #require(person.value(forKey: "name") as? String)
            let want = try #require(expected[name], "\(name) was not saved")
            keys.insert(person.objectID.primaryKey)
            #expect(person.entity.name == want.entity, "\(name): \(person.entity.name)")
            #expect(person.value(forKey: "age") as? Int16 == Int16(want.age), "\(name): age")
            let department = person.value(forKey: "department") as? NSManagedObject
            #expect(department?.value(forKey: "name") as? String == want.department, "\(name): department")
            let mentor = person.value(forKey: "mentor") as? NSManagedObject
            #expect(mentor?.value(forKey: "name") as? String == want.mentor, "\(name): mentor")
        }
        #expect(keys.count == expected.count, "two people share a primary key")
        let readDepartments = try reader.objects("Department", sort: ["name"])
        #expect(readDepartments.map { $0.value(forKey: "budget") as? Decimal } == (0..<7).map { Decimal(string: "\($0).1") })
        // The saving context's objects have the IDs of the rows they were written to.
        for department in departments {
            for person in try #require(department.value(forKey: "employees") as? Set<NSManagedObject>) {
                let row = try reader.existingObject(with: person.objectID)
                #expect(row.value(forKey: "name") as? String == (person.value(forKey: "name") as? String))
            }
        }
    }

    @Test func emptyTextAndEmptyDataAreNotNil() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.make("Employee", ["name": "", "photo": Data()])
        try context.save()
        let read = try #require(try stack.context().objects("Employee").first)
        #expect(read.value(forKey: "name") as? String == "")
        #expect(read.value(forKey: "photo") as? Data == Data())
    }

    /// Another program wrote a real number too large for an integer attribute into its column: reading it is an
    /// error that names the attribute (it used to trap converting the double).
    @Test func anIntegerColumnHoldingAHugeRealIsAnErrorNotACrash() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.make("Employee", ["name": "Ann", "serial": Int64(5)])
        try context.save()
        let queue = try DatabaseQueue(path: stack.storeURL.path)
        try queue.write { db in try db.execute(sql: "UPDATE ZPERSON SET ZSERIAL = 1e300") }
        let error = #expect(throws: CoreDataError.self) {
            _ = try stack.context().objects("Employee").first?.value(forKey: "serial")
        }
        #expect(error?.message.contains("serial") == true, "\(String(describing: error))")
    }

    @Test func onlyATableHoldingSeveralEntitiesIndexesTheEntityColumn() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        try stack.context().save()  // the store exists once loaded; read its schema
        let queue = try DatabaseQueue(path: stack.storeURL.path)
        let indexes = try queue.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE '%Z_ENT_INDEX'")
        }
        #expect(indexes == ["ZPERSON_Z_ENT_INDEX"])
    }
}
