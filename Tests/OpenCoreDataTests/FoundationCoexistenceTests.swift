// Imports Foundation and OpenCoreData together: none of OpenCoreData's names may clash with Foundation's.
import Foundation
import OpenCoreData
import Testing
import _TestSupport

@Suite struct FoundationCoexistenceTests {
    @Test func foundationTypesAndOursLiveSideBySide() throws {
        // Foundation's own predicate and sort descriptor still mean Foundation's.
        let foundationPredicate = NSPredicate { object, _ in (object as? String) == "x" }
        #expect(foundationPredicate.evaluate(with: "x"))
        let foundationSort = NSSortDescriptor(keyPath: \NSString.length, ascending: false)
        #expect(!foundationSort.ascending)
        // Ours have their own names.
        let ours = try FetchPredicate(format: "name == %@", "x")
        let sort = FetchSortDescriptor(key: "name")
        #expect(ours.predicateFormat == "name == \"x\"")
        #expect(sort.ascending)
        // Core Data's names resolve to OpenCoreData's types.
        let request = NSFetchRequest<NSManagedObject>(entityName: "Products")
        #expect(request.entityName == "Products")
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        #expect(context.concurrencyType == .privateQueueConcurrencyType)
        #expect(NSAttributeType.integer32AttributeType.rawValue == 200)
        #expect(NSDeleteRule.cascadeDeleteRule.rawValue == 2)
    }

    /// The README's quick start, verbatim between the markers: if this stops compiling, so does the README.
    @Test func readmeQuickStart() throws {
        let directory = TemporaryDirectory()
        let storeURL = directory.file("Groceries.sqlite")
        // README quick start: begin
        let model = try NSManagedObjectModel {
            Entity("Product") {
                Attribute("name", .string, optional: false)
                Attribute("price", .integer32, default: 0)
            }
        }
        let container = NSPersistentContainer(name: "Groceries", managedObjectModel: model)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: storeURL)]
        try container.loadPersistentStores()
        let context = container.viewContext

        let banana = NSManagedObject(entity: try context.entity(named: "Product"), insertInto: context)
        banana.setValue("Banana", forKey: "name")
        banana.setValue(185, forKey: "price")
        try context.save()

        let request = NSFetchRequest<NSManagedObject>(entityName: "Product")
        request.predicate = try FetchPredicate(format: "name CONTAINS[cd] %@ AND price < %d", "banana", 500)
        request.sortDescriptors = [FetchSortDescriptor(key: "price", ascending: true)]
        for product in try context.fetch(request) {
            print(product.value(forKey: "name") ?? "", product.value(forKey: "price") ?? "")
        }
        // README quick start: end
        #expect(try context.count(for: request) == 1)
    }
}
