import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Contexts of one container on several queues at once, for a bounded time.
///
/// A context with a controller merging every save, private-queue contexts editing and saving, child contexts saving
/// into them, batch updates merged, refreshes, a second coordinator whose saves arrive through persistent history and
/// the remote-change notification, and a reader merging the history. Run under ThreadSanitizer (as `.ci/run` does:
/// `OCD_STRESS_ONLY=1 swift test --sanitize=thread --filter ConcurrencyStressTests`) it must report no data race; in
/// any build, every controller's list must equal a fresh fetch at the end.
@Suite struct ConcurrencyStressTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("score", .integer32, default: 0)
                Relationship("group", to: "Group", inverse: "items")
            }
            Entity("Group") {
                Attribute("title", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "group", deleteRule: .nullifyDeleteRule)
            }
        }
    }

    @Test func contextsOnManyQueuesStayConsistent() throws {
        let seconds = Double(ProcessInfo.processInfo.environment["OCD_STRESS_SECONDS"] ?? "") ?? 2
        // With persistent history, and a second coordinator on the file (another process, as far as the first can
        // tell): its saves reach the watching context through the remote-change notification and the history.
        let stack = try TestStack(model: try Self.model(), history: true, remoteChanges: true)
        let remote = NSPersistentContainer(name: "Remote", managedObjectModel: stack.container.managedObjectModel)
        remote.persistentStoreDescriptions = [NSPersistentStoreDescription(url: stack.storeURL)]
        try remote.loadPersistentStores()
        defer { try? remote.removeStores() }
        let setup = stack.context()
        try setup.performAndWait {
            let group = try setup.make("Group", ["title": "g"])
            for i in 0..<50 { try setup.make("Item", ["name": "i\(i)", "score": i, "group": group]) }
            try setup.save()
        }
        // A watching context with a controller, merging every save.
        let watcher = stack.context()
        watcher.automaticallyMergesChangesFromParent = true
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "score"), FetchSortDescriptor(key: "name")]
        let controller = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: watcher, sectionNameKeyPath: nil, cacheName: nil)
        let recorder = DifferenceRecorder()
        controller.delegate = recorder
        try watcher.performAndWait { try controller.performFetch() }
        recorder.items = watcher.performAndWait { (controller.fetchedObjects ?? []).map(\.objectID) }

        let deadline = Date().addingTimeInterval(seconds)
        let failures = Failures()
        let group = DispatchGroup()
        for worker in 0..<5 {
            group.enter()
            DispatchQueue.global().async {
                defer { group.leave() }
                var rng = SeededGenerator(seed: UInt64(worker + 1))
                let context = worker == 4 ? remote.newBackgroundContext() : stack.context()
                context.mergePolicy = .mergeByPropertyObjectTrump
                var round = 0
                while Date() < deadline {
                    round += 1
                    do {
                        let updated = try Self.round(worker, round, context, &rng)
                        // A batch update reaches the contexts it is merged into (the app's job, as in Core Data).
                        if !updated.isEmpty {
                            NSManagedObjectContext.mergeChanges(
                                fromRemoteContextSave: [NSUpdatedObjectsKey: updated], into: [context, watcher])
                        }
                    } catch {
                        failures.add("worker \(worker) round \(round): \(error)")
                    }
                }
            }
        }
        // A reader of the history, merging each transaction into its own context as an app's extension would.
        group.enter()
        DispatchQueue.global().async {
            defer { group.leave() }
            let reader = stack.context()
            var token: NSPersistentHistoryToken?
            while Date() < deadline {
                do {
                    let result = try reader.execute(NSPersistentHistoryChangeRequest.fetchHistory(after: token))
                    for transaction in (result as? NSPersistentHistoryResult)?.result as? [NSPersistentHistoryTransaction] ?? [] {
                        reader.performAndWait { reader.mergeChanges(fromContextDidSave: transaction.objectIDNotification()) }
                        token = transaction.token
                    }
                } catch {
                    failures.add("history reader: \(error)")
                }
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
        group.wait()
        // Let the last merges land (the remote coordinator's through the history), then compare with a fresh fetch.
        _ = eventually {
            let shown = watcher.performAndWait { (controller.fetchedObjects ?? []).compactMap { $0.string("name") } }
            let fresh = stack.context()
            return shown
                == (try? fresh.performAndWait { try fresh.objects("Item", sort: ["score", "name"]).compactMap { $0.string("name") } })
        }
        Thread.sleep(forTimeInterval: 0.3)
        watcher.performAndWait { watcher.processPendingChanges() }
        let shown = watcher.performAndWait { (controller.fetchedObjects ?? []).compactMap { $0.string("name") } }
        let fresh = stack.context()
        let expected = try fresh.performAndWait { try fresh.objects("Item", sort: ["score", "name"]).compactMap { $0.string("name") } }
        #expect(failures.list.isEmpty, "\(failures.list.prefix(5))")
        #expect(shown == expected, "the controller's list is the store's")
        #expect(recorder.items == watcher.performAndWait { (controller.fetchedObjects ?? []).map(\.objectID) }, "the batches give the list")
    }

    /// One round of a worker: edits in its context or in a child of it, a save, now and then a batch update (whose
    /// updated IDs it returns).
    static func round(_ worker: Int, _ round: Int, _ context: NSManagedObjectContext, _ rng: inout SeededGenerator) throws
        -> [NSManagedObjectID]
    {
        let choice = Int.random(in: 0..<10, using: &rng)
        let score = Int.random(in: 0..<1000, using: &rng)
        return try context.performAndWait { () throws -> [NSManagedObjectID] in
            var updated: [NSManagedObjectID] = []
            let items = try context.objects("Item")
            switch choice {
            case 0..<4:
                try context.make("Item", ["name": "w\(worker)-\(round)", "score": score])
            case 4..<6:
                if let item = items.randomElement() { item.setValue(score, forKey: "score") }
            case 6:
                if items.count > 20, let item = items.randomElement() { context.delete(item) }
            case 7:
                // A child edits through this context and saves into it.
                let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
                child.parent = context
                try child.performAndWait {
                    try child.make("Item", ["name": "c\(worker)-\(round)", "score": score])
                    try child.save()
                }
            case 8:
                let update = NSBatchUpdateRequest(entityName: "Item")
                update.predicate = try FetchPredicate(format: "score == %d", score)
                update.propertiesToUpdate = ["score": score + 1]
                update.resultType = .updatedObjectIDsResultType
                updated = (try context.execute(update) as? NSBatchUpdateResult)?.result as? [NSManagedObjectID] ?? []
            default:
                context.refreshAllObjects()
            }
            do {
                try context.save()
            } catch let error as CoreDataError where error.code == .managedObjectMerge || error.code == .objectNotFound {
                context.rollback()  // another worker deleted what this one changed: start over
            }
            return updated
        }
    }

    final class Failures: @unchecked Sendable {
        private let lock = NSLock()
        private var failures: [String] = []
        func add(_ failure: String) { lock.withLock { failures.append(failure) } }
        var list: [String] { lock.withLock { failures } }
    }
}
