import Foundation
import OpenCoreDataModel
import Testing
import _TestSupport

@testable import OpenCoreDataContext

/// The context's pending-changes and event sets are `MarkedObjects`, whose members carry the set's bit.
///
/// A change to an object already there then costs no hashing. The bit and the set must agree through every way an
/// object leaves them (save, rollback, refresh, delete, reset), or a later change would be skipped and lost at the next
/// save.
@Suite struct MarkedObjectsTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Note") {
                Attribute("title", .string)
                Attribute("rank", .integer64)
            }
        }
    }

    @Test func membershipAndMarksAgree() throws {
        let context = try TestStack(model: try Self.model(), inMemory: true).context()
        try context.performAndWait {
            let a = try context.make("Note"), b = try context.make("Note")
            var changed = MarkedObjects(.changed)
            var event = MarkedObjects(.event)
            changed.insert(a)
            changed.insert(a)
            event.insert(a)
            changed.insert(b)
            #expect(changed.count == 2 && event.count == 1)
            #expect(a.marks == ObjectSetMark.changed.rawValue | ObjectSetMark.event.rawValue)
            changed.remove(a)
            changed.remove(a)
            #expect(changed.count == 1 && !changed.members.contains(a))
            #expect(a.marks == ObjectSetMark.event.rawValue, "leaving one set keeps the other's bit")
            changed.removeAll()
            event.removeAll()
            #expect(changed.isEmpty && event.isEmpty)
            #expect(a.marks == 0 && b.marks == 0)
        }
    }

    /// A stored object changed again after each way its pending changes end is saved again: its mark was cleared with
    /// the set, so the new change put it back.
    @Test func aChangeAfterEveryWayPendingChangesEndIsSaved() throws {
        let stack = try TestStack(model: try Self.model())
        let context = stack.context()
        let id = try context.performAndWait {
            let note = try context.make("Note", ["title": "first", "rank": 1])
            try context.save()
            return note.objectID
        }
        func stored() throws -> (String?, Int64?) {
            let reader = stack.context()
            return try reader.performAndWait {
                let note = try reader.existingObject(with: id)
                return (note.value(forKey: "title") as? String, (note.value(forKey: "rank") as? NSNumber)?.int64Value)
            }
        }
        try context.performAndWait {
            let note = try context.existingObject(with: id)
            // After a save.
            note.setValue("second", forKey: "title")
            note.setValue(Int64(2), forKey: "rank")  // a second change of the object: it is in the set already
            try context.save()
            note.setValue("third", forKey: "title")
            #expect(context.updatedObjects == [note])
            try context.save()
            #expect(try stored() == ("third", 2))
            // After a rollback.
            note.setValue("discarded", forKey: "title")
            context.rollback()
            note.setValue("fourth", forKey: "title")
            try context.save()
            #expect(try stored() == ("fourth", 2))
            // After a refresh that drops the change.
            note.setValue("dropped", forKey: "title")
            context.processPendingChanges()
            context.refresh(note, mergeChanges: false)
            #expect(context.updatedObjects.isEmpty)
            note.setValue(Int64(5), forKey: "rank")
            #expect(context.hasChanges)
            try context.save()
            #expect(try stored() == ("fourth", 5))
            // A change set back to the stored value leaves the set; a new change joins it again.
            note.setValue("changed", forKey: "title")
            note.setValue("fourth", forKey: "title")
            #expect(context.updatedObjects.isEmpty)
            note.setValue("fifth", forKey: "title")
            try context.save()
            #expect(try stored() == ("fifth", 5))
        }
    }

    /// After a reset every object is gone from both sets with its bits cleared; objects fetched again are changed and
    /// saved as any other.
    @Test func aResetClearsTheMarks() throws {
        let stack = try TestStack(model: try Self.model())
        let context = stack.context()
        try context.performAndWait {
            let note = try context.make("Note", ["title": "a"])
            try context.save()
            note.setValue("b", forKey: "title")
            #expect(note.marks != 0)
            context.reset()
            #expect(note.marks == 0)
            let again = try #require(try context.objects("Note").first)
            again.setValue("c", forKey: "title")
            try context.save()
            #expect(try stack.context().objects("Note").first?.value(forKey: "title") as? String == "c")
        }
    }
}
