import CoreDataCommandLine
import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// `coredata track`'s store operations: batch updates and deletes merged into the tracked context, and waiting for
/// another process's commits.
@Suite struct TrackStoreOpsTests {
    let dir = TemporaryDirectory()
    var model: String { Fixtures.url("Groceries.xcdatamodel").path }

    func lines(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    }

    func seed(_ store: String) throws {
        let data = dir.file("seed.json")
        try Data(#"[{"name":"Banana","price":185},{"name":"Milk","price":409},{"name":"Soda","price":76}]"#.utf8).write(to: data)
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", data.path]).code == 0)
    }

    @Test func batchOpsReachTheStoreAndTheController() throws {
        let store = dir.file("b.sqlite").path
        try seed(store)
        let script = dir.file("batch.jsonl")
        try Data(
            """
            {"op":"batch-update","where":"price < 200","values":{"price":500}}
            {"op":"batch-delete","where":"name == 'Milk'"}
            """.utf8
        ).write(to: script)
        let result = coredata([
            "track", "--model", model, "--store", store, "--entity", "Products", "--ref-key", "name", "--sort", "name", "--snapshots",
            script.path,
        ])
        #expect(result.code == 0, "\(result.err)")
        let out = try lines(result.out)
        #expect(out.count == 4, "initial, a batch per op, final: \(result.out)")
        let updates = (out[1]["objects"] as? [[String: Any]]) ?? []
        #expect(
            Set(updates.compactMap { $0["ref"] as? String }) == ["Banana", "Soda"]
                && updates.allSatisfy { $0["type"] as? String == "update" })
        let deletes = (out[2]["objects"] as? [[String: Any]]) ?? []
        #expect(deletes.map { $0["ref"] as? String } == ["Milk"] && deletes.first?["type"] as? String == "delete")
        #expect(((out[3]["final"] as? [[String: Any]])?.first?["refs"] as? [String]) == ["Banana", "Soda"])
        let fetched = coredata(["fetch", "--model", model, "--store", store, "--entity", "Products", "--predicate", "price == 500"])
        #expect(fetched.out.contains("Banana") && fetched.out.contains("Soda") && !fetched.out.contains("Milk"), "\(fetched.out)")
        let bad = dir.file("bad.jsonl")
        try Data(#"{"op":"batch-update","where":"price < 200","values":{"colour":"red"}}"#.utf8).write(to: bad)
        let refused = coredata([
            "track", "--model", model, "--store", store, "--entity", "Products", "--ref-key", "name", "--sort", "name", bad.path,
        ])
        #expect(refused.code == 1 && refused.err.contains("line 1: entity 'Products' has no attribute 'colour'"), "\(refused.err)")
    }

    @Test(.enabled(if: Requirement.executableIsBuilt("coredata"), "needs the coredata executable beside the tests (swift build)"))
    func waitRemoteMergesAnotherProcesssCommits() throws {
        let tool = try #require(builtExecutable("coredata"))
        let store = dir.file("w.sqlite").path
        try seed(store)
        let script = dir.file("wait.jsonl")
        try Data(#"{"op":"wait-remote","count":1,"timeout":20}"#.utf8).write(to: script)
        let track = try ChildProcess(
            tool.path,
            ["track", "--model", model, "--store", store, "--entity", "Products", "--ref-key", "name", "--sort", "price", script.path],
            captureOutput: true)
        var output = track.readOutput(timeout: 10) { $0.contains("\"initial\"") }
        let data = dir.file("more.json")
        try Data(#"[{"name":"Kiwi","price":1}]"#.utf8).write(to: data)
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", data.path]).code == 0)
        output += track.readOutput(timeout: 20) { $0.contains("\"final\"") }
        #expect(track.wait(timeout: 10) == 0, "\(output)")
        #expect(output.contains(#""ref":"Kiwi","to":[0,0],"type":"insert""#), "\(output)")
        #expect(output.contains(#"{"final":[{"name":"","refs":["Kiwi","Soda","Banana","Milk"]}]}"#), "\(output)")
    }
}
