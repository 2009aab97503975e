import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

/// Random edits, undos, redos and saves on a context with an undo manager, watched by a sectioned controller: every
/// undo must bring back exactly the state before the step it undoes (every redo the state after it), and every batch
/// the controller reports must be one a table accepts, leaving it showing what a fresh fetch shows.
///
/// Replay a failure with `OCD_SEED=<seed> swift test --filter UndoControllerTests`; `OCD_PROPERTY_CASES=N` runs N seeds.
@Suite struct UndoControllerTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Folder") {
                Attribute("name", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "folder", deleteRule: .cascadeDeleteRule)
            }
            Entity("Item") {
                Attribute("title", .string)
                Attribute("rank", .integer32, default: 0)
                Relationship("folder", to: "Folder", inverse: "items")
                Relationship("tags", to: "Tag", toMany: true, inverse: "items")
            }
            Entity("Tag") {
                Attribute("label", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "tags")
            }
        }
    }

    /// Every object's values and relationships, as text.
    static func state(_ context: NSManagedObjectContext) throws -> String {
        func names(_ value: Any?, _ key: String) -> String {
            ((value as? Set<NSManagedObject>) ?? []).compactMap { $0.string(key) }.sorted().joined(separator: "+")
        }
        let folders = try context.objects("Folder", sort: ["name"]).map {
            "\($0.string("name") ?? "-")[\(names($0.value(forKey: "items"), "title"))]"
        }
        let items = try context.objects("Item", sort: ["title"]).map { item in
            let folder = (item.value(forKey: "folder") as? NSManagedObject)?.string("name") ?? "-"
            return
                "\(item.string("title") ?? "-")/\(item.value(forKey: "rank") ?? "")/\(folder)/\(names(item.value(forKey: "tags"), "label"))"
        }
        let tags = try context.objects("Tag", sort: ["label"]).map {
            "\($0.string("label") ?? "-"){\(names($0.value(forKey: "items"), "title"))}"
        }
        return (folders + items + tags).joined(separator: " ")
    }

    @Test func randomEditsUndosAndRedosKeepTheTableAndTheStatesRight() throws {
        let count = Int(ProcessInfo.processInfo.environment["OCD_PROPERTY_CASES"] ?? "") ?? 40
        let seeds: [UInt64] = ProcessInfo.processInfo.environment["OCD_SEED"].flatMap(UInt64.init).map { [$0] } ?? Array(1...UInt64(count))
        var undos = 0
        var batches = 0
        for seed in seeds {
            var rng = SeededGenerator(seed: seed)
            func int(_ r: ClosedRange<Int>) -> Int { Int.random(in: r, using: &rng) }
            let stack = try TestStack(model: try Self.model(), inMemory: true)
            let context = stack.context()
            var folders: [NSManagedObject] = []
            var tags: [NSManagedObject] = []
            for i in 0..<3 { folders.append(try context.make("Folder", ["name": "F\(i)"])) }
            for i in 0..<2 { tags.append(try context.make("Tag", ["label": "t\(i)"])) }
            for i in 0..<8 {
                try context.make(
                    "Item", ["title": "i\(i)", "rank": int(0...9), "folder": folders[int(0...2)], "tags": Set([tags[int(0...1)]])])
            }
            try context.save()
            let manager = UndoManager()
            context.undoManager = manager

            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.predicate = try FetchPredicate(format: "folder != nil")
            request.sortDescriptors = [
                FetchSortDescriptor(key: "folder.name"), FetchSortDescriptor(key: "rank"), FetchSortDescriptor(key: "title"),
            ]
            let frc = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "folder.name", cacheName: nil)
            let recorder = DelegateRecorder()
            frc.delegate = recorder
            try frc.performFetch()
            func items() -> SectionedItems<ObjectIdentifier> { frc.shownItems }
            let table = TableViewModel(items()) { _ in "" }
            var problem: String?
            recorder.onBatch = { batch in
                do { try table.apply(batch, dataSource: items()) { _ in "" } } catch { problem = "\(error)\n\(batch)" }
            }
            // The states after each step that can be undone, and where the context is among them.
            var states = [try Self.state(context)]
            var position = 0
            var log: [String] = []
            for step in 0..<40 {
                let live = { (objects: [NSManagedObject]) in objects.filter { $0.managedObjectContext === context && !$0.isDeleted } }
                let liveItems = try context.objects("Item")
                let liveFolders = try context.objects("Folder")
                let op = int(0...9)
                var changed = true
                switch op {
                case 0:
                    try context.make(
                        "Item",
                        [
                            "title": "n\(step)", "rank": int(0...9), "folder": liveFolders.randomElement(using: &rng),
                            "tags": Set(live(tags).prefix(int(0...2))),
                        ])
                    log.append("insert n\(step)")
                case 1:
                    if let item = liveItems.randomElement(using: &rng) {
                        let rank = (item.value(forKey: "rank") as? Int32 ?? 0) + Int32(int(1...5))
                        item.setValue(rank, forKey: "rank")
                        log.append("rank \(item.string("title") ?? "") \(rank)")
                    } else {
                        changed = false
                    }
                case 2:
                    if let item = liveItems.randomElement(using: &rng), let folder = liveFolders.randomElement(using: &rng),
                        item.value(forKey: "folder") as? NSManagedObject !== folder
                    {
                        item.setValue(folder, forKey: "folder")
                        log.append("move \(item.string("title") ?? "") to \(folder.string("name") ?? "")")
                    } else {
                        changed = false
                    }
                case 3:
                    if let item = liveItems.randomElement(using: &rng) {
                        context.delete(item)
                        log.append("delete \(item.string("title") ?? "")")
                    } else {
                        changed = false
                    }
                case 4:
                    if liveFolders.count > 1, let folder = liveFolders.randomElement(using: &rng) {
                        context.delete(folder)
                        log.append("delete folder \(folder.string("name") ?? "")")
                    } else {
                        changed = false
                    }
                case 5:
                    folders.append(try context.make("Folder", ["name": "G\(step)"]))
                    log.append("insert folder G\(step)")
                case 6:
                    if let item = liveItems.randomElement(using: &rng), let tag = live(tags).randomElement(using: &rng) {
                        let set = item.mutableSetValue(forKey: "tags")
                        if set.contains(tag) { set.remove(tag) } else { set.add(tag) }
                        log.append("toggle \(tag.string("label") ?? "") on \(item.string("title") ?? "")")
                    } else {
                        changed = false
                    }
                case 7:
                    changed = false
                    if manager.canUndo {
                        context.undo()
                        undos += 1
                        position -= 1
                        log.append("undo")
                        if try Self.state(context) != states[position] {
                            problem =
                                "undo did not restore step \(position)'s state\n now:    \(try Self.state(context))\n wanted: \(states[position])"
                        }
                    }
                case 8:
                    changed = false
                    if manager.canRedo {
                        context.redo()
                        position += 1
                        log.append("redo")
                        if try Self.state(context) != states[position] {
                            problem =
                                "redo did not restore step \(position)'s state\n now:    \(try Self.state(context))\n wanted: \(states[position])"
                        }
                    }
                default:
                    changed = false
                    try context.save()
                    log.append("save")
                }
                context.processPendingChanges()
                if changed {
                    states.removeSubrange((position + 1)...)
                    states.append(try Self.state(context))
                    position += 1
                }
                if problem == nil, table.items != sectioned(try context.fetch(request), by: "folder.name") {
                    problem = "the table differs from a fresh fetch"
                }
                if let problem {
                    Issue.record("seed \(seed), step \(step): \(problem)\n steps: \(log.joined(separator: "; "))")
                    break
                }
            }
            if problem == nil {
                // What the context holds after its last step is what a save writes.
                try context.save()
                #expect(try Self.state(stack.context()) == Self.state(context), "seed \(seed)")
            }
            batches += table.batchesApplied
        }
        print("undo property test: \(seeds.count) seeds, \(undos) undos, \(batches) batches checked")
        #expect(undos > seeds.count * 2, "undos: \(undos)")
        #expect(batches > seeds.count * 5, "batches: \(batches)")
    }

    /// Without an undo manager too: a saved object deleted (the controller removed its row) and inserted again in a
    /// later event is reported as inserted, so the row comes back.
    @Test func aSavedObjectDeletedAndInsertedAgainComesBackToTheTable() throws {
        let stack = try TestStack(model: try Self.model(), inMemory: true)
        let context = stack.context()
        let a = try context.make("Item", ["title": "a"])
        try context.make("Item", ["title": "b"])
        try context.save()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "title")]
        let frc = NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
        let recorder = DelegateRecorder()
        frc.delegate = recorder
        try frc.performFetch()
        let table = TableViewModel(frc.shownItems) { _ in "" }
        recorder.onBatch = { batch in try? table.apply(batch, dataSource: frc.shownItems) { _ in "" } }
        context.delete(a)
        context.processPendingChanges()
        #expect(frc.fetchedObjects?.count == 1)
        context.insert(a)
        context.processPendingChanges()
        #expect(frc.fetchedObjects?.map { $0.string("title") } == ["a", "b"])
        #expect(table.items == sectioned(try context.fetch(request), by: nil))
        #expect(table.batchesApplied == 2)
        try context.save()
        #expect(try stack.context().objects("Item").count == 2)
    }
}
