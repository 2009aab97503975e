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

    /// A child's deletion of an object its parent inserted and has not saved takes the insertion back (Core Data): the
    /// object leaves the parent's `insertedObjects`, its controller reports the delete, and the parent's save never
    /// writes it.
    @Test func aChildDeletesItsParentsUnsavedObject() throws {
        let (stack, parent) = try stack()
        let frc = controller(parent)
        let recorder = DelegateRecorder()
        frc.delegate = recorder
        try parent.performAndWait { try frc.performFetch() }
        let table = recorder.followedTable(of: frc)
        let r029 = try parent.performAndWait { try parent.make("Item", ["name": "r029", "score": 7]) }
        parent.performAndWait { parent.processPendingChanges() }
        #expect(names(frc, parent) == ["b", "c", "a", "r029"])
        let child = child(of: parent)
        try child.performAndWait {
            let theirs = try #require(try child.objects("Item", "name == 'r029'").first)
            #expect(theirs.objectID.isTemporaryID, "the child sees the parent's unsaved object")
            child.delete(theirs)
            try child.save()
        }
        parent.performAndWait {
            #expect(!parent.insertedObjects.contains(r029))
            #expect(!parent.deletedObjects.contains(r029), "an insertion taken back is not a deletion to save")
        }
        #expect(names(frc, parent) == ["b", "c", "a"])
        #expect(recorder.lines.contains { $0.hasPrefix("object delete at [0, 3]") }, "\(recorder.lines)")
        #expect(table.items == frc.shownItems)
        try parent.performAndWait { try parent.save() }
        let reader = stack.context()
        let stored = try reader.performAndWait { try reader.objects("Item", sort: ["name"]).compactMap { $0.string("name") } }
        #expect(stored == ["a", "b", "c"], "the parent's save did not write the object its child deleted")
    }

    /// A child's new object keeps its temporary ID through the child's save (into the parent): a later change of it
    /// is an update of its row, not a second insert.
    @Test func aChildsSavedObjectChangedAgainIsUpdatedInPlace() throws {
        let (stack, parent) = try stack()
        _ = stack
        let child = child(of: parent)
        let frc = controller(child)
        let recorder = DelegateRecorder()
        frc.delegate = recorder
        try child.performAndWait { try frc.performFetch() }
        let table = recorder.followedTable(of: frc)
        try child.performAndWait {
            let d = try child.make("Item", ["name": "d", "score": 21])
            try child.save()
            d.setValue(38, forKey: "score")
            child.processPendingChanges()
        }
        #expect(names(frc, child) == ["b", "c", "a", "d"])
        #expect(recorder.lines.filter { $0.hasPrefix("object insert") }.count == 1, "\(recorder.lines)")
        #expect(table.items == frc.shownItems)
    }

    /// Once its parent has saved the child's new object, a fetch in the child returns the object the child holds
    /// (now under the stored row's ID), never a second object for the same row; the child's next save and its
    /// loaded memberships use that ID.
    @Test func afterItsParentSavesAChildFetchesTheObjectItHolds() throws {
        let (stack, parent) = try stack()
        let child = child(of: parent)
        let (h, uri) = try child.performAndWait {
            let h = try child.make("Item", ["name": "h", "score": 8])
            try child.save()
            return (h, h.objectID)
        }
        try parent.performAndWait { try parent.save() }
        try child.performAndWait {
            #expect(h.objectID == uri && h.objectID.isTemporaryID, "as in Core Data, the ID it was saved under, until it asks again")
            let fetched = try child.objects("Item", "name == 'h'")
            #expect(fetched.count == 1 && fetched.first === h, "the object the child holds, not a copy")
            #expect(!h.objectID.isTemporaryID, "now known by the stored row's ID")
            h.setValue(9, forKey: "score")
            try child.save()
        }
        try parent.performAndWait { try parent.save() }
        let reader = stack.context()
        let scores = try reader.performAndWait { try reader.objects("Item", "name == 'h'").map { $0.value(forKey: "score") as? Int32 } }
        #expect(scores == [9])
    }
}
