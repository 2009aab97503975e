import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// A merge moves an object that was read here between another context's save and the merge.
///
/// Something here reads one of the saved objects before the save is merged (a cell firing a fault, a page of faults
/// loading) and so already holds the saved values. The merge then finds nothing new in that object, yet the
/// controller placed it by the values it had before: the merge must still move it.
@Suite struct FaultBeforeMergeTests {
    let stack: TestStack
    let context: NSManagedObjectContext
    let recorder = DelegateRecorder()

    init() throws {
        stack = try TestStack(model: try SectionCacheTests.model())
        context = stack.context()
        try context.performAndWait {
            for (name, score) in [("a", 10), ("b", 20), ("c", 30), ("d", 40)] {
                try context.make("Item", ["name": name, "group": name == "d" ? "h" : "g", "score": score])
            }
            try context.save()
        }
        recorder.describe = { object in (object as? NSManagedObject)?.value(forKey: "name") as? String ?? "?" }
    }

    func controller(predicate: String? = nil) throws -> NSFetchedResultsController<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "score")]
        request.predicate = try predicate.map { try FetchPredicate(format: $0) }
        request.fetchBatchSize = 2  // rows without objects: the controller knows them by their values only
        let frc = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group", cacheName: nil)
        frc.delegate = recorder
        try frc.performFetch()
        return frc
    }

    /// Saves `values` on the item named `name` in another context, and returns the save's notification unmerged.
    func saveElsewhere(_ name: String, _ values: [String: Any]) throws -> Notification {
        try stack.saveElsewhere { other in
            let item = try #require(try other.objects("Item", "name == %@", name).first)
            for (key, value) in values { item.setValue(value, forKey: key) }
        }
    }

    /// The names in the controller, by section, and in a fresh fetch.
    func shownAndStored(_ frc: NSFetchedResultsController<NSManagedObject>, predicate: String? = nil) throws -> ([[String]], [[String]]) {
        (frc.namesBySection, try stack.storedNamesBySection(predicate: predicate))
    }

    @Test func anObjectReadBeforeTheMergeStillMoves() throws {
        try context.performAndWait {
            let frc = try controller()
            // "a" moves to the end of its section, and "b" to the other section.
            let moveA = try saveElsewhere("a", ["score": 35])
            let moveB = try saveElsewhere("b", ["group": "h"])
            // Read here before the merges: the objects now hold the saved values.
            let a = try #require(try context.existingObject(with: try #require(frc.fetchedObjects?.first).objectID))
            #expect(a.value(forKey: "score") as? Int == 35)
            let b = try #require(frc.fetchedObjects?.first { $0.value(forKey: "name") as? String == "b" })
            #expect(b.value(forKey: "group") as? String == "h")
            let batches = recorder.batches.count
            context.mergeChanges(fromContextDidSave: moveA)
            context.mergeChanges(fromContextDidSave: moveB)
            let (shown, stored) = try shownAndStored(frc)
            #expect(shown == stored, "the controller shows \(shown), the store holds \(stored)")
            #expect(recorder.batches.count == batches + 2, "one batch for each merge")
            // The same save merged again changes nothing and reports nothing; the rows are left alone (a lookup table
            // being built from them in the background stays good).
            let version = frc.engine.rowsVersion
            context.mergeChanges(fromContextDidSave: moveB)
            #expect(recorder.batches.count == batches + 2, "\(recorder.lines.suffix(4))")
            #expect(frc.engine.rowsVersion == version)
        }
    }

    @Test func anObjectReadBeforeTheMergeComesAndGoesWithThePredicate() throws {
        let predicate = "score < 35"
        try context.performAndWait {
            let frc = try controller(predicate: predicate)
            #expect(frc.fetchedObjects?.count == 3)
            let hideC = try saveElsewhere("c", ["score": 50])
            let showD = try saveElsewhere("d", ["score": 5])
            // Read here before the merges: "c" is a result's object, "d" one the results do not hold.
            let c = try #require(frc.fetchedObjects?.first { $0.value(forKey: "name") as? String == "c" })
            #expect(c.value(forKey: "score") as? Int == 50)
            let d = try #require(try context.objects("Item", "name == 'd'").first)
            #expect(d.value(forKey: "score") as? Int == 5)
            context.mergeChanges(fromContextDidSave: hideC)
            context.mergeChanges(fromContextDidSave: showD)
            let (shown, stored) = try shownAndStored(frc, predicate: predicate)
            #expect(shown == stored, "the controller shows \(shown), the store holds \(stored)")
        }
    }
}
