import Foundation
import GRDB
import Logging
import OpenCoreData
import OpenCoreDataTesting
import Synchronization
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// Failures the controller cannot throw reach the user — through the delegate and the controller's logger — and the
/// controller recovers with a full re-fetch and diff instead of going stale.
@Suite struct ControllerFailureTests {
    /// Records log messages (swift-log's `LoggingSystem` can be bootstrapped once per process; a controller's logger
    /// can be replaced instead).
    final class LogCapture: LogHandler, @unchecked Sendable {
        let lines = Mutex<[String]>([])
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lines.withLock { $0.append("\(event.level): \(event.message)") }
        }
    }

    final class FailureRecorder: NSFetchedResultsControllerDelegate {
        var failures: [String] = []
        var batches = 0
        func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) { batches += 1 }
        func controller(_ controller: NSFetchedResultsController<any NSFetchRequestResult>, didFailWith error: any Error) {
            failures.append("\(error)")
        }
    }

    /// A controller over the items sorted by score, logging to `capture`, fetched with `delegate` set once items
    /// scored `scores` are saved.
    struct Scenario {
        let stack: TestStack
        let context: NSManagedObjectContext
        let frc: NSFetchedResultsController<NSManagedObject>
        let capture = LogCapture()

        init(scores: [Int], fetchLimit: Int = 0, cacheName: String? = nil, delegate: any NSFetchedResultsControllerDelegate) throws {
            stack = try TestStack(model: try SectionCacheTests.model())
            let context = stack.context()
            self.context = context
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.sortDescriptors = [FetchSortDescriptor(key: "score")]
            request.fetchLimit = fetchLimit
            let frc = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: cacheName)
            self.frc = frc
            frc.logger = Logger(label: "test") { [capture] _ in capture }
            try context.performAndWait {
                for score in scores { try context.make("Item", ["name": "s\(score)", "group": "g", "score": score]) }
                try context.save()
                frc.delegate = delegate
                try frc.performFetch()
            }
        }

        /// A table that applies every batch `recorder` hears, starting from the fetched results.
        func table(following recorder: DelegateRecorder) -> TableViewModel<ObjectIdentifier> {
            let table = recorder.followedTable(of: frc)
            return table
        }
    }

    @Test func aFailedRefetchIsReportedAndTheNextChangeReportsTheWholeDifference() throws {
        let recorder = DelegateRecorder()
        // A window: every change re-fetches and diffs.
        let scenario = try Scenario(scores: [5, 3, 9], fetchLimit: 3, delegate: recorder)
        let (stack, context, frc, capture) = (scenario.stack, scenario.context, scenario.frc, scenario.capture)
        let table = scenario.table(following: recorder)

        // The store's table goes away under the controller: the re-fetch that a change needs fails.
        let store = try DatabaseQueue(path: stack.storeURL.path)
        try store.write { db in try db.execute(sql: "ALTER TABLE ZITEM RENAME TO ZITEM_AWAY") }
        try context.performAndWait {
            try context.make("Item", ["name": "s1", "group": "g", "score": 1])
            context.processPendingChanges()
        }
        #expect(recorder.batches.isEmpty, "nothing reported for a change the controller could not follow")
        let logged = capture.lines.withLock { $0 }
        #expect(logged.count == 1 && logged[0].hasPrefix("error: Could not re-fetch the results for entity Item"), "\(logged)")
        #expect(logged.first?.contains("no such table") == true, "\(logged)")
        #expect(frc.shownItems == table.items, "the results stay as the delegate last saw them")

        // Once the store can be read again, the next change brings the delegate up to date in one batch.
        try store.write { db in try db.execute(sql: "ALTER TABLE ZITEM_AWAY RENAME TO ZITEM") }
        try context.performAndWait {
            try context.make("Item", ["name": "s2", "group": "g", "score": 2])
            context.processPendingChanges()
        }
        #expect(recorder.batches.count == 1)
        let fresh = try context.performAndWait { try context.objects("Item", sort: ["score"]).prefix(3).map { $0.string("name") ?? "?" } }
        #expect((frc.fetchedObjects ?? []).map { $0.string("name") ?? "?" } == fresh)
        #expect(fresh == ["s1", "s2", "s3"])
        #expect(capture.lines.withLock { $0.count } == 1, "the recovery logs nothing more")
        #expect(frc.shownItems == table.items)
    }

    @Test func aRefetchThatFailedIsRedoneByTheNextChangeWithoutAWindow() throws {
        let recorder = DelegateRecorder()
        let scenario = try Scenario(scores: [5, 3, 9], delegate: recorder)
        let (stack, context, frc) = (scenario.stack, scenario.context, scenario.frc)
        let table = scenario.table(following: recorder)
        // A reset makes the controller re-fetch; the store cannot be read at that moment.
        let store = try DatabaseQueue(path: stack.storeURL.path)
        try store.write { db in try db.execute(sql: "ALTER TABLE ZITEM RENAME TO ZITEM_AWAY") }
        context.performAndWait { context.reset() }
        #expect(recorder.batches.isEmpty)
        // Meanwhile another writer (no notification reaches this context) adds a row.
        try store.write { db in
            try db.execute(sql: "ALTER TABLE ZITEM_AWAY RENAME TO ZITEM")
            try db.execute(
                sql: "INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZNAME, ZGROUP, ZSCORE) SELECT 1000, Z_ENT, 1, 's0', 'g', 0 FROM ZITEM LIMIT 1")
        }
        // The next change, however small, brings the delegate up to date: the other writer's row included.
        try context.performAndWait {
            try context.make("Item", ["name": "s7", "group": "g", "score": 7])
            context.processPendingChanges()
        }
        #expect(recorder.batches.count == 1)
        #expect((frc.fetchedObjects ?? []).map { $0.string("name") ?? "?" } == ["s0", "s3", "s5", "s7", "s9"])
        // (The reset made new objects for the rows that stayed, so the table is compared by its shape.)
        #expect(table.items.sections.map(\.items.count) == [5], "\(recorder.lines)")
    }

    @Test func theDelegateHearsOfTheFailure() throws {
        let failures = FailureRecorder()
        let scenario = try Scenario(scores: [], fetchLimit: 2, delegate: failures)
        let (stack, context) = (scenario.stack, scenario.context)
        let store = try DatabaseQueue(path: stack.storeURL.path)
        try store.write { db in try db.execute(sql: "DROP TABLE ZITEM") }
        try context.performAndWait {
            try context.make("Item", ["name": "x", "group": "g", "score": 1])
            context.processPendingChanges()
        }
        #expect(failures.failures.count == 1 && failures.failures[0].contains("no such table"), "\(failures.failures)")
    }

    @Test func aSectionCacheThatCannotBeWrittenIsReported() throws {
        let name = "unwritable-\(UUID().uuidString)"
        // A folder where the cache file should be: the atomic write cannot replace it.
        let blocker = SectionCache.url(named: name)
        try FileManager.default.createDirectory(at: blocker.appendingPathComponent("inside"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: blocker) }
        let failures = FailureRecorder()
        let scenario = try Scenario(scores: [1], cacheName: name, delegate: failures)
        let (context, capture) = (scenario.context, scenario.capture)
        SectionCache.waitForWrites()
        context.performAndWait {}  // the report hops back to the context's queue
        #expect(failures.failures.count == 1, "\(failures.failures)")
        #expect(capture.lines.withLock { $0.first?.contains("Could not write the section cache '\(name)'") } == true)
    }

    /// Another writer's changes arrive as object IDs while the store cannot be read: nothing is taken for deleted (the
    /// controller reports no delete, the objects stay), and once the store answers the context catches up by itself
    /// — the update and the insert reach the delegate, and the table it keeps matches the controller.
    @Test func aMergeThatCannotReadTheStoreKeepsItsObjectsAndCatchesUpLater() throws {
        let recorder = DelegateRecorder()
        let scenario = try Scenario(scores: [5, 3, 9], delegate: recorder)
        let (stack, context, frc) = (scenario.stack, scenario.context, scenario.frc)
        let table = scenario.table(following: recorder)
        // Another context saves an edit and an insert; this one hears of them only by object IDs.
        let writer = stack.context()
        let (updated, inserted) = try writer.performAndWait {
            let five = try #require(try writer.objects("Item", "score == 5").first)
            five.setValue(50, forKey: "score")
            let four = try writer.make("Item", ["name": "s4", "group": "g", "score": 4])
            try writer.save()
            return (five.objectID, four.objectID)
        }
        let note = Notification(
            name: .NSManagedObjectContextDidSave, object: nil,
            userInfo: [NSUpdatedObjectIDsKey: Set([updated]), NSInsertedObjectIDsKey: Set([inserted])])
        let store = try DatabaseQueue(path: stack.storeURL.path)
        try store.write { db in try db.execute(sql: "ALTER TABLE ZITEM RENAME TO ZITEM_AWAY") }
        context.performAndWait { context.mergeChanges(fromContextDidSave: note) }
        let during = context.performAndWait {
            (recorder.lines, frc.fetchedObjects?.map { $0.string("name") ?? "?" } ?? [], context.registeredObject(for: updated) != nil)
        }
        #expect(!during.0.contains { $0.contains("delete") }, "no delete for rows that could not be read: \(during.0)")
        #expect(during.1 == ["s3", "s5", "s9"] && during.2, "the objects stay: \(during.1)")
        // The store answers again; the context's own retry (no further change, no call) brings the writer's changes.
        try store.write { db in try db.execute(sql: "ALTER TABLE ZITEM_AWAY RENAME TO ZITEM") }
        let deadline = Date().addingTimeInterval(10)
        var names: [String] = []
        while Date() < deadline {
            names = context.performAndWait { frc.fetchedObjects?.map { $0.string("name") ?? "?" } ?? [] }
            if names == ["s3", "s4", "s9", "s5"] { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(names == ["s3", "s4", "s9", "s5"], "\(recorder.lines)")
        context.performAndWait {
            #expect(frc.shownItems == table.items)
            #expect(!recorder.lines.contains { $0.contains("delete") }, "\(recorder.lines)")
            #expect(context.registeredObject(for: updated)?.value(forKey: "score") as? Int64 == 50)
        }
    }
}
