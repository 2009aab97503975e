// Seed 001 ("Oil Changes", NSHipster-era screencast), its Core Data code in today's Swift for Apple platforms.
// Changed for Linux: the import, and @NSManaged → @Managed.
import OpenCoreDataCompatibility  // was: import CoreData (which, like this module, brings Foundation)

final class Entry: NSManagedObject {
    @Managed var date: Date?  // was: @NSManaged
    @Managed var miles: NSNumber?
    @Managed var log: String?
}

final class EntriesViewController: NSObject, NSFetchedResultsControllerDelegate {
    let tableView = TableView()
    let context: NSManagedObjectContext
    // swift-format-ignore: NeverUseImplicitlyUnwrappedOptionals
    var fetchedResultsController: NSFetchedResultsController<Entry>!
    private var saveObserver: (any NSObjectProtocol)?
    private(set) var alerts: [String] = []

    init(context: NSManagedObjectContext) {
        self.context = context
    }

    var fetchRequest: NSFetchRequest<Entry> {
        let fetchRequest = NSFetchRequest<Entry>(entityName: "Entry")
        let sortByDate = NSSortDescriptor(key: "date", ascending: false)
        fetchRequest.sortDescriptors = [sortByDate]
        return fetchRequest
    }

    func viewDidLoad() {
        listenForChanges()
        setupFetchedResultsController()
    }

    func setupFetchedResultsController() {
        fetchedResultsController = NSFetchedResultsController(
            fetchRequest: fetchRequest, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
        fetchedResultsController.delegate = self
        do {
            try fetchedResultsController.performFetch()
        } catch {
            alerts.append("Couldn't fetch entries :(")
        }
    }

    func numberOfRows(inSection section: Int) -> Int {
        fetchedResultsController.sections?[section].numberOfObjects ?? 0
    }

    func configureCell(at indexPath: IndexPath) -> String {
        let entry = fetchedResultsController.object(at: indexPath)
        let miles = entry.miles.map { "\($0)" } ?? ""
        return "\(miles) \(entry.log ?? "")"
    }

    /// The table's delete action: delete the entry, then save on the context's queue.
    func commitDelete(forRowAt indexPath: IndexPath) {
        let entry = fetchedResultsController.object(at: indexPath)
        context.delete(entry)
        context.performAndWait {
            do {
                try context.save()
            } catch {
                alerts.append("Couldn't delete entry: \(error)")
            }
        }
    }

    // MARK: Listening for changes

    func listenForChanges() {
        let context = self.context
        saveObserver = NotificationCenter.default.addObserver(
            forName: .NSManagedObjectContextDidSave, object: nil, queue: nil
        ) { notification in
            guard (notification.object as? NSManagedObjectContext) !== context else { return }
            context.performAndWait { context.mergeChanges(fromContextDidSave: notification) }
        }
    }

    func stopListening() {
        saveObserver.map(NotificationCenter.default.removeObserver)
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
            tableView.insertRows(at: [newIndexPath!], with: .automatic)
            tableView.scrollToRow(at: newIndexPath!, at: .top, animated: true)
        case .delete:
            tableView.deleteRows(at: [indexPath!], with: .automatic)
        case .update:
            tableView.reloadRows(at: [indexPath!], with: .automatic)
        case .move:
            tableView.moveRow(at: indexPath!, to: newIndexPath!)
        @unknown default:
            break
        }
    }

    func controllerDidChangeContent(_ controller: NSFetchedResultsController<NSFetchRequestResult>) {
        tableView.endUpdates()
    }
}
