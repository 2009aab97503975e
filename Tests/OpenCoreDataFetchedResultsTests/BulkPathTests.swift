import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// Large batches are applied in passes over all results (`processInBulk`) instead of object by object.
///
/// Both paths
/// must tell the delegate the same thing, including where a change cannot be placed and the controller re-fetches.
@Suite struct BulkPathTests {
    func stack() throws -> (TestStack, NSManagedObjectContext, [NSManagedObject]) {
        let model = try NSManagedObjectModel {
            Entity("Item") {
                Attribute("group", .string)
                Attribute("score", .integer64, default: 0)
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        var items: [NSManagedObject] = []
        for (group, score) in [("A", 1), ("A", 2), ("B", 3), ("B", 4), ("C", 5), ("C", 6)] {
            items.append(try context.make("Item", ["group": group, "score": score]))
        }
        try context.save()
        return (stack, context, items)
    }

    /// Two controllers over the same request, one forced to bulk, each with a recorder.
    func pair(_ context: NSManagedObjectContext, sortKeys: [String]) throws -> [(
        NSFetchedResultsController<NSManagedObject>, DelegateRecorder
    )] {
        try [false, true].map { bulk in
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.sortDescriptors = sortKeys.map { FetchSortDescriptor(key: $0) }
            let frc = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group", cacheName: nil)
            if bulk { frc.engine.diagnostics.alwaysBulk = true }
            let recorder = DelegateRecorder()
            recorder.describe = { object in
                let item = object as! NSManagedObject
                let score = (item.value(forKey: "score")) as? Int ?? -1
                return (item.string("group") ?? "") + String(score)
            }
            frc.delegate = recorder
            try frc.performFetch()
            return (frc, recorder)
        }
    }

    func expectSame(
        _ pair: [(NSFetchedResultsController<NSManagedObject>, DelegateRecorder)], _ context: NSManagedObjectContext, sortKeys: [String]
    ) throws {
        let (incremental, bulk) = (pair[0], pair[1])
        #expect(bulk.1.lines == incremental.1.lines)
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = sortKeys.map { FetchSortDescriptor(key: $0) }
        let fresh = sectioned(try context.fetch(request), by: "group")
        #expect(incremental.0.shownItems == fresh)
        #expect(bulk.0.shownItems == fresh)
    }

    @Test func movesInsertsDeletesAndNewSections() throws {
        let (stack, context, items) = try stack()
        _ = stack
        let controllers = try pair(context, sortKeys: ["group", "score"])
        items[0].setValue(10, forKey: "score")  // move within A
        items[2].setValue("C", forKey: "group")  // B → C
        items[3].setValue("D", forKey: "group")  // B empties; D appears
        context.delete(items[4])
        try context.make("Item", ["group": "A", "score": 0])
        items[5].setValue(7, forKey: "score")  // update in place (C6 → C7 stays last in C)
        context.processPendingChanges()
        #expect(controllers[1].0.engine.diagnostics.bulkBatches == 1 && controllers[0].0.engine.diagnostics.bulkBatches == 0)
        #expect(controllers[0].1.lines.contains("section delete at 1: B"))
        try expectSame(controllers, context, sortKeys: ["group", "score"])
        // The bulk pass noted the unsaved object's row (read by its key word in place); the save re-keys it.
        #expect(controllers.map { $0.0.engine.unsavedRows.count } == [1, 1])
        try context.save()
        #expect(controllers.map { $0.0.engine.unsavedRows.count } == [0, 0])
        items[1].setValue(-1, forKey: "score")  // A2 moves before the saved A0
        context.processPendingChanges()
        try expectSame(controllers, context, sortKeys: ["group", "score"])
    }

    @Test func aChangeThatWouldSplitASectionFallsBackToARefetch() throws {
        let (stack, context, items) = try stack()
        _ = stack
        // Sections follow `group`, but the order is by score alone: moving A1 to group C puts a C before A2.
        let controllers = try pair(context, sortKeys: ["score"])
        items[0].setValue("C", forKey: "group")
        context.processPendingChanges()
        #expect(controllers.allSatisfy { $0.0.engine.diagnostics.fullRefetches == 1 }, "both paths re-fetch")
        try expectSame(controllers, context, sortKeys: ["score"])
    }

    @Test func sectionsThatChangeOrderFallBackToARefetch() throws {
        let (stack, context, items) = try stack()
        _ = stack
        // Sections by group, sorted by score: all of A jump behind C (A's order against B and C changes).
        let controllers = try pair(context, sortKeys: ["score"])
        items[0].setValue(100, forKey: "score")
        items[1].setValue(101, forKey: "score")
        context.processPendingChanges()
        #expect(controllers.allSatisfy { $0.0.engine.diagnostics.fullRefetches == 1 }, "both paths re-fetch")
        try expectSame(controllers, context, sortKeys: ["score"])
    }
}
