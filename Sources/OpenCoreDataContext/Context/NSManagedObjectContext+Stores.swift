import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

extension NSManagedObjectContext {
    /// Says which of the coordinator's stores a new object is saved to (Core Data's method of this name), for an
    /// entity that several stores' configurations list; without it, a new object goes to the first such store added.
    ///
    /// For example:
    /// ```swift
    /// let archive = coordinator.persistentStore(for: archiveURL)!
    /// context.assign(note, to: archive)
    /// try context.save()
    /// ```
    /// An object that is not new here, or a store of another coordinator, is left as it is. A store whose
    /// configuration does not list the object's entity fails the next save with an error naming both.
    public func assign(_ object: Any, to store: any PersistentStore) {
        guard let object = object as? NSManagedObject, object.managedObjectContext === self, object.objectID.isTemporaryID,
            let coordinator = persistentStoreCoordinator, coordinator.persistentStores.contains(where: { $0 === store })
        else { return }
        coordinator.assignments[object.objectID] = store.identifier
    }
}
