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

    /// Objects whose last reference goes on other threads while their context fetches, faults and looks them up again.
    ///
    /// The context's registry holds stored objects without a reference, and each leaves it in its `deinit` on whatever
    /// thread releases it. Every object the context hands out must be alive, be the one of its ID, and read.
    @Test func objectsReleasedOnOtherThreadsWhileTheirContextFindsThemAgain() throws {
        let seconds = Double(ProcessInfo.processInfo.environment["OCD_STRESS_SECONDS"] ?? "") ?? 2
        let stack = try TestStack(model: try Self.model())
        let context = stack.context()
        let ids = try context.performAndWait {
            let items = try (0..<300).map { (i: Int) in try context.make("Item", ["name": "i" + String(i), "score": i]) }
            try context.save()
            return items.map(\.objectID)
        }
        let deadline = Date().addingTimeInterval(seconds)
        let failures = Failures()
        let releasers = DispatchQueue(label: "releasers", attributes: .concurrent)
        var round = 0
        while Date() < deadline {
            round += 1
            let handedOff: [NSManagedObject] = try context.performAndWait {
                let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
                request.fetchBatchSize = 25
                var objects = try context.fetch(request).map { $0 }  // faults, made or found again
                for id in ids.shuffled().prefix(50) {
                    let object = context.object(with: id)
                    if object.objectID != id { failures.add("round \(round): object(with:) gave \(object.objectID) for \(id)") }
                    if let registered = context.registeredObject(for: id), registered !== object {
                        failures.add("round \(round): two objects for \(id)")
                    }
                    objects.append(object)
                }
                for object in objects.prefix(40) where object.value(forKey: "name") == nil {
                    failures.add("round \(round): \(object.objectID) has no name")
                }
                return objects
            }
            // The context's own references are gone: these are the last, released in pieces on other threads.
            let pieces = stride(from: 0, to: handedOff.count, by: 60).map {
                ObjectBox(Array(handedOff[$0..<min($0 + 60, handedOff.count)]))
            }
            _ = consume handedOff
            for piece in pieces { releasers.async { piece.release() } }
        }
        releasers.sync(flags: .barrier) {}
        let left = context.performAndWait { context.registeredObjects.count }
        #expect(failures.list.isEmpty, "\(failures.list.prefix(5))")
        #expect(left == 0, "every object was released, and its entry with it (\(left) left after \(round) rounds)")
    }

    /// Objects handed to another thread, released there.
    final class ObjectBox: @unchecked Sendable {
        private var objects: [NSManagedObject]
        init(_ objects: [NSManagedObject]) { self.objects = objects }
        func release() { objects = [] }
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
