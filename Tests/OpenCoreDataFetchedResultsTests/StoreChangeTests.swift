import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

/// Another writer — here a second container on the same file, as another process would be — changes the store; the
/// context hears nothing until `mergeChangesFromStore()`, and then its controller reports exactly what changed.
@Suite struct StoreChangeTests {
    @Test func aControllerReportsAnotherWritersInsertsUpdatesMovesAndDeletes() throws {
        let stack = try TestStack(model: try SectionCacheTests.model())
        let context = stack.context()
        let recorder = DelegateRecorder()
        recorder.describe = { ($0 as? NSManagedObject)?.string("name") ?? "?" }
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "score")]
        let frc = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group", cacheName: nil)
        let table = try context.performAndWait {
            for (name, group, score) in [("a", "g1", 1), ("b", "g1", 2), ("c", "g1", 3), ("d", "g2", 1)] {
                try context.make("Item", ["name": name, "group": group, "score": score])
            }
            try context.save()
            frc.delegate = recorder
            try frc.performFetch()
            let table = recorder.followedTable(of: frc)
            // The cells on screen: their objects hold values.
            for object in frc.fetchedObjects ?? [] { _ = object.value(forKey: "name") }
            return table
        }

        let other = NSPersistentContainer(name: "Other", managedObjectModel: stack.container.managedObjectModel)
        other.persistentStoreDescriptions = [NSPersistentStoreDescription(url: stack.storeURL)]
        try other.loadPersistentStores()
        let writer = other.newBackgroundContext()
        try writer.performAndWait {
            let items = try writer.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item"))
            func item(_ name: String) -> NSManagedObject { items.first { $0.string("name") == name }! }
            item("a").setValue("a, renamed", forKey: "name")  // an update in place
            item("c").setValue(0, forKey: "score")  // a move to the top of g1
            writer.delete(item("d"))  // g2 empties
            try writer.make("Item", ["name": "e", "group": "g3", "score": 1])  // a new section
            try writer.save()
        }
        #expect(recorder.batches.isEmpty, "nothing is heard before the merge")

        context.performAndWait { context.mergeChangesFromStore() }
        #expect(recorder.batches.count == 1, "\(recorder.lines)")
        #expect(
            Set(recorder.lines) == [
                "will change", "section delete at 1: g2", "section insert at 1: g3", "object delete at [1, 0]: d",
                "object insert at [1, 0]: e", "object move at [0, 2] → [0, 0]: c", "object update at [0, 0]: a, renamed", "did change",
            ], "\(recorder.lines)")
        context.performAndWait {
            #expect(frc.shownItems == table.items, "a table applying the batch shows the results")
            #expect(frc.fetchedObjects?.map { $0.string("name") ?? "?" } == ["c", "a, renamed", "b", "e"])
        }

        // Nothing changed since: a second merge reports nothing.
        context.performAndWait { context.mergeChangesFromStore() }
        #expect(recorder.batches.count == 1, "\(recorder.lines)")
    }
}
