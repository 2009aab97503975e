import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// During delivery the object a delegate is handed still reads its last values and its object ID, whatever the
/// change: a consumer must be able to tell which row went, moved or changed (Core Data's objects do the same).
@Suite struct DeliveredObjectTests {
    let stack: TestStack
    let context: NSManagedObjectContext
    let recorder = DelegateRecorder()

    init() throws {
        stack = try TestStack(model: try SectionCacheTests.model())
        context = stack.context()
        recorder.describe = { object in
            guard let object = object as? NSManagedObject else { return "not an object" }
            let name = (object.value(forKey: "name")) as? String ?? "nil"
            let score = (object.value(forKey: "score")).flatMap { $0 as? NSNumber }.map { "\($0)" } ?? "nil"
            return "\(name)/\(score) \(object.objectID.isTemporaryID ? "temporary" : "permanent")"
        }
    }

    func controller() throws -> NSFetchedResultsController<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "score")]
        let frc = NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
        frc.delegate = recorder
        try frc.performFetch()
        return frc
    }

    /// The object lines of the last batch.
    var lastObjectLines: [String] {
        let start = recorder.lines.lastIndex(of: "will change").map { $0 + 1 } ?? 0
        return recorder.lines[start...].filter { $0.hasPrefix("object ") }
    }

    @Test func unsavedObjectsReadTheirValuesInEveryChangeKind() throws {
        try context.performAndWait {
            let saved = try context.make("Item", ["name": "saved", "group": "g", "score": 10])
            try context.save()
            let frc = try controller()
            _ = frc

            let fresh = try context.make("Item", ["name": "fresh", "group": "g", "score": 20])
            context.processPendingChanges()
            #expect(lastObjectLines == ["object insert at [0, 1]: fresh/20 temporary"])

            fresh.setValue("renamed", forKey: "name")
            context.processPendingChanges()
            #expect(lastObjectLines == ["object update at [0, 1]: renamed/20 temporary"])

            fresh.setValue(5, forKey: "score")
            context.processPendingChanges()
            #expect(lastObjectLines == ["object move at [0, 1] → [0, 0]: renamed/5 temporary"])

            // Inserted and deleted before any save: the delete still shows what the row was.
            context.delete(fresh)
            context.processPendingChanges()
            #expect(lastObjectLines == ["object delete at [0, 0]: renamed/5 temporary"])

            context.delete(saved)
            context.processPendingChanges()
            #expect(lastObjectLines == ["object delete at [0, 0]: saved/10 permanent"])
        }
    }

    @Test func objectsDeletedByASaveOrAMergeReadTheirLastValues() throws {
        let frc = try context.performAndWait {
            for (name, score) in [("a", 1), ("b", 2), ("c", 3)] { try context.make("Item", ["name": name, "group": "g", "score": score]) }
            try context.save()
            return try controller()
        }
        try context.performAndWait {
            // Deleted and saved in one go: the save's own processing reports it.
            let a = try #require(try context.objects("Item", "name == 'a'").first)
            context.delete(a)
            try context.save()
            #expect(lastObjectLines == ["object delete at [0, 0]: a/1 permanent"])
        }
        // Deleted by another context's save, merged here: once for a row this context holds an object for, once for
        // one it never loaded.
        let held = try context.performAndWait { try #require(try context.objects("Item", "name == 'c'").first) }
        try mergeDelete(of: "c")
        #expect(lastObjectLines == ["object delete at [0, 1]: c/3 permanent"], "\(recorder.lines)")
        #expect(held.isDeleted || held.managedObjectContext == nil)
        try mergeDelete(of: "b")
        #expect(lastObjectLines == ["object delete at [0, 0]: b/2 permanent"], "\(recorder.lines)")
        #expect(frc.fetchedObjects?.isEmpty == true)
    }

    func mergeDelete(of name: String) throws {
        let note = try stack.saveElsewhere { other in other.delete(try #require(try other.objects("Item", "name == %@", name).first)) }
        context.performAndWait { context.mergeChanges(fromContextDidSave: note) }  // delivered as the block ends
    }
}
