import Foundation
import OpenCoreDataCompatibility
import Testing
import _TestSupport

/// Runs the seeds' Core Data code (the files under Seeds/, written against Apple's API and compiled here with only
/// the import changed) against real stores, and checks what their tables would show.
@Suite(.serialized) struct SeedAppTests {
    let folder = TemporaryDirectory()

    /// A container for one of the seed models (in Models/), its store in a temporary folder, loaded as an app does.
    func container(_ name: String, classes: [String: NSManagedObject.Type] = [:]) throws -> NSPersistentContainer {
        let url = try #require(Bundle.module.url(forResource: "Models/\(name)", withExtension: "xcdatamodeld"))
        let model = try #require(NSManagedObjectModel(contentsOf: url))
        for (entity, cls) in classes { model.entitiesByName[entity]?.managedObjectClass = cls }
        let container = NSPersistentContainer(name: name, managedObjectModel: model)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: folder.file("\(name).sqlite"))]
        var loadError: (any Error)?
        container.loadPersistentStores { _, error in loadError = error }
        if let loadError { throw loadError }
        return container
    }

    @Test func seed000TheReaderShowsTheImportAndMatchesItemsByGuid() throws {
        let container = try container("RSSReader", classes: ["FeedItem": FeedItem.self])
        container.viewContext.automaticallyMergesChangesFromParent = true
        let controller = RootViewController(managedObjectContext: container.viewContext)
        defer { NSFetchedResultsController<FeedItem>.deleteCache(withName: "Root") }
        controller.viewDidLoad()
        #expect(controller.numberOfSections() == 1 && controller.numberOfRows(inSection: 0) == 0)

        let day: TimeInterval = 86_400
        let items = (1...3).map { (guid: "g\($0)", title: "Item \($0)", date: Date(timeIntervalSince1970: Double($0) * day)) }
        let queue = OperationQueue()
        let first = ImportOperation(container: container, items: items)
        queue.addOperations([first], waitUntilFinished: true)
        #expect(first.error == nil)
        container.viewContext.performAndWait {}  // the merge is delivered on the main context's queue
        #expect(controller.tableView.calls == ["begin", "insert 0.0", "insert 0.1", "insert 0.2", "end"])
        #expect((0..<3).map { controller.cellText(at: IndexPath(row: $0, section: 0)) } == ["Item 3", "Item 2", "Item 1"])

        // The same feed again changes nothing; an updated one renames an item and adds a newer one.
        controller.tableView.clear()
        queue.addOperations([ImportOperation(container: container, items: items)], waitUntilFinished: true)
        container.viewContext.performAndWait {}
        #expect(controller.tableView.calls.isEmpty, "\(controller.tableView.calls)")
        let updated = [
            (guid: "g2", title: "Item 2, corrected", date: items[1].date),
            (guid: "g9", title: "Item 9", date: Date(timeIntervalSince1970: 9 * day)),
        ]
        queue.addOperations([ImportOperation(container: container, items: updated)], waitUntilFinished: true)
        container.viewContext.performAndWait {}
        #expect(controller.tableView.calls == ["begin", "insert 0.0", "reload 0.1", "end"], "\(controller.tableView.calls)")
        #expect(controller.cellText(at: IndexPath(row: 2, section: 0)) == "Item 2, corrected")
    }

    @Test func seed001BackgroundSavesAreMergedAndDeletesSave() throws {
        let container = try container("OilChanges", classes: ["Entry": Entry.self])
        let viewController = EntriesViewController(context: container.viewContext)
        viewController.viewDidLoad()
        defer { viewController.stopListening() }
        let background = container.newBackgroundContext()
        try background.performAndWait {
            for (miles, day) in [(3_000, 1.0), (6_000, 2.0)] {
                let entry = Entry(context: background)
                entry.miles = NSNumber(value: miles)
                entry.log = "oil"
                entry.date = Date(timeIntervalSince1970: day * 86_400)
            }
            try background.save()
        }
        #expect(
            viewController.tableView.calls == ["begin", "insert 0.0", "scroll 0.0", "insert 0.1", "scroll 0.1", "end"],
            "\(viewController.tableView.calls)")
        #expect(viewController.configureCell(at: IndexPath(row: 0, section: 0)) == "6000 oil")
        viewController.tableView.clear()
        viewController.commitDelete(forRowAt: IndexPath(row: 0, section: 0))
        #expect(viewController.alerts.isEmpty, "\(viewController.alerts)")
        #expect(viewController.tableView.calls == ["begin", "delete 0.0", "end"])
        let remaining = try background.performAndWait { try background.count(for: NSFetchRequest<Entry>(entityName: "Entry")) }
        #expect(remaining == 1, "the delete was saved")
    }

    @Test func seed002TheArticlesFetchRequestsGiveItsResults() throws {
        let container = try container("Groceries")
        let store = GroceriesStore(context: container.viewContext)
        let products: [(String, Int)] = [
            ("Donut", 156), ("Soda", 425), ("Soda", 85), ("Cheddar Cheese", 400), ("Flour", 920), ("Parmesan Cheese", 861),
            ("Cheddar Cheese", 221), ("Parmesan Cheese", 345), ("Milk", 0),
        ]
        for (name, price) in products { store.addProduct(name: name, price: price) }
        try store.save()
        func describe(_ objects: [NSManagedObject]) -> [String] {
            objects.map { "\($0.value(forKey: "name") as? String ?? "?") \($0.value(forKey: "price") as? Int ?? -1)" }
        }
        #expect(describe(try store.allProducts()).prefix(3) == ["Cheddar Cheese 221", "Cheddar Cheese 400", "Donut 156"])
        #expect(describe(try store.products(named: "Cheddar Cheese")).sorted() == ["Cheddar Cheese 221", "Cheddar Cheese 400"])
        #expect(
            describe(try store.cheapProducts(containing: "CHEESE", under: 500)) == [
                "Cheddar Cheese 221", "Parmesan Cheese 345", "Cheddar Cheese 400",
            ])
        #expect(describe(try store.cheapest(2)) == ["Milk 0", "Soda 85"])
        #expect(try store.productNames().count == 9)
        #expect(try store.count(where: NSPredicate(format: "price > %d", 400)) == 3)
        #expect(try store.count(where: NSPredicate(value: true)) == 9)
        #expect(describe(try store.search(name: "p", maximumPrice: 500)) == ["Parmesan Cheese 345"])
        #expect(try store.search(name: nil, maximumPrice: nil).count == 9, "an AND of nothing is true")
        let controller = store.makeController()
        try controller.performFetch()
        #expect(controller.sections?.map(\.name) == ["Cheddar Cheese", "Donut", "Flour", "Milk", "Parmesan Cheese", "Soda"])
    }

    @Test func seed003SectionIndexTitlesAndACustomisedController() throws {
        let container = try container("Groceries")
        let store = GroceriesStore(context: container.viewContext)
        for (name, price) in [("Apple", 1), ("Apricot", 2), ("Banana", 3), ("Blueberry", 4)] { store.addProduct(name: name, price: price) }
        try store.save()
        let plain = SectionIndexDataSource(context: container.viewContext, twoLetterIndex: false)
        try plain.fetchedResultsController.performFetch()
        #expect(plain.sectionIndexTitles() == ["A", "B"])
        #expect(plain.section(forSectionIndexTitle: "B", at: 1) == 2)
        #expect(plain.titleForHeader(inSection: 1) == "Apricot")
        let custom = SectionIndexDataSource(context: container.viewContext, twoLetterIndex: true)
        defer { NSFetchedResultsController<NSManagedObject>.deleteCache(withName: "Products") }
        try custom.fetchedResultsController.performFetch()
        #expect(custom.sectionIndexTitles() == ["AP", "BA", "BL"])
        // A new product in a new section, reported as UIKit wants it.
        store.addProduct(name: "Cherry", price: 5)
        container.viewContext.processPendingChanges()
        #expect(custom.tableView.calls == ["begin", "insert section 4", "insert 4.0", "end"], "\(custom.tableView.calls)")
    }

    @Test func seed004AddingAndDeletingEventsDrivesTheTable() throws {
        let container = try container("Locations", classes: ["Event": Event.self])
        let viewController = try LocationsViewController(managedObjectContext: container.viewContext)
        viewController.addEvent(latitude: 52.37, longitude: 4.89, at: Date(timeIntervalSince1970: 100))
        viewController.addEvent(latitude: 48.85, longitude: 2.35, at: Date(timeIntervalSince1970: 200))
        #expect(viewController.errors.isEmpty)
        #expect(viewController.tableView.calls == ["begin", "insert 0.0", "scroll 0.0", "end", "begin", "insert 0.0", "scroll 0.0", "end"])
        #expect(viewController.resultsController.object(at: IndexPath(row: 0, section: 0)).latitude == 48.85)
        viewController.tableView.clear()
        viewController.deleteEvent(at: IndexPath(row: 1, section: 0))
        #expect(viewController.tableView.calls == ["begin", "delete 0.1", "end"])
        #expect(viewController.resultsController.fetchedObjects?.map(\.latitude) == [48.85])
    }
}
