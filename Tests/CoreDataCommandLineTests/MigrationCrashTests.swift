import CoreDataCommandLine
import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// A migration killed (`kill -9`) at any moment leaves either the old store intact or the new one complete.
///
/// The next migration finishes the job. Needs the `coredata` executable beside the tests (`swift build` makes it).
@Suite struct MigrationCrashTests {
    let dir = TemporaryDirectory()

    @Test(.enabled(if: Requirement.executableIsBuilt("coredata"), "needs the coredata executable beside the tests (swift build)"))
    func aMigrationKilledAtAnyMomentLeavesTheOldStoreOrTheNewOne() throws {
        let tool = try #require(builtExecutable("coredata"))
        let version1 = """
                <entity name="Item" representedClassName="Item" syncable="YES">
                    <attribute name="name" attributeType="String"/>
                    <attribute name="count" optional="YES" attributeType="Integer 16" defaultValueString="0"/>
                    <relationship name="tags" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Tag" inverseName="items"/>
                </entity>
                <entity name="Tag" representedClassName="Tag" syncable="YES">
                    <attribute name="label" optional="YES" attributeType="String"/>
                    <relationship name="items" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Item" inverseName="tags"/>
                </entity>
            """
        // Version 2: name renamed title, count widened, a required rank with a default.
        let version2 = version1.replacingOccurrences(
            of: #"<attribute name="name" attributeType="String"/>"#,
            with: #"<attribute name="title" attributeType="String" elementID="name"/>"#
        ).replacingOccurrences(
            of: #"<attribute name="count" optional="YES" attributeType="Integer 16" defaultValueString="0"/>"#,
            with:
                #"<attribute name="count" optional="YES" attributeType="Integer 64" defaultValueString="0"/><attribute name="rank" attributeType="Integer 32" defaultValueString="1"/>"#
        )
        let v1 = try dir.writeModel("ShopV1", version1).path
        let v2 = try dir.writeModel("ShopV2", version2).path
        // The store to migrate: 20,000 items, half of them tagged.
        let count = 20_000
        let data = dir.file("shop.json")
        let items = (0..<count).map { n in
            #"{"name": "item \#(n)", "count": \#(n % 300)\#(n % 2 == 0 ? #", "tags": ["t\#(n % 10)"]"# : "")}"#
        }
        let tags = (0..<10).map { #"{"@id": "t\#($0)", "label": "tag \#($0)"}"# }
        try Data(#"{"Tag": [\#(tags.joined(separator: ","))], "Item": [\#(items.joined(separator: ",\n"))]}"#.utf8).write(to: data)
        let base = dir.file("base.sqlite").path
        let imported = coredata(["import", "--model", v1, "--store", base, data.path])
        #expect(imported.code == 0, "\(imported.err)")
        let work = dir.file("work.sqlite").path
        func reset() throws {
            for suffix in ["", "-wal", "-shm", ".migrating", ".migrating-journal", ".migrating-wal"] {
                try? FileManager.default.removeItem(atPath: work + suffix)
            }
            for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: base + suffix) {
                try FileManager.default.copyItem(atPath: base + suffix, toPath: work + suffix)
            }
        }
        // How long one migration takes here, to kill inside it.
        try reset()
        let started = Date()
        #expect(coredata(["migrate", "--model", v2, "--store", work]).code == 0)
        let duration = max(0.05, Date().timeIntervalSince(started)) + 0.15  // and the process's start
        let seed = UInt64(Date().timeIntervalSince1970)
        var random = SeededGenerator(seed: seed)
        var outcomes = (old: 0, new: 0)
        for attempt in 0..<50 {
            try reset()
            let process = try ChildProcess(tool.path, ["migrate", "--model", v2, "--store", work])
            let delay = Double.random(in: 0...(duration * 1.3), using: &random)
            Thread.sleep(forTimeInterval: delay)
            kill(process.pid, SIGKILL)
            #expect(process.wait(timeout: 30) != nil, "seed \(seed), attempt \(attempt): the killed migration did not end")
            let where_ = "seed \(seed), attempt \(attempt), killed after \(String(format: "%.3f", delay)) s"
            // Either version opens it, whole, without migrating.
            let asOld = coredata(["fetch", "--model", v1, "--store", work, "--entity", "Item", "--result", "count"])
            let asNew = coredata(["fetch", "--model", v2, "--store", work, "--entity", "Item", "--result", "count"])
            let old = asOld.code == 0 && asOld.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(count)"
            let new = asNew.code == 0 && asNew.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(count)"
            #expect(old != new, "\(where_): old \(asOld.code) \(asOld.out) \(asOld.err) new \(asNew.code) \(asNew.out) \(asNew.err)")
            if old { outcomes.old += 1 } else if new { outcomes.new += 1 }
            // The next migration finishes it.
            let again = coredata(["migrate", "--model", v2, "--store", work])
            #expect(again.code == 0, "\(where_): \(again.err)")
            let tagged = coredata([
                "fetch", "--model", v2, "--store", work, "--entity", "Item", "--predicate", "tags.@count > 0", "--result", "count",
            ])
            #expect(tagged.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(count / 2)", "\(where_): \(tagged.err)")
            #expect(!FileManager.default.fileExists(atPath: work + ".migrating"), "\(where_)")
        }
        print("MigrationCrashTests: seed \(seed): 50 kills, \(outcomes.old) left the old store, \(outcomes.new) the new one")
    }
}
