import Foundation
import OpenCoreData
import Testing
import _TestSupport

@Suite struct AttributeRoundTripTests {
    @Test func everyAttributeTypeSurvivesSaveAndFetch() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let badge = UUID()
        let born = Date(timeIntervalSinceReferenceDate: 123_456.789)
        let photo = Data([0, 1, 2, 255, 128])
        let values: [String: Any?] = [
            "name": "Ada Lövelace ✓", "badge": badge, "born": born, "active": false, "age": Int16(-36), "level": Int32(2_000_000_000),
            "serial": Int64.max, "salary": 12345.678, "rating": Float(4.25), "homepage": URL(string: "https://example.com/ada?x=1")!,
            "photo": photo,
        ]
        try context.make("Employee", values)
        try context.make("Department", ["name": "Money", "budget": Decimal(string: "1234567890123.45")!])
        try context.save()

        let fresh = stack.context()
        let ada = try #require(try fresh.objects("Employee").first)
        #expect(ada.string("name") == "Ada Lövelace ✓")
        #expect(ada.value(forKey: "badge") as? UUID == badge)
        #expect(ada.value(forKey: "born") as? Date == born)
        #expect(ada.value(forKey: "active") as? Bool == false)
        #expect(ada.value(forKey: "age") as? Int16 == -36)
        #expect(ada.value(forKey: "age") as? Int == -36)
        #expect(ada.value(forKey: "level") as? Int32 == 2_000_000_000)
        #expect(ada.value(forKey: "serial") as? Int64 == Int64.max)
        #expect(ada.value(forKey: "salary") as? Double == 12345.678)
        #expect(ada.value(forKey: "rating") as? Float == 4.25)
        #expect(ada.value(forKey: "homepage") as? URL == URL(string: "https://example.com/ada?x=1"))
        #expect(ada.value(forKey: "photo") as? Data == photo)
        let budget = try fresh.objects("Department").first?.value(forKey: "budget") as? Decimal
        #expect(budget == Decimal(string: "1234567890123.45"), "decimals keep their 15 digits")
    }

    /// A decimal with more significant digits than Core Data's DECIMAL column keeps (15) is refused by the save, naming
    /// the attribute, rather than stored rounded; the context keeps it, and a value that fits saves.
    @Test func aDecimalTooPreciseForTheStoreIsRefusedNotRounded() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let money = try context.make("Department", ["name": "Money", "budget": Decimal(string: "12345678901234567.89")!])
        let error = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(error?.key == "budget" && error?.message.contains("12345678901234567.89") == true, "\(error?.message ?? "")")
        #expect(try stack.context().objects("Department").isEmpty, "nothing of the save was written")
        #expect(money.value(forKey: "budget") as? Decimal == Decimal(string: "12345678901234567.89"))
        money.setValue(Decimal(string: "0.1")!, forKey: "budget")
        try context.save()
        #expect(try stack.context().objects("Department").first?.value(forKey: "budget") as? Decimal == Decimal(string: "0.1"))
    }

    @Test func nilAndDefaults() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let e = try context.make("Employee", ["name": "Defaults"])
        #expect(e.value(forKey: "active") as? Bool == true)
        #expect(e.value(forKey: "level") as? Int == 1)
        #expect(e.value(forKey: "homepage") == nil)
        try context.save()
        let fetched = try #require(try stack.context().objects("Employee").first)
        #expect(fetched.value(forKey: "level") as? Int == 1)
        #expect(fetched.value(forKey: "photo") == nil)
    }

    static func sample(_ name: String) -> Any {
        switch name {
        case "70000": return 70_000
        case "date": return Date()
        case "7": return 7
        case "3": return 3
        default: return name
        }
    }

    @Test(arguments: [
        ("age", "forty", "is a Integer 16 attribute; it cannot hold String forty"),
        ("age", "70000", "70000 does not fit 'Employee.age'"),
        ("born", "yesterday", "Date attribute"),
        ("salary", "date", "Double attribute"),
        ("badge", "not-a-uuid", "UUID attribute"),
        ("active", "7", "Boolean attribute"),
        ("department", "R&D", "to-one relationship; it needs a managed object"),
        ("projects", "3", "to-many relationship"),
    ])
    func wrongValueTypesThrowNamingEntityAndKey(_ key: String, _ sampleName: String, _ expected: String) throws {
        let stack = try TestStack(model: try makeCompanyModel(), inMemory: true)
        let e = try stack.context().make("Employee", ["name": "X"])
        let error = #expect(throws: CoreDataError.self) { try e.setCheckedValue(Self.sample(sampleName), forKey: key) }
        #expect(error?.code == .wrongValueType)
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
        #expect(error?.key == key)
    }

    @Test func unknownKeysThrow() throws {
        let stack = try TestStack(model: try makeCompanyModel(), inMemory: true)
        let e = try stack.context().make("Employee", ["name": "X"])
        let read = #expect(throws: CoreDataError.self) { _ = try e.checkedValue(forKey: "salry") }
        #expect(read?.code == .unknownKey)
        #expect(read?.message == "Entity 'Employee' has no property 'salry'.")
        #expect(throws: CoreDataError.self) { try e.setCheckedValue(1, forKey: "nope") }
        #expect(throws: CoreDataError.self) { _ = try e.checkedValue(forKeyPath: "department.nope") }
        let unknownEntity = #expect(throws: CoreDataError.self) { _ = try stack.context().objects("Employe") }
        #expect(unknownEntity?.code == .unknownEntity)
        #expect(unknownEntity?.message.contains("no entity named 'Employe'") == true)
    }
}

@Suite struct ObjectGraphTests {
    @Test func inverseRelationshipsAreMaintained() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let rd = try context.make("Department", ["name": "R&D"])
        let ops = try context.make("Department", ["name": "Ops"])
        let ada = try context.make("Employee", ["name": "Ada"])
        ada.setValue(rd, forKey: "department")
        #expect((rd.value(forKey: "employees") as? Set<NSManagedObject>) == [ada])
        ada.setValue(ops, forKey: "department")
        #expect((rd.value(forKey: "employees") as? Set<NSManagedObject>)?.isEmpty == true)
        #expect((ops.value(forKey: "employees") as? Set<NSManagedObject>) == [ada])
        // Setting the to-many side moves the to-one too.
        rd.setValue([ada], forKey: "employees")
        #expect(ada.value(forKey: "department") as? NSManagedObject === rd)
        #expect((ops.value(forKey: "employees") as? Set<NSManagedObject>)?.isEmpty == true)
        // Many-to-many.
        let p = try context.make("Project", ["title": "Apollo"])
        p.setValue([ada], forKey: "members")
        #expect((ada.value(forKey: "projects") as? Set<NSManagedObject>) == [p])
        try context.save()

        let fresh = stack.context()
        let freshAda = try #require(try fresh.objects("Employee").first)
        #expect(freshAda.value(forKeyPath: "department.name") as? String == "R&D")
        #expect(freshAda.value(forKeyPath: "projects.title") as? Set<AnyHashable> == ["Apollo"])
        let freshRD = try #require(try fresh.objects("Department", "name == 'R&D'").first)
        #expect(freshRD.value(forKeyPath: "employees.@count") as? Int == 1)
        #expect(freshRD.value(forKeyPath: "employees.name") as? Set<AnyHashable> == ["Ada"])
    }

    @Test func keyPathCollectionOperators() throws {
        let stack = try TestStack(model: try makeCompanyModel(), inMemory: true)
        let context = stack.context()
        let d = try context.make("Department", ["name": "D"])
        for (name, salary) in [("a", 10.0), ("b", 20.0), ("c", 60.0)] {
            try context.make("Employee", ["name": name, "salary": salary, "department": d])
        }
        #expect(d.value(forKeyPath: "employees.@count") as? Int == 3)
        #expect(d.value(forKeyPath: "employees.@sum.salary") as? Double == 90)
        #expect(d.value(forKeyPath: "employees.@avg.salary") as? Double == 30)
        #expect(d.value(forKeyPath: "employees.@max.salary") as? Double == 60)
        #expect(d.value(forKeyPath: "employees.@min.salary") as? Double == 10)
    }

    @Test func cascadeDeletesAndNullifies() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let d = try context.make("Department", ["name": "Gone"])
        let a = try context.make("Employee", ["name": "A", "department": d])
        let b = try context.make("Employee", ["name": "B", "department": d])
        let p = try context.make("Project", ["title": "P"])
        p.setValue([a, b], forKey: "members")
        try context.save()
        context.delete(d)
        context.processPendingChanges()
        #expect(a.isDeleted && b.isDeleted, "cascade from Department.employees")
        #expect((p.value(forKey: "members") as? Set<NSManagedObject>)?.isEmpty == true, "nullify Employee.projects")
        try context.save()
        let fresh = stack.context()
        #expect(try fresh.objects("Employee").isEmpty)
        #expect(try fresh.objects("Department").isEmpty)
        let project = try #require(try fresh.objects("Project").first)
        #expect((project.value(forKey: "members") as? Set<NSManagedObject>)?.isEmpty == true)
    }

    @Test func denyRuleBlocksTheSaveAndWritesNothing() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let d = try context.make("Department", ["name": "HQ"])
        try context.make("Office", ["city": "Paris", "department": d])
        try context.save()
        context.delete(d)
        let error = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(error?.code == .validationRelationshipDeniedDelete)
        #expect(error?.message.contains("'offices' has the Deny rule") == true, "\(error?.message ?? "")")
        #expect(try stack.context().objects("Department").count == 1, "nothing written")
        // Removing the office first lets the delete through.
        context.rollback()
        let office = try #require(try context.objects("Office").first)
        context.delete(office)
        context.delete(try #require(try context.objects("Department").first))
        try context.save()
        #expect(try stack.context().objects("Department").isEmpty)
    }

    @Test func noActionLeavesTheOtherSideAlone() throws {
        let stack = try TestStack(model: try makeCompanyModel(), inMemory: true)
        let context = stack.context()
        let mentor = try context.make("Employee", ["name": "M"])
        let mentee = try context.make("Employee", ["name": "N"])
        mentee.setValue(mentor, forKey: "mentor")
        try context.save()
        context.delete(mentee)
        context.processPendingChanges()
        // Employee.mentor has No Action: the mentor still lists the deleted mentee until the caller fixes it.
        #expect((mentor.value(forKey: "mentees") as? Set<NSManagedObject>) == [mentee])
    }

    @Test func validationFailuresNameObjectAndKeyAndLeaveStoreUntouched() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.make("Department", ["name": "Kept"])
        try context.save()
        try context.make("Department", [:])  // name is required
        let p = try context.make("Project", ["title": "Big"])
        var crowd: [NSManagedObject] = []
        for i in 0..<6 { crowd.append(try context.make("Employee", ["name": "E\(i)"])) }
        p.setValue(crowd, forKey: "members")  // max 5
        let error = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(error?.code == .validationMultipleErrors)
        let codes = Set(error?.underlying.map(\.code) ?? [])
        #expect(codes == [.validationMissingMandatoryProperty, .validationRelationshipExceedsMaximumCount])
        #expect(error?.underlying.contains { $0.key == "name" && $0.entityName == "Department" } == true)
        #expect(error?.message.contains("Project 'members' holds 6 objects but allows at most 5") == true)
        let fresh = stack.context()
        #expect(try fresh.objects("Department").compactMap { $0.string("name") } == ["Kept"])
        #expect(try fresh.objects("Employee").isEmpty)
        #expect(context.hasChanges, "the context keeps its changes to fix and retry")
    }

    @Test func uniquingOneObjectPerRowPerContext() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let d = try context.make("Department", ["name": "U"])
        try context.make("Employee", ["name": "E", "department": d])
        try context.save()
        let other = stack.context()
        let a = try #require(try other.objects("Department").first)
        let b = try #require(try other.objects("Department", "name == 'U'").first)
        let viaRelationship = try other.objects("Employee").first?.value(forKey: "department") as? NSManagedObject
        #expect(a === b)
        #expect(viaRelationship === a)
        #expect(other.object(with: a.objectID) === a)
        #expect(try other.existingObject(with: a.objectID) === a)
        #expect(try context.objects("Department").first === d, "the saving context keeps its own object")
    }

    @Test func faultsLoadTheirRowOnFirstAccess() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let d = try context.make("Department", ["name": "Faulty"])
        try context.save()
        let other = stack.context()
        let fault = other.object(with: d.objectID)
        #expect(fault.isFault)
        #expect(fault.string("name") == "Faulty")
        #expect(!fault.isFault)
        // A fault for a row that no longer exists throws on access.
        context.delete(d)
        try context.save()
        let third = stack.context()
        let ghost = third.object(with: d.objectID)
        let error = #expect(throws: CoreDataError.self) { _ = try ghost.checkedValue(forKey: "name") }
        #expect(error?.code == .objectNotFound)
        // A fault whose context is gone cannot load either, and says why.
        let orphan = stack.context().object(with: d.objectID)
        let gone = #expect(throws: CoreDataError.self) { _ = try orphan.checkedValue(forKey: "name") }
        #expect(gone?.code == .objectWithoutContext)
    }

    @Test func changeStateAndChangedValues() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let e = try context.make("Employee", ["name": "Old", "salary": 1.0])
        #expect(e.isInserted && !e.isUpdated && e.hasChanges)
        try context.save()
        #expect(!e.isInserted && !e.hasChanges && !context.hasChanges)
        e.setValue("New", forKey: "name")
        #expect(e.isUpdated && context.hasChanges)
        #expect(e.changedValues()["name"] as? String == "New")
        #expect(e.changedValues().count == 1)
        #expect(e.committedValues(forKeys: ["name"])["name"] as? String == "Old")
        #expect(context.updatedObjects == [e])
        // Setting it back: no change any more.
        e.setValue("Old", forKey: "name")
        #expect(!e.isUpdated && !context.hasChanges)
        context.delete(e)
        #expect(e.isDeleted && context.deletedObjects == [e])
        context.rollback()
        #expect(!e.isDeleted && e.string("name") == "Old")
    }

    @Test func reinsertingAnUnsavedObjectDeletedInTheSameEventKeepsItNew() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let d = try context.make("Department", ["name": "Back"])
        context.delete(d)
        context.insert(d)  // before the deletion is processed
        #expect(d.isInserted && !d.isDeleted && context.insertedObjects == [d])
        d.setValue("Again", forKey: "name")
        try context.save()
        #expect(!d.objectID.isTemporaryID && !d.hasChanges)
        let other = stack.context()
        #expect(try other.objects("Department").map { $0.string("name") } == ["Again"])
    }

    @Test func newObjectsAreReportedOnceInInsertionOrderWithTheirLatestValues() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let first = try context.make("Department", ["name": "first"])
        try context.save()
        var batches: [ContextChange] = []
        let observation = context.addChangeObserver { batches.append($0) }
        defer { observation.cancel() }
        let a = try context.make("Department", ["name": "a"])
        first.setValue("edited", forKey: "name")
        let b = try context.make("Department", ["name": "b"])
        let gone = try context.make("Department", ["name": "gone"])
        context.delete(gone)
        let c = try context.make("Department", ["name": "c"])
        b.setValue("b2", forKey: "name")  // edits before the report fold into the insertion
        context.processPendingChanges()
        #expect(batches.count == 1)
        #expect(batches.last?.inserted == [a, b, c], "stored objects first, then new ones in insertion order; the deleted one never shows")
        #expect(batches.last?.updated.map(\.object) == [first])
        #expect(batches.last?.deleted.isEmpty == true)
        #expect(b.string("name") == "b2")
        // After the report, edits of a new object are updates with their keys.
        a.setValue("a2", forKey: "name")
        context.processPendingChanges()
        #expect(batches.count == 2)
        #expect(batches.last?.inserted.isEmpty == true)
        #expect(batches.last?.updated.map(\.object) == [a] && batches.last?.updated.first?.keys == ["name"])
        // Deleting a reported new object reports a deletion.
        context.delete(c)
        context.processPendingChanges()
        #expect(batches.last?.deleted == [c])
        #expect(context.insertedObjects == [a, b])
    }

    @Test func temporaryIDsAreDistinctAndRoundTripThroughTheirURIs() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let objects = try (0..<2_000).map { try context.make("Department", ["name": "d\($0)"]) }
        let ids = objects.map(\.objectID)
        #expect(Set(ids).count == ids.count)
        #expect(Set(ids.map { $0.uriRepresentation() }).count == ids.count)
        for (object, id) in zip(objects, ids).prefix(50) {
            let parsed = try #require(
                stack.container.persistentStoreCoordinator.managedObjectID(forURIRepresentation: id.uriRepresentation()))
            #expect(parsed == id && parsed.hashValue == id.hashValue)
            #expect(context.object(with: parsed) === object)
        }
        // Later IDs order after earlier ones (the order new objects get their primary keys in).
        #expect(ids == ids.sorted())
    }

    @Test func rollbackRefreshAndReset() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let d = try context.make("Department", ["name": "A"])
        try context.save()
        d.setValue("B", forKey: "name")
        let inserted = try context.make("Department", ["name": "C"])
        context.rollback()
        #expect(d.string("name") == "A")
        #expect(inserted.managedObjectContext == nil)
        #expect(inserted.string("name") == "C", "a rolled-back new object keeps the values it was given")
        #expect(try context.objects("Department").count == 1)

        // refresh(mergeChanges: false) picks up another context's save and drops local edits.
        let other = stack.context()
        let otherD = try #require(try other.objects("Department").first)
        otherD.setValue("Z", forKey: "name")
        try other.save()
        d.setValue("local", forKey: "name")
        context.refresh(d, mergeChanges: false)
        #expect(d.string("name") == "Z")
        #expect(!context.hasChanges)

        context.reset()
        #expect(context.registeredObjects.isEmpty)
        #expect(d.managedObjectContext == nil)
        #expect(try context.objects("Department").first?.string("name") == "Z")
    }

    /// An object deleted and saved reads its attributes' last values and relates to nothing (a view may still show
    /// the object it just deleted); its row's last related IDs stay known to the package.
    @Test func anObjectDeletedAndSavedRelatesToNothing() throws {
        let stack = try TestStack(model: try makeCompanyModel(), inMemory: true)
        let context = stack.context()
        let d = try context.make("Department", ["name": "A"])
        let e = try context.make("Employee", ["name": "B"])
        e.setValue(d, forKey: "department")
        try context.save()
        #expect(e.value(forKey: "department") as? NSManagedObject === d)
        context.delete(e)
        try context.save()
        #expect(e.managedObjectContext == nil)
        #expect(e.string("name") == "B")
        #expect(e.value(forKey: "department") == nil)
        #expect((e.value(forKey: "projects") as? Set<NSManagedObject>)?.isEmpty == true)
        #expect(e.lastSavedRelatedIDs(forKey: "department") == [d.objectID])
    }

    @Test func relationshipsAcrossContextsAreRefused() throws {
        let stack = try TestStack(model: try makeCompanyModel(), inMemory: true)
        let a = stack.context(), b = stack.context()
        let d = try a.make("Department", ["name": "A"])
        let e = try b.make("Employee", ["name": "B"])
        let error = #expect(throws: CoreDataError.self) { try e.setCheckedValue(d, forKey: "department") }
        #expect(error?.code == .managedObjectExternalRelationship)
    }

    @Test func optimisticLockingConflictFailsTheSaveUnderTheDefaultPolicy() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let first = stack.context()
        let d = try first.make("Department", ["name": "v1"])
        try first.save()
        let second = stack.context()
        let d2 = try #require(try second.objects("Department").first)
        d2.setValue("second", forKey: "name")
        try second.save()
        d.setValue("first", forKey: "name")
        let error = #expect(throws: CoreDataError.self) { try first.save() }
        #expect(error?.code == .managedObjectMerge)
        #expect(try stack.context().objects("Department").first?.string("name") == "second")
        first.mergePolicy = NSMergeByPropertyObjectTrumpMergePolicy
        try first.save()
        #expect(try stack.context().objects("Department").first?.string("name") == "first")
    }
}

/// Typed subclasses, next to key-value access on the same model.
final class Team: NSManagedObject {
    @Managed var name: String?
    @Managed var size: Int16
    @Managed var founded: Date?
    @Managed var score: Double
    @Managed var open: Bool
    @Managed("motto") var slogan: String?
    @Managed var players: Set<Player>
}

final class Player: NSManagedObject {
    @Managed var name: String?
    @Managed var team: Team?
}

/// Two properties declared on one line, and a subclass adding one: each `@Managed` property finds its own key.
class Pair: NSManagedObject {
    // swift-format-ignore
    @Managed var left: Int32;    @Managed var right: Int32
}

final class LabelledPair: Pair {
    @Managed var label: String?
}

/// Swift types that differ from their attributes' types: the typed setter's direct path must convert them as
/// `setValue(_:forKey:)` does.
final class Gauge: NSManagedObject {
    @Managed var flag: Int  // a boolean attribute
    @Managed var count: Bool  // an integer 32 attribute
    @Managed var ratio: Float  // a double attribute
    @Managed var small: Int  // an integer 16 attribute
    @Managed var note: String?

    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Gauge", managedObjectClass: Gauge.self) {
                Attribute("flag", .boolean)
                Attribute("count", .integer32)
                Attribute("ratio", .double)
                Attribute("small", .integer16)
                Attribute("note", .string)
            }
        }
    }
}

/// A class two entities share.
final class SharedLabel: NSManagedObject {
    @Managed var label: String?
}

/// A generic subclass: each specialization has its own storage key paths.
final class Box<Tag>: NSManagedObject {
    @Managed var label: String?
}

@Suite struct TypedSubclassTests {
    @Test func typedSettersConvertAndCheckValuesAsSetValueDoes() throws {
        let context = try TestStack(model: try Gauge.model()).context()
        let typed = Gauge(context: context)
        (typed.flag, typed.count, typed.ratio, typed.small, typed.note) = (1, true, 0.1, -300, "n")
        let keyed = try context.make("Gauge", ["flag": 1, "count": true, "ratio": Float(0.1), "small": -300, "note": "n"])
        for key in ["flag", "count", "ratio", "small", "note"] {
            let a = typed.value(forKey: key) as? NSObject
            let b = keyed.value(forKey: key) as? NSObject
            #expect(a == b, "\(key): typed \(String(describing: a)), setValue \(String(describing: b))")
        }
        #expect(typed.value(forKey: "flag") as? Bool == true)
        #expect(typed.value(forKey: "ratio") as? Double == Double(Float(0.1)))
        typed.note = nil
        #expect(typed.value(forKey: "note") == nil)
        #expect(typed.changedValues()["note"] is NSNull)
    }

    /// A typed accessor cannot throw: a value its attribute cannot hold stops the process, as documented on `@Managed`,
    /// rather than being stored (the direct path still checks the attribute's range).
    @Test func aTypedValueOutOfItsAttributesRangeStops() async {
        await #expect(processExitsWith: .failure) {
            let stack = try TestStack(model: try Gauge.model(), inMemory: true)
            let gauge = Gauge(context: stack.context())
            gauge.small = 70_000
        }
    }

    @Test func anOptionalRelationshipSetToNilThroughATypedPropertyClearsBothSides() throws {
        let context = try TestStack(model: try model()).context()
        let team = Team(context: context)
        let player = Player(context: context)
        player.team = team
        #expect(team.players == [player])
        player.team = nil
        #expect(player.team == nil)
        #expect(team.players.isEmpty)
    }

    /// One class for two entities whose property lists differ: a typed property lands on its own key in each,
    /// whichever entity the previous object had.
    @Test func aClassSharedByTwoEntitiesSetsEachEntitysOwnProperty() throws {
        let model = try NSManagedObjectModel {
            Entity("Plain", managedObjectClass: SharedLabel.self) { Attribute("label", .string) }
            Entity("Wide", managedObjectClass: SharedLabel.self) {
                Attribute("extra", .string)
                Attribute("label", .string)
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        for i in 0..<4 {
            let plain = SharedLabel(entity: try context.entity(named: "Plain"), insertInto: context)
            let wide = SharedLabel(entity: try context.entity(named: "Wide"), insertInto: context)
            plain.label = "plain \(i)"
            wide.label = "wide \(i)"
            #expect(plain.value(forKey: "label") as? String == "plain \(i)")
            #expect(wide.value(forKey: "label") as? String == "wide \(i)")
            #expect(wide.value(forKey: "extra") == nil, "the wide entity's first property is untouched")
        }
    }

    @Test func specializationsOfAGenericSubclassEachFindTheirKey() throws {
        let model = try NSManagedObjectModel {
            Entity("IntBox", managedObjectClass: Box<Int>.self) { Attribute("label", .string) }
            Entity("TextBox", managedObjectClass: Box<String>.self) { Attribute("label", .string) }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        for i in 0..<50 {
            let a = Box<Int>(entity: try context.entity(named: "IntBox"), insertInto: context)
            let b = Box<String>(entity: try context.entity(named: "TextBox"), insertInto: context)
            a.label = "int \(i)"
            b.label = "text \(i)"
            #expect(a.value(forKey: "label") as? String == "int \(i)")
            #expect(b.label == "text \(i)")
        }
        try context.save()
        #expect(try context.objects("TextBox").count == 50)
    }

    @Test func propertiesDeclaredOnOneLineAndInSubclassesFindTheirKeys() throws {
        let model = try NSManagedObjectModel {
            Entity("Pair", managedObjectClass: LabelledPair.self) {
                Attribute("left", .integer32, default: 0)
                Attribute("right", .integer32, default: 0)
                Attribute("label", .string)
            }
        }
        let context = try TestStack(model: model).context()
        for i in 0..<3 {
            let pair = LabelledPair(context: context)
            (pair.left, pair.right, pair.label) = (Int32(i), Int32(10 + i), "p\(i)")
            #expect(pair.value(forKey: "left") as? Int32 == Int32(i))
            #expect(pair.value(forKey: "right") as? Int32 == Int32(10 + i))
            #expect(pair.value(forKey: "label") as? String == "p\(i)")
            #expect((pair.left, pair.right, pair.label) == (Int32(i), Int32(10 + i), "p\(i)"))
        }
    }

    func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Team", managedObjectClass: Team.self) {
                Attribute("name", .string)
                Attribute("size", .integer16, default: 11)
                Attribute("founded", .date)
                Attribute("score", .double)
                Attribute("open", .boolean)
                Attribute("motto", .string)
                Relationship("players", to: "Player", toMany: true, inverse: "team")
            }
            Entity("Player", managedObjectClass: Player.self) {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "players")
            }
            Entity("Referee") { Attribute("name", .string) }
        }
    }

    @Test func typedPropertiesReadAndWriteManagedValues() throws {
        let stack = try TestStack(model: try model())
        let context = stack.context()
        let team = Team(context: context)
        #expect(team.size == 11, "default value through a typed property")
        team.name = "Lions"
        team.slogan = "Roar"
        team.open = true
        team.score = 2.5
        let player = Player(context: context)
        player.name = "Zed"
        player.team = team
        #expect(team.players == [player])
        // The untyped API sees the same values; a plain entity lives in the same model.
        #expect(team.value(forKey: "motto") as? String == "Roar")
        let referee = try context.make("Referee", ["name": "Ref"])
        #expect(type(of: referee) == NSManagedObject.self)
        try context.save()

        let fresh = stack.context()
        let teams = try fresh.fetch(Team.fetchRequest())
        let loaded = try #require(teams.first)
        #expect(loaded.name == "Lions" && loaded.slogan == "Roar" && loaded.open && loaded.score == 2.5)
        #expect(loaded.players.map(\.name) == ["Zed"])
        let players = try fresh.fetch(NSFetchRequest<Player>(entityName: "Player"))
        #expect(players.first?.team === loaded)
    }

    @Test func aRequestTypedForTheWrongClassThrows() throws {
        let stack = try TestStack(model: try model(), inMemory: true)
        let context = stack.context()
        _ = Team(context: context)
        let wrong = NSFetchRequest<Player>(entityName: "Team")
        let error = #expect(throws: CoreDataError.self) { _ = try context.fetch(wrong) }
        #expect(error?.code == .invalidFetchRequest)
    }
}

@Suite struct PortingConvenienceTests {
    @Test func entityLookupAndInsertNewObjectAsInSeedCode() throws {
        let stack = try TestStack(model: try TypedSubclassTests().model(), inMemory: true)
        let context = stack.context()
        #expect(NSEntityDescription.entity(forEntityName: "Team", in: context)?.name == "Team")
        #expect(NSEntityDescription.entity(forEntityName: "Nope", in: context) == nil)
        let team = NSEntityDescription.insertNewObject(forEntityName: "Team", into: context)
        #expect(team is Team, "the entity's class is used")
        #expect(team.isInserted)
        #expect(context.registeredObject(for: team.objectID) === team)
        #expect(throws: CoreDataError.self) { _ = try NSEntityDescription.checkedInsertNewObject(forEntityName: "Nope", into: context) }
    }
}

/// `mutableSetValue(forKey:)`: a live view of an unordered to-many whose changes set the relationship and its inverses.
@Suite struct MutableSetTests {
    @Test func changesThroughTheViewSetTheRelationshipAndItsInverses() throws {
        let stack = try TestStack(
            model: try NSManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("members", to: "Person", toMany: true, inverse: "teams")
                }
                Entity("Person") {
                    Attribute("name", .string)
                    Relationship("teams", to: "Team", toMany: true, inverse: "members")
                }
            })
        let context = stack.context()
        try context.performAndWait {
            let team = try context.make("Team", ["name": "red"])
            let (ada, bob, cy) = (
                try context.make("Person", ["name": "ada"]), try context.make("Person", ["name": "bob"]),
                try context.make("Person", ["name": "cy"])
            )
            let members = team.mutableSetValue(forKey: "members")
            members.add(ada)
            members.addObjects(from: [bob, cy])
            #expect(members.count == 3 && members.contains(bob))
            #expect((bob.value(forKey: "teams") as? Set<NSManagedObject>) == [team], "the inverse follows")
            members.remove(bob)
            #expect((bob.value(forKey: "teams") as? Set<NSManagedObject>)?.isEmpty == true)
            members.intersect([ada, bob])
            #expect(Set(members.compactMap { $0.string("name") }) == ["ada"])
            try context.save()
            // A view taken earlier reads the relationship as it is now.
            team.setValue(Set([cy]), forKey: "members")
            #expect(members.allObjects == [cy])
            members.removeAllObjects()
            #expect(team.hasChanges && (cy.value(forKey: "teams") as? Set<NSManagedObject>)?.isEmpty == true)
            try context.save()
        }
        let fresh = stack.context()
        #expect(try fresh.performAndWait { try fresh.objects("Team")[0].mutableSetValue(forKey: "members").count } == 0)
    }
}
