import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Nested contexts, with Core Data's semantics: a child reads through its parent (unsaved changes included), its save
/// goes into the parent as changes made there, the parent's save writes them; temporary IDs are one per object along
/// the chain; discarding a child leaves the parent as it was.
@Suite struct NestedContextTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Folder") {
                Attribute("name", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "folder", deleteRule: .cascadeDeleteRule, ordered: true)
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

    /// A stack whose store holds folder "Inbox" with items a (rank 1) and b (rank 2), a tagged "red".
    func seeded() throws -> TestStack {
        let stack = try TestStack(model: try Self.model())
        let context = stack.context()
        try context.performAndWait {
            let inbox = try context.make("Folder", ["name": "Inbox"])
            let a = try context.make("Item", ["title": "a", "rank": 1, "folder": inbox])
            try context.make("Item", ["title": "b", "rank": 2, "folder": inbox])
            try context.make("Tag", ["label": "red"]).setValue(Set([a]), forKey: "items")
            try context.save()
        }
        return stack
    }

    func child(of parent: NSManagedObjectContext) -> NSManagedObjectContext {
        let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        child.parent = parent
        return child
    }

    func titles(_ context: NSManagedObjectContext, _ format: String? = nil) throws -> [String] {
        try context.performAndWait { try context.objects("Item", format, sort: ["title"]).compactMap { $0.string("title") } }
    }

    @Test func aChildSeesItsParentsUnsavedChanges() throws {
        let stack = try seeded()
        let parent = stack.context()
        try parent.performAndWait {
            try parent.make("Item", ["title": "c", "rank": 3])
            try parent.objects("Item", "title == 'b'").first?.setCheckedValue(9, forKey: "rank")
            try parent.objects("Item", "title == 'a'").first.map(parent.delete)
        }
        let child = child(of: parent)
        #expect(try titles(child) == ["b", "c"])
        #expect(try titles(child, "rank > 2") == ["b", "c"], "b's unsaved rank 9 is what the child filters on")
        try child.performAndWait {
            #expect(try child.count(for: NSFetchRequest<NSManagedObject>(entityName: "Item")) == 2)
            let c = try #require(try child.objects("Item", "title == 'c'").first)
            #expect(
                c.objectID.isTemporaryID
                    && c.objectID == parent.performAndWait { try? parent.objects("Item", "title == 'c'").first?.objectID })
            let inbox = try #require(try child.objects("Folder").first)
            let items = try #require(inbox.value(forKey: "items") as? NSOrderedSet)
            #expect(items.array.compactMap { ($0 as? NSManagedObject)?.string("title") } == ["b"], "a is deleted in the parent")
        }
        // The store has none of it.
        #expect(try titles(stack.context()) == ["a", "b"])
    }

    @Test func aChildsSaveGoesIntoItsParentAndTheParentsSaveWritesIt() throws {
        let stack = try seeded()
        let parent = stack.context()
        let child = child(of: parent)
        var childItemID: NSManagedObjectID?
        try child.performAndWait {
            let inbox = try #require(try child.objects("Folder").first)
            let d = try child.make("Item", ["title": "d", "rank": 4, "folder": inbox])
            let red = try #require(try child.objects("Tag").first)
            red.setValue(Set((red.value(forKey: "items") as? Set<NSManagedObject> ?? []) + [d]), forKey: "items")
            try child.objects("Item", "title == 'a'").first?.setCheckedValue("a2", forKey: "title")
            try child.objects("Item", "title == 'b'").first.map(child.delete)
            try child.save()
            childItemID = d.objectID
            #expect(!child.hasChanges && d.objectID.isTemporaryID, "a child's saved objects keep temporary IDs until the parent saves")
        }
        #expect(try titles(stack.context()) == ["a", "b"], "the child's save did not reach the store")
        try parent.performAndWait {
            #expect(parent.hasChanges)
            let id = try #require(childItemID)
            #expect(parent.insertedObjects.map(\.objectID) == [id], "the parent knows the new object by the child's ID")
            #expect(parent.updatedObjects.contains { $0.entity.name == "Item" && $0.string("title") == "a2" })
            #expect(parent.deletedObjects.map { $0.entity.name == "Item" ? $0.string("title") : nil } == ["b"])
            let d = try #require(parent.registeredObject(for: id))
            #expect((d.value(forKey: "folder") as? NSManagedObject)?.string("name") == "Inbox")
            let inbox = try #require(d.value(forKey: "folder") as? NSManagedObject)
            #expect(
                (inbox.value(forKey: "items") as? NSOrderedSet)?.array.compactMap { ($0 as? NSManagedObject)?.string("title") } == [
                    "a2", "d",
                ])
            try parent.save()
            #expect(!d.objectID.isTemporaryID)
        }
        let reader = stack.context()
        #expect(try titles(reader) == ["a2", "d"])
        try reader.performAndWait {
            let red = try #require(try reader.objects("Tag").first)
            #expect(Set((red.value(forKey: "items") as? Set<NSManagedObject>)?.compactMap { $0.string("title") } ?? []) == ["a2", "d"])
        }
    }

    @Test func theParentReportsAChildsSaveAsChangesMadeThere() throws {
        let stack = try seeded()
        let parent = stack.context()
        var changes: [ContextChange] = []
        let observation = parent.addChangeObserver { changes.append($0) }
        defer { observation.cancel() }
        let child = child(of: parent)
        try child.performAndWait {
            try child.make("Item", ["title": "e"])
            try child.objects("Item", "title == 'a'").first?.setCheckedValue(5, forKey: "rank")
            try child.save()
        }
        let change = try #require(changes.last)
        #expect(change.origin == .localEdits)
        #expect(change.inserted.map { $0.string("title") } == ["e"])
        #expect(change.updated.map { $0.object.string("title") } == ["a"])
        #expect(change.updated.first?.keys.contains("rank") == true)
    }

    @Test func discardingAChildLeavesTheParentAsItWas() throws {
        let stack = try seeded()
        let parent = stack.context()
        do {
            let child = child(of: parent)
            try child.performAndWait {
                try child.make("Item", ["title": "never"])
                try child.objects("Item").forEach(child.delete)
            }
        }
        parent.performAndWait {
            #expect(!parent.hasChanges)
            #expect(parent.registeredObjects.isEmpty, "the child read through the parent without making objects there")
        }
        #expect(try titles(parent) == ["a", "b"])
    }

    @Test func aGrandchildSavesThroughTheChainAndPermanentIDsAreOnePerObject() throws {
        let stack = try seeded()
        let root = stack.context()
        let middle = child(of: root)
        let leaf = child(of: middle)
        var uri: URL?
        try leaf.performAndWait {
            let f = try leaf.make("Item", ["title": "f"])
            try leaf.obtainPermanentIDs(for: [f])
            #expect(!f.objectID.isTemporaryID)
            uri = f.objectID.uriRepresentation()
            try leaf.save()
        }
        try middle.performAndWait {
            let f = try #require(try middle.objects("Item", "title == 'f'").first)
            #expect(f.objectID.uriRepresentation() == uri)
            try middle.save()
        }
        try root.performAndWait {
            let f = try #require(try root.objects("Item", "title == 'f'").first)
            #expect(f.objectID.uriRepresentation() == uri)
            try root.save()
        }
        let reader = stack.context()
        try reader.performAndWait {
            let f = try #require(try reader.objects("Item", "title == 'f'").first)
            #expect(f.objectID.uriRepresentation() == uri, "the ID obtained in the grandchild is the stored row's")
            // Another new object takes a key after the reserved one.
            let g = try reader.make("Item", ["title": "g"])
            try reader.save()
            #expect(g.objectID.primaryKey > f.objectID.primaryKey)
        }
    }

    @Test func aChildKeepsWorkingOnObjectsItsParentHasSavedSince() throws {
        let stack = try seeded()
        let parent = stack.context()
        let child = child(of: parent)
        let h = try child.performAndWait {
            let h = try child.make("Item", ["title": "h"])
            try child.save()
            return h
        }
        try parent.performAndWait { try parent.save() }
        try child.performAndWait {
            #expect(h.objectID.isTemporaryID, "as in Core Data, the child's object keeps the ID it was saved under")
            h.setValue("h2", forKey: "title")
            try child.save()
        }
        try parent.performAndWait { try parent.save() }
        #expect(try titles(stack.context()) == ["a", "b", "h2"])
    }

    @Test func aChildsSaveOfAnObjectItsParentDeletedFailsAndChangesNothing() throws {
        let stack = try seeded()
        let parent = stack.context()
        let child = child(of: parent)
        try child.performAndWait {
            try child.objects("Item", "title == 'a'").first?.setCheckedValue("changed", forKey: "title")
            try child.make("Item", ["title": "new"])
        }
        let before = try parent.performAndWait {
            try parent.objects("Item", "title == 'a'").first.map(parent.delete)
            parent.processPendingChanges()
            return (parent.updatedObjects, parent.deletedObjects)
        }
        let error = #expect(throws: CoreDataError.self) { try child.performAndWait { try child.save() } }
        #expect(error?.code == .objectNotFound && error?.message.contains("deleted") == true, "\(error?.message ?? "")")
        parent.performAndWait {
            #expect(parent.insertedObjects.isEmpty, "nothing of the failed save reached the parent")
            #expect(parent.updatedObjects == before.0 && parent.deletedObjects == before.1)
            #expect(child.performAndWait { child.hasChanges })
        }
    }

    @Test func aChildMergesItsParentsAndSiblingsSavesAutomatically() throws {
        let stack = try seeded()
        let parent = stack.context()
        let watcher = child(of: parent)
        watcher.automaticallyMergesChangesFromParent = true
        let a = try watcher.performAndWait { try #require(try watcher.objects("Item", "title == 'a'").first) }
        let sibling = child(of: parent)
        try sibling.performAndWait {
            try sibling.objects("Item", "title == 'a'").first?.setCheckedValue(42, forKey: "rank")
            try sibling.save()
        }
        #expect(eventually { watcher.performAndWait { (a.value(forKey: "rank") as? Int32) == 42 } })
        // A context on the store does not take a save that only reached the parent.
        let other = stack.context()
        other.automaticallyMergesChangesFromParent = true
        let otherA = try other.performAndWait { try #require(try other.objects("Item", "title == 'a'").first) }
        try sibling.performAndWait {
            try sibling.objects("Item", "title == 'a'").first?.setCheckedValue(43, forKey: "rank")
            try sibling.save()
        }
        try parent.performAndWait { try parent.save() }
        #expect(eventually { other.performAndWait { (otherA.value(forKey: "rank") as? Int32) == 43 } })
        #expect(eventually { watcher.performAndWait { (a.value(forKey: "rank") as? Int32) == 43 } })
    }
}
