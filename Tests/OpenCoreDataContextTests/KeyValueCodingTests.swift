import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Apple's key-value coding signatures: `value(forKey:)`, `setValue(_:forKey:)`, `value(forKeyPath:)` and
/// `insertNewObject(forEntityName:into:)` do not throw.
///
/// An unknown key or entity stops the program (a programming
/// error, as on Apple platforms); a value of the wrong type is a validation error of the next save; the checked
/// variants throw for input that comes from outside.
@Suite struct KeyValueCodingTests {
    @Test func aValueOfTheWrongTypeIsAValidationErrorOfTheSave() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.performAndWait {
            let ada = NSEntityDescription.insertNewObject(forEntityName: "Employee", into: context)
            ada.setValue("Ada", forKey: "name")
            ada.setValue(36, forKey: "age")
            try context.save()
            #expect(!context.hasChanges)

            ada.setValue("thirty-six", forKey: "age")  // not an integer
            #expect(ada.value(forKey: "age") as? Int == 36, "the object keeps the value it had")
            #expect(context.hasChanges, "a rejected value is a pending change: the save must report it")
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .managedObjectValidation)
            #expect(error?.code.rawValue == 1550)
            #expect(error?.entityName == "Employee" && error?.key == "age", "\(String(describing: error))")
            #expect(
                error?.message.contains("Integer 16") == true && error?.message.contains("thirty-six") == true,
                "\(String(describing: error))")
            #expect(error?.errorUserInfo["NSValidationErrorKey"] as? String == "age")
            #expect(error?.errorUserInfo["NSValidationErrorValue"] as? String == "thirty-six")
            // It keeps failing until the property gets a value it can hold…
            #expect(throws: CoreDataError.self) { try context.save() }
            ada.setValue(37, forKey: "age")
            try context.save()
            #expect(ada.value(forKey: "age") as? Int == 37)

            // …or the context rolls back.
            ada.setValue(Date(), forKey: "name")
            ada.setValue("not a department", forKey: "department")
            let both = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(
                both?.code == .validationMultipleErrors && both?.underlying.map(\.key) == ["name", "department"],
                "\(String(describing: both))")
            context.rollback()
            #expect(!context.hasChanges)
            try context.save()
        }
    }

    @Test func aPrimitiveSetIsSavedButLeavesTheInverseAlone() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.performAndWait {
            let rd = NSEntityDescription.insertNewObject(forEntityName: "Department", into: context)
            rd.setValue("R&D", forKey: "name")
            try context.save()
            let ada = NSEntityDescription.insertNewObject(forEntityName: "Employee", into: context)
            ada.setPrimitiveValue("Ada", forKey: "name")
            ada.setPrimitiveValue(rd, forKey: "department")
            #expect(ada.primitiveValue(forKey: "name") as? String == "Ada")
            #expect((ada.value(forKey: "department") as? NSManagedObject) === rd)
            #expect((rd.value(forKey: "employees") as? Set<NSManagedObject>)?.isEmpty == true, "the inverse is not kept in step")
            #expect(!rd.hasChanges, "the department was not touched")
            try context.save()
            context.reset()
            let stored = try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Department"))
            let employees = try #require(stored.first?.value(forKey: "employees") as? Set<NSManagedObject>)
            #expect(employees.map { $0.value(forKey: "name") as? String } == ["Ada"], "the store keeps the relationship")

            // A value the property cannot hold: reported by the next save, as for setValue, or at once by the checked form.
            let bob = NSEntityDescription.insertNewObject(forEntityName: "Employee", into: context)
            bob.setValue("Bob", forKey: "name")
            let colleague = try #require(employees.first)
            #expect(throws: CoreDataError.self) { try bob.setCheckedPrimitiveValue(colleague, forKey: "department") }
            bob.setPrimitiveValue(colleague, forKey: "department")
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.key == "department", "\(String(describing: error))")
        }
    }

    @Test func nanIsRefusedEverywhereASQLiteStoreCouldNotKeepIt() throws {
        // SQLite stores NaN as NULL: an object holding NaN would read back nil, and SQL and memory would disagree on
        // `salary > 0` (the fuzzer found it). NaN is refused like any value an attribute cannot hold.
        let model = try NSManagedObjectModel {
            Entity("Reading", managedObjectClass: Reading.self) {
                Attribute("value", .double, default: 0.0)
                Attribute("ratio", .float, default: 0.0)
                Attribute("exact", .decimal)
            }
        }
        let stack = try TestStack(model: model, inMemory: true)
        let context = stack.context()
        try context.performAndWait { () throws in
            let reading = Reading(context: context)
            let error = #expect(throws: CoreDataError.self) { try reading.setCheckedValue(Double.nan, forKey: "value") }
            #expect(error?.message.contains("'Reading.value' cannot hold NaN") == true, "\(String(describing: error))")
            #expect(throws: CoreDataError.self) { try reading.setCheckedValue(Float.nan, forKey: "ratio") }
            #expect(throws: CoreDataError.self) { try reading.setCheckedValue(Double.nan, forKey: "exact") }
            #expect(throws: CoreDataError.self) { try reading.setCheckedValue(Double.infinity, forKey: "exact") }
            try reading.setCheckedValue(Double.infinity, forKey: "value")  // a REAL column holds infinity
            try context.save()
            // The non-throwing setters, key-value and typed, keep the old value and fail the save.
            reading.setValue(Double.nan, forKey: "value")
            reading.value = .nan
            #expect(reading.value == .infinity)
            let save = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(save?.code == .managedObjectValidation && save?.key == "value", "\(String(describing: save))")
            reading.value = 2.5
            try context.save()
        }
    }

    /// A decimal attribute set to an `NSDecimalNumber` (how Apple's code sets one) keeps its digits — it was read as
    /// a `Double` first, so 19.99 came back 19.990000000000002 — and reads back as an `NSDecimalNumber`, as on Apple's
    /// platforms, which `as? Decimal`, `as? NSDecimalNumber` and `as? Double` all take.
    @Test func decimalsKeepTheirDigitsAndReadAsNSDecimalNumber() throws {
        let model = try NSManagedObjectModel {
            Entity("Price") { Attribute("amount", .decimal) }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            for text in ["19.99", "0.1", "123456789.12345", "-7", "2.5"] {
                let price = NSEntityDescription.insertNewObject(forEntityName: "Price", into: context)
                price.setValue(NSDecimalNumber(string: text), forKey: "amount")
                let read = price.value(forKey: "amount")
                #expect(read is NSDecimalNumber, "\(text): \(String(describing: read))")
                #expect((read as? Decimal) == Decimal(string: text), "\(text): \(String(describing: read))")
                #expect((read as? NSDecimalNumber)?.stringValue == text)
                if text == "2.5" { #expect((read as? Double) == 2.5) }
            }
            try context.save()
        }
        let other = stack.context()
        try other.performAndWait {
            let request = NSFetchRequest<NSManagedObject>(entityName: "Price")
            request.predicate = try FetchPredicate(format: "amount == %@", NSDecimalNumber(string: "19.99"))
            let found = try other.fetch(request)
            #expect(found.count == 1)
            #expect((found.first?.value(forKey: "amount") as? NSDecimalNumber)?.stringValue == "19.99")
        }
    }

    /// Key-value coding's object operators after a to-many relationship, as Apple's code reads them
    /// (`lines.@distinctUnionOfObjects.sku`): they stopped the program as unknown collection operators.
    @Test func objectOperatorsCollectTheValuesOfAToMany() throws {
        let model = try NSManagedObjectModel {
            Entity("Customer") { Relationship("orders", to: "Order", toMany: true, inverse: "customer") }
            Entity("Order") {
                Attribute("note", .string)
                Relationship("lines", to: "Line", toMany: true, inverse: "order")
                Relationship("customer", to: "Customer", inverse: "orders")
            }
            Entity("Line") {
                Attribute("sku", .string)
                Relationship("order", to: "Order", inverse: "lines")
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            let customer = NSEntityDescription.insertNewObject(forEntityName: "Customer", into: context)
            let orders = (0..<2).map { _ in NSEntityDescription.insertNewObject(forEntityName: "Order", into: context) }
            for order in orders { order.setValue(customer, forKey: "customer") }
            orders[0].setValue("rush", forKey: "note")
            var lines: [NSManagedObject] = []
            for (index, sku) in ["a", "b", "a", nil, "c"].enumerated() {
                let line = NSEntityDescription.insertNewObject(forEntityName: "Line", into: context)
                line.setValue(sku, forKey: "sku")
                line.setValue(orders[index < 4 ? 0 : 1], forKey: "order")
                lines.append(line)
            }
            try context.save()
            let all = orders[0].value(forKeyPath: "lines.@unionOfObjects.sku") as? [String]
            #expect(all?.sorted() == ["a", "a", "b"], "nil values are left out: \(String(describing: all))")
            let distinct = orders[0].value(forKeyPath: "lines.@distinctUnionOfObjects.sku") as? [String]
            #expect(distinct?.sorted() == ["a", "b"])
            #expect(customer.value(forKeyPath: "orders.@distinctUnionOfObjects.note") as? [String] == ["rush"])
            let skus = customer.value(forKeyPath: "orders.@distinctUnionOfArrays.lines.sku") as? [String]
            #expect(skus?.sorted() == ["a", "b", "c"])
            let flattened = customer.value(forKeyPath: "orders.@unionOfSets.lines") as? Set<NSManagedObject>
            #expect(flattened == Set(lines))
            for (bad, expected) in [
                ("lines.@unionOfObjects", "needs a key path after it"), ("note.@unionOfObjects.sku", "is not one"),
                ("lines.@unionOfObjects.nope", "no property 'nope'"),
            ] {
                let error = #expect(throws: CoreDataError.self) { try orders[0].checkedValue(forKeyPath: bad) }
                #expect(error?.code == .unknownKey && error?.message.contains(expected) == true, "\(String(describing: error))")
            }
        }
    }

    @Test func checkedVariantsThrowForInputFromOutside() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.performAndWait {
            let ada = try NSEntityDescription.checkedInsertNewObject(forEntityName: "Employee", into: context)
            try ada.setCheckedValue("Ada", forKey: "name")
            #expect(try ada.checkedValue(forKey: "name") as? String == "Ada")
            let unknown = #expect(throws: CoreDataError.self) { try ada.checkedValue(forKey: "salry") }
            #expect(unknown?.code == .unknownKey && unknown?.message == "Entity 'Employee' has no property 'salry'.")
            let wrong = #expect(throws: CoreDataError.self) { try ada.setCheckedValue("old", forKey: "age") }
            #expect(wrong?.code == .wrongValueType)
            let path = #expect(throws: CoreDataError.self) { try ada.checkedValue(forKeyPath: "department.nope") }
            #expect(path?.message.contains("'nope'") == true)
            let entity = #expect(throws: CoreDataError.self) {
                try NSEntityDescription.checkedInsertNewObject(forEntityName: "Nope", into: context)
            }
            #expect(entity?.code == .unknownEntity)
            try context.save()  // a set that threw left nothing behind to fail the save
            #expect(ada.value(forKey: "age") as? Int == 0)
        }
    }

    @Test func aComputedKeyIsReadByBothVariantsAndAnUnknownOneOnlyThrowsInTheChecked() throws {
        let model = try NSManagedObjectModel {
            Entity("Person", managedObjectClass: InitialedPerson.self) { Attribute("name", .string) }
        }
        let stack = try TestStack(model: model, inMemory: true)
        let context = stack.context()
        try context.performAndWait { () throws in
            let contact = InitialedPerson(context: context)
            contact.name = "zoë"
            #expect(contact.value(forKey: "initial") as? String == "Z")
            #expect(try contact.checkedValue(forKey: "initial") as? String == "Z")
            #expect(contact.value(forKeyPath: "initial") as? String == "Z")
            // The subclass hands other keys to super, whose default throws under the checked variant.
            #expect(throws: CoreDataError.self) { try contact.checkedValue(forKey: "nickname") }
        }
    }

    @Test func aFaultWhoseRowWasDeletedReadsNil() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let writer = stack.context()
        let id = try writer.performAndWait {
            let d = try writer.make("Department", ["name": "Gone"])
            try writer.save()
            return d.objectID
        }
        let reader = stack.context()
        let fault = reader.performAndWait { reader.object(with: id) }
        try writer.performAndWait {
            writer.delete(try writer.existingObject(with: id))
            try writer.save()
        }
        reader.performAndWait {
            #expect(fault.value(forKey: "name") == nil)
            #expect(throws: CoreDataError.self) { try fault.checkedValue(forKey: "name") }
        }
    }

    @Test func valueForKeyReadsEachKindOfPropertyOfAFault() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let url = URL(string: "https://example.com/ada")!
        try context.performAndWait {
            let department = try context.make("Department", ["name": "Research", "budget": Decimal(string: "12.5")!])
            let ada = try context.make("Employee", ["name": "Ada", "age": 36, "homepage": url, "department": department])
            ada.setValue("Countess", forKey: "nickname")
            try context.save()
            let other = stack.context()
            let fault = other.object(with: ada.objectID)
            #expect(fault.isFault)
            // Attributes of each kind: a scalar, a string, a URI, a default, a transient (nil in a fresh fault).
            #expect(fault.value(forKey: "age") as? Int16 == 36)
            #expect(fault.value(forKey: "name") as? String == "Ada")
            #expect(fault.value(forKey: "homepage") as? URL == url)
            #expect(fault.value(forKey: "level") as? Int32 == 1)
            #expect(fault.value(forKey: "nickname") == nil)
            // Relationships: a to-one is the object, a to-many a set.
            let loaded = fault.value(forKey: "department") as? NSManagedObject
            #expect(loaded?.objectID == department.objectID)
            #expect((loaded?.value(forKey: "employees") as? Set<NSManagedObject>)?.map(\.objectID) == [ada.objectID])
            #expect(loaded?.value(forKey: "budget") as? Decimal == Decimal(string: "12.5"))
        }
    }

    @Test func settingAPropertyBackToItsCommittedValueLeavesNoChange() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.performAndWait {
            let research = try context.make("Department", ["name": "Research"])
            let sales = try context.make("Department", ["name": "Sales"])
            let ada = try context.make("Employee", ["name": "Ada", "salary": 10.0, "department": research])
            try context.save()
            // From a fault in another context: the committed values come from the row read on the first set.
            let other = stack.context()
            let fault = other.object(with: ada.objectID)
            fault.setValue(11.0, forKey: "salary")
            fault.setValue(other.object(with: sales.objectID), forKey: "department")
            #expect(Set(fault.changedValues().keys) == ["salary", "department"])
            fault.setValue(10.0, forKey: "salary")
            #expect(Set(fault.changedValues().keys) == ["department"], "an attribute set back is no change")
            fault.setValue(other.object(with: research.objectID), forKey: "department")
            #expect(fault.changedValues().isEmpty, "a to-one set back is no change")
            #expect(!fault.isUpdated && !other.updatedObjects.contains(fault))
        }
    }

    @Test func anUnknownKeyStopsTheProgramNamingEntityAndKey() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let container = try itemContainer()
            let item = NSEntityDescription.insertNewObject(forEntityName: "Item", into: container.viewContext)
            _ = item.value(forKey: "nmae")
        }
        let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(stderr.contains("Entity 'Item' has no property 'nmae'."), "\(stderr)")
        await #expect(processExitsWith: .failure) {
            let container = try itemContainer()
            _ = NSEntityDescription.insertNewObject(forEntityName: "Itme", into: container.viewContext)
        }
    }
}

/// A subclass with a computed key, as Core Data apps section by a first letter.
final class InitialedPerson: NSManagedObject {
    @Managed var name: String?

    override func value(forUndefinedKey key: String) -> Any? {
        guard key == "initial" else { return super.value(forUndefinedKey: key) }
        return name.map { String($0.prefix(1)).uppercased() }
    }
}

/// A container with an in-memory store whose model has one entity, Item (exit tests run in a child process and
/// capture nothing, so they make their own).
func itemContainer() throws -> NSPersistentContainer {
    let model = try NSManagedObjectModel { Entity("Item") { Attribute("name", .string) } }
    let container = NSPersistentContainer(name: "Exit", managedObjectModel: model)
    let description = NSPersistentStoreDescription(url: URL(fileURLWithPath: "/dev/null"))
    description.type = NSInMemoryStoreType
    container.persistentStoreDescriptions = [description]
    try container.loadPersistentStores()
    return container
}

/// A typed subclass with floating-point attributes.
final class Reading: NSManagedObject {
    @Managed var value: Double
}
