// Seed 004 (Apple's "Locations" tutorial with a fetched results controller), its Core Data code in today's Swift.
// Changed for Linux: the import, and @NSManaged → @Managed. (CoreLocation is not on Linux: the location is given.)
import OpenCoreDataCompatibility  // was: import CoreData (which, like this module, brings Foundation)

final class Event: NSManagedObject {
    @Managed var creationDate: Date?  // was: @NSManaged
    @Managed var latitude: NSNumber?
    @Managed var longitude: NSNumber?
}

final class LocationsViewController: NSObject, NSFetchedResultsControllerDelegate {
    let tableView = TableView()
    let managedObjectContext: NSManagedObjectContext
    let resultsController: NSFetchedResultsController<Event>
    private(set) var errors: [String] = []

    init(managedObjectContext: NSManagedObjectContext) throws {
        self.managedObjectContext = managedObjectContext
        let request = NSFetchRequest<Event>(entityName: "Event")
        request.sortDescriptors = [NSSortDescriptor(keyPath: \Event.creationDate, ascending: false)]
        resultsController = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: managedObjectContext, sectionNameKeyPath: nil, cacheName: nil)
        super.init()
        resultsController.delegate = self
        try resultsController.performFetch()
    }

    func addEvent(latitude: Double, longitude: Double, at date: Date) {
        let event = NSEntityDescription.insertNewObject(forEntityName: "Event", into: managedObjectContext) as! Event
        event.latitude = NSNumber(value: latitude)
        event.longitude = NSNumber(value: longitude)
        event.creationDate = date
        do {
            try managedObjectContext.save()
        } catch {
            errors.append("Unresolved error \(error)")
        }
    }

    func deleteEvent(at indexPath: IndexPath) {
        let eventToDelete = resultsController.object(at: indexPath)
        managedObjectContext.delete(eventToDelete)
        do {
            try managedObjectContext.save()
        } catch {
            errors.append("Unresolved error \(error)")
        }
    }

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
            tableView.scrollToRow(at: newIndexPath!, at: .top, animated: true)
        case .delete:
            tableView.deleteRows(at: [indexPath!], with: .fade)
        default:
            break
        }
    }

    func controllerDidChangeContent(_ controller: NSFetchedResultsController<NSFetchRequestResult>) {
        tableView.endUpdates()
    }
}
