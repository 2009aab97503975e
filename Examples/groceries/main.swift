// The grocery list from the NSFetchRequest / NSFetchedResultsController article the project grew from:
// a Products entity (name, price), a FavoriteProducts entity that inherits from it, thirty items in SQLite,
// and one block of output per fetch the article shows. With options (--web [--port N], --terminal, --script FILE,
// --store PATH) it shows the sectioned list as a live table instead.

import Foundation
import OpenCoreData
import SeedApps

class Products: NSManagedObject {
    @Managed var name: String?
    @Managed var price: Int32
}

final class FavoriteProducts: Products {}

/// The thirty items, in the order the article lists them.
let groceries = GroceryList.products.map { ($0.name, Int32($0.price)) }

func makeModel() throws -> NSManagedObjectModel {
    try GroceryList.model(classes: ["Products": Products.self, "FavoriteProducts": FavoriteProducts.self])
}

func block(_ title: String, _ lines: [String]) {
    print("== \(title) (\(lines.count))")
    for line in lines { print(line) }
    print()
}

/// Prints every delegate call, one line each, as a table view would receive them.
final class PrintingDelegate: NSFetchedResultsControllerDelegate {
    func describe(_ object: Any) -> String {
        guard let product = object as? Products else { return "\(object)" }
        return "\(product.name ?? "nil"), \(product.price)"
    }

    func path(_ indexPath: IndexPath?) -> String {
        indexPath.map { "[\($0.section), \($0.row)]" } ?? "nil"
    }

    func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        print("will change content")
    }

    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange sectionInfo: any NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType
    ) {
        print("section \(type) at \(sectionIndex): \(sectionInfo.name)")
    }

    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?
    ) {
        switch type {
        case .insert: print("object insert at \(path(newIndexPath)): \(describe(anObject))")
        case .delete: print("object delete at \(path(indexPath)): \(describe(anObject))")
        case .move: print("object move at \(path(indexPath)) to \(path(newIndexPath)): \(describe(anObject))")
        case .update: print("object update at \(path(indexPath)): \(describe(anObject))")
        }
    }

    func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        print("did change content")
    }
}

func rows(_ products: [Products]) -> [String] {
    products.map { "NAME: \($0.name ?? "nil"), PRICE: \($0.price)" }
}

func run() throws {
    let container = NSPersistentContainer(name: "Groceries", managedObjectModel: try makeModel())
    let storeURL = NSPersistentContainer.defaultDirectoryURL().appendingPathComponent("Groceries.sqlite")
    // Every run starts from a fresh store, so two runs print the same.
    for suffix in ["", "-wal", "-shm"] {
        try? FileManager.default.removeItem(atPath: storeURL.path + suffix)
    }
    container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: storeURL)]
    try container.loadPersistentStores()
    let context = container.viewContext

    for (name, price) in groceries {
        let product = Products(context: context)
        product.name = name
        product.price = price
    }
    try context.save()
    print("Saved \(groceries.count) products to \(storeURL.lastPathComponent)\n")

    let request = Products.fetchRequest()
    block("All products, in the order they were stored", rows(try context.fetch(request)))

    request.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: true), FetchSortDescriptor(key: "price", ascending: true)]
    block("Sorted by name, then price", rows(try context.fetch(request)))

    let exact = Products.fetchRequest()
    exact.predicate = try FetchPredicate(format: "name == %@", "Cheddar Cheese")
    block("name == \"Cheddar Cheese\"", rows(try context.fetch(exact)))

    let cheese = Products.fetchRequest()
    cheese.predicate = try FetchPredicate(format: "name CONTAINS[cd] %@ AND price < %d", "cheese", 500)
    cheese.sortDescriptors = request.sortDescriptors
    block("name CONTAINS[cd] \"cheese\" AND price < 500, sorted by name, price", rows(try context.fetch(cheese)))

    let cheapest = Products.fetchRequest()
    cheapest.sortDescriptors = [FetchSortDescriptor(key: "price", ascending: true)]
    cheapest.fetchLimit = 12
    block("The 12 cheapest (fetchLimit 12, sorted by price)", rows(try context.fetch(cheapest)))

    cheapest.fetchOffset = 2
    block("The same with fetchOffset 2", rows(try context.fetch(cheapest)))

    let names = NSFetchRequest<NSDictionary>(entityName: "Products")
    names.resultType = .dictionaryResultType
    names.propertiesToFetch = ["name"]
    block("Dictionaries with propertiesToFetch [\"name\"]", try context.fetch(names).map { "name: \($0["name"] ?? "nil")" })

    let apple = FavoriteProducts(context: context)
    apple.name = "Apple"
    apple.price = 999
    try context.save()

    block(
        "After adding FavoriteProducts \"Apple\" 999: sorted by name, price, includesSubentities = true", rows(try context.fetch(request)))
    request.includesSubentities = false
    block("The same with includesSubentities = false", rows(try context.fetch(request)))

    // The fetched results controller: sectioned by name, sorted by name then price.
    let sectioned = Products.fetchRequest()
    sectioned.sortDescriptors = [FetchSortDescriptor(key: "name"), FetchSortDescriptor(key: "price")]
    let controller = NSFetchedResultsController(
        fetchRequest: sectioned, managedObjectContext: context, sectionNameKeyPath: "name", cacheName: nil)
    let delegate = PrintingDelegate()
    controller.delegate = delegate
    try controller.performFetch()
    let sections = (controller.sections ?? []).map { "\($0.name) (\($0.indexTitle ?? "-")): \($0.numberOfObjects)" }
    block("NSFetchedResultsController sections, by name", sections)

    print("== Inserting \"Banana\" 1 and \"Cheddar Cheese\" 1: the delegate calls")
    for name in ["Banana", "Cheddar Cheese"] {
        let product = Products(context: context)
        product.name = name
        product.price = 1
    }
    context.processPendingChanges()
    try context.save()
    _ = delegate
}

let arguments = Array(CommandLine.arguments.dropFirst())
if !arguments.isEmpty {
    exit(
        SeedSession.main(
            GroceryList.self, arguments, output: { print($0) }, errors: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }))
}
do {
    try run()
} catch {
    print("groceries failed: \(error)")
    exit(1)
}
