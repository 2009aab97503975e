import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Core Data's query generations: a pinned context reads the store as it was when pinned (fetches, counts, faults,
/// relationship faults) while other contexts save, until it saves, merges, is reset or is unpinned.
@Suite struct QueryGenerationTests {
    /// A store file with folder "Inbox" holding items a and b.
    func seeded() throws -> TestStack {
        let stack = try TestStack(model: try NestedContextTests.model())
        let context = stack.context()
        let inbox = try context.make("Folder", ["name": "Inbox"])
        try context.make("Item", ["title": "a", "rank": 1, "folder": inbox])
        try context.make("Item", ["title": "b", "rank": 2, "folder": inbox])
        try context.save()
        return stack
    }

    func titles(_ context: NSManagedObjectContext) throws -> [String] {
        try context.objects("Item", sort: ["title"]).compactMap { $0.string("title") }
    }

    /// Another context renames a to "A", adds c and deletes b, and saves.
    func changeElsewhere(_ stack: TestStack) throws {
        let other = stack.context()
        try other.objects("Item", "title == 'a'").first?.setValue("A", forKey: "title")
        try other.make("Item", ["title": "c", "folder": try other.objects("Folder").first])
        try other.objects("Item", "title == 'b'").first.map(other.delete)
        try other.save()
    }

    @Test func aPinnedContextReadsTheStoreAsItWasUntilUnpinned() throws {
        let stack = try seeded()
        let context = stack.context()
        #expect(context.queryGenerationToken == nil)
        try context.setQueryGenerationFrom(.current)
        let token = try #require(context.queryGenerationToken)
        #expect(token != .current)
        let aID = try #require(try context.objects("Item", "title == 'a'").first?.objectID)
        let inboxID = try #require(try context.objects("Folder").first?.objectID)
        context.reset()  // forget what was read: faults must read the store again (reset moves to the latest …)
        try context.setQueryGenerationFrom(token)  // … so pin to the same generation again
        try changeElsewhere(stack)

        #expect(try titles(context) == ["a", "b"])
        #expect(try context.count(for: NSFetchRequest<NSManagedObject>(entityName: "Item")) == 2)
        #expect(context.object(with: aID).string("title") == "a")  // a fault fired at the generation
        let items = context.object(with: inboxID).value(forKey: "items") as? NSOrderedSet
        #expect(items?.count == 2)  // the to-many as it was

        // Another context can share the generation.
        let second = stack.context()
        try second.setQueryGenerationFrom(token)
        #expect(try titles(second) == ["a", "b"])

        try context.setQueryGenerationFrom(nil)
        #expect(context.queryGenerationToken == nil)
        #expect(try titles(context) == ["A", "c"])
        // Pinning again takes the latest data.
        try context.setQueryGenerationFrom(.current)
        #expect(try titles(context) == ["A", "c"])
    }

    @Test func savingMergingAndResettingMoveToTheLatestGeneration() throws {
        let stack = try seeded()
        let context = stack.context()
        try context.setQueryGenerationFrom(.current)
        try changeElsewhere(stack)
        #expect(try titles(context) == ["a", "b"])
        // Its own save moves it on: it sees what others saved before.
        try context.make("Item", ["title": "d"])
        try context.save()
        #expect(try titles(context) == ["A", "c", "d"])
        #expect(context.queryGenerationToken != nil)

        // A merge of another context's save moves it on too.
        let other = stack.context()
        try other.make("Item", ["title": "e"])
        let later = stack.context()
        try later.make("Item", ["title": "f"])
        try later.save()
        #expect(try titles(context) == ["A", "c", "d"])  // pinned: f not seen yet
        nonisolated(unsafe) var saved: Notification?
        let token = NotificationCenter.default.addObserver(
            forName: NSManagedObjectContext.didSaveObjectsNotification, object: other, queue: nil
        ) {
            saved = $0
        }
        try other.save()
        NotificationCenter.default.removeObserver(token)
        context.mergeChanges(fromContextDidSave: try #require(saved))
        #expect(try titles(context) == ["A", "c", "d", "e", "f"])

        let last = stack.context()
        try last.make("Item", ["title": "g"])
        try last.save()
        #expect(try titles(context).last == "f")
        context.reset()
        #expect(try titles(context).last == "g")
        #expect(context.queryGenerationToken != nil)
    }

    @Test func storesThatCannotKeepAGenerationSaySo() throws {
        let memory = try TestStack(model: try NestedContextTests.model(), inMemory: true)
        #expect {
            try memory.context().setQueryGenerationFrom(.current)
        } throws: { ($0 as? CoreDataError)?.message.contains("in memory") == true }

        let stack = try seeded()
        let parent = stack.context()
        let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        child.parent = parent
        #expect {
            try child.setQueryGenerationFrom(.current)
        } throws: { ($0 as? CoreDataError)?.message.contains("pin the parent") == true }

        // A token of another coordinator's store is refused.
        let otherStack = try seeded()
        let elsewhere = otherStack.context()
        try elsewhere.setQueryGenerationFrom(.current)
        let foreign = try #require(elsewhere.queryGenerationToken)
        #expect(throws: CoreDataError.self) { try parent.setQueryGenerationFrom(foreign) }
        #expect(parent.queryGenerationToken == nil)
    }
}

/// A PostgreSQL store cannot pin a context to a query generation (Core Data pins SQLite stores only): the error says so.
@Suite(.enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLQueryGenerationTests {
    @Test func pinningAContextIsRefusedNamingTheStoreType() throws {
        let places = StorePlaces(.postgreSQL)
        let stack = try TestStack(model: try NestedContextTests.model(), storeAt: try places.url("Generations"))
        let context = stack.context()
        #expect {
            try context.setQueryGenerationFrom(.current)
        } throws: { ($0 as? CoreDataError)?.message.contains("need SQLite store files") == true }
        #expect(context.queryGenerationToken == nil)
        try context.make("Item", ["title": "a"])
        try context.save()
        #expect(try context.objects("Item").count == 1)
    }
}
