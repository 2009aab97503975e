import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Fetched results controllers and nested contexts: a parent's controller reports a child's save as changes made in
/// the parent; a child's controller shows the parent's unsaved objects and what siblings save into the parent.
@Suite struct NestedContextControllerTests {
    func stack() throws -> (TestStack, NSManagedObjectContext) {
        let model = try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("score", .integer32, default: 0)
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            for (name, score) in [("a", 3), ("b", 1), ("c", 2)] { try context.make("Item", ["name": name, "score": score]) }
            try context.save()
        }
        return (stack, context)
    }

    func controller(_ context: NSManagedObjectContext) -> NSFetchedResultsController<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "score")]
        return NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
    }

    func child(of parent: NSManagedObjectContext) -> NSManagedObjectContext {
        let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        child.parent = parent
        return child
    }

    func names(_ frc: NSFetchedResultsController<NSManagedObject>, _ context: NSManagedObjectContext) -> [String] {
        context.performAndWait { (frc.fetchedObjects ?? []).compactMap { $0.string("name") } }
    }

    @Test func theParentsControllerReportsAChildsSave() throws {
        let (stack, parent) = try stack()
        _ = stack
        let frc = controller(parent)
        let recorder = DifferenceRecorder()
        frc.delegate = recorder
        try parent.performAndWait { try frc.performFetch() }
        #expect(names(frc, parent) == ["b", "c", "a"])
        recorder.items = parent.performAndWait { (frc.fetchedObjects ?? []).map(\.objectID) }
        let child = child(of: parent)
        try child.performAndWait {
            try child.make("Item", ["name": "d", "score": 0])
            try child.objects("Item", "name == 'a'").first?.setCheckedValue(-1, forKey: "score")
            try child.objects("Item", "name == 'c'").first.map(child.delete)
            try child.save()
        }
        #expect(recorder.differences == 1, "one batch for the child's save")
        #expect(names(frc, parent) == ["a", "d", "b"])
        #expect(
            recorder.items == parent.performAndWait { (frc.fetchedObjects ?? []).map(\.objectID) },
            "the batch applied to the old list gives the new one")
    }

    @Test func aChildsControllerSeesItsParentAndItsSiblings() throws {
        let (stack, parent) = try stack()
        _ = stack
        _ = try parent.performAndWait { try parent.make("Item", ["name": "p", "score": 5]) }
        let watcher = child(of: parent)
        watcher.automaticallyMergesChangesFromParent = true
        let frc = controller(watcher)
        let recorder = DifferenceRecorder()
        frc.delegate = recorder
        try watcher.performAndWait { try frc.performFetch() }
        #expect(names(frc, watcher) == ["b", "c", "a", "p"], "the parent's unsaved object is a result")
        recorder.items = watcher.performAndWait { (frc.fetchedObjects ?? []).map(\.objectID) }
        let sibling = child(of: parent)
        try sibling.performAndWait {
            try sibling.make("Item", ["name": "s", "score": 4])
            try sibling.objects("Item", "name == 'b'").first?.setCheckedValue(9, forKey: "score")
            try sibling.save()
        }
        let deadline = Date().addingTimeInterval(5)
        while names(frc, watcher) != ["c", "a", "s", "p", "b"], Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(names(frc, watcher) == ["c", "a", "s", "p", "b"])
        #expect(recorder.items == watcher.performAndWait { (frc.fetchedObjects ?? []).map(\.objectID) })
    }
}
