import CoreDataCommandLine
import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// `coredata migrate`, and the other commands on a store of an older model version: `import` migrates it first (as
/// a container does), `fetch` refuses it saying it needs migrating and leaves it untouched.
@Suite struct MigrateToolTests {
    let dir = TemporaryDirectory()

    /// A bundle with two versions: `V1` (Item: name) and `V2` (current: Item: name, note; entity Tag added).
    func bundle() throws -> URL {
        let bundle = dir.file("Shop.xcdatamodeld")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        let v1 =
            #"<entity name="Item" representedClassName="Item" syncable="YES"><attribute name="name" optional="YES" attributeType="String"/></entity>"#
        let v2 =
            v1.replacingOccurrences(
                of: "</entity>", with: #"<attribute name="note" optional="YES" attributeType="String"/></entity>"#)
            + #"<entity name="Tag" representedClassName="Tag" syncable="YES"><attribute name="label" optional="YES" attributeType="String"/></entity>"#
        for (name, body) in [("V1", v1), ("V2", v2)] {
            let folder = bundle.appendingPathComponent("\(name).xcdatamodel")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(#"<?xml version="1.0" encoding="UTF-8"?><model type="com.apple.IDECoreDataModeler.DataModel">\#(body)</model>"#.utf8)
                .write(to: folder.appendingPathComponent("contents"))
        }
        try Data(
            #"<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict><key>_XCCurrentVersionName</key><string>V2.xcdatamodel</string></dict></plist>"#
                .utf8
        ).write(to: bundle.appendingPathComponent(".xccurrentversion"))
        return bundle
    }

    @Test func migrateMovesAStoreToTheCurrentVersionAndSaysWhatChanged() throws {
        try migrateMovesAStoreToTheCurrentVersion(StorePlaces(.sqlite))
    }

    func migrateMovesAStoreToTheCurrentVersion(_ places: StorePlaces) throws {
        let bundle = try bundle()
        let url = try places.url("shop")
        let store = url.isFileURL ? url.path : url.absoluteString
        let data = dir.file("items.json")
        try Data(#"{"Item": [{"name": "pen"}, {"name": "ink"}]}"#.utf8).write(to: data)
        let v1 = bundle.appendingPathComponent("V1.xcdatamodel").path
        #expect(coredata(["import", "--model", v1, "--store", store, data.path]).code == 0)
        let before = try places.contents("shop")
        // fetch never migrates: it says the store needs it, and the store stays as it was.
        let refused = coredata(["fetch", "--model", bundle.path, "--store", store, "--entity", "Item"])
        #expect(refused.code == 1 && refused.err.contains("migrat"), "\(refused.err)")
        #expect(try places.contents("shop") == before)
        let migrated = coredata(["migrate", "--model", bundle.path, "--store", store])
        #expect(migrated.code == 0, "\(migrated.err)")
        #expect(migrated.out.contains("added entity Tag") && migrated.out.contains("added Item.note"), "\(migrated.out)")
        let again = coredata(["migrate", "--model", bundle.path, "--store", store, "--to", "V2"])
        #expect(again.code == 0 && again.out.contains("already"), "\(again.out)")
        let fetched = coredata(["fetch", "--model", bundle.path, "--store", store, "--entity", "Item", "--result", "count"])
        #expect(fetched.code == 0 && fetched.out.trimmingCharacters(in: .whitespacesAndNewlines) == "2", "\(fetched.err)")
        let missing = coredata(["migrate", "--model", bundle.path, "--store", store, "--to", "V9"])
        #expect(missing.code == 1 && missing.err.contains("V9"), "\(missing.err)")
    }

    /// `import` into a store of an older version migrates it first, as a container does.
    @Test func importMigratesAnOlderStoreFirst() throws {
        let bundle = try bundle()
        let store = dir.file("old.sqlite").path
        let first = dir.file("first.json")
        try Data(#"{"Item": [{"name": "pen"}]}"#.utf8).write(to: first)
        #expect(
            coredata(["import", "--model", bundle.appendingPathComponent("V1.xcdatamodel").path, "--store", store, first.path]).code == 0)
        let second = dir.file("second.json")
        try Data(#"{"Item": [{"name": "ink", "note": "blue"}], "Tag": [{"label": "office"}]}"#.utf8).write(to: second)
        let imported = coredata(["import", "--model", bundle.path, "--store", store, second.path])
        #expect(imported.code == 0, "\(imported.err)")
        let count = coredata(["fetch", "--store", store, "--entity", "Item", "--result", "count"])
        #expect(count.out.trimmingCharacters(in: .whitespacesAndNewlines) == "2", "\(count.err)")
    }
}
