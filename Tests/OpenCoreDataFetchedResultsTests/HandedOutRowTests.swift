import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// Deleting the object the controller just handed out finds its row without reading the object's values.
///
/// (A swipe to delete, a selection.) A row handed out earlier, and moved since, is still found where it is.
@Suite struct HandedOutRowTests {
    let stack: TestStack
    let context: NSManagedObjectContext
    let recorder = DelegateRecorder()

    init() throws {
        stack = try TestStack(model: try SectionCacheTests.model())
        context = stack.context()
        try context.performAndWait {
            for (name, score) in [("a", 10), ("b", 20), ("c", 30), ("d", 40), ("e", 50), ("f", 60)] {
                try context.make("Item", ["name": name, "group": "g", "score": score])
            }
            try context.save()
        }
        recorder.describe = { object in "\((object as? NSManagedObject)?.objectID.primaryKey ?? 0)" }
    }

    func controller() throws -> NSFetchedResultsController<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "score")]
        request.fetchBatchSize = 2  // objects handed out as faults
        let frc = NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
        frc.delegate = recorder
        try frc.performFetch()
        return frc
    }

    @Test func deletingTheObjectJustHandedOutReadsNoRow() throws {
        try context.performAndWait {
            let frc = try controller()
            let victim = frc.object(at: IndexPath(row: 3, section: 0))
            #expect(victim.isFault)
            let store = stack.container.persistentStoreCoordinator.persistentStores.first as! SQLiteStore
            let read = store.rowsRead
            context.delete(victim)
            context.processPendingChanges()
            #expect(store.rowsRead == read, "the delete read the object's row (\(store.rowsRead - read) rows read)")
            #expect(victim.isFault && victim.isDeleted)
            // Its values can still be read until the save (as in Core Data): that loads them.
            #expect(victim.value(forKey: "name") as? String == "d")
            #expect(!victim.isFault)
            #expect(recorder.lines.contains("object delete at [0, 3]: \(victim.objectID.primaryKey)"), "\(recorder.lines)")
            #expect(frc.fetchedObjects?.count == 5)
        }
    }

    @Test func aRowHandedOutBeforeOthersMovedIsFoundWhereItIsNow() throws {
        try context.performAndWait {
            let frc = try controller()
            let victim = frc.object(at: IndexPath(row: 3, section: 0))  // "d", score 40
            // A new row before it: "d" is at 4 now, and the row at 3 is another.
            try context.make("Item", ["name": "new", "group": "g", "score": 5])
            context.processPendingChanges()
            context.delete(victim)
            context.processPendingChanges()
            #expect(recorder.lines.contains("object delete at [0, 4]: \(victim.objectID.primaryKey)"), "\(recorder.lines)")
            let names = frc.fetchedObjects?.map { $0.value(forKey: "name") as? String ?? "?" }
            #expect(names == ["new", "a", "b", "c", "e", "f"], "\(String(describing: names))")
        }
    }
}
