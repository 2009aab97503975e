import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// Rows whose primary keys are too large for a result row's one-word key (2⁴⁸ and more, which only another program
/// writing the file makes) are fetched, moved, inserted beside and deleted like any other.
@Suite struct LargePrimaryKeyTests {
    @Test func rowsWithPrimaryKeysTooLargeToPackMoveLikeOthers() throws {
        let stack = try TestStack(model: try SectionCacheTests.model())
        let setup = stack.context()
        try setup.performAndWait {
            for i in 0..<40 { try setup.make("Item", ["name": "item \(i)", "group": "g\(i % 3)", "score": i]) }
            try setup.save()
        }
        // Every other row gets a primary key of 2⁴⁸ or more; new rows are numbered after them.
        let offset: Int64 = 1 << 48
        try DatabaseQueue(path: stack.storeURL.path).write { db in
            try db.execute(sql: "UPDATE ZITEM SET Z_PK = Z_PK + ? WHERE Z_PK % 2 = 0", arguments: [offset])
            try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = (SELECT MAX(Z_PK) FROM ZITEM) WHERE Z_NAME = 'Item'")
        }
        for batchSize in [0, 5] {
            let context = stack.context()
            try context.performAndWait {
                let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
                request.sortDescriptors = [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "score")]
                request.fetchBatchSize = batchSize
                let frc = NSFetchedResultsController(
                    fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group", cacheName: nil)
                let recorder = DelegateRecorder()
                frc.delegate = recorder
                try frc.performFetch()
                #expect(try frc.namesBySection == stack.storedNamesBySection())
                #expect(frc.engine.rows.filter { $0.packedKey == ResultRow.wideTag }.count == 20, "half the rows keep boxed keys")
                let wide = try #require(frc.fetchedObjects?.first { $0.objectID.primaryKey >= offset })
                // Moved within and across sections, a new row beside it, one deleted; saved; then many at once, applied
                // in one pass over the results (the bulk route).
                wide.setValue(1_000, forKey: "score")
                try context.make("Item", ["name": "new \(batchSize)", "group": "g1", "score": 7])
                context.delete(try #require(frc.fetchedObjects?.last { $0.objectID.primaryKey >= offset && $0 !== wide }))
                try context.save()
                #expect(try frc.namesBySection == stack.storedNamesBySection(), "batch size \(batchSize)")
                frc.engine.diagnostics.alwaysBulk = true
                for object in frc.fetchedObjects ?? [] where object.objectID.primaryKey % 3 == 0 {
                    object.setValue("g\((object.value(forKey: "score") as! Int + batchSize) % 4)", forKey: "group")
                }
                try context.save()
                #expect(try frc.namesBySection == stack.storedNamesBySection(), "batch size \(batchSize)")
                #expect(recorder.batches.count == 2 && frc.engine.diagnostics.bulkBatches == 1, "batch size \(batchSize)")
            }
        }
    }
}
