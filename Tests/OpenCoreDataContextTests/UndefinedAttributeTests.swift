import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Transient attributes of undefined type, as Xcode writes them (no `attributeType`): they hold any value, in memory
/// only.
@Suite struct UndefinedAttributeTests {
    let dir = TemporaryDirectory()

    func model(_ attributes: String) throws -> NSManagedObjectModel { try dir.noteModel(attributes) }

    final class Thumbnail {
        let pixels: [UInt8]
        init(pixels: [UInt8]) { self.pixels = pixels }
    }

    @Test func aTransientAttributeWithoutATypeHoldsAnyValueInMemoryOnly() throws {
        let model = try model(#"<attribute name="cache" optional="YES" transient="YES" syncable="YES"/>"#)
        let attribute = try #require(model.entitiesByName["Note"]?.attributesByName["cache"])
        #expect(attribute.attributeType == .undefinedAttributeType && attribute.isTransient)

        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            let note = try context.make("Note", ["title": "first"])
            let thumbnail = Thumbnail(pixels: [1, 2, 3])
            note.setValue(thumbnail, forKey: "cache")
            #expect(note.value(forKey: "cache") as? Thumbnail === thumbnail, "the same object comes back")
            note.setValue(["a", "b"], forKey: "cache")
            #expect(note.value(forKey: "cache") as? [String] == ["a", "b"])
            note.setValue("text", forKey: "cache")
            #expect(note.value(forKey: "cache") as? String == "text")
            note.setValue(nil, forKey: "cache")
            #expect(note.value(forKey: "cache") == nil)
            note.setValue(thumbnail, forKey: "cache")
            try context.save()
            #expect(note.value(forKey: "cache") as? Thumbnail === thumbnail, "a save keeps the in-memory value")
        }
        // Transient: the store never held it.
        let other = stack.context()
        try other.performAndWait {
            let fetched = try other.fetch(NSFetchRequest<NSManagedObject>(entityName: "Note"))
            #expect(fetched.count == 1 && fetched[0].string("title") == "first")
            #expect(fetched[0].value(forKey: "cache") == nil)
        }
    }

    @Test func onlyATransientAttributeMayHaveUndefinedType() throws {
        #expect {
            _ = try model(#"<attribute name="cache" optional="YES" syncable="YES"/>"#)
        } throws: { error in
            let message = (error as? CoreDataError)?.message ?? ""
            return message.contains("line 5") && message.contains(#"name="cache""#) && message.contains("only a transient attribute")
        }
    }
}
