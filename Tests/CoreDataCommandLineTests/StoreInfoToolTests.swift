import CoreDataCommandLine
import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// `coredata info`, and `fetch` with the model a store caches: on this project's stores, and on stores Apple's Core
/// Data wrote when the corpus is beside the checkout.
@Suite struct StoreInfoToolTests {
    let dir = TemporaryDirectory()
    var model: String { Fixtures.url("Company.xcdatamodeld").path }

    func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    @Test func infoOnThisProjectsStore() throws {
        let store = dir.file("c.sqlite").path
        let file = dir.file("c.json")
        try Data(#"{"Department": [{"name": "d1"}, {"name": "d2"}], "Employee": [{"name": "e"}]}"#.utf8).write(to: file)
        #expect(coredata(["import", "--model", model, "--store", store, file.path]).code == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: store))
        let r = coredata(["info", "--model", model, "--store", store])
        #expect(r.code == 0, "\(r.err)")
        let info = try json(r.out)
        let entities = try #require(info["entities"] as? [[String: Any]])
        let department = try #require(entities.first { $0["name"] as? String == "Department" })
        #expect(department["count"] as? Int == 2 && department["countIncludingSubentities"] as? Int == 2)
        let described = try #require(info["model"] as? [String: Any])
        #expect(described["source"] as? String == "file" && described["matchesStore"] as? Bool == true)
        #expect((described["versionHashes"] as? [String: String])?["Department"] != nil)
        #expect(described["hashesMatchStore"] as? Bool == true && (described["entitiesWithOtherHashes"] as? [String])?.isEmpty == true)
        #expect((info["uuid"] as? String)?.isEmpty == false)
        // Without a model: the one the store caches (this project's stores cache theirs, as Core Data's do).
        let bare = coredata(["info", "--store", store])
        #expect(bare.code == 0, "\(bare.err)")
        let cached = try #require(try json(bare.out)["model"] as? [String: Any])
        #expect(cached["source"] as? String == "store" && cached["matchesStore"] as? Bool == true)
        let fetch = coredata(["fetch", "--store", store, "--entity", "Department", "--result", "count"])
        #expect(fetch.code == 0 && fetch.out.trimmingCharacters(in: .whitespacesAndNewlines) == "2", "\(fetch.err)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: store)) == before, "info and fetch wrote to the store")
        // A store without a cache (as Apple's before iOS 12) needs --model, and says so.
        try DatabaseQueue(path: store).write { db in try db.execute(sql: "DROP TABLE Z_MODELCACHE") }
        let none = coredata(["info", "--store", store])
        #expect(none.code == 0 && none.err.contains("model cache") && none.err.contains("--model"), "\(none.err)")
        #expect(try json(none.out)["model"] is NSNull)
        let refused = coredata(["fetch", "--store", store, "--entity", "Department"])
        #expect(refused.code == 1 && refused.err.contains("--model"), "\(refused.err)")
    }

    @Test(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout")) func appleStoresOpenByTheirModelCache()
        throws
    {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../shared/corpus/apple-stores/apple-ios-notes/NoteStore.sqlite").standardizedFileURL
        try #require(FileManager.default.fileExists(atPath: corpus.path), "the corpus is there")
        let store = dir.file("NoteStore.sqlite")
        try FileManager.default.copyItem(at: corpus, to: store)
        let before = try Data(contentsOf: store)
        let r = coredata(["info", "--store", store.path])
        #expect(r.code == 0, "\(r.err)")
        let info = try json(r.out)
        let described = try #require(info["model"] as? [String: Any])
        #expect(described["source"] as? String == "store" && described["matchesStore"] as? Bool == true)
        let metadata = try #require(info["metadata"] as? [String: Any])
        #expect(metadata["NSStoreType"] as? String == "SQLite" && metadata["NSStoreUUID"] as? String == info["uuid"] as? String)
        // The hashes computed from the cached model are the ones Apple recorded (Core Data's algorithm).
        let recorded = try #require(metadata["NSStoreModelVersionHashes"] as? [String: String])
        #expect(recorded["ICNote"] != nil && (described["versionHashes"] as? [String: String]) == recorded)
        #expect(described["hashesMatchStore"] as? Bool == true, "\(described["entitiesWithOtherHashes"] ?? "")")
        let notes = try #require((info["entities"] as? [[String: Any]])?.first { $0["name"] as? String == "ICNote" })
        let fetched = coredata(["fetch", "--store", store.path, "--entity", "ICNote", "--format", "json"])
        #expect(fetched.code == 0, "\(fetched.err)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(fetched.out.utf8)) as? [[String: Any]])
        #expect(rows.count == notes["count"] as? Int && !rows.isEmpty)
        let uuid = try #require(info["uuid"] as? String)
        #expect(rows.allSatisfy { ($0["objectID"] as? String)?.hasPrefix("x-coredata://\(uuid)/ICNote/p") == true })
        #expect(try Data(contentsOf: store) == before)
    }

    /// `fetch` and `info` read a store on read-only media whose committed pages are still in its `-wal`.
    ///
    /// No `-shm` is beside it, and none can be made there: they read from a temporary copy, removed afterwards; nothing is written where the
    /// store is. Needs a read-only bind mount (root with the right to mount); skipped with a notice otherwise.
    @Test(.enabled(if: Requirement.canMount, "needs to mount a read-only bind mount (root)"))
    func fetchAndInfoReadAWALStoreOnReadOnlyMedia() throws {
        let source = dir.file("source")
        let mounted = dir.file("mounted")
        for folder in [source, mounted] { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
        try #require((try? ChildProcess.run("/bin/mount", ["--bind", source.path, mounted.path]))?.status == 0, "the bind mount works")
        defer { _ = try? ChildProcess.run("/bin/umount", [mounted.path]) }
        try #require((try? ChildProcess.run("/bin/mount", ["-o", "remount,ro,bind", mounted.path]))?.status == 0, "the bind mount works")
        // A store whose saves are still in its WAL: copied while its container is open (no checkpoint yet).
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.performAndWait {
            for n in 0..<25 { try context.make("Department", ["name": "d\(n)"]) }
            try context.save()
        }
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(
                atPath: stack.storeURL.path + suffix, toPath: source.appendingPathComponent("Company.sqlite").path + suffix)
        }
        let store = mounted.appendingPathComponent("Company.sqlite").path
        let temporary = {
            Set(try FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory()).filter { $0.hasPrefix("OpenCoreData-read-") })
        }
        let before = try temporary()
        let fetch = coredata(["fetch", "--store", store, "--entity", "Department", "--result", "count"])
        #expect(fetch.code == 0 && fetch.out.trimmingCharacters(in: .whitespacesAndNewlines) == "25", "\(fetch.err)")
        let info = coredata(["info", "--store", store])
        #expect(info.code == 0, "\(info.err)")
        let entities = try #require(try json(info.out)["entities"] as? [[String: Any]])
        #expect(entities.first { $0["name"] as? String == "Department" }?["count"] as? Int == 25)
        #expect(try FileManager.default.contentsOfDirectory(atPath: source.path).sorted() == ["Company.sqlite", "Company.sqlite-wal"])
        #expect(try temporary() == before, "the temporary copies are gone")
    }
}
