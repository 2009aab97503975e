import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Foundation's `UndoManager` (which Linux's Foundation lacks) and a context's undo: each event one step, undone and
/// redone as changes the next save writes.
@Suite struct UndoManagerTests {
    final class Counter {
        var value = 0
        let undoManager: UndoManager

        init(_ undoManager: UndoManager) { self.undoManager = undoManager }

        /// Adds `amount` and registers its undo, which registers its own (the redo).
        func add(_ amount: Int) {
            value += amount
            undoManager.registerUndo(withTarget: self) { $0.add(-amount) }
        }
    }

    @Test func registrationsBeforeAnUndoAreOneStepThatRedoes() {
        let manager = UndoManager()
        let counter = Counter(manager)
        #expect(!manager.canUndo && !manager.canRedo)
        counter.add(2)
        counter.add(3)
        #expect(manager.groupingLevel == 1)  // opened by the first registration (groupsByEvent)
        #expect(manager.canUndo)
        manager.undo()
        #expect(counter.value == 0)
        #expect(manager.canRedo && !manager.canUndo && manager.groupingLevel == 0)
        manager.redo()
        #expect(counter.value == 5)
        #expect(manager.canUndo && !manager.canRedo)
        manager.undo()
        #expect(counter.value == 0)
        // A new registration outside undo and redo clears the redo stack.
        counter.add(7)
        #expect(!manager.canRedo)
        manager.undo()
        #expect(counter.value == 0)
        #expect(!manager.canUndo)
    }

    @Test func explicitGroupsNestAndNameTheirStep() {
        let manager = UndoManager()
        let counter = Counter(manager)
        manager.beginUndoGrouping()
        counter.add(1)
        manager.beginUndoGrouping()
        counter.add(10)
        manager.setActionName("Add Ten")
        manager.endUndoGrouping()
        counter.add(100)
        manager.setActionName("Add")
        manager.endUndoGrouping()
        #expect(manager.undoActionName == "Add")
        #expect(manager.undoMenuItemTitle == "Undo Add")
        manager.undo()
        #expect(counter.value == 0)
        #expect(manager.redoActionName == "Add")
        #expect(manager.redoMenuItemTitle == "Redo Add")
        #expect(manager.undoMenuItemTitle == "Undo")
        manager.redo()
        #expect(counter.value == 111)

        // undoNestedGroup inside an open group undoes the last group closed in it.
        manager.beginUndoGrouping()
        manager.beginUndoGrouping()
        counter.add(1000)
        manager.endUndoGrouping()
        manager.undoNestedGroup()
        #expect(counter.value == 111)
        manager.endUndoGrouping()
    }

    @Test func levelsDisablingTargetsAndClearing() {
        let manager = UndoManager()
        manager.levelsOfUndo = 2
        let counter = Counter(manager)
        for amount in [1, 2, 4] {
            manager.beginUndoGrouping()
            counter.add(amount)
            manager.endUndoGrouping()
        }
        manager.undo()
        manager.undo()
        manager.undo()  // the first step was dropped
        #expect(counter.value == 1)

        manager.disableUndoRegistration()
        manager.disableUndoRegistration()
        counter.add(5)
        manager.enableUndoRegistration()
        #expect(!manager.isUndoRegistrationEnabled)
        counter.add(5)
        manager.enableUndoRegistration()
        #expect(manager.isUndoRegistrationEnabled)
        manager.redo()
        manager.redo()
        #expect(counter.value == 17)  // 1 + 5 + 5 + 2 + 4: nothing registered while disabled, the redo stack kept

        let other = Counter(manager)
        manager.beginUndoGrouping()
        other.add(1)
        counter.add(1)
        manager.endUndoGrouping()
        manager.removeAllActions(withTarget: other)
        manager.undo()
        #expect(other.value == 1 && counter.value == 17)

        var gone: Counter? = Counter(manager)
        gone?.add(1)
        gone = nil
        manager.undo()  // its target is gone: skipped
        manager.removeAllActions()
        #expect(!manager.canUndo && !manager.canRedo && manager.groupingLevel == 0)
    }

    @Test func notificationsArePosted() {
        let manager = UndoManager()
        let counter = Counter(manager)
        nonisolated(unsafe) var names: [Notification.Name] = []
        let tokens = [UndoManager.didUndoChangeNotification, .NSUndoManagerDidRedoChange, .NSUndoManagerDidCloseUndoGroup].map { name in
            NotificationCenter.default.addObserver(forName: name, object: manager, queue: nil) { names.append($0.name) }
        }
        defer { for token in tokens { NotificationCenter.default.removeObserver(token) } }
        counter.add(1)
        manager.undo()
        manager.redo()
        #expect(names == [.NSUndoManagerDidCloseUndoGroup, .NSUndoManagerDidUndoChange, .NSUndoManagerDidRedoChange])
    }
}

@Suite struct ContextUndoTests {
    /// Folders with ordered, cascading items; items tagged many-to-many (the nested-context tests' model).
    static func model() throws -> NSManagedObjectModel { try NestedContextTests.model() }

    /// A stack whose store holds folder "Inbox" with items a (rank 1) and b (rank 2), both tagged "red".
    func seeded() throws -> TestStack {
        let stack = try TestStack(model: try Self.model())
        let context = stack.context()
        let inbox = try context.make("Folder", ["name": "Inbox"])
        let a = try context.make("Item", ["title": "a", "rank": 1, "folder": inbox])
        let b = try context.make("Item", ["title": "b", "rank": 2, "folder": inbox])
        try context.make("Tag", ["label": "red"]).setValue(Set([a, b]), forKey: "items")
        try context.save()
        return stack
    }

    /// Everything the context holds now (pending changes included), as text to compare.
    func state(_ context: NSManagedObjectContext) throws -> String {
        let folders = try context.objects("Folder", sort: ["name"]).map { folder in
            let items =
                (folder.value(forKey: "items") as? NSOrderedSet)?.array.compactMap { ($0 as? NSManagedObject)?.string("title") } ?? []
            return "\(folder.string("name") ?? "-")[\(items.joined(separator: ","))]"
        }
        let items = try context.objects("Item", sort: ["title"]).map { item in
            let tags = ((item.value(forKey: "tags") as? Set<NSManagedObject>) ?? []).compactMap { $0.string("label") }.sorted()
            let folder = (item.value(forKey: "folder") as? NSManagedObject)?.string("name") ?? "-"
            return "\(item.string("title") ?? "-")/\(item.value(forKey: "rank") ?? "")/\(folder)/\(tags.joined(separator: "+"))"
        }
        let tags = try context.objects("Tag", sort: ["label"]).map { tag in
            let items = ((tag.value(forKey: "items") as? Set<NSManagedObject>) ?? []).compactMap { $0.string("title") }.sorted()
            return "\(tag.string("label") ?? "-"){\(items.joined(separator: ","))}"
        }
        return (folders + items + tags).joined(separator: " ")
    }

    /// What the store holds, read by a new context.
    func storeState(_ stack: TestStack) throws -> String { try state(stack.context()) }

    @Test func anEditIsUndoneAndRedoneOneEventAtATime() throws {
        let stack = try seeded()
        let context = stack.context()
        context.undoManager = UndoManager()
        let a = try #require(try context.objects("Item", "title == 'a'").first)
        let start = try state(context)
        a.setValue("A", forKey: "title")
        a.setValue(5, forKey: "rank")
        context.processPendingChanges()
        let afterFirst = try state(context)
        a.setValue(6, forKey: "rank")
        context.processPendingChanges()
        let afterSecond = try state(context)
        #expect(context.undoManager?.canUndo == true)
        context.undo()
        #expect(try state(context) == afterFirst)
        context.undo()
        #expect(try state(context) == start)
        #expect(!context.hasChanges)  // back to the committed values
        context.redo()
        #expect(try state(context) == afterFirst)
        context.redo()
        #expect(try state(context) == afterSecond)
        try context.save()
        #expect(try storeState(stack) == afterSecond)
    }

    @Test func anUndoFirstRegistersWhatIsPending() throws {
        let stack = try seeded()
        let context = stack.context()
        context.undoManager = UndoManager()
        let start = try state(context)
        try context.objects("Item", "title == 'b'").first?.setValue("B", forKey: "title")
        // Not processed yet: the undo manager's checkpoint has the context register it first, as Core Data does.
        context.undo()
        #expect(try state(context) == start)
        context.redo()
        #expect(try context.objects("Item", "title == 'B'").count == 1)
    }

    @Test func anInsertionIsUndoneAndRedoneWithItsRelationships() throws {
        let stack = try seeded()
        let context = stack.context()
        context.undoManager = UndoManager()
        let start = try state(context)
        let inbox = try #require(try context.objects("Folder").first)
        let red = try #require(try context.objects("Tag").first)
        let c = try context.make("Item", ["title": "c", "rank": 3, "folder": inbox, "tags": Set([red])])
        let temporaryID = c.objectID
        context.processPendingChanges()
        let inserted = try state(context)
        context.undo()
        #expect(try state(context) == start)
        #expect(context.insertedObjects.isEmpty)
        context.redo()
        #expect(try state(context) == inserted)
        #expect(c.objectID == temporaryID)
        #expect(context.insertedObjects == [c])
        try context.save()
        #expect(try storeState(stack) == inserted)
        // Undone after the save: the saved object is deleted, and the next save removes its row.
        context.undo()
        try context.save()
        #expect(try storeState(stack) == start)
        context.redo()
        try context.save()
        #expect(try storeState(stack) == inserted)
    }

    @Test func aDeletionComesBackWithWhatItsRulesChanged() throws {
        let stack = try seeded()
        let context = stack.context()
        context.undoManager = UndoManager()
        let start = try state(context)
        // Deleting the folder cascades to its items, whose tag loses them (nullify).
        context.delete(try #require(try context.objects("Folder").first))
        context.processPendingChanges()
        let deleted = try state(context)
        #expect(deleted == "red{}")
        context.undo()
        #expect(try state(context) == start)
        #expect(context.deletedObjects.isEmpty && !context.hasChanges)
        context.redo()
        #expect(try state(context) == deleted)
        try context.save()
        #expect(try storeState(stack) == deleted)
        // Undone after the save: the objects come back as new ones, related as they were.
        context.undo()
        #expect(try state(context) == start)
        try context.save()
        #expect(try storeState(stack) == start)
    }

    @Test func aNewObjectDeletedInALaterEventComesBack() throws {
        let stack = try seeded()
        let context = stack.context()
        context.undoManager = UndoManager()
        let inbox = try #require(try context.objects("Folder").first)
        let c = try context.make("Item", ["title": "c", "folder": inbox])
        context.processPendingChanges()
        let inserted = try state(context)
        context.delete(c)
        context.processPendingChanges()  // a new object deleted goes away
        #expect(!(try state(context)).contains("c/"))
        context.undo()
        #expect(try state(context) == inserted)
        #expect(context.insertedObjects == [c])
        try context.save()
        #expect(try storeState(stack) == inserted)
    }

    @Test func orderAndMovesAreUndone() throws {
        let stack = try seeded()
        let context = stack.context()
        context.undoManager = UndoManager()
        let start = try state(context)
        let inbox = try #require(try context.objects("Folder").first)
        let archive = try context.make("Folder", ["name": "Archive"])
        context.processPendingChanges()
        let withArchive = try state(context)
        let items = try context.objects("Item", sort: ["title"])
        inbox.setValue(NSOrderedSet(array: items.reversed()), forKey: "items")
        context.processPendingChanges()
        let reversed = try state(context)
        #expect(reversed.hasPrefix("Archive[] Inbox[b,a]"))
        items[0].setValue(archive, forKey: "folder")
        context.processPendingChanges()
        #expect(try state(context).hasPrefix("Archive[a] Inbox[b]"))
        context.undo()
        #expect(try state(context) == reversed)
        context.undo()
        #expect(try state(context) == withArchive)
        context.undo()
        #expect(try state(context) == start)
        #expect(!context.hasChanges)
    }

    @Test func explicitGroupsSpanEvents() throws {
        let stack = try seeded()
        let context = stack.context()
        let manager = UndoManager()
        context.undoManager = manager
        let start = try state(context)
        manager.beginUndoGrouping()
        try context.objects("Item", "title == 'a'").first?.setValue(9, forKey: "rank")
        context.processPendingChanges()
        try context.make("Tag", ["label": "blue"])
        context.processPendingChanges()
        manager.endUndoGrouping()
        context.undo()
        #expect(try state(context) == start)
    }

    @Test func rollbackResetAndDisabledRegistrationRecordNothing() throws {
        let stack = try seeded()
        let context = stack.context()
        let manager = UndoManager()
        context.undoManager = manager
        try context.objects("Item", "title == 'a'").first?.setValue(9, forKey: "rank")
        context.processPendingChanges()
        context.rollback()
        #expect(!manager.canUndo)

        manager.disableUndoRegistration()
        try context.objects("Item", "title == 'a'").first?.setValue(8, forKey: "rank")
        context.processPendingChanges()
        manager.enableUndoRegistration()
        #expect(!manager.canUndo)

        try context.objects("Item", "title == 'b'").first?.setValue(7, forKey: "rank")
        context.processPendingChanges()
        #expect(manager.canUndo)
        context.reset()
        #expect(!manager.canUndo)

        // Without an undo manager nothing is recorded, and undo() does nothing.
        context.undoManager = nil
        try context.objects("Item", "title == 'b'").first?.setValue(6, forKey: "rank")
        context.undo()
        #expect(try context.objects("Item", "rank == 6").count == 1)
    }
}
