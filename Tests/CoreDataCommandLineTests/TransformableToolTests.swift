import CoreDataCommandLine
import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// `coredata` on transformable attributes: JSON values imported through the attribute's transformer, printed back as
/// JSON, and stored bytes no transformer of the tool reads printed in base64 with a warning.
@Suite struct TransformableToolTests {
    let dir = TemporaryDirectory()
    var store: String { dir.file("notes.sqlite").path }

    func writeModel() throws -> String {
        try dir.writeModel(
            "Notes",
            """
                <entity name="Note" representedClassName="Note" syncable="YES">
                    <attribute name="title" optional="YES" attributeType="String"/>
                    <attribute name="tags" optional="YES" attributeType="Transformable" valueTransformerName="NSSecureUnarchiveFromData"/>
                    <attribute name="color" optional="YES" attributeType="Transformable" valueTransformerName="ToolColorTest"/>
                </entity>
            """
        ).path
    }

    @Test func jsonValuesImportThroughTheTransformerAndPrintBack() throws {
        let model = try writeModel()
        let file = dir.file("notes.json")
        try Data(#"[{"title": "a", "tags": ["x", "y", {"n": 2, "f": 0.5, "ok": true}]}, {"title": "b", "tags": null}]"#.utf8).write(
            to: file)
        let imported = coredata(["import", "--model", model, "--store", store, "--entity", "Note", file.path])
        #expect(imported.code == 0, "\(imported.err)")
        let r = coredata(["fetch", "--model", model, "--store", store, "--entity", "Note", "--sort", "title", "--format", "json"])
        #expect(r.code == 0, "\(r.err)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]], "\(r.out)")
        let tags = try #require(rows.first?["tags"] as? [Any])
        #expect(tags.count == 3 && tags[0] as? String == "x" && tags[1] as? String == "y")
        let object = try #require(tags[2] as? [String: Any])
        #expect(object["n"] as? Int == 2 && object["f"] as? Double == 0.5 && object["ok"] as? Bool == true)
        #expect(rows.last?["tags"] is NSNull)
    }

    final class ColorTransformer: ValueTransformer, @unchecked Sendable {
        override func transformedValue(_ value: Any?) -> Any? { (value as? String).map { Data($0.utf8) } }
        override func reverseTransformedValue(_ value: Any?) -> Any? { (value as? Data).map { String(decoding: $0, as: UTF8.self) } }
    }

    @Test func bytesNoTransformerReadsArePrintedInBase64WithAWarning() throws {
        let model = try writeModel()
        let name = NSValueTransformerName("ToolColorTest")
        do {
            // The app that wrote the store had the transformer; the tool does not.
            ValueTransformer.setValueTransformer(ColorTransformer(), forName: name)
            defer { ValueTransformer.setValueTransformer(nil, forName: name) }
            let container = NSPersistentContainer(
                name: "Notes", managedObjectModel: try NSManagedObjectModel(contentsOf: URL(fileURLWithPath: model)))
            container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: URL(fileURLWithPath: store))]
            try container.loadPersistentStores()
            let context = container.newBackgroundContext()
            try context.performAndWait {
                try context.make("Note", ["title": "c", "color": "#ff0000"])
                try context.save()
            }
        }
        let r = coredata(["fetch", "--model", model, "--store", store, "--entity", "Note", "--format", "json"])
        #expect(r.code == 0, "\(r.err)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]], "\(r.out)")
        #expect(rows.first?["color"] as? String == Data("#ff0000".utf8).base64EncodedString())
        #expect(r.err.contains("warning") && r.err.contains("Note.color") && r.err.contains("ToolColorTest"), "\(r.err)")
        // Importing a value for it fails by name, and writes nothing.
        let file = dir.file("more.json")
        try Data(##"[{"title": "d", "color": "#00ff00"}]"##.utf8).write(to: file)
        let imported = coredata(["import", "--model", model, "--store", store, "--entity", "Note", file.path])
        #expect(imported.code == 1 && imported.err.contains("ToolColorTest") && imported.err.contains("not registered"), "\(imported.err)")
    }
}
