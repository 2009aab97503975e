// Seed 002 ("How NSFetchRequest, NSFetchedResultsController work in Core Data"), its Swift in today's syntax for
// Apple platforms: products fetched by predicate, sort, limit and dictionary results, and a sectioned controller.
// Changed for Linux: the import.
import OpenCoreDataCompatibility  // was: import CoreData (which, like this module, brings Foundation)

final class GroceriesStore {
    let context: NSManagedObjectContext

    init(context: NSManagedObjectContext) {
        self.context = context
    }

    func addProduct(name: String, price: Int) {
        let product = NSEntityDescription.insertNewObject(forEntityName: "Products", into: context)
        product.setValue(name, forKey: "name")
        product.setValue(price, forKey: "price")
    }

    func save() throws {
        if context.hasChanges { try context.save() }
    }

    /// All products by name, then price.
    func allProducts() throws -> [NSManagedObject] {
        let entityDescription = NSEntityDescription.entity(forEntityName: "Products", in: context)
        let request = NSFetchRequest<NSManagedObject>()
        request.entity = entityDescription
        let nameSortDescriptor = NSSortDescriptor(key: "name", ascending: true)
        let priceSortDescriptor = NSSortDescriptor(key: "price", ascending: true)
        request.sortDescriptors = [nameSortDescriptor, priceSortDescriptor]
        return try context.fetch(request)
    }

    func products(named name: String) throws -> [NSManagedObject] {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Products")
        request.predicate = NSPredicate(format: "name == %@", name)
        return try context.fetch(request)
    }

    func cheapProducts(containing text: String, under price: Int) throws -> [NSManagedObject] {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Products")
        request.predicate = NSPredicate(format: "name CONTAINS[cd] %@ AND price < %d", text, price)
        request.sortDescriptors = [NSSortDescriptor(key: "price", ascending: true)]
        return try context.fetch(request)
    }

    func cheapest(_ count: Int) throws -> [NSManagedObject] {
        let fetchRequest = NSFetchRequest<NSManagedObject>(entityName: "Products")
        let priceSortDescriptor = NSSortDescriptor(key: "price", ascending: true)
        fetchRequest.sortDescriptors = [priceSortDescriptor]
        fetchRequest.fetchLimit = count
        return try context.fetch(fetchRequest)
    }

    func productNames() throws -> [String] {
        let fetchRequest = NSFetchRequest<NSDictionary>(entityName: "Products")
        fetchRequest.resultType = .dictionaryResultType
        fetchRequest.propertiesToFetch = ["name"]
        fetchRequest.sortDescriptors = [NSSortDescriptor(key: "name", ascending: true)]
        return try context.fetch(fetchRequest).compactMap { $0["name"] as? String }
    }

    func count(where predicate: NSPredicate) throws -> Int {
        let request = NSFetchRequest<NSFetchRequestResult>(entityName: "Products")
        request.predicate = predicate
        return try context.count(for: request)
    }

    /// A compound filter built from parts, as a search screen does.
    func search(name: String?, maximumPrice: Int?) throws -> [NSManagedObject] {
        var subpredicates: [NSPredicate] = []
        if let name { subpredicates.append(NSPredicate(format: "name BEGINSWITH[c] %@", name)) }
        if let maximumPrice { subpredicates.append(NSPredicate(format: "price <= %d", maximumPrice)) }
        let request = NSFetchRequest<NSManagedObject>(entityName: "Products")
        request.predicate = NSCompoundPredicate(andPredicateWithSubpredicates: subpredicates)
        request.sortDescriptors = [NSSortDescriptor(key: "name", ascending: true), NSSortDescriptor(key: "price", ascending: true)]
        return try context.fetch(request)
    }

    /// The article's table: products sectioned by name.
    func makeController() -> NSFetchedResultsController<NSManagedObject> {
        let fetchRequest = NSFetchRequest<NSManagedObject>(entityName: "Products")
        fetchRequest.sortDescriptors = [NSSortDescriptor(key: "name", ascending: true), NSSortDescriptor(key: "price", ascending: true)]
        return NSFetchedResultsController(
            fetchRequest: fetchRequest, managedObjectContext: context, sectionNameKeyPath: "name", cacheName: nil)
    }
}
