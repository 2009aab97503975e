import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

/// Random edit scripts over a chain of private-queue contexts — a root on the coordinator, a child, a grandchild —
/// checked against a model of what each context should hold, as Core Data defines nested contexts: a child sees its
/// parent's unsaved state; a child's save becomes its parent's unsaved changes (a deletion of an object the parent
/// inserted takes that insertion back, so it is never saved); a root's save reaches the store.
///
/// Every level has a fetched results controller followed by a table-view model. After every step the table of each
/// level must take its controller's batches as UIKit would; after every save, each level whose objects are current
/// (no ancestor edited them since the level was made) must show exactly what the model says, and the store must hold
/// what the root saved.
///
/// Replay a failure with `OCD_SEED=<seed> swift test --filter NestedContextPropertyTests`; `OCD_NESTED_CASES=N` runs
/// more seeds, `OCD_TRACE=1` prints each step.
@Suite struct NestedContextPropertyTests {
    struct Item: Equatable, CustomStringConvertible {
        var score: Int
        var group: String
        var shelf: Int?
        var description: String { "\(score)/\(group)/\(shelf.map(String.init) ?? "-")" }
    }

    /// What one context holds: items and shelves by their `ref`.
    struct World: Equatable {
        var items: [Int: Item] = [:]
        var shelves: [Int: String] = [:]
    }

    /// One context of the chain, its expected contents and what it has not saved yet.
    final class Level {
        let context: NSManagedObjectContext
        var world: World
        /// What the level held when it last read or saved: its pending changes are the difference to `world`.
        var committed: World
        /// An ancestor edited objects after this level read them: its objects may show older values (as in Core Data).
        var stale = false
        /// The level edited objects while stale: whether a value it set was new there is not known, so neither is
        /// what its save does.
        var editedWhileStale = false
        var items: [Int: NSManagedObject] = [:]
        var shelves: [Int: NSManagedObject] = [:]
        let controller: NSFetchedResultsController<NSManagedObject>
        let recorder: DelegateRecorder
        let table: TableViewModel<ObjectIdentifier>
        var refusal: String?

        init(context: NSManagedObjectContext, world: World, controller: NSFetchedResultsController<NSManagedObject>) {
            self.context = context
            self.world = world
            committed = world
            self.controller = controller
            recorder = DelegateRecorder()
            controller.delegate = recorder
            table = TableViewModel(controller.shownItems) { _ in "" }
        }

        /// Items changed here (by key), not counting new ones.
        var changedItems: [Int: Set<String>] {
            var changed: [Int: Set<String>] = [:]
            for (ref, now) in world.items {
                guard let then = committed.items[ref] else { continue }
                var keys: Set<String> = []
                if now.score != then.score { keys.insert("score") }
                if now.group != then.group { keys.insert("group") }
                if now.shelf != then.shelf { keys.insert("shelf") }
                if !keys.isEmpty { changed[ref] = keys }
            }
            return changed
        }
        var deletedItems: Set<Int> { Set(committed.items.keys).subtracting(world.items.keys) }
        var insertedItems: Set<Int> { Set(world.items.keys).subtracting(committed.items.keys) }
        var insertedShelves: Set<Int> { Set(world.shelves.keys).subtracting(committed.shelves.keys) }
        var deletedShelves: Set<Int> { Set(committed.shelves.keys).subtracting(world.shelves.keys) }
        /// Shelves renamed here, or whose items changed.
        var changedShelves: Set<Int> {
            var changed = Set(world.shelves.keys.filter { committed.shelves[$0] != nil && committed.shelves[$0] != world.shelves[$0] })
            for (ref, now) in world.items where committed.items[ref]?.shelf != now.shelf {
                if let old = committed.items[ref]?.shelf { changed.insert(old) }
                if let new = now.shelf { changed.insert(new) }
            }
            for ref in deletedItems { if let old = committed.items[ref]?.shelf { changed.insert(old) } }
            return changed.intersection(committed.shelves.keys).intersection(world.shelves.keys)
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Item") {
                Attribute("ref", .integer64, default: 0)
                Attribute("score", .integer32, default: 0)
                Attribute("group", .string)
                Relationship("shelf", to: "Shelf", inverse: "items")
            }
            Entity("Shelf") {
                Attribute("ref", .integer64, default: 0)
                Attribute("label", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "shelf")
            }
        }
    }

    static var seeds: [UInt64] {
        if let text = ProcessInfo.processInfo.environment["OCD_SEED"], let seed = UInt64(text) { return [seed] }
        let count = Int(ProcessInfo.processInfo.environment["OCD_NESTED_CASES"] ?? "") ?? 120
        return (1...UInt64(count)).map { $0 }
    }

    @Test func randomNestedEditsMatchTheModel() throws {
        var totals = (steps: 0, saves: 0, batches: 0, refusals: 0)
        for seed in Self.seeds {
            do {
                let counts = try Self.run(seed: seed)
                totals.steps += counts.steps
                totals.saves += counts.saves
                totals.batches += counts.batches
                totals.refusals += counts.refusals
            } catch {
                Issue.record("seed \(seed): \(error)  (replay: OCD_SEED=\(seed) swift test --filter NestedContextPropertyTests)")
            }
        }
        print(
            "nested context property test: \(Self.seeds.count) seeds, \(totals.steps) steps, \(totals.saves) saves, \(totals.batches) batches checked, \(totals.refusals) saves refused as expected"
        )
        #expect(Self.seeds.count == 1 || totals.saves > Self.seeds.count * 5, "too few saves (\(totals.saves))")
        #expect(Self.seeds.count < 20 || totals.refusals > 0, "no save met an object its parent had deleted")
    }

    // swiftlint:disable:next function_body_length
    static func run(seed: UInt64) throws -> (steps: Int, saves: Int, batches: Int, refusals: Int) {
        var rng = SeededGenerator(seed: seed)
        func int(_ r: ClosedRange<Int>) -> Int { Int.random(in: r, using: &rng) }
        let trace = ProcessInfo.processInfo.environment["OCD_TRACE"] != nil
        let groups = ["A", "B", "C"]
        let labels = ["left", "right", "top"]
        let sectioned = seed % 2 == 0
        let predicate = seed % 3 == 0 ? "score >= 20" : nil
        let stack = try TestStack(model: try model())
        var store = World()
        var chain: [Level] = []
        var nextRef = 1
        var counts = (steps: 0, saves: 0, batches: 0, refusals: 0)

        func pick<T>(_ values: [T]) -> T? { values.isEmpty ? nil : values[int(0...(values.count - 1))] }
        func matches(_ item: Item) -> Bool { predicate == nil || item.score >= 20 }

        /// The refs a level should list, in the controller's order (group, then score and ref).
        func expectedRefs(_ world: World) -> [Int] {
            world.items.filter { matches($0.value) }.sorted {
                let (a, b) = ($0.value, $1.value)
                if sectioned, a.group != b.group { return a.group < b.group }
                return a.score != b.score ? a.score < b.score : $0.key < $1.key
            }.map(\.key)
        }

        func ref(_ object: NSManagedObject) -> Int { (object.value(forKey: "ref") as? Int64).map(Int.init) ?? -1 }

        /// The level's object of `ref` (one it read, made, or was given by a child's save), kept alive by the level.
        func object(_ entity: String, _ ref: Int, in level: Level) throws -> NSManagedObject {
            if let known = entity == "Item" ? level.items[ref] : level.shelves[ref] { return known }
            let found = try #require(try level.context.objects(entity, "ref == %d", ref).first, "\(entity) \(ref) is not in its context")
            if entity == "Item" { level.items[ref] = found } else { level.shelves[ref] = found }
            return found
        }
        func item(_ ref: Int, _ level: Level) throws -> NSManagedObject { try object("Item", ref, in: level) }
        func shelf(_ ref: Int, _ level: Level) throws -> NSManagedObject { try object("Shelf", ref, in: level) }

        /// What the level's context holds, read back through a fetch.
        func fetchedWorld(_ context: NSManagedObjectContext) throws -> World {
            try context.performAndWait {
                var world = World()
                for object in try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item")) {
                    let shelf = object.value(forKey: "shelf") as? NSManagedObject
                    world.items[ref(object)] = Item(
                        score: (object.value(forKey: "score") as? Int32).map(Int.init) ?? -1,
                        group: object.string("group") ?? "", shelf: shelf.map(ref))
                }
                for object in try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Shelf")) {
                    world.shelves[ref(object)] = object.string("label") ?? ""
                }
                return world
            }
        }

        /// Adds a context under the chain's last (or on the coordinator), reading every object it can see.
        func push() throws {
            let context: NSManagedObjectContext
            if let parent = chain.last?.context {
                context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
                context.parent = parent
            } else {
                context = stack.context()
            }
            let level = try context.performAndWait {
                let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
                request.sortDescriptors =
                    (sectioned ? [FetchSortDescriptor(key: "group")] : []) + [
                        FetchSortDescriptor(key: "score"), FetchSortDescriptor(key: "ref"),
                    ]
                request.predicate = try predicate.map { try FetchPredicate(format: $0) }
                let controller = NSFetchedResultsController(
                    fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: sectioned ? "group" : nil, cacheName: nil)
                try controller.performFetch()
                return Level(context: context, world: chain.last?.world ?? store, controller: controller)
            }
            try context.performAndWait {
                for object in try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Item")) { level.items[ref(object)] = object }
                for object in try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Shelf")) {
                    level.shelves[ref(object)] = object
                }
            }
            level.recorder.onBatch = { [weak level] batch in
                guard let level else { return }
                counts.batches += 1
                do {
                    try level.table.apply(batch, dataSource: level.controller.shownItems) { _ in "" }
                } catch {
                    level.refusal = level.refusal ?? "the table refused a batch: \(error)\n\(batch)"
                }
            }
            // Under a level holding older values, what a new level reads depends on which of them the level had
            // loaded (a fault reads through to the current values): not predicted.
            level.stale = chain.last?.stale ?? false
            chain.append(level)
            let seen = try fetchedWorld(level.context)
            if !level.stale, seen != level.world {
                throw Failure(description: "a new context at depth \(chain.count - 1) reads \(seen), expected \(level.world)")
            }
        }

        /// Checks the level's table, controller and contents.
        func check(_ level: Level, depth: Int, what: String) throws {
            if let refusal = level.refusal { throw Failure(description: "\(what), depth \(depth): \(refusal)") }
            try level.context.performAndWait {
                level.context.processPendingChanges()
                if level.table.items != level.controller.shownItems {
                    throw Failure(description: "\(what), depth \(depth): the table differs from its controller")
                }
                guard !level.stale else { return }
                let shown = (level.controller.fetchedObjects ?? []).map(ref)
                let expected = expectedRefs(level.world)
                if shown != expected {
                    throw Failure(
                        description:
                            "\(what), depth \(depth): the controller lists \(shown), expected \(expected); last delegate calls:\n\(level.recorder.lines.suffix(8).joined(separator: "\n"))"
                    )
                }
            }
            guard !level.stale else { return }
            let seen = try fetchedWorld(level.context)
            if seen != level.world {
                throw Failure(description: "\(what), depth \(depth): the context holds\n \(seen)\nexpected\n \(level.world)")
            }
        }

        /// Saves the level at `depth` into its parent (or the store); returns whether it was refused as expected.
        func save(_ depth: Int) throws -> Bool {
            let level = chain[depth]
            let parentWorld = depth == 0 ? store : chain[depth - 1].world
            // The parent must still hold every object the save changes or deletes (Core Data's child save needs them).
            let touchedItems = Set(level.changedItems.keys).union(level.deletedItems)
            let touchedShelves = level.changedShelves.union(level.deletedShelves)
            let refused =
                depth > 0
                && (touchedItems.contains { parentWorld.items[$0] == nil } || touchedShelves.contains { parentWorld.shelves[$0] == nil })
            var thrown: (any Error)?
            level.context.performAndWait {
                do { try level.context.save() } catch { thrown = error }
            }
            if level.editedWhileStale {
                // Not predicted: a refusal drops the level; a save makes the parent unpredictable too.
                if thrown != nil {
                    chain.removeSubrange(depth...)
                    return false
                }
                for above in chain[..<depth] { above.stale = true; above.editedWhileStale = true }
                if depth == 0 {
                    store = try fetchedWorld(stack.context())
                    level.committed = level.world
                    return false
                }
            } else if refused {
                guard thrown != nil else { throw Failure(description: "depth \(depth): a save the parent cannot take succeeded") }
                // The refused level (and what is under it) is dropped, as an app would roll back and start again.
                chain.removeSubrange(depth...)
                return true
            }
            if let thrown { throw Failure(description: "depth \(depth): the save failed: \(thrown)") }
            counts.saves += 1
            guard depth > 0 else {
                store = level.world
                level.committed = level.world
                let seen = try fetchedWorld(stack.context())
                if seen != store { throw Failure(description: "the store holds\n \(seen)\nexpected\n \(store)") }
                return false
            }
            let parent = chain[depth - 1]
            for ref in level.insertedShelves.union(level.changedShelves) { parent.world.shelves[ref] = level.world.shelves[ref] }
            for ref in level.insertedItems { parent.world.items[ref] = level.world.items[ref] }
            for (ref, keys) in level.changedItems {
                // (Both are there unless the save was not predicted: see `editedWhileStale`.)
                guard let mine = level.world.items[ref], var theirs = parent.world.items[ref] else { continue }
                if keys.contains("score") { theirs.score = mine.score }
                if keys.contains("group") { theirs.group = mine.group }
                if keys.contains("shelf") { theirs.shelf = mine.shelf }
                parent.world.items[ref] = theirs
            }
            for ref in level.deletedItems { parent.world.items[ref] = nil }
            for ref in level.deletedShelves { parent.world.shelves[ref] = nil }
            level.committed = level.world
            return false
        }

        try push()
        for step in 0..<40 {
            counts.steps += 1
            let depth = chain.count - 1
            let level = chain[depth]
            let operation = int(0...19)
            if trace { print("TRACE seed \(seed) step \(step) depth \(depth) operation \(operation)") }
            // A level holding older values edits only objects it holds (others it may no longer find).
            let itemRefs = level.world.items.keys.sorted().filter { !level.stale || level.items[$0] != nil }
            let shelfRefs = level.world.shelves.keys.sorted().filter { !level.stale || level.shelves[$0] != nil }
            let context = level.context
            var what = "step \(step), operation \(operation)"
            if level.stale, operation < 12 { level.editedWhileStale = true }
            try context.performAndWait {
                switch operation {
                case 0, 1:  // a new item, on a shelf now and then (its parent's unsaved shelves included)
                    let ref = nextRef
                    nextRef += 1
                    let item = Item(score: int(0...40), group: pick(groups)!, shelf: int(0...1) == 0 ? pick(shelfRefs) : nil)
                    let object = try context.make("Item", ["ref": Int64(ref), "score": Int32(item.score), "group": item.group])
                    if let ref = item.shelf { object.setValue(try shelf(ref, level), forKey: "shelf") }
                    level.items[ref] = object
                    level.world.items[ref] = item
                case 2, 3:  // a new score
                    guard let ref = pick(itemRefs) else { return }
                    let score = (level.world.items[ref]!.score + int(1...40)) % 41  // always another score
                    try item(ref, level).setValue(Int32(score), forKey: "score")
                    level.world.items[ref]!.score = score
                case 4:  // another group (another section)
                    guard let ref = pick(itemRefs) else { return }
                    let group = pick(groups.filter { $0 != level.world.items[ref]!.group })!
                    try item(ref, level).setValue(group, forKey: "group")
                    level.world.items[ref]!.group = group
                case 5, 6:  // onto another shelf, or off it
                    guard let ref = pick(itemRefs) else { return }
                    let destination = int(0...3) == 0 ? nil : pick(shelfRefs)
                    guard destination != level.world.items[ref]!.shelf else { return }
                    try item(ref, level).setValue(try destination.map { try shelf($0, level) }, forKey: "shelf")
                    level.world.items[ref]!.shelf = destination
                case 7, 8:  // an item deleted (its parent's unsaved items included)
                    guard let ref = pick(itemRefs) else { return }
                    context.delete(try item(ref, level))
                    level.world.items[ref] = nil
                case 9:  // a new shelf
                    let ref = nextRef
                    nextRef += 1
                    let label = pick(labels)!
                    level.shelves[ref] = try context.make("Shelf", ["ref": Int64(ref), "label": label])
                    level.world.shelves[ref] = label
                case 10:  // a shelf renamed
                    guard let ref = pick(shelfRefs) else { return }
                    let label = pick(labels.filter { $0 != level.world.shelves[ref] })!
                    try shelf(ref, level).setValue(label, forKey: "label")
                    level.world.shelves[ref] = label
                case 11:  // a shelf deleted: its items lose it (nullify)
                    guard let ref = pick(shelfRefs) else { return }
                    context.delete(try shelf(ref, level))
                    level.world.shelves[ref] = nil
                    for (item, value) in level.world.items where value.shelf == ref {
                        level.world.items[item]!.shelf = nil
                    }
                default: break
                }
            }
            switch operation {
            case 12, 13, 14:
                what += " (save at depth \(depth))"
                if try save(depth) { counts.refusals += 1 }
            case 15:  // a save further up while a child lives
                let at = int(0...depth)
                what += " (save at depth \(at))"
                if try save(at) { counts.refusals += 1 }
            case 16, 17:
                if chain.count < 3 { try push() } else if try save(depth) { counts.refusals += 1 }
            case 18:
                // An ancestor changes or deletes an object its descendants may have changed: they hold older values now.
                guard depth > 0 else { break }
                let at = int(0...(depth - 1))
                let ancestor = chain[at]
                let candidates = ancestor.world.items.keys.sorted().filter { !ancestor.stale || ancestor.items[$0] != nil }
                // Half the time one that a level below has changed: its save then meets the ancestor's edit.
                let changedBelow = Set(chain[(at + 1)...].flatMap { $0.changedItems.keys })
                guard let ref = int(0...1) == 0 ? pick(candidates.filter(changedBelow.contains)) ?? pick(candidates) : pick(candidates)
                else { break }
                let changes = int(0...1) == 0
                what += " (depth \(at) \(changes ? "changes" : "deletes") item \(ref))"
                try ancestor.context.performAndWait {
                    if changes {
                        let score = (ancestor.world.items[ref]!.score + int(1...40)) % 41
                        try item(ref, ancestor).setValue(Int32(score), forKey: "score")
                        ancestor.world.items[ref]!.score = score
                    } else {
                        ancestor.context.delete(try item(ref, ancestor))
                        ancestor.world.items[ref] = nil
                    }
                }
                for below in chain[(at + 1)...] { below.stale = true }
            case 19:
                // The deepest context is dropped unsaved.
                if chain.count > 1 { chain.removeLast() }
            default: break
            }
            if trace {
                print("TRACE   \(what): store \(store)")
                for (index, level) in chain.enumerated() {
                    let shown = level.context.performAndWait {
                        level.context.processPendingChanges()
                        return (level.controller.fetchedObjects ?? []).map(ref)
                    }
                    print("TRACE   depth \(index)\(level.stale ? " (stale)" : ""): \(level.world) shows \(shown)")
                }
            }
            for (index, level) in chain.enumerated() { try check(level, depth: index, what: what) }
            if chain.isEmpty { try push() }
        }
        // Everything saved all the way down reaches the store.
        while let depth = chain.indices.last {
            if try save(depth) { counts.refusals += 1 } else if depth > 0 { chain.removeLast() } else { break }
            for (index, level) in chain.enumerated() { try check(level, depth: index, what: "final save") }
        }
        return counts
    }
}
