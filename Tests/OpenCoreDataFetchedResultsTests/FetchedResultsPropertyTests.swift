import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// Random edit sequences against a fetched results controller: every delegate batch is applied to a table-view model
/// that checks what UITableView checks, and after every batch the table (rows and cell texts) must equal a fresh fetch.
///
/// Replay a failure with `OCD_SEED=<seed> swift test --filter FetchedResultsPropertyTests`; add `OCD_TRACE=1` to print
/// each step's operations, the objects and the delegate calls.
@Suite struct FetchedResultsPropertyTests {
    struct Configuration: CustomStringConvertible {
        var section: String?
        var sorts: [FetchSortDescriptor]
        var predicate: String?
        var limit = 0
        var offset = 0
        var batchSize = 0
        var description: String {
            "section: \(section ?? "nil"), sorts: \(sorts.map(\.description)), predicate: \(predicate ?? "nil"), limit: \(limit), offset: \(offset), batch: \(batchSize)"
        }
    }

    static let configurations: [Configuration] = [
        Configuration(section: "group", sorts: [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "score")]),
        Configuration(
            section: "group",
            sorts: [FetchSortDescriptor(key: "group", ascending: false), FetchSortDescriptor(key: "name", ascending: false)],
            predicate: "hidden == NO"),
        Configuration(section: nil, sorts: [FetchSortDescriptor(key: "score"), FetchSortDescriptor(key: "name")]),
        Configuration(
            section: nil, sorts: [FetchSortDescriptor(key: "name", comparison: .caseInsensitive)], predicate: "score > 20 OR tag == 'x'"),
        Configuration(
            section: "group",
            sorts: [
                FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "tag"), FetchSortDescriptor(key: "score", ascending: false),
            ], predicate: "hidden == NO AND score < 80"),
        Configuration(section: nil, sorts: [FetchSortDescriptor(key: "score")], limit: 6),
        Configuration(
            section: "group", sorts: [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "score")], limit: 8, offset: 2),
        Configuration(
            section: "group", sorts: [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "score")], predicate: "hidden == NO",
            batchSize: 3),
        // Keys through a to-one relationship: renaming or re-ranking a shelf moves, hides or shows its items.
        Configuration(
            section: "shelf.label", sorts: [FetchSortDescriptor(key: "shelf.label"), FetchSortDescriptor(key: "score")],
            predicate: "shelf.rank > 1 OR shelf == nil"),
        Configuration(
            section: nil, sorts: [FetchSortDescriptor(key: "shelf.rank", ascending: false), FetchSortDescriptor(key: "name")],
            predicate: "hidden == NO", limit: 7, offset: 1),
        Configuration(
            section: "shelf.label", sorts: [FetchSortDescriptor(key: "shelf.label"), FetchSortDescriptor(key: "name")],
            predicate: "shelf.rank < 4", batchSize: 4),
    ]

    static var seeds: [UInt64] {
        if let text = ProcessInfo.processInfo.environment["OCD_SEED"], let seed = UInt64(text) { return [seed] }
        let count = Int(ProcessInfo.processInfo.environment["OCD_PROPERTY_CASES"] ?? "") ?? 140
        return (1...UInt64(count)).map { $0 }
    }

    @Test func randomEditSequencesNeverBreakTheTable() throws {
        var batches = 0
        var operations = 0
        var bulkBatches = 0
        for seed in Self.seeds {
            let config = Self.configurations[Int(seed % UInt64(Self.configurations.count))]
            do {
                let counts = try Self.run(seed: seed, config: config)
                batches += counts.batches
                operations += counts.operations
                bulkBatches += counts.bulkBatches
            } catch {
                Issue.record("seed \(seed) (\(config)): \(error)")
            }
        }
        print(
            "fetched results property test: \(Self.seeds.count) seeds, \(operations) operations, \(batches) batches checked (\(bulkBatches) applied in bulk)"
        )
        #expect(Self.seeds.count == 1 || batches > Self.seeds.count * 5, "too few batches were produced (\(batches))")
        #expect(Self.seeds.count < 2 * Self.configurations.count || bulkBatches > batches / 5, "too few bulk batches (\(bulkBatches))")
    }

    final class NoteBox: @unchecked Sendable {
        var note: Notification?
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Every other round of the configurations applies each batch in bulk (passes over all results) instead of
    /// object by object, so both of the engine's paths see the same kinds of edits.
    static func bulk(_ seed: UInt64) -> Bool { (seed / UInt64(configurations.count)) % 2 == 1 }

    /// The same random edit scripts on a PostgreSQL store (`OCD_POSTGRES_URL`), a database of its own per seed:
    /// `OCD_POSTGRES_PROPERTY_CASES` seeds (default 24), every third with persistent history (other coordinators'
    /// saves merged from it), without the per-configuration variant (one database per seed).
    @Test(.enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
    func randomEditSequencesNeverBreakTheTableOnPostgreSQL() throws {
        let count = Int(ProcessInfo.processInfo.environment["OCD_POSTGRES_PROPERTY_CASES"] ?? "") ?? 24
        let seeds = ProcessInfo.processInfo.environment["OCD_SEED"].flatMap(UInt64.init).map { [$0] } ?? (1...UInt64(count)).map { $0 }
        var batches = 0
        for seed in seeds {
            let config = Self.configurations[Int(seed % UInt64(Self.configurations.count))]
            do {
                let database = try PostgreSQLTestDatabase()
                batches += try Self.run(seed: seed, config: config, storeURL: database.url).batches
            } catch {
                Issue.record("seed \(seed) (\(config)) on PostgreSQL: \(error)")
            }
        }
        print("fetched results property test on PostgreSQL: \(seeds.count) seeds, \(batches) batches checked")
        #expect(seeds.count == 1 || batches > seeds.count * 5, "too few batches were produced (\(batches))")
    }

    static func run(seed: UInt64, config: Configuration, storeURL: URL? = nil) throws -> (batches: Int, operations: Int, bulkBatches: Int) {
        var rng = SeededGenerator(seed: seed)
        func int(_ r: ClosedRange<Int>) -> Int { Int.random(in: r, using: &rng) }
        let groups = ["Apples", "Bread", "Cheese", "Dairy", "Eggs"]
        let names = ["ant", "Bee", "cat", "Dog", "eel", "fox", "Gnu", "hen"]
        let tags = ["x", "y", "z"]
        let labels = ["Left", "Middle", "Right", "Top"]
        // Every third seed keeps persistent history: other writers' saves are then merged from it. Every fourth runs
        // on a coordinator with a store per configuration (items and shelves in the first).
        let history = seed % 3 == 0
        let stack =
            try storeURL.map { try TestStack(model: try model(), storeAt: $0, history: history) }
            ?? TestStack(model: try model(), history: history, configurations: seed % 4 == 2 ? ["Main", "Side"] : nil)
        let context = stack.context()
        var shelves: [NSManagedObject] = []
        for i in 0..<3 { shelves.append(try context.make("Shelf", ["label": labels[i], "rank": int(0...5)])) }
        /// A live shelf of this context, or nil (no shelf) now and then.
        func randomShelf() -> NSManagedObject? {
            let live = shelves.filter { $0._isLive && $0.managedObjectContext === context }
            return live.isEmpty || int(0...4) == 0 ? nil : live[int(0...(live.count - 1))]
        }
        for _ in 0..<int(0...12) {
            try context.make(
                "Item",
                [
                    "name": names[int(0...7)], "group": groups[int(0...4)], "score": int(0...100), "tag": tags[int(0...2)],
                    "hidden": int(0...3) == 0, "shelf": randomShelf(),
                ])
        }
        try context.save()

        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = config.sorts
        request.predicate = try config.predicate.map { try FetchPredicate(format: $0) }
        request.fetchLimit = config.limit
        request.fetchOffset = config.offset
        request.fetchBatchSize = config.batchSize
        let frc = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: config.section, cacheName: nil)
        let recorder = DelegateRecorder()
        frc.delegate = recorder
        if bulk(seed) { frc.engine.diagnostics.alwaysBulk = true }
        try frc.performFetch()
        // Items are told apart by ObjectIdentifier, so every item is kept alive for the whole run: the context holds
        // saved objects weakly and a controller makes objects only for the rows asked for, so an item nobody held
        // could otherwise come back as another object (at another address, or at a reused one).
        var objectsByID: [ObjectIdentifier: NSManagedObject] = [:]
        func remember() { for object in context.registeredObjects { objectsByID[ObjectIdentifier(object)] = object } }
        for object in try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item")) {
            objectsByID[ObjectIdentifier(object)] = object
        }
        remember()
        let table = TableViewModel(try freshItems(context, config)) { Self.render(objectsByID[$0]!, config) }
        var failure: String?
        var step = 0
        /// What the controller reports, as UIKit's data-source methods would read it.
        func controllerItems() -> SectionedItems<ObjectIdentifier> { frc.shownItems }
        recorder.onBatch = { batch in
            frc.engine._checkInvariants()
            remember()
            do {
                try table.apply(batch, dataSource: controllerItems()) { Self.render(objectsByID[$0]!, config) }
                if table.items != controllerItems() { failure = "step \(step): the table differs from the controller after\n\(batch)" }
            } catch {
                failure = "step \(step): \(error)\nbatch:\n\(batch)"
            }
        }
        /// Once every edit is processed, the table must show what a fresh fetch gives, with fresh cell contents.
        func checkAgainstFreshFetch() throws {
            let expected = try freshItems(context, config)
            remember()
            if table.items != expected {
                failure =
                    "step \(step): the table differs from a fresh fetch\n table: \(table.items.sections.map { ($0.name, $0.items.count) })\n fetch: \(expected.sections.map { ($0.name, $0.items.count) })\n table: \(table.items.sections.flatMap(\.items).map { Self.render(objectsByID[$0]!, config) })\n fetch: \(expected.sections.flatMap(\.items).map { Self.render(objectsByID[$0]!, config) })"
                return
            }
            let fresh = expected.sections.map { $0.items.map { Self.render(objectsByID[$0]!, config) } }
            if table.contents != fresh {
                failure = "step \(step): a cell shows stale content: \(zip(table.contents.joined(), fresh.joined()).filter { $0 != $1 })"
            }
        }
        // Unsectioned: a second controller whose delegate takes CollectionDifferences; applying each to the list it
        // had must give the controller's list.
        let differenceFRC =
            config.section == nil
            ? NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
            : nil
        let differences = DifferenceRecorder()
        if let differenceFRC {
            if bulk(seed) { differenceFRC.engine.diagnostics.alwaysBulk = true }
            differenceFRC.delegate = differences
            try differenceFRC.performFetch()
            differences.items = differenceFRC.snapshot.itemIdentifiers
        }
        // A third controller with a snapshot delegate, consumed as a diffable data source would: an item keeps its
        // cell unless it is new or listed as reloaded, so a changed item left out of the reloads shows as a stale cell.
        let snapshotFRC = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: config.section, cacheName: nil)
        let snapshots = SnapshotRecorder()
        if bulk(seed) { snapshotFRC.engine.diagnostics.alwaysBulk = true }
        snapshotFRC.delegate = snapshots
        try snapshotFRC.performFetch()
        var snapshotCells: [NSManagedObjectID: String] = [:]
        /// Applies a snapshot as a diffable data source does, rendering cells as it is delivered.
        func apply(_ snapshot: FetchedResultsSnapshot) {
            var cells: [NSManagedObjectID: String] = [:]
            let reloaded = Set(snapshot.reloadedItemIdentifiers)
            for id in snapshot.itemIdentifiers {
                if let old = snapshotCells[id], !reloaded.contains(id) {
                    cells[id] = old
                } else if let object = try? context.existingObject(with: id) {
                    cells[id] = Self.render(object, config)
                } else {
                    failure = "step \(step): a snapshot lists \(id), which the context does not have"
                }
            }
            snapshotCells = cells
        }
        snapshots.onSnapshot = apply
        apply(snapshotFRC.snapshot)
        /// The snapshot consumer must show the fresh fetch: same sections, same IDs, no stale cell.
        func checkSnapshotConsumer() throws {
            let shown = snapshotFRC.snapshot
            let expected = try freshItems(context, config)
            let expectedIDs = expected.sections.map { $0.items.map { objectsByID[$0]!.objectID } }
            if shown.sectionIdentifiers != expected.sections.map(\.name) || shown.itemIdentifiersBySection != expectedIDs {
                failure = "step \(step): the snapshot controller differs from a fresh fetch"
                return
            }
            for id in shown.itemIdentifiers where snapshotCells[id] != Self.render(try context.existingObject(with: id), config) {
                failure = "step \(step): the snapshot consumer shows a stale cell: \(snapshotCells[id] ?? "none")"
                return
            }
            if snapshots.fineGrainedCalls != 0 { failure = "step \(step): a snapshot delegate received fine-grained calls" }
        }
        let background = stack.context()
        let traceObservation = context.addChangeObserver { change in
            guard ProcessInfo.processInfo.environment["OCD_TRACE"] != nil else { return }
            print(
                "TRACE   change storeChanged=\(change.storeChanged) updated=\(change.updated.map { "\($0.object.entity.name):\($0.object.entity.name == "Item" ? $0.object.value(forKey: "name") ?? "-" : $0.object.value(forKey: "label") ?? "-"):\($0.keys.sorted())" }) inserted=\(change.inserted.count) deleted=\(change.deleted.count)"
            )
        }
        defer { traceObservation.cancel() }
        var remote: NSPersistentContainer?
        func remoteContainer() throws -> NSPersistentContainer {
            if let remote { return remote }
            let container = NSPersistentContainer(name: "Remote", managedObjectModel: stack.container.managedObjectModel)
            container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: stack.storeURL)]
            try container.loadPersistentStores()
            remote = container
            return container
        }
        defer { try? remote?.removeStores() }
        var operations = 0
        for s in 0..<30 {
            step = s
            let live = try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item"))
            func randomItem() -> NSManagedObject? {
                let candidates = live.filter { $0._isLive }
                return candidates.isEmpty ? nil : candidates[int(0...(candidates.count - 1))]
            }
            for _ in 0..<int(1...3) {
                operations += 1
                let operation = int(0...20)
                if ProcessInfo.processInfo.environment["OCD_TRACE"] != nil { print("TRACE step \(s) operation \(operation)") }
                do {
                    switch operation {
                    case 0, 1:
                        try context.make(
                            "Item",
                            ["name": names[int(0...7)], "group": groups[int(0...4)], "score": int(0...100), "tag": tags[int(0...2)]])
                    case 2: if let o = randomItem() { context.delete(o) }
                    case 3, 4: randomItem()?.setValue(int(0...100), forKey: "score")
                    case 5: randomItem()?.setValue(groups[int(0...4)], forKey: "group")
                    case 6: randomItem()?.setValue(tags[int(0...2)], forKey: "tag")
                    case 7: randomItem()?.setValue(int(0...1) == 0, forKey: "hidden")
                    case 8: randomItem()?.setValue(names[int(0...7)], forKey: "name")
                    case 9:
                        if let o = randomItem() {  // set a value and set it back
                            let old = o.value(forKey: "score")
                            o.setValue(int(0...100), forKey: "score")
                            o.setValue(old, forKey: "score")
                        }
                    case 11: randomItem()?.setValue(randomShelf(), forKey: "shelf")
                    case 12: randomShelf()?.setValue(labels[int(0...3)], forKey: "label")
                    case 13: randomShelf()?.setValue(int(0...5), forKey: "rank")
                    case 14:
                        if int(0...2) == 0, let shelf = randomShelf() {
                            context.delete(shelf)  // its items lose their shelf (nullify)
                        } else {
                            shelves.append(try context.make("Shelf", ["label": labels[int(0...3)], "rank": int(0...5)]))
                        }
                    case 10, 15:
                        // Another context changes the store and this one merges its save.
                        let box = NoteBox()
                        let observer = NotificationCenter.default.addObserver(
                            forName: .NSManagedObjectContextDidSave, object: background, queue: nil
                        ) {
                            box.note = $0
                        }
                        background.reset()  // as a fresh background task would start; this context does not merge ours
                        let theirs = try background.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item"))
                        let theirShelves = try background.fetch(NSFetchRequest<NSManagedObject>(entityName: "Shelf"))
                        if !theirShelves.isEmpty, int(0...2) == 0 {
                            let shelf = theirShelves[int(0...(theirShelves.count - 1))]
                            if int(0...1) == 0 {
                                shelf.setValue(int(0...5), forKey: "rank")
                            } else {
                                shelf.setValue(labels[int(0...3)], forKey: "label")
                            }
                            if !theirs.isEmpty { theirs[int(0...(theirs.count - 1))].setValue(shelf, forKey: "shelf") }
                        } else if !theirs.isEmpty, int(0...1) == 0 {
                            theirs[int(0...(theirs.count - 1))].setValue(int(0...100), forKey: "score")
                        } else {
                            try background.make(
                                "Item", ["name": names[int(0...7)], "group": groups[int(0...4)], "score": int(0...100), "tag": "x"])
                        }
                        if int(0...3) == 0, let victim = theirs.first { background.delete(victim) }
                        do {
                            try background.save()
                        } catch {
                            background.rollback()  // a conflict with this context's unsaved edits: skip this merge
                        }
                        NotificationCenter.default.removeObserver(observer)
                        if let note = box.note { context.mergeChanges(fromContextDidSave: note) }
                    case 17:
                        // A child context edits through this one and saves into it (or is dropped): its changes
                        // arrive as this context's own.
                        let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
                        child.parent = context
                        try child.performAndWait {
                            let theirs = try child.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item"))
                            func pick() -> NSManagedObject? {
                                let live = theirs.filter { $0._isLive }
                                return live.isEmpty ? nil : live[int(0...(live.count - 1))]
                            }
                            for _ in 0..<int(1...3) {
                                switch int(0...3) {
                                case 0:
                                    try child.make(
                                        "Item", ["name": names[int(0...7)], "group": groups[int(0...4)], "score": int(0...100), "tag": "y"])
                                case 1: pick()?.setValue(int(0...100), forKey: "score")
                                case 2: pick()?.setValue(groups[int(0...4)], forKey: "group")
                                default: if let victim = pick() { child.delete(victim) }
                                }
                            }
                            if int(0...4) > 0 { try child.save() }
                        }
                    case 18, 19:
                        // A batch request on the store, merged into this context as Core Data's documentation says.
                        let ids: [NSManagedObjectID]
                        let key: String
                        if operation == 18 {
                            let update = NSBatchUpdateRequest(entityName: "Item")
                            update.predicate = try FetchPredicate(format: "group == %@", groups[int(0...4)])
                            update.propertiesToUpdate = int(0...1) == 0 ? ["score": int(0...100)] : ["hidden": int(0...1) == 0]
                            update.resultType = .updatedObjectIDsResultType
                            ids = (try context.execute(update) as? NSBatchUpdateResult)?.result as? [NSManagedObjectID] ?? []
                            key = NSUpdatedObjectsKey
                        } else {
                            let fetch = NSFetchRequest<NSManagedObject>(entityName: "Item")
                            fetch.predicate = try FetchPredicate(format: "tag == %@ AND score < %d", tags[int(0...2)], int(0...40))
                            let delete = NSBatchDeleteRequest(fetchRequest: fetch)
                            delete.resultType = .resultTypeObjectIDs
                            ids = (try context.execute(delete) as? NSBatchDeleteResult)?.result as? [NSManagedObjectID] ?? []
                            key = NSDeletedObjectsKey
                        }
                        NSManagedObjectContext.mergeChanges(fromRemoteContextSave: [key: ids], into: [context])
                    case 20:
                        // Another coordinator on the file (another process, as far as this one can tell) saves; this
                        // context merges it from persistent history, or by re-reading the store without history.
                        let other = try remoteContainer()
                        let token = other.persistentStoreCoordinator.currentPersistentHistoryToken(fromStores: nil)
                        let theirs = other.newBackgroundContext()
                        try theirs.performAndWait {
                            let items = try theirs.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item"))
                            func pick() -> NSManagedObject? {
                                let live = items.filter { !$0.isDeleted }
                                return live.isEmpty ? nil : live[int(0...(live.count - 1))]
                            }
                            let theirShelves = try theirs.fetch(NSFetchRequest<NSManagedObject>(entityName: "Shelf"))
                            for _ in 0..<int(1...3) {
                                switch int(0...4) {
                                case 0:
                                    try theirs.make(
                                        "Item", ["name": names[int(0...7)], "group": groups[int(0...4)], "score": int(0...100), "tag": "z"])
                                case 1: pick()?.setValue(int(0...100), forKey: "score")
                                case 2: pick()?.setValue(names[int(0...7)], forKey: "name")
                                case 3:
                                    // A related object: the results read its rank and label through `shelf`.
                                    if !theirShelves.isEmpty {
                                        theirShelves[int(0...(theirShelves.count - 1))].setValue(int(0...5), forKey: "rank")
                                    }
                                default: pick().map(theirs.delete)
                                }
                            }
                            try theirs.save()
                        }
                        if history {
                            let result = try context.execute(NSPersistentHistoryChangeRequest.fetchHistory(after: token))
                            for transaction in (result as? NSPersistentHistoryResult)?.result as? [NSPersistentHistoryTransaction] ?? [] {
                                context.mergeChanges(fromContextDidSave: transaction.objectIDNotification())
                            }
                        } else {
                            context.mergeChangesFromStore()
                        }
                    default:
                        do {
                            try context.save()
                        } catch {
                            context.rollback()
                        }
                    }
                } catch {
                    throw Failure(description: "step \(step), operation \(operation): \(error)")
                }
            }
            context.processPendingChanges()
            if ProcessInfo.processInfo.environment["OCD_TRACE"] != nil {
                for o in try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item")) {
                    print("TRACE   \(Self.render(o, config))")
                }
                for shelf in try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Shelf")) {
                    let members = ((shelf.value(forKey: "items") as? Set<NSManagedObject>) ?? []).compactMap { $0.string("name") }.sorted()
                    print("TRACE   shelf \(shelf.string("label") ?? "-") \(shelf.objectID) items \(members) changed=\(shelf.hasChanges)")
                }
                print("TRACE   controller: \(controllerItems().sections.map { ($0.name, $0.items.count) }); lines: \(recorder.lines)")
                recorder.lines = []
            }
            if failure == nil { try checkAgainstFreshFetch() }
            if failure == nil { try checkSnapshotConsumer() }
            if failure == nil, let differenceFRC, differences.items != differenceFRC.snapshot.itemIdentifiers {
                failure = "step \(step): applying the CollectionDifferences does not give the controller's list"
            }
            if let failure { throw Failure(description: failure) }
        }
        return (table.batchesApplied, operations, frc.engine.diagnostics.bulkBatches)
    }
}
