import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// Commits by other writers of the same store file: a coordinator with the remote-change option posts
/// `NSPersistentStoreRemoteChange` for each (and never for its own saves), and a context that merges automatically
/// brings its controller up to the store, which reports the other writer's inserts, moves and deletes.
@Suite struct RemoteChangeTests {
    let dir = TemporaryDirectory()

    func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("score", .integer32, default: 0)
            }
        }
    }

    func container(_ url: URL, _ model: NSManagedObjectModel, watching: Bool, history: Bool = false) throws -> NSPersistentContainer {
        let description = NSPersistentStoreDescription(url: url)
        if history { description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey) }
        if watching { description.setOption(true as NSNumber, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey) }
        let container = NSPersistentContainer(name: "Remote", managedObjectModel: model)
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        return container
    }

    /// Another writer's save that inserts `d`, moves `a` to the end (score 9) and deletes `b`; returns its context.
    func insertMoveAndDelete(in other: NSPersistentContainer) throws -> NSManagedObjectContext {
        let writer = other.newBackgroundContext()
        try writer.performAndWait {
            try writer.make("Item", ["name": "d", "score": 0])
            try writer.objects("Item", "name == 'a'").first?.setCheckedValue(9, forKey: "score")
            try writer.objects("Item", "name == 'b'").first.map(writer.delete)
            try writer.save()
        }
        return writer
    }

    /// Two containers on the store at `url` that keep history: the watched one (posting other writers' commits when
    /// `watching`) and another writer, which has saved items a, b and c.
    func historyWriters(at url: URL, watching: Bool = true) throws -> (watched: NSPersistentContainer, other: NSPersistentContainer) {
        let model = try model()
        let watched = try container(url, model, watching: watching, history: true)
        let other = try container(url, model, watching: false, history: true)
        try seedABC(in: other)
        return (watched, other)
    }

    /// Another writer's save of items a, b and c (scores 1, 2, 3).
    func seedABC(in other: NSPersistentContainer) throws {
        let seed = other.newBackgroundContext()
        try seed.performAndWait {
            for (name, score) in [("a", 1), ("b", 2), ("c", 3)] { try seed.make("Item", ["name": name, "score": score]) }
            try seed.save()
        }
    }

    /// A context of the watched container that merges automatically, with a controller over the items by score whose
    /// batches a recorder applies.
    struct Watching {
        let context: NSManagedObjectContext
        let frc: NSFetchedResultsController<NSManagedObject>
        let recorder = DifferenceRecorder()

        /// Fetches once the store shows `count` items, when given.
        init(_ watched: NSPersistentContainer, waitingFor count: Int? = nil) throws {
            let context = watched.newBackgroundContext()
            context.automaticallyMergesChangesFromParent = true
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.sortDescriptors = [FetchSortDescriptor(key: "score")]
            let frc = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
            frc.delegate = recorder
            if let count { #expect(eventually { (try? context.performAndWait { try context.count(for: request) }) == count }) }
            try context.performAndWait { try frc.performFetch() }
            recorder.items = context.performAndWait { (frc.fetchedObjects ?? []).map(\.objectID) }
            (self.context, self.frc) = (context, frc)
        }

        func names() -> [String] { context.performAndWait { (frc.fetchedObjects ?? []).compactMap { $0.string("name") } } }
        func scores() -> [Int] { context.performAndWait { (frc.fetchedObjects ?? []).compactMap { $0.value(forKey: "score") as? Int } } }
        /// Whether applying the recorded batches gives the controller's list.
        var batchesGiveTheList: Bool { context.performAndWait { recorder.items == (frc.fetchedObjects ?? []).map(\.objectID) } }
    }

    final class Counter: @unchecked Sendable {
        let lock = NSLock()
        var value = 0
        var last: [AnyHashable: Any] = [:]
    }

    @Test func anotherWritersCommitsReachTheControllerAndOwnSavesPostNothing() throws {
        let url = dir.file("Remote.sqlite")
        let model = try model()
        let watched = try container(url, model, watching: true)
        let other = try container(url, model, watching: false)
        let counter = Counter()
        let observer = NotificationCenter.default.addObserver(
            forName: .NSPersistentStoreRemoteChange, object: watched.persistentStoreCoordinator, queue: nil
        ) { note in
            counter.lock.withLock {
                counter.value += 1
                counter.last = note.userInfo ?? [:]
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try seedABC(in: other)
        // The seeding is a remote commit too: seen before the controller starts.
        #expect(eventually { counter.lock.withLock { counter.value } == 1 })
        let view = try Watching(watched)
        let names = view.names
        #expect(names() == ["a", "b", "c"])
        let started = Date()
        // The other writer inserts, moves and deletes.
        _ = try insertMoveAndDelete(in: other)
        #expect(eventually { names() == ["d", "c", "a"] }, "\(names())")
        print("RemoteChangeTests: the other writer's save reached the controller in \(Int(Date().timeIntervalSince(started) * 1000)) ms")
        #expect(eventually { counter.lock.withLock { counter.value } == 2 }, "one notification for the other writer's save")
        #expect(
            counter.lock.withLock { counter.last[NSStoreUUIDKey] as? String }
                == watched.persistentStoreCoordinator.persistentStores.first?.identifier)
        #expect(view.batchesGiveTheList, "the batches give the new list")
        // Saves through the watched container itself are not remote.
        let before = counter.lock.withLock { counter.value }
        let own = watched.newBackgroundContext()
        try own.performAndWait {
            try own.make("Item", ["name": "e", "score": 5])
            try own.save()
        }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(counter.lock.withLock { counter.value } == before, "an own save is not a remote change")
    }

    /// A coordinator holding a store per configuration follows each store: another process writing one of the files
    /// reaches a controller over that store's entity, with history (merged exactly) or without (re-read).
    @Test(arguments: [false, true]) func eachStoreOfAConfiguredCoordinatorIsFollowed(history: Bool) throws {
        let model = try NSManagedObjectModel(configurations: ["Main": ["Item"], "Cache": ["Note"]]) {
            Entity("Item") { Attribute("name", .string) }
            Entity("Note") {
                Attribute("text", .string)
                Attribute("rank", .integer32, default: 0)
            }
        }
        let watched = NSPersistentContainer(name: "Configured", managedObjectModel: model)
        watched.persistentStoreDescriptions = ["Main", "Cache"].map { configuration in
            let description = NSPersistentStoreDescription(url: dir.file("\(configuration)-\(history).sqlite"))
            description.configuration = configuration
            description.setOption(true as NSNumber, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey)
            if history { description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey) }
            return description
        }
        try watched.loadPersistentStores()
        let context = watched.newBackgroundContext()
        context.automaticallyMergesChangesFromParent = true
        let request = NSFetchRequest<NSManagedObject>(entityName: "Note")
        request.sortDescriptors = [FetchSortDescriptor(key: "rank")]
        let frc = NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
        let failures = ControllerFailureTests.FailureRecorder()
        frc.delegate = failures  // (a controller without a delegate does not track changes, as in Core Data)
        try context.performAndWait {
            try context.make("Item", ["name": "kept apart"])
            try context.make("Note", ["text": "own", "rank": 5])
            try context.save()
            try frc.performFetch()
        }
        let counter = Counter()
        let observer = NotificationCenter.default.addObserver(
            forName: .NSPersistentStoreRemoteChange, object: watched.persistentStoreCoordinator, queue: nil
        ) { _ in counter.lock.withLock { counter.value += 1 } }
        defer { NotificationCenter.default.removeObserver(observer) }
        // Another process opens the Cache file alone (every entity's tables are in it) and writes notes.
        let other = try container(dir.file("Cache-\(history).sqlite"), model, watching: false, history: history)
        let writer = other.newBackgroundContext()
        try writer.performAndWait {
            try writer.make("Note", ["text": "remote", "rank": 1])
            try writer.objects("Note", "text == 'own'").first?.setCheckedValue(0, forKey: "rank")
            try writer.save()
        }
        let texts = { context.performAndWait { (frc.fetchedObjects ?? []).compactMap { $0.string("text") } } }
        let arrived = eventually { texts() == ["own", "remote"] }
        #expect(arrived, "\(texts()) after \(counter.lock.withLock { counter.value }) notifications")
        let cache = try #require(watched.persistentStoreCoordinator.persistentStores.last)
        let ids = context.performAndWait { (frc.fetchedObjects ?? []).map(\.objectID.storeIdentifier) }
        #expect(ids.allSatisfy { $0 == cache.identifier })
        #expect(failures.failures.isEmpty && failures.batches >= 1, "\(failures.failures)")
    }

    /// With history, a remote commit is merged from its transactions: exactly the objects it changed, with no re-read
    /// of the store; a commit that records no history (a raw SQLite write) still reaches the controller by a re-read.
    @Test func historyMergesExactlyWhatAnotherWriterChangedAndRawWritesStillArrive() throws {
        let url = dir.file("History.sqlite")
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        try historyMergesExactly(at: url) { sql in
            let raw = try DatabaseQueue(path: url.path, configuration: configuration)
            try raw.write { db in try db.execute(sql: sql) }
            try raw.close()
        }
    }

    /// A row changed by plain SQL (no new version) while the context holds the object with its old values: a re-fetch
    /// that comes before the context reads the row again (here a window's, for another context's insert) keeps the
    /// list in the order of the values the context holds, so the batches still give the list; when the new values
    /// arrive, the move is reported.
    @Test func aRefetchOrdersRowsByTheValuesTheContextHoldsNotByRowsChangedUnderIt() throws {
        let url = dir.file("Stale.sqlite")
        let container = try container(url, try model(), watching: false)
        let seed = container.newBackgroundContext()
        try seed.performAndWait {
            for (name, score) in [("a", 1), ("b", 2), ("c", 3)] { try seed.make("Item", ["name": name, "score": score]) }
            try seed.save()
        }
        let context = container.newBackgroundContext()
        let recorder = DifferenceRecorder()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "score")]
        request.fetchLimit = 10  // a window: any change re-fetches
        let frc = NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
        frc.delegate = recorder
        let names = { context.performAndWait { (frc.fetchedObjects ?? []).compactMap { $0.string("name") } } }
        try context.performAndWait { try frc.performFetch() }
        recorder.items = context.performAndWait { (frc.fetchedObjects ?? []).map(\.objectID) }
        #expect(names() == ["a", "b", "c"])  // the objects hold their values now
        // Another program moves c to the front, keeping its version.
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        let raw = try DatabaseQueue(path: url.path, configuration: configuration)
        try raw.write { db in try db.execute(sql: "UPDATE ZITEM SET ZSCORE = -1 WHERE ZNAME = 'c'") }
        try raw.close()
        // Another context's insert reaches the controller: its window re-fetches, before anything reads c again.
        let other = container.newBackgroundContext()
        let saved = Counter()
        let observer = NotificationCenter.default.addObserver(forName: .NSManagedObjectContextDidSave, object: other, queue: nil) {
            note in saved.lock.withLock { saved.last = [0: note] }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try other.performAndWait {
            try other.make("Item", ["name": "d", "score": 10])
            try other.save()
        }
        let note = try #require(saved.lock.withLock { saved.last[0] as? Notification })
        context.performAndWait { context.mergeChanges(fromContextDidSave: note) }
        let agree = { context.performAndWait { recorder.items == (frc.fetchedObjects ?? []).map(\.objectID) } }
        #expect(agree(), "\(names())")
        #expect(names() == ["a", "b", "c", "d"], "placed by the values the context holds")
        // The store's values arrive: c moves, and the move is reported.
        context.performAndWait { context.mergeChangesFromStore() }
        #expect(names() == ["c", "a", "b", "d"])
        #expect(agree())
    }

    /// Records which objects each batch inserted.
    final class InsertRecorder: NSFetchedResultsControllerDifferenceDelegate, @unchecked Sendable {
        let lock = NSLock()
        var batches: [[NSManagedObjectID]] = []
        func controller(
            _ controller: NSFetchedResultsController<any NSFetchRequestResult>,
            didChangeContentWith diff: CollectionDifference<NSManagedObjectID>
        ) {
            let inserted = diff.insertions.map { change -> NSManagedObjectID in
                guard case .insert(_, let id, _) = change else { preconditionFailure("insertions are inserts") }
                return id
            }
            lock.withLock { batches.append(inserted) }
        }
    }

    /// What the SQLite watcher saw at each report, and the other writers' transactions handed over with it.
    final class WatcherReports: @unchecked Sendable {
        let lock = NSLock()
        var reports: [(count: Int?, transactions: Int)] = []
        var commitsToMake = 0
        /// The score the next commit writes: a new one each time, so that every commit changes the row (a value drawn at
        /// random could repeat the current one, and the save would then commit nothing).
        var nextScore = 10
        /// What the hook's commits threw (they run on the watcher's thread, where a test expectation cannot stop them).
        var errors: [String] = []
    }

    /// A commit that lands while the watcher reads — after it has read the newest history transaction, before it reads
    /// the commit count — goes with the report that counts it. (Counted in one report while its transaction went with
    /// the next, it passed there for that report's own commit: a commit of a writer that keeps no history, counted in
    /// the same report, was then taken for it and never read.)
    @Test func eachReportHandsOverTheTransactionsOfTheCommitsItCounts() throws {
        let (watched, other) = try historyWriters(at: dir.file("Between.sqlite"), watching: false)
        let store = try #require(watched.persistentStoreCoordinator.persistentStores.first as? SQLiteStore)
        _ = try store.startFollowingHistory()
        let seen = WatcherReports()
        let writer = other.newBackgroundContext()
        let watcher = try store.watchRemoteChanges(
            every: .milliseconds(5),
            afterReadingHistory: {
                // One commit, made at the worst moment of the poll that finds the test waiting for it.
                let score = seen.lock.withLock { () -> Int? in
                    defer { seen.commitsToMake = max(0, seen.commitsToMake - 1) }
                    guard seen.commitsToMake > 0 else { return nil }
                    seen.nextScore += 1
                    return seen.nextScore
                }
                guard let score else { return }
                do {
                    let written = try writer.performAndWait { () throws -> Bool in
                        guard let item = try writer.objects("Item", "name == 'a'").first else { return false }
                        try item.setCheckedValue(score, forKey: "score")
                        try writer.save()
                        return true
                    }
                    if !written { seen.lock.withLock { seen.errors.append("item a not found") } }
                } catch {
                    seen.lock.withLock { seen.errors.append("\(error)") }
                }
            }
        ) { commits in
            let handed = (try? store.takeOthersHistory(through: commits.historyThrough))??.transactions.count ?? -1
            seen.lock.withLock { seen.reports.append((commits.count, handed)) }
        }
        defer { watcher.cancel() }
        for round in 1...5 {
            seen.lock.withLock { seen.commitsToMake = 1 }
            #expect(
                eventually(within: 20) {
                    seen.lock.withLock { seen.commitsToMake == 0 && seen.reports.compactMap(\.count).reduce(0, +) >= round }
                },
                "round \(round): \(seen.lock.withLock { (seen.reports, seen.errors) })")
        }
        // Let any late report arrive, then compare: every commit here is a transaction of the other writer.
        Thread.sleep(forTimeInterval: 0.05)
        let reports = seen.lock.withLock { seen.reports }
        #expect(seen.lock.withLock { seen.errors }.isEmpty, "the other writer's commits failed: \(seen.lock.withLock { seen.errors })")
        #expect(reports.map(\.transactions).reduce(0, +) == 5, "\(reports)")
        for report in reports {
            #expect(report.count == report.transactions, "each report's count matches its history: \(reports)")
        }
    }

    /// A commit that left no history (another program's SQL) and a later one that did (a batch insert), seen together:
    /// the context reads the store again rather than merging the later one's history first, so the controller never
    /// reports the later commit's insert before the earlier one's.
    @Test func commitsWithAndWithoutHistoryAreReportedInCommitOrder() throws {
        let url = dir.file("Order.sqlite")
        let (watched, other) = try historyWriters(at: url)
        let view = try Watching(watched, waitingFor: 3)
        let recorder = InsertRecorder()
        view.frc.delegate = recorder
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        let writer = other.newBackgroundContext()
        for round in 0..<8 {
            // Back to back, most likely in one poll of the watcher: an insert by plain SQL, then a save with history.
            let raw = try DatabaseQueue(path: url.path, configuration: configuration)
            try raw.write { db in
                try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Item'")
                try db.execute(
                    sql: """
                        INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZNAME, ZSCORE)
                        SELECT Z_MAX, Z_ENT, 1, ?, ? FROM Z_PRIMARYKEY WHERE Z_NAME = 'Item'
                        """,
                    arguments: ["raw \(round)", 10 + 2 * round])
            }
            try raw.close()
            // (A batch insert: history is recorded, and no save notification reaches the view within this process,
            // which a save's would, at once.)
            try writer.performAndWait {
                let row: [String: Any] = ["name": "saved \(round)", "score": 11 + 2 * round]
                _ = try writer.execute(NSBatchInsertRequest(entityName: "Item", objects: [row]))
            }
            #expect(eventually { view.names().contains("saved \(round)") && view.names().contains("raw \(round)") }, "round \(round)")
        }
        let batches = view.context.performAndWait {
            recorder.lock.withLock { recorder.batches }.map { ids in
                ids.compactMap { try? view.context.existingObject(with: $0).string("name") }
            }
        }
        for round in 0..<8 {
            let rawBatch = batches.firstIndex { $0.contains("raw \(round)") }
            let savedBatch = batches.firstIndex { $0.contains("saved \(round)") }
            #expect(rawBatch != nil && savedBatch != nil, "round \(round): \(batches)")
            if let rawBatch, let savedBatch {
                #expect(rawBatch <= savedBatch, "round \(round): the later commit reported first: \(batches)")
            }
        }
        #expect(batches.joined().count == Set(batches.joined()).count, "each insert reported once: \(batches)")
    }

    /// The body of `historyMergesExactlyWhatAnotherWriterChangedAndRawWritesStillArrive` for a store at `url` on any
    /// back end; `raw` runs SQL as another program would (no history).
    func historyMergesExactly(at url: URL, raw: (String) throws -> Void) throws {
        let (watched, other) = try historyWriters(at: url)
        let view = try Watching(watched, waitingFor: 3)
        let (context, names, scores) = (view.context, view.names, view.scores)
        let counter = Counter()
        let changes = context.addChangeObserver { change in
            counter.lock.withLock {
                counter.value += 1
                counter.last["storeChanged"] = change.storeChanged || (counter.last["storeChanged"] as? Bool ?? false)
                let seen = counter.last["updated"] as? Set<String> ?? []
                counter.last["updated"] = seen.union(change.updated.compactMap { $0.object.string("name") })
            }
        }
        defer { changes.cancel() }
        let writer = try insertMoveAndDelete(in: other)
        #expect(eventually { names() == ["d", "c", "a"] }, "\(names())")
        #expect(view.batchesGiveTheList)
        #expect(
            counter.lock.withLock { counter.last["storeChanged"] as? Bool } == false, "merged from history, not by re-reading the store")
        #expect(counter.lock.withLock { counter.last["updated"] as? Set<String> } == ["a"])
        // A writer that records no history: SQL straight into the store.
        try raw("UPDATE ZITEM SET ZSCORE = -1, Z_OPT = Z_OPT + 1 WHERE ZNAME = 'c'")
        #expect(eventually { names() == ["c", "d", "a"] }, "\(names())")
        // (The change observer may be called a moment after the controller has the new order.)
        #expect(eventually { counter.lock.withLock { counter.last["storeChanged"] as? Bool } == true }, "re-read from the store")
        #expect(view.batchesGiveTheList)
        // A history commit and a raw one back to back, most likely seen in one poll: the store's commit counter tells
        // that one of them left no transaction, so the context re-reads as well, and misses neither.
        for round in 0..<5 {
            try writer.performAndWait {
                try writer.objects("Item", "name == 'a'").first?.setCheckedValue(100 + round, forKey: "score")
                try writer.save()
            }
            try raw("UPDATE ZITEM SET ZSCORE = \(200 + round) WHERE ZNAME = 'd'")
            #expect(
                eventually { names() == ["c", "a", "d"] && scores() == [-1, 100 + round, 200 + round] }, "round \(round): \(scores())")
            #expect(view.batchesGiveTheList)
        }
    }

    /// `coredata watch` in another process reports a third process's commits, then the final state; SIGTERM stops it.
    @Test(.enabled(if: Requirement.executableIsBuilt("coredata"), "needs the coredata executable beside the tests (swift build)"))
    func theWatchToolReportsOtherProcessesCommits() throws {
        let tool = try #require(builtExecutable("coredata"))
        let url = dir.file("Watched.sqlite")
        let modelURL = try dir.writeModel(
            "Watched",
            """
            <entity name="Item" representedClassName="Item" syncable="YES">
                <attribute name="name" optional="YES" attributeType="String"/>
                <attribute name="score" optional="YES" attributeType="Integer 32" defaultValueString="0"/>
            </entity>
            """)
        let writer = try container(url, try NSManagedObjectModel(contentsOf: modelURL), watching: false)
        let context = writer.newBackgroundContext()
        try context.performAndWait {
            try context.make("Item", ["name": "a", "score": 1])
            try context.save()
        }
        let watch = try ChildProcess(
            tool.path,
            [
                "watch", "--model", modelURL.path, "--store", url.path, "--entity", "Item", "--ref-key", "name", "--sort", "score", "--for",
                "180",
            ],
            captureOutput: true)
        // Generous waits, each ending as soon as its line comes: CI runs suites of several busy processes beside this one.
        var output = watch.readOutput(timeout: 60) { $0.contains("\"initial\"") }
        #expect(output.contains(#"{"initial":[{"name":"","refs":["a"]}]}"#), "\(output)")
        try context.performAndWait {
            try context.make("Item", ["name": "b", "score": 0])
            try context.save()
        }
        output += watch.readOutput(timeout: 60) { $0.contains("\"insert\"") }
        #expect(output.contains(#""ref":"b","to":[0,0],"type":"insert""#), "\(output)")
        kill(watch.pid, SIGTERM)
        output += watch.readOutput(timeout: 60) { $0.contains("\"final\"") }
        #expect(output.contains(#"{"final":[{"name":"","refs":["b","a"]}]}"#), "\(output)")
        #expect(watch.wait(timeout: 10) == 0)
    }
}
