import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// Persistent history: every save and batch request recorded as a transaction in Apple's tables, fetched and deleted
/// by token, date or transaction, merged into contexts exactly, and read from stores Apple's Core Data wrote.
@Suite struct PersistentHistoryTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Folder") {
                Attribute("name", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "folder", deleteRule: .cascadeDeleteRule)
            }
            Entity("Item") {
                Attribute("title", .string, preservesValueInHistoryOnDeletion: true)
                Attribute("score", .integer32, default: 0)
                Attribute("tag", .uuid, preservesValueInHistoryOnDeletion: true)
                Relationship("folder", to: "Folder", inverse: "items")
                Relationship("labels", to: "Label", toMany: true, inverse: "items")
            }
            Entity("Label") {
                Attribute("text", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "labels")
            }
        }
    }

    /// A container on the model with history on (or off), on `url`.
    static func container(_ model: NSManagedObjectModel, at url: URL, history: Bool = true, remote: Bool = false) throws
        -> NSPersistentContainer
    {
        let container = NSPersistentContainer(name: "History", managedObjectModel: model)
        let description = NSPersistentStoreDescription(url: url)
        if history { description.setOption(true, forKey: NSPersistentHistoryTrackingKey) }
        if remote { description.setOption(true, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey) }
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        return container
    }

    static func transactions(_ context: NSManagedObjectContext, after token: NSPersistentHistoryToken? = nil) throws
        -> [NSPersistentHistoryTransaction]
    {
        let result = try context.execute(NSPersistentHistoryChangeRequest.fetchHistory(after: token)) as? NSPersistentHistoryResult
        return try #require(result?.result as? [NSPersistentHistoryTransaction])
    }

    static func summary(_ transaction: NSPersistentHistoryTransaction) -> [String] {
        (transaction.changes ?? []).map { change in
            let kind = ["insert", "update", "delete"][change.changeType.rawValue]
            let properties = change.updatedProperties.map { " " + $0.map(\.name).sorted().joined(separator: ",") } ?? ""
            return "\(kind) \(change.changedObjectID.entity.name)\(properties)"
        }
    }

    @Test func eachSaveIsOneTransactionWithItsChangesAuthorAndTombstones() throws {
        try Self.eachSaveIsOneTransactionWithItsChangesAuthorAndTombstones(StorePlaces(.sqlite))
    }

    static func eachSaveIsOneTransactionWithItsChangesAuthorAndTombstones(_ places: StorePlaces) throws {
        let container = try Self.container(try Self.model(), at: try places.url("H"))
        let context = container.newBackgroundContext()
        context.name = "editor"
        context.transactionAuthor = "import"
        let tag = UUID()
        try context.performAndWait {
            let folder = try context.make("Folder", ["name": "inbox"])
            for i in 0..<3 { try context.make("Item", ["title": "t\(i)", "score": i, "folder": folder, "tag": i == 2 ? tag : nil]) }
            try context.save()
            context.transactionAuthor = "edit"
            let items = try context.objects("Item", sort: ["title"])
            items[0].setValue(Int32(10), forKey: "score")
            items[1].setValue("renamed", forKey: "title")
            items[1].setValue(nil, forKey: "folder")
            context.delete(items[2])
            try context.save()
        }
        let all = try context.performAndWait { try Self.transactions(context) }
        #expect(all.count == 2)
        #expect(all.map(\.author) == ["import", "edit"] && all.allSatisfy { $0.contextName == "editor" })
        #expect(all[0].transactionNumber < all[1].transactionNumber && all[0].timestamp <= all[1].timestamp)
        #expect(all.allSatisfy { !$0.processID.isEmpty && !$0.bundleID.isEmpty && $0.storeID == all[0].storeID })
        #expect(Self.summary(all[0]) == ["insert Folder", "insert Item", "insert Item", "insert Item"])
        // The folder lost two items: its to-many changed too.
        #expect(
            Set(Self.summary(all[1])) == ["update Item score", "update Item folder,title", "delete Item", "update Folder items"],
            "\(Self.summary(all[1]))")
        let deleted = try #require(all[1].changes?.first { $0.changeType == .delete })
        #expect(deleted.tombstone?["title"] as? String == "t2" && deleted.tombstone?["tag"] as? UUID == tag)
        #expect(deleted.transaction === all[1] && all[1].changes?.first { $0.changeType == .update }?.tombstone == nil)
        // After a token: only what came later; the token belongs to this store.
        #expect(
            try context.performAndWait { try Self.transactions(context, after: all[0].token) }.map(\.transactionNumber) == [
                all[1].transactionNumber
            ])
        #expect(container.persistentStoreCoordinator.currentPersistentHistoryToken(fromStores: nil) == all[1].token)
    }

    @Test func linksOfManyToManyRelationshipsAreUpdatesOfBothEnds() throws {
        try Self.linksOfManyToManyRelationshipsAreUpdatesOfBothEnds(StorePlaces(.sqlite))
    }

    static func linksOfManyToManyRelationshipsAreUpdatesOfBothEnds(_ places: StorePlaces) throws {
        let container = try Self.container(try Self.model(), at: try places.url("H"))
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let label = try context.make("Label", ["text": "red"])
            try context.make("Item", ["title": "a"])
            try context.save()
            let item = try context.objects("Item")[0]
            item.setValue(Set([label]), forKey: "labels")
            try context.save()
            item.setValue(Set<NSManagedObject>(), forKey: "labels")
            item.setValue(Int32(3), forKey: "score")
            try context.save()
        }
        let all = try context.performAndWait { try Self.transactions(context) }
        #expect(
            all.map { Self.summary($0).sorted() } == [
                ["insert Item", "insert Label"], ["update Item labels", "update Label items"],
                ["update Item labels,score", "update Label items"],
            ], "\(all.map(Self.summary))")
    }

    @Test func fetchRequestsNarrowTheHistoryByTransactionOrChange() throws {
        try Self.fetchRequestsNarrowTheHistoryByTransactionOrChange(StorePlaces(.sqlite))
    }

    static func fetchRequestsNarrowTheHistoryByTransactionOrChange(_ places: StorePlaces) throws {
        let container = try Self.container(try Self.model(), at: try places.url("H"))
        let context = container.newBackgroundContext()
        for (author, entity) in [("app", "Item"), ("importer", "Label"), ("app", "Label"), ("importer", "Item")] {
            context.transactionAuthor = author
            try context.performAndWait {
                try context.make(entity, [:])
                try context.save()
            }
        }
        let others = try #require(NSPersistentHistoryTransaction.fetchRequest)
        others.predicate = try FetchPredicate(format: "author != %@", "app")
        let request = NSPersistentHistoryChangeRequest.fetchHistory(withFetch: others)
        let byAuthor = try #require(
            (try context.execute(request) as? NSPersistentHistoryResult)?.result as? [NSPersistentHistoryTransaction])
        #expect(byAuthor.map(\.author) == ["importer", "importer"])
        // A change request keeps the matching changes; with a token, only what came after it.
        let labels = try #require(NSPersistentHistoryChange.fetchRequest)
        labels.predicate = try FetchPredicate(format: "changedEntity == 'Label' AND transaction.author == 'app'")
        let after = NSPersistentHistoryChangeRequest.fetchHistory(after: nil as NSPersistentHistoryToken?)
        after.fetchRequest = labels
        after.resultType = .changesOnly
        let changes = try #require((try context.execute(after) as? NSPersistentHistoryResult)?.result as? [NSPersistentHistoryChange])
        #expect(changes.map { $0.changedObjectID.entity.name } == ["Label"] && changes.first?.transaction?.author == "app")
        // A predicate over a key history does not have is named.
        let bad = try #require(NSPersistentHistoryTransaction.fetchRequest)
        bad.predicate = try FetchPredicate(format: "colour == 'red'")
        let error = #expect(throws: CoreDataError.self) {
            try context.execute(NSPersistentHistoryChangeRequest.fetchHistory(withFetch: bad))
        }
        #expect(error?.message.contains("no key 'colour'") == true, "\(error?.message ?? "")")
    }

    @Test func batchRequestsCascadesAndNullifiesAreRecorded() throws {
        try Self.batchRequestsCascadesAndNullifiesAreRecorded(StorePlaces(.sqlite))
    }

    static func batchRequestsCascadesAndNullifiesAreRecorded(_ places: StorePlaces) throws {
        let container = try Self.container(try Self.model(), at: try places.url("H"))
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let folder = try context.make("Folder", ["name": "f"])
            for i in 0..<4 { try context.make("Item", ["title": "t\(i)", "folder": i < 2 ? folder : nil]) }
            try context.save()
        }
        let start = container.persistentStoreCoordinator.currentPersistentHistoryToken(fromStores: nil)
        let insert = NSBatchInsertRequest(entityName: "Item", objects: [["title": "b0"], ["title": "b1"]])
        _ = try context.execute(insert)
        let update = NSBatchUpdateRequest(entityName: "Item")
        update.predicate = try FetchPredicate(format: "title BEGINSWITH 'b'")
        update.propertiesToUpdate = ["score": 7]
        _ = try context.execute(update)
        // Deleting the folder cascades to its two items.
        _ = try context.execute(NSBatchDeleteRequest(fetchRequest: NSFetchRequest<NSManagedObject>(entityName: "Folder")))
        let later = try context.performAndWait { try Self.transactions(context, after: start) }
        #expect(
            later.map { Self.summary($0).sorted() } == [
                ["insert Item", "insert Item"], ["update Item score", "update Item score"],
                ["delete Folder", "delete Item", "delete Item"],
            ], "\(later.map(Self.summary))")
        #expect(
            later[2].changes?.count == 3 && later[2].changes?.compactMap { $0.tombstone?["title"] as? String }.sorted() == ["t0", "t1"])
    }

    /// A store followed for remote changes tells its own transactions from others' without keeping them: those that
    /// follow the cursor directly move it, and the rest go with the next notification.
    @Test func ownTransactionsDoNotPileUpWhileFollowingOtherWriters() throws {
        try Self.ownTransactionsDoNotPileUpWhileFollowingOtherWriters(StorePlaces(.sqlite))
    }

    static func ownTransactionsDoNotPileUpWhileFollowingOtherWriters(_ places: StorePlaces) throws {
        let url = try places.url("H")
        let watched = try Self.container(try Self.model(), at: url, remote: true)
        let store = try #require(watched.persistentStoreCoordinator.persistentStores.first as? any RemoteChangeStore)
        let context = watched.newBackgroundContext()
        for i in 0..<50 {
            try context.performAndWait {
                try context.make("Item", ["title": "own\(i)"])
                try context.save()
            }
        }
        // (PostgreSQL's watcher passes own commits at its next poll, within seconds. The waits below end as soon as the
        // condition holds; their bounds are long because the whole suite in parallel once starved the watcher for
        // more than 10 s on CI's two cores.)
        #expect(eventually(within: 60) { store.pendingOwnHistoryTransactions == 0 })
        // Another writer in between: own transactions wait for the notification, which takes them.
        let other = try Self.container(try Self.model(), at: url)
        let theirs = other.newBackgroundContext()
        try theirs.performAndWait {
            try theirs.make("Item", ["title": "theirs"])
            try theirs.save()
        }
        try context.performAndWait {
            try context.make("Item", ["title": "after"])
            try context.save()
        }
        #expect(eventually(within: 60) { store.pendingOwnHistoryTransactions == 0 })
        let merged = watched.newBackgroundContext()
        #expect(try merged.performAndWait { try merged.objects("Item").count } == 52)
    }

    /// The race behind a flaky wait: an own commit right after another writer's is passed by that one's notification.
    ///
    /// Another writer commits, then this store commits at once, before the remote-change notification of the first
    /// commit moved the cursor; that notification hands over history up to the other writer's transaction only. The
    /// own commit right after it must not stay pending until yet another writer commits (none may): the notification
    /// passes it too.
    @Test func anOwnCommitRightAfterAnotherWritersIsPassedByTheNotificationOfThatOne() throws {
        let url = try StorePlaces(.sqlite).url("Race")
        let watched = try Self.container(try Self.model(), at: url)
        let store = try #require(watched.persistentStoreCoordinator.persistentStores.first as? any RemoteChangeStore & HistoryStore)
        _ = try store.startFollowingHistory()
        let other = try Self.container(try Self.model(), at: url)
        let theirs = other.newBackgroundContext()
        try theirs.performAndWait {
            try theirs.make("Item", ["title": "theirs"])
            try theirs.save()
        }
        let theirNumber = try #require(try store.lastHistoryTransaction())
        let context = watched.newBackgroundContext()
        try context.performAndWait {
            try context.make("Item", ["title": "mine"])
            try context.save()
        }
        #expect(store.pendingOwnHistoryTransactions == 1)
        // The notification of their commit, read before mine landed, hands over theirs alone, and passes mine.
        let taken = try #require(try store.takeOthersHistory(through: theirNumber))
        #expect(taken.transactions.map(\.number) == [theirNumber] && taken.last == theirNumber)
        #expect(store.pendingOwnHistoryTransactions == 0)
        // The next other writer's commit is handed over, and mine is not.
        try theirs.performAndWait {
            try theirs.make("Item", ["title": "theirs again"])
            try theirs.save()
        }
        let next = try #require(try store.takeOthersHistory(through: nil))
        #expect(next.transactions.map(\.number) == [theirNumber + 2])
    }

    /// A container that watches for other writers stops watching when it goes away: its coordinator, stores and
    /// watcher are freed with it, after its contexts merged another writer's commits. (A watcher left polling every 5 ms
    /// for each container a process ever opened would slow everything else in the process down.)
    @Test func aWatchingContainerIsFreedWhenItsUserLetsGo() throws {
        let url = try StorePlaces(.sqlite).url("Freed")
        weak var coordinator: NSPersistentStoreCoordinator?
        weak var store: AnyObject?
        try {
            let watched = try Self.container(try Self.model(), at: url, remote: true)
            coordinator = watched.persistentStoreCoordinator
            store = watched.persistentStoreCoordinator.persistentStores.first
            let view = watched.viewContext
            view.automaticallyMergesChangesFromParent = true
            let other = try Self.container(try Self.model(), at: url)
            let theirs = other.newBackgroundContext()
            let posted = PostedFlag()
            let observer = NotificationCenter.default.addObserver(
                forName: .NSPersistentStoreRemoteChange, object: watched.persistentStoreCoordinator, queue: nil
            ) { _ in posted.set() }
            defer { NotificationCenter.default.removeObserver(observer) }
            try theirs.performAndWait {
                try theirs.make("Item", ["title": "theirs again"])
                try theirs.save()
            }
            #expect(eventually(within: 60) { posted.isSet })
            #expect(try view.performAndWait { try view.objects("Item").count } == 1)
        }()
        #expect(eventually(within: 10) { coordinator == nil && store == nil })
    }

    /// Whether a notification came (set on the poster's thread, read on the test's).
    final class PostedFlag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set() { lock.withLock { value = true } }
        var isSet: Bool { lock.withLock { value } }
    }

    /// A save writing two stores (one per configuration) commits them in one transaction each, nested: their history
    /// transactions are noted as this coordinator's own when the whole commits, so they do not pile up either.
    @Test func savesAcrossConfiguredStoresDoNotPileUpOwnTransactions() throws {
        try Self.savesAcrossConfiguredStoresDoNotPileUpOwnTransactions(StorePlaces(.sqlite))
    }

    static func savesAcrossConfiguredStoresDoNotPileUpOwnTransactions(_ places: StorePlaces) throws {
        let model = try NSManagedObjectModel(configurations: ["A": ["Item"], "B": ["Label"]]) {
            Entity("Item") { Attribute("title", .string) }
            Entity("Label") { Attribute("text", .string) }
        }
        let container = NSPersistentContainer(name: "Configured", managedObjectModel: model)
        container.persistentStoreDescriptions = try ["A", "B"].map { configuration in
            let description = NSPersistentStoreDescription(url: try places.url(configuration))
            description.configuration = configuration
            description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey)
            description.setOption(true as NSNumber, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey)
            return description
        }
        try container.loadPersistentStores()
        let stores = container.persistentStoreCoordinator.persistentStores.compactMap { $0 as? any RemoteChangeStore & HistoryStore }
        let context = container.newBackgroundContext()
        for i in 0..<20 {
            try context.performAndWait {
                try context.make("Item", ["title": "item\(i)"])
                try context.make("Label", ["text": "label\(i)"])
                try context.save()
            }
        }
        #expect(stores.count == 2)
        #expect(eventually(within: 10) { stores.allSatisfy { $0.pendingOwnHistoryTransactions == 0 } })
        // Each store recorded its own objects' transactions, and only those.
        for (store, entity) in zip(stores, ["Item", "Label"]) {
            let transactions = try store.historyTransactions(after: .transaction(0), withChanges: true)
            #expect(transactions.count == 20)
            #expect(transactions.flatMap { $0.changes ?? [] }.allSatisfy { $0.objectID.entity.name == entity })
        }
    }

    /// History survives a lightweight migration (its tables come along) and keeps recording with the new model.
    @Test func historyCarriesThroughAMigration() throws { try Self.historyCarriesThroughAMigration(StorePlaces(.sqlite)) }

    static func historyCarriesThroughAMigration(_ places: StorePlaces) throws {
        let url = try places.url("H")
        let v1 = try NSManagedObjectModel { Entity("Item") { Attribute("title", .string, preservesValueInHistoryOnDeletion: true) } }
        let v2 = try NSManagedObjectModel {
            Entity("Item") {
                Attribute("title", .string, preservesValueInHistoryOnDeletion: true)
                Attribute("note", .string, preservesValueInHistoryOnDeletion: true)
            }
        }
        let old = try Self.container(v1, at: url)
        let before = old.newBackgroundContext()
        try before.performAndWait {
            try before.make("Item", ["title": "kept"])
            try before.save()
        }
        try old.removeStores()
        let new = try Self.container(v2, at: url)
        let after = new.newBackgroundContext()
        try after.performAndWait {
            try after.make("Item", ["title": "new", "note": "n"])
            try after.save()
            after.delete(try after.objects("Item", "title == 'kept'")[0])
            try after.save()
        }
        let all = try after.performAndWait { try Self.transactions(after) }
        #expect(all.map(Self.summary) == [["insert Item"], ["insert Item"], ["delete Item"]], "\(all.map(Self.summary))")
        #expect(all[2].changes?.first?.tombstone?["title"] as? String == "kept")
    }

    @Test func tokensDeletionAndErrorsNameTheProblem() throws { try Self.tokensDeletionAndErrorsNameTheProblem(StorePlaces(.sqlite)) }

    static func tokensDeletionAndErrorsNameTheProblem(_ places: StorePlaces) throws {
        let container = try Self.container(try Self.model(), at: try places.url("H"))
        let context = container.newBackgroundContext()
        for i in 0..<4 {
            try context.performAndWait {
                try context.make("Item", ["title": "t\(i)"])
                try context.save()
            }
        }
        let all = try context.performAndWait { try Self.transactions(context) }
        #expect(all.count == 4)
        // A token survives NSKeyedArchiver (apps keep the last one they merged).
        let data = try NSKeyedArchiver.archivedData(withRootObject: all[1].token, requiringSecureCoding: true)
        let token = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: NSPersistentHistoryToken.self, from: data))
        #expect(token == all[1].token && token != all[2].token)
        // Deleting before a token deletes that transaction and the earlier ones.
        let request = NSPersistentHistoryChangeRequest.deleteHistory(before: token)
        request.resultType = .count
        #expect((try context.execute(request) as? NSPersistentHistoryResult)?.result as? Int == 2)
        #expect(
            try context.performAndWait { try Self.transactions(context) }.map(\.transactionNumber) == all[2...].map(\.transactionNumber))
        // Numbers are never given twice, even after the newest transactions are deleted.
        _ = try context.execute(NSPersistentHistoryChangeRequest.deleteHistory(before: nil as NSPersistentHistoryToken?))
        try context.performAndWait {
            try context.make("Item", ["title": "after"])
            try context.save()
        }
        #expect(try context.performAndWait { try Self.transactions(context) }.map(\.transactionNumber) == [all[3].transactionNumber + 1])
        // A token of another store is refused, naming both.
        let other = try Self.container(try Self.model(), at: try places.url("Other"))
        let foreign = try #require(other.persistentStoreCoordinator.currentPersistentHistoryToken(fromStores: nil))
        let error = #expect(throws: CoreDataError.self) {
            try context.execute(NSPersistentHistoryChangeRequest.fetchHistory(after: foreign))
        }
        #expect(error?.message.contains("belongs to the store \(foreign.storeIdentifier)") == true, "\(error?.message ?? "")")
        // A store without history says so.
        let plain = try Self.container(try Self.model(), at: try places.url("Plain"), history: false)
        let noHistory = #expect(throws: CoreDataError.self) {
            try plain.newBackgroundContext().execute(NSPersistentHistoryChangeRequest.fetchHistory(after: nil as NSPersistentHistoryToken?))
        }
        #expect(noHistory?.message.contains("keeps no persistent history") == true)
        #expect(plain.persistentStoreCoordinator.currentPersistentHistoryToken(fromStores: nil) == nil)
    }

    @Test func aStoreWithHistoryKeepsRecordingWhenOpenedWithoutTheOptionAndAFailedSaveLeavesNone() throws {
        try Self.aStoreWithHistoryKeepsRecordingWhenOpenedWithoutTheOptionAndAFailedSaveLeavesNone(StorePlaces(.sqlite))
    }

    static func aStoreWithHistoryKeepsRecordingWhenOpenedWithoutTheOptionAndAFailedSaveLeavesNone(_ places: StorePlaces) throws {
        let url = try places.url("H")
        let model = try Self.model()
        var container: NSPersistentContainer? = try Self.container(model, at: url)
        let first = try #require(container?.newBackgroundContext())
        try first.performAndWait {
            try first.make("Item", ["title": "first"])
            try first.save()
        }
        try container?.removeStores()
        container = nil
        let reopened = try Self.container(model, at: url, history: false)
        let context = reopened.newBackgroundContext()
        try context.performAndWait {
            try context.make("Item", ["title": "second"])
            try context.save()
        }
        #expect(try context.performAndWait { try Self.transactions(context) }.count == 2)
        // A save that fails (a conflict with another context's save) records nothing.
        let other = reopened.newBackgroundContext()
        let item = try context.performAndWait { try context.objects("Item", "title == 'second'")[0] }
        try other.performAndWait {
            try other.objects("Item", "title == 'second'")[0].setValue("theirs", forKey: "title")
            try other.save()
        }
        #expect(throws: CoreDataError.self) {
            try context.performAndWait {
                item.setValue("mine", forKey: "title")
                try context.save()
            }
        }
        #expect(try context.performAndWait { try Self.transactions(context) }.count == 3)
    }
}

/// The same history tests on a PostgreSQL store: its triggers, its numbering by the commit counter, its reads.
@Suite(.enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLHistoryTests {
    @Test func historyCarriesThroughAMigration() throws {
        try PersistentHistoryTests.historyCarriesThroughAMigration(StorePlaces(.postgreSQL))
    }
    @Test func savesAcrossConfiguredStoresDoNotPileUpOwnTransactions() throws {
        try PersistentHistoryTests.savesAcrossConfiguredStoresDoNotPileUpOwnTransactions(StorePlaces(.postgreSQL))
    }
    @Test func eachSaveIsOneTransactionWithItsChangesAuthorAndTombstones() throws {
        try PersistentHistoryTests.eachSaveIsOneTransactionWithItsChangesAuthorAndTombstones(StorePlaces(.postgreSQL))
    }
    @Test func linksOfManyToManyRelationshipsAreUpdatesOfBothEnds() throws {
        try PersistentHistoryTests.linksOfManyToManyRelationshipsAreUpdatesOfBothEnds(StorePlaces(.postgreSQL))
    }
    @Test func fetchRequestsNarrowTheHistoryByTransactionOrChange() throws {
        try PersistentHistoryTests.fetchRequestsNarrowTheHistoryByTransactionOrChange(StorePlaces(.postgreSQL))
    }
    @Test func batchRequestsCascadesAndNullifiesAreRecorded() throws {
        try PersistentHistoryTests.batchRequestsCascadesAndNullifiesAreRecorded(StorePlaces(.postgreSQL))
    }
    @Test func ownTransactionsDoNotPileUpWhileFollowingOtherWriters() throws {
        try PersistentHistoryTests.ownTransactionsDoNotPileUpWhileFollowingOtherWriters(StorePlaces(.postgreSQL))
    }
    @Test func tokensDeletionAndErrorsNameTheProblem() throws {
        try PersistentHistoryTests.tokensDeletionAndErrorsNameTheProblem(StorePlaces(.postgreSQL))
    }
    @Test func aStoreWithHistoryKeepsRecordingWhenOpenedWithoutTheOptionAndAFailedSaveLeavesNone() throws {
        try PersistentHistoryTests.aStoreWithHistoryKeepsRecordingWhenOpenedWithoutTheOptionAndAFailedSaveLeavesNone(
            StorePlaces(.postgreSQL))
    }
}
