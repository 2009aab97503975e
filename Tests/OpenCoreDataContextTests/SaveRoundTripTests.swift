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
            let fresh = try read.value(forKey: key)
            #expect(Self.same(fresh, value), "\(key): read \(String(describing: fresh)), set \(value)")
            #expect(Self.same(committed[key], fresh), "\(key): the saving context keeps \(String(describing: committed[key]))")
        }
        let readDepartment = try #require(try read.value(forKey: "department") as? NSManagedObject)
        #expect(try readDepartment.value(forKey: "budget") as? Decimal == Decimal(string: "12.5"))
        #expect(Self.same(department.committedValues(forKeys: ["budget"])["budget"], try readDepartment.value(forKey: "budget")))
    }

    /// A transient attribute is not written, but the saving context's object keeps its value (as Core Data does: a
    /// save does not turn objects into faults); another context reads the default.
    @Test func aTransientValueStaysOnTheSavedObjectAndIsNotStored() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let employee = try context.make("Employee", ["name": "Ada", "nickname": "Countess"])
        try context.save()
        #expect(try employee.value(forKey: "nickname") as? String == "Countess")
        #expect(!employee.hasChanges)
        let read = try #require(try stack.context().objects("Employee").first)
        #expect(try read.value(forKey: "nickname") == nil)
        try employee.setValue("Ada L.", forKey: "name")
        try context.save()
        #expect(try employee.value(forKey: "nickname") as? String == "Countess")
    }

    @Test func emptyTextAndEmptyDataAreNotNil() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.make("Employee", ["name": "", "photo": Data()])
        try context.save()
        let read = try #require(try stack.context().objects("Employee").first)
        #expect(try read.value(forKey: "name") as? String == "")
        #expect(try read.value(forKey: "photo") as? Data == Data())
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
