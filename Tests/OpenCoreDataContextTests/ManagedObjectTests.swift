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
