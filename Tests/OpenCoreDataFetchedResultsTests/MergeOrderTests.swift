import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Saves whose notifications reach a merging context in another order than their commits.
///
/// A save commits, then tells its own observers, then posts `didSaveObjectsNotification`; another context can commit
/// a later change to the same row in between (the saving thread descheduled under load), and a context that merges
/// automatically then receives the later change first. Row keys are never reused and a row's version only grows, so a
/// merging context can tell: a row it has seen deleted does not come back, and an older version of a row does not
/// replace a newer one. Every test ends with the controller's list equal to the store's.
@Suite struct MergeOrderTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("score", .integer32, default: 0)
            }
        }
    }

    /// A watching context with a controller over every item by score and name, merging every save.
    final class Watcher: @unchecked Sendable {
        let context: NSManagedObjectContext
        let controller: NSFetchedResultsController<NSManagedObject>
        let recorder = DifferenceRecorder()

        init(_ stack: TestStack, merging: Bool = true) throws {
            context = stack.context()
            context.automaticallyMergesChangesFromParent = merging
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.sortDescriptors = [FetchSortDescriptor(key: "score"), FetchSortDescriptor(key: "name")]
            controller = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
            controller.delegate = recorder
            try context.performAndWait { try controller.performFetch() }
            recorder.items = context.performAndWait { (controller.fetchedObjects ?? []).map(\.objectID) }
        }

        /// The names and scores the controller lists, once the merges queued so far have run.
        var shown: [String] {
            context.performAndWait {
                context.processPendingChanges()
                return (controller.fetchedObjects ?? []).map { "\($0.string("name") ?? "")=\($0.value(forKey: "score") ?? "")" }
            }
        }

        /// The controller's list and the differences it reported agree.
        var differencesGiveTheList: Bool {
            context.performAndWait { recorder.items == (controller.fetchedObjects ?? []).map(\.objectID) }
        }
    }

    /// What the store holds, as `Watcher.shown` prints it.
    static func stored(_ stack: TestStack) throws -> [String] {
        let fresh = stack.context()
        return try fresh.performAndWait {
            try fresh.objects("Item", sort: ["score", "name"]).map { "\($0.string("name") ?? "")=\($0.value(forKey: "score") ?? "")" }
        }
    }

    /// Saves items with these names and scores.
    static func seed(_ stack: TestStack, _ items: [(String, Int)]) throws {
        let setup = stack.context()
        try setup.performAndWait {
            for (name, score) in items { try setup.make("Item", ["name": name, "score": score]) }
            try setup.save()
        }
    }

    /// Runs `between` once, on the saving thread, after `context`'s next save has committed and before it posts its
    /// notification.
    static func afterNextCommit(of context: NSManagedObjectContext, _ between: @escaping () throws -> Void) -> ContextObservation {
        nonisolated(unsafe) var done = false
        return context.addChangeObserver { change in
            guard change.didSave, !done else { return }
            done = true
            #expect(throws: Never.self) { try between() }
        }
    }

    @Test func aRowDeletedBeforeItsInsertArrivesStaysDeleted() throws {
        let stack = try TestStack(model: try Self.model())
        let watcher = try Watcher(stack)
        let inserter = stack.context(), deleter = stack.context()
        let observation = Self.afterNextCommit(of: inserter) {
            try deleter.performAndWait {
                try deleter.objects("Item", "name == 'late'").forEach(deleter.delete)
                try deleter.save()
            }
        }
        defer { observation.cancel() }
        try inserter.performAndWait {
            try inserter.make("Item", ["name": "late", "score": 1])
            try inserter.make("Item", ["name": "kept", "score": 2])
            try inserter.save()
        }
        #expect(try Self.stored(stack) == ["kept=2"])
        #expect(watcher.shown == ["kept=2"], "the insert's notification came after the delete's")
        #expect(watcher.differencesGiveTheList)
    }

    @Test func anOlderVersionOfARowDoesNotReplaceANewerOne() throws {
        let stack = try TestStack(model: try Self.model())
        try Self.seed(stack, [("a", 1), ("b", 5)])
        let watcher = try Watcher(stack)
        let first = stack.context(), second = stack.context()
        let observation = Self.afterNextCommit(of: first) {
            try second.performAndWait {
                try second.objects("Item", "name == 'a'").first?.setCheckedValue(9, forKey: "score")
                try second.save()
            }
        }
        defer { observation.cancel() }
        try first.performAndWait {
            try first.objects("Item", "name == 'a'").first?.setCheckedValue(3, forKey: "score")
            try first.save()
        }
        #expect(try Self.stored(stack) == ["b=5", "a=9"])
        #expect(watcher.shown == ["b=5", "a=9"], "the first update's notification came after the second's")
        #expect(watcher.differencesGiveTheList)
    }

    @Test func anUpdateOfARowDeletedMeanwhileDoesNotBringItBack() throws {
        let stack = try TestStack(model: try Self.model())
        try Self.seed(stack, [("a", 1), ("b", 2)])
        let watcher = try Watcher(stack)
        // The watcher has never touched the row's object: it holds it as the controller's fetch left it.
        let editor = stack.context(), deleter = stack.context()
        let observation = Self.afterNextCommit(of: editor) {
            try deleter.performAndWait {
                try deleter.objects("Item", "name == 'a'").forEach(deleter.delete)
                try deleter.save()
            }
        }
        defer { observation.cancel() }
        try editor.performAndWait {
            try editor.objects("Item", "name == 'a'").first?.setCheckedValue(7, forKey: "score")
            try editor.save()
        }
        #expect(try Self.stored(stack) == ["b=2"])
        #expect(watcher.shown == ["b=2"])
        #expect(watcher.differencesGiveTheList)
    }

    /// A delete a child saves into its parent is not final: after the parent rolls it back, a sibling's later update
    /// of the row still reaches a third child that merged the delete.
    @Test func aDeleteSavedIntoAParentThatRollsItBackDoesNotHideTheRow() throws {
        let stack = try TestStack(model: try Self.model())
        try Self.seed(stack, [("a", 1), ("b", 2)])
        let parent = stack.context()
        func child() -> NSManagedObjectContext {
            let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
            child.parent = parent
            return child
        }
        let deleter = child(), editor = child(), watcher = child()
        watcher.automaticallyMergesChangesFromParent = true
        // What the watcher's merges report.
        nonisolated(unsafe) var merged: [String] = []
        let observation = watcher.addChangeObserver { change in
            merged += change.deleted.map { "-\($0.string("name") ?? "")" }
            merged += change.updated.map { "\($0.object.string("name") ?? "")=\($0.object.value(forKey: "score") ?? "")" }
        }
        defer { observation.cancel() }
        let held = try watcher.performAndWait { try watcher.objects("Item") }  // registered while the test runs
        defer { withExtendedLifetime(held) {} }
        try deleter.performAndWait {
            try deleter.objects("Item", "name == 'a'").forEach(deleter.delete)
            try deleter.save()
        }
        // (A sibling's save reaches a child through its parent's queue: it is waited for.)
        #expect(eventually { watcher.performAndWait { merged } == ["-a"] })
        parent.performAndWait { parent.rollback() }
        try editor.performAndWait {
            try editor.objects("Item", "name == 'a'").first?.setCheckedValue(5, forKey: "score")
            try editor.save()
        }
        #expect(
            eventually { watcher.performAndWait { merged } == ["-a", "a=5"] },
            "the watcher merged the editor's update of a row its parent brought back: \(watcher.performAndWait { merged })")
    }

    /// The same through persistent history, the way another process's changes arrive: the delete's transaction is
    /// merged first, the insert's save after it.
    @Test func aDeleteMergedFromHistoryKeepsALateInsertOut() throws {
        let stack = try TestStack(model: try Self.model(), history: true)
        let watcher = try Watcher(stack, merging: false)
        let inserter = stack.context(), deleter = stack.context()
        nonisolated(unsafe) var saves: [Notification] = []
        let token = NotificationCenter.default.addObserver(
            forName: NSManagedObjectContext.didSaveObjectsNotification, object: inserter, queue: nil
        ) { saves.append($0) }
        defer { NotificationCenter.default.removeObserver(token) }
        let start = stack.container.persistentStoreCoordinator.currentPersistentHistoryToken(fromStores: nil)
        try inserter.performAndWait {
            try inserter.make("Item", ["name": "late", "score": 1])
            try inserter.make("Item", ["name": "kept", "score": 2])
            try inserter.save()
        }
        try deleter.performAndWait {
            try deleter.objects("Item", "name == 'late'").forEach(deleter.delete)
            try deleter.save()
        }
        let history = try watcher.context.performAndWait {
            try watcher.context.execute(NSPersistentHistoryChangeRequest.fetchHistory(after: start)) as? NSPersistentHistoryResult
        }
        let transactions = history?.result as? [NSPersistentHistoryTransaction] ?? []
        try #require(transactions.count == 2)
        try #require(saves.count == 1)
        watcher.context.performAndWait {
            watcher.context.mergeChanges(fromContextDidSave: transactions[1].objectIDNotification())
            watcher.context.mergeChanges(fromContextDidSave: saves[0])
        }
        #expect(try Self.stored(stack) == ["kept=2"])
        #expect(watcher.shown == ["kept=2"])
        #expect(watcher.differencesGiveTheList)
    }
}
