// Seed 000 (the RSS reader of "NSFetchedResultsController" by Marcus Zarra), its Core Data code as a Swift developer
// writes it today for Apple platforms. Changed for Linux: the import, and @NSManaged → @Managed.
import OpenCoreDataCompatibility  // was: import CoreData (which, like this module, brings Foundation)

final class FeedItem: NSManagedObject {
    @Managed var title: String?  // was: @NSManaged
    @Managed var link: URL?
    @Managed var guid: String?
    @Managed var pubDate: Date?
    @Managed var summary: String?
}

extension FeedItem {
    @nonobjc class func fetchRequest() -> NSFetchRequest<FeedItem> {
        NSFetchRequest<FeedItem>(entityName: "FeedItem")
    }
}

/// The root view controller: a table of feed items, newest first, updated as the import operation saves.
final class RootViewController: NSObject, NSFetchedResultsControllerDelegate {
    let tableView = TableView()
    let managedObjectContext: NSManagedObjectContext

    init(managedObjectContext: NSManagedObjectContext) {
        self.managedObjectContext = managedObjectContext
    }

    lazy var fetchedResultsController: NSFetchedResultsController<FeedItem> = {
        let fetchRequest: NSFetchRequest<FeedItem> = FeedItem.fetchRequest()
        fetchRequest.entity = NSEntityDescription.entity(forEntityName: "FeedItem", in: managedObjectContext)
        fetchRequest.fetchBatchSize = 20
        fetchRequest.sortDescriptors = [NSSortDescriptor(key: "pubDate", ascending: false)]
        let frc = NSFetchedResultsController(
            fetchRequest: fetchRequest, managedObjectContext: managedObjectContext, sectionNameKeyPath: nil, cacheName: "Root")
        frc.delegate = self
        return frc
    }()

    func viewDidLoad() {
        do {
            try fetchedResultsController.performFetch()
        } catch {
            print("Unresolved error \(error)")
        }
    }

    func numberOfSections() -> Int {
        fetchedResultsController.sections?.count ?? 0
    }

    func numberOfRows(inSection section: Int) -> Int {
        guard let sectionInfo = fetchedResultsController.sections?[section] else { return 0 }
        return sectionInfo.numberOfObjects
    }

    func cellText(at indexPath: IndexPath) -> String {
        let item = fetchedResultsController.object(at: indexPath)
        return item.title ?? ""
    }

    // MARK: NSFetchedResultsControllerDelegate

    func controllerWillChangeContent(_ controller: NSFetchedResultsController<NSFetchRequestResult>) {
        tableView.beginUpdates()
    }

    func controller(
        _ controller: NSFetchedResultsController<NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?
    ) {
        switch type {
        case .insert:
            tableView.insertRows(at: [newIndexPath!], with: .fade)
        case .delete:
            tableView.deleteRows(at: [indexPath!], with: .fade)
        case .update:
            tableView.reloadRows(at: [indexPath!], with: .fade)
        case .move:
            tableView.deleteRows(at: [indexPath!], with: .fade)
            tableView.insertRows(at: [newIndexPath!], with: .fade)
        @unknown default:
            break
        }
    }

    func controllerDidChangeContent(_ controller: NSFetchedResultsController<NSFetchRequestResult>) {
        tableView.endUpdates()
    }
}

/// The import: an operation that parses items and saves them in its own context; the main context merges the save.
final class ImportOperation: Operation, @unchecked Sendable {
    let container: NSPersistentContainer
    let items: [(guid: String, title: String, date: Date)]
    private(set) var error: (any Error)?

    init(container: NSPersistentContainer, items: [(guid: String, title: String, date: Date)]) {
        self.container = container
        self.items = items
    }

    override func main() {
        let context = container.newBackgroundContext()
        context.performAndWait {
            for item in items {
                let request: NSFetchRequest<FeedItem> = FeedItem.fetchRequest()
                request.predicate = NSPredicate(format: "guid == %@", item.guid)
                request.fetchLimit = 1
                let existing = try? context.fetch(request).first
                let feedItem = existing ?? FeedItem(context: context)
                feedItem.guid = item.guid
                feedItem.title = item.title
                feedItem.pubDate = item.date
            }
            do {
                try context.save()
            } catch {
                self.error = error
            }
        }
    }
}
