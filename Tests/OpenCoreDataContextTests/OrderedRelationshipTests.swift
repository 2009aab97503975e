import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// Ordered to-many relationships: `NSOrderedSet` values, `mutableOrderedSetValue(forKey:)`, the order saved in Core
/// Data's `Z_FOK_` columns and read back, inverses kept, and other contexts seeing a new order after a merge.
@Suite struct OrderedRelationshipTests {
    func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Folder") {
                Attribute("name", .string)
                Relationship("children", to: "Item", toMany: true, inverse: "parent", ordered: true)
            }
            Entity("Item") {
                Attribute("title", .string)
                Relationship("parent", to: "Folder", inverse: "children")
                Relationship("playlists", to: "Playlist", toMany: true, inverse: "items")
            }
            Entity("Playlist") {
                Attribute("name", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "playlists", ordered: true)
            }
        }
    }

    func titles(_ value: Any?) -> [String] {
        ((value as? NSOrderedSet)?.array ?? []).compactMap { ($0 as? NSManagedObject)?.string("title") }
    }

    /// The titles of `folder`'s children (or a playlist's items) read by a fresh context.
    func stored(_ stack: TestStack, _ entity: String, _ name: String, _ key: String) throws -> [String] {
        let context = stack.context()
        return try context.performAndWait {
            titles(try context.objects(entity, "name == %@", name).first?.value(forKey: key))
        }
    }

    @Test func theOrderIsKeptSavedAndReadBack() throws {
        let stack = try TestStack(model: model())
        let context = stack.context()
        try context.performAndWait {
            let folder = try context.make("Folder", ["name": "f"])
            let items = try ["a", "b", "c", "d"].map { try context.make("Item", ["title": $0]) }
            let children = folder.mutableOrderedSetValue(forKey: "children")
            for item in items { children.add(item) }
            children.insert(items[3], at: 0)
            #expect(titles(folder.value(forKey: "children")) == ["d", "a", "b", "c"])
            #expect((items[0].value(forKey: "parent") as? NSManagedObject) === folder, "the inverse is set")
            try context.save()
        }
        #expect(try stored(stack, "Folder", "f", "children") == ["d", "a", "b", "c"])
        let columns = try DatabaseQueue(path: stack.storeURL.path).read { db in try db.columns(in: "ZITEM").map(\.name) }
        #expect(columns.contains("Z_FOK_PARENT"), "Core Data's order column beside ZPARENT: \(columns)")

        // A new order alone is a change, saved and read back.
        try context.performAndWait {
            let folder = try #require(try context.objects("Folder").first)
            folder.mutableOrderedSetValue(forKey: "children").moveObjects(at: IndexSet([2, 3]), to: 0)
            #expect(folder.hasChanges)
            try context.save()
        }
        #expect(try stored(stack, "Folder", "f", "children") == ["b", "c", "d", "a"])
    }

    @Test func inversesAndReplacementsKeepAnOrder() throws {
        let stack = try TestStack(model: model())
        let context = stack.context()
        try context.performAndWait {
            let first = try context.make("Folder", ["name": "first"])
            let second = try context.make("Folder", ["name": "second"])
            let items = try ["a", "b", "c"].map { try context.make("Item", ["title": $0]) }
            first.setValue(NSOrderedSet(array: items.reversed()), forKey: "children")
            #expect(titles(first.value(forKey: "children")) == ["c", "b", "a"])
            second.setValue(NSOrderedSet(array: [try context.make("Item", ["title": "z"])]), forKey: "children")
            try context.save()
            // Setting the to-one side appends to the new parent and leaves the old one.
            items[1].setValue(second, forKey: "parent")
            #expect(titles(first.value(forKey: "children")) == ["c", "a"])
            #expect(titles(second.value(forKey: "children")) == ["z", "b"])
            // A Set keeps the members already there in their order, then adds the others.
            second.setValue(Set([items[1], items[0]]), forKey: "children")
            #expect(titles(second.value(forKey: "children")) == ["b", "a"])
            #expect(titles(first.value(forKey: "children")) == ["c"])
            try context.save()
        }
        #expect(try stored(stack, "Folder", "first", "children") == ["c"])
        #expect(try stored(stack, "Folder", "second", "children") == ["b", "a"])
    }

    @Test func manyToManyOrderAndMergesIntoAnotherContext() throws {
        let stack = try TestStack(model: model())
        let writer = stack.context()
        let reader = stack.context()
        try writer.performAndWait {
            let playlist = try writer.make("Playlist", ["name": "p"])
            let items = try ["x", "y", "z"].map { try writer.make("Item", ["title": $0]) }
            playlist.setValue(NSOrderedSet(array: [items[2], items[0], items[1]]), forKey: "items")
            #expect((items[0].value(forKey: "playlists") as? Set<NSManagedObject>)?.contains(playlist) == true)
            try writer.save()
        }
        #expect(try stored(stack, "Playlist", "p", "items") == ["z", "x", "y"])
        let observed = try reader.performAndWait {
            let playlist = try #require(try reader.objects("Playlist").first)
            #expect(titles(playlist.value(forKey: "items")) == ["z", "x", "y"])
            return playlist
        }
        let saved = try writer.performAndWait {
            let playlist = try #require(try writer.objects("Playlist").first)
            playlist.mutableOrderedSetValue(forKey: "items").moveObjects(at: IndexSet(integer: 0), to: 2)
            final class Box: @unchecked Sendable { var note: Notification? }
            let box = Box()
            let token = NotificationCenter.default.addObserver(
                forName: NSManagedObjectContext.didSaveObjectsNotification, object: writer, queue: nil
            ) { box.note = $0 }
            defer { NotificationCenter.default.removeObserver(token) }
            try writer.save()
            return try #require(box.note)
        }
        #expect(try stored(stack, "Playlist", "p", "items") == ["x", "y", "z"])
        reader.performAndWait {
            reader.mergeChanges(fromContextDidSave: saved)
            #expect(titles(observed.value(forKey: "items")) == ["x", "y", "z"], "the merged order")
        }
    }
}
