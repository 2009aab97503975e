// Seed 003 (Apple's NSFetchedResultsController class reference): a sectioned table with a section index, and a
// subclass that customises index titles. Changed for Linux: the import.
import OpenCoreDataCompatibility  // was: import CoreData (which, like this module, brings Foundation)

/// Index titles from the first two letters of a section name, as the reference suggests overriding.
final class TwoLetterIndexController: NSFetchedResultsController<NSManagedObject> {
    override func sectionIndexTitle(forSectionName sectionName: String) -> String? {
        String(sectionName.prefix(2)).uppercased()
    }
}

final class SectionIndexDataSource: NSObject, NSFetchedResultsControllerDelegate {
    let fetchedResultsController: NSFetchedResultsController<NSManagedObject>
    let tableView = TableView()

    init(context: NSManagedObjectContext, twoLetterIndex: Bool) {
        let fetchRequest = NSFetchRequest<NSManagedObject>(entityName: "Products")
        fetchRequest.sortDescriptors = [NSSortDescriptor(key: "name", ascending: true), NSSortDescriptor(key: "price", ascending: true)]
        if twoLetterIndex {
            fetchedResultsController = TwoLetterIndexController(
                fetchRequest: fetchRequest, managedObjectContext: context, sectionNameKeyPath: "name", cacheName: "Products")
        } else {
            fetchedResultsController = NSFetchedResultsController(
                fetchRequest: fetchRequest, managedObjectContext: context, sectionNameKeyPath: "name", cacheName: nil)
        }
        super.init()
        fetchedResultsController.delegate = self
    }

    func numberOfSections() -> Int {
        fetchedResultsController.sections?.count ?? 0
    }

    func titleForHeader(inSection section: Int) -> String? {
        fetchedResultsController.sections?[section].name
    }

    func sectionIndexTitles() -> [String] {
        fetchedResultsController.sectionIndexTitles
    }

    func section(forSectionIndexTitle title: String, at index: Int) -> Int {
        fetchedResultsController.section(forSectionIndexTitle: title, at: index)
    }

    func controllerWillChangeContent(_ controller: NSFetchedResultsController<NSFetchRequestResult>) {
        tableView.beginUpdates()
    }

    func controller(
        _ controller: NSFetchedResultsController<NSFetchRequestResult>, didChange sectionInfo: NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType
    ) {
        switch type {
        case .insert: tableView.insertSections(IndexSet(integer: sectionIndex), with: .fade)
        case .delete: tableView.deleteSections(IndexSet(integer: sectionIndex), with: .fade)
        default: break
        }
    }

    func controller(
        _ controller: NSFetchedResultsController<NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?
    ) {
        switch type {
        case .insert: tableView.insertRows(at: [newIndexPath!], with: .fade)
        case .delete: tableView.deleteRows(at: [indexPath!], with: .fade)
        case .update: tableView.reloadRows(at: [indexPath!], with: .fade)
        case .move:
            tableView.deleteRows(at: [indexPath!], with: .fade)
            tableView.insertRows(at: [newIndexPath!], with: .fade)
        @unknown default: break
        }
    }

    func controllerDidChangeContent(_ controller: NSFetchedResultsController<NSFetchRequestResult>) {
        tableView.endUpdates()
    }
}
