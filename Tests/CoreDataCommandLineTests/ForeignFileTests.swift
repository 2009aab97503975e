import CoreDataCommandLine
import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The tool never changes a file that is not its store, never leaves behind what a failed command made, never
/// rewrites a store it only reads, and names what it found instead of a store.
@Suite struct ForeignFileTests {
    let dir = TemporaryDirectory()
    var model: String { Fixtures.url("Groceries.xcdatamodel").path }

    func write(_ text: String, _ name: String) throws -> String {
        let url = dir.file(name)
        try Data(text.utf8).write(to: url)
        return url.path
    }

    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    func sidecars(_ path: String) -> [String] {
        ["-wal", "-shm", "-journal"].filter { FileManager.default.fileExists(atPath: path + $0) }
    }

    /// A store holding one product, checkpointed, with its -wal and -shm files removed.
    func storeWithoutSidecars() throws -> String {
        let store = dir.file("g.sqlite").path
        let json = try write(#"[{"name": "Kiwi", "price": 1}]"#, "g.json")
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", json]).code == 0)
        let queue = try DatabaseQueue(path: store)
        try queue.writeWithoutTransaction { db in _ = try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try queue.close()
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: store + suffix) {
            try FileManager.default.removeItem(atPath: store + suffix)
        }
        return store
    }

    @Test func anotherApplicationsDatabaseIsLeftByteForByte() throws {
        let path = dir.file("other.db").path
        // Another program's database, in the default rollback-journal mode.
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            try db.execute(sql: "INSERT INTO notes (body) VALUES ('keep me')")
        }
        try queue.close()
        let before = try #require(bytes(path))
        let json = try write(#"[{"name": "Kiwi", "price": 1}]"#, "one.json")
        for command in [
            ["import", "--model", model, "--store", path, "--entity", "Products", json],
            ["fetch", "--model", model, "--store", path, "--entity", "Products"],
        ] {
            let r = coredata(command)
            #expect(r.code == 1, "\(command[0])")
            #expect(r.err.contains("is a SQLite database but not an OpenCoreData store"), "\(command[0]): \(r.err)")
        }
        #expect(bytes(path) == before, "the file's bytes changed")
        #expect(sidecars(path).isEmpty, "left \(sidecars(path))")
    }

    @Test func aFailedImportIntoANewPathLeavesNothingBehind() throws {
        let store = dir.file("made/for/it/g.sqlite").path
        let bad = try write(#"[{"name": "Kiwi", "price": "cheap"}]"#, "bad.json")
        let r = coredata(["import", "--model", model, "--store", store, "--entity", "Products", bad])
        #expect(r.code == 1)
        #expect(r.err.contains("expects Integer 32"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("made").path), "the folders made for the store are still there")
        // Into an existing folder: only the store's files go.
        let beside = dir.file("g.sqlite").path
        #expect(coredata(["import", "--model", model, "--store", beside, "--entity", "Products", bad]).code == 1)
        #expect(!FileManager.default.fileExists(atPath: beside) && sidecars(beside).isEmpty)
        #expect(FileManager.default.fileExists(atPath: dir.url.path))
    }

    @Test func openingAStoreToReadOrToWriteNothingLeavesItsBytesAsTheyWere() throws {
        let store = dir.file("g.sqlite").path
        let json = try write(#"[{"name": "Kiwi", "price": 1}, {"name": "Fig", "price": 2}]"#, "g.json")
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", json]).code == 0)
        let empty = try write("[]", "empty.json")
        // (The first open after the import may checkpoint: the WAL's pages move into the main file, same data.)
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", empty]).code == 0)
        let (main, wal) = (bytes(store), bytes(store + "-wal"))
        for _ in 0..<2 {
            #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", empty]).code == 0)
            #expect(coredata(["fetch", "--model", model, "--store", store, "--entity", "Products"]).code == 0)
        }
        #expect(bytes(store) == main, "the store file changed")
        #expect(bytes(store + "-wal") == wal, "the WAL changed")
    }

    @Test func fetchCreatesNoFilesBesideAStoreThatHasNone() throws {
        // As a store arrives when copied without its -wal and -shm (after a checkpoint).
        let store = try storeWithoutSidecars()
        let before = bytes(store)
        let r = coredata(["fetch", "--model", model, "--store", store, "--entity", "Products"])
        #expect(r.code == 0, "\(r.err)")
        #expect(r.out.contains("Kiwi"))
        #expect(sidecars(store).isEmpty, "fetch left \(sidecars(store))")
        #expect(bytes(store) == before)
    }

    @Test func whatIsNotAStoreIsNamed() throws {
        let folder = dir.file("folder.sqlite").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let text = try write("just some text, long enough to hold a header of a hundred bytes or so, but not SQLite's", "text.sqlite")
        let fifo = dir.file("pipe.sqlite").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let loop = dir.file("loop.sqlite").path
        try FileManager.default.createSymbolicLink(atPath: loop, withDestinationPath: dir.file("round.sqlite").path)
        try FileManager.default.createSymbolicLink(atPath: dir.file("round.sqlite").path, withDestinationPath: loop)
        for (path, message) in [
            (folder, "is a folder, not a store file"), (text, "is not a SQLite store: its first bytes are not a SQLite header"),
            (fifo, "is not a regular file"), (loop, "is a symbolic link in a loop of links"),
        ] {
            for command in ["fetch", "import"] {
                let json = try write("[]", "e.json")
                let arguments =
                    command == "fetch"
                    ? ["fetch", "--model", model, "--store", path, "--entity", "Products"]
                    : ["import", "--model", model, "--store", path, "--entity", "Products", json]
                let r = coredata(arguments)  // a FIFO would block an open: the test would hang here
                #expect(r.code == 1, "\(command) \(path)")
                #expect(r.err.contains(message), "\(command) \(path): \(r.err)")
            }
        }
        #expect(bytes(text) == Data("just some text, long enough to hold a header of a hundred bytes or so, but not SQLite's".utf8))
    }

    @Test func aDamagedStoreIsCalledDamaged() throws {
        let store = try storeWithoutSidecars()
        // Overwrite the schema's page (the first page after the 100-byte header) with garbage.
        var data = try #require(bytes(store))
        for i in 100..<1_000 { data[i] = 0xA5 }
        try data.write(to: URL(fileURLWithPath: store))
        let r = coredata(["fetch", "--model", model, "--store", store, "--entity", "Products"])
        #expect(r.code == 1)
        #expect(r.err.contains("is a damaged SQLite store"), "\(r.err)")
        #expect(bytes(store) == data)
    }

    @Test func tablesShowControlCharactersEscaped() throws {
        let store = dir.file("g.sqlite").path
        let json = try write(#"[{"name": "evil\u001b[2J\u001b]0;title\u0007\nline\ttab\u0085", "price": 1}]"#, "g.json")
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", json]).code == 0)
        let r = coredata(["fetch", "--model", model, "--store", store, "--entity", "Products", "--format", "table"])
        #expect(r.code == 0)
        #expect(!r.out.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" || $0.value == 0x85 }, "\(r.out.debugDescription)")
        #expect(r.out.contains(#"evil\u{1B}[2J\u{1B}]0;title\u{7}\nline\ttab\u{85}"#), "\(r.out)")
        // JSON output keeps the value exactly.
        let j = coredata(["fetch", "--model", model, "--store", store, "--entity", "Products"])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(j.out.utf8)) as? [[String: Any]])
        #expect(rows.first?["name"] as? String == "evil\u{1B}[2J\u{1B}]0;title\u{7}\nline\ttab\u{85}")
    }

    @Test func anEmptyPropertyListIsAUsageError() throws {
        let store = dir.file("g.sqlite").path
        let json = try write(#"[{"name": "Kiwi", "price": 1}]"#, "g.json")
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", json]).code == 0)
        for properties in ["", "name,", ",", "name,,price"] {
            let r = coredata([
                "fetch", "--model", model, "--store", store, "--entity", "Products", "--result", "dictionaries", "--properties", properties,
            ])
            #expect(r.code == 2, "--properties '\(properties)'")
            #expect(r.err.contains("--properties needs property names"), "\(r.err)")
            #expect(!r.err.contains("SELECT"), "\(r.err)")
        }
    }
}
