import CoreDataCommandLine
import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// A process saving batches killed (`kill -9`) at random moments, again and again, while a watcher in another process
/// follows the store: after each kill the store passes SQLite's integrity check, every save reported before the kill
/// is there whole, no save is there in part, and what the watcher reported adds up to exactly the saves committed.
///
/// `OCD_CRASH_KILLS` sets the number of kills (default 50; 200 for a long run). Needs the `coredata` executable beside
/// the tests (`swift build` makes it).
@Suite struct SaveCrashTests {
    let dir = TemporaryDirectory()

    static let model = """
            <entity name="Item" representedClassName="Item" syncable="YES">
                <attribute name="name" attributeType="String"/>
                <attribute name="batch" attributeType="Integer 32" defaultValueString="0"/>
            </entity>
        """

    @Test(.enabled(if: Requirement.executableIsBuilt("coredata"), "needs the coredata executable beside the tests (swift build)"))
    func savesKilledAtRandomMomentsAreWholeOrAbsent() throws {
        let tool = try #require(builtExecutable("coredata"))
        let kills = Int(ProcessInfo.processInfo.environment["OCD_CRASH_KILLS"] ?? "") ?? 50
        let model = try dir.writeModel("Crash", Self.model).path
        let store = dir.file("crash.sqlite").path
        let empty = dir.file("empty.json")
        try Data("[]".utf8).write(to: empty)
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Item", "--history", empty.path]).code == 0)
        let watch = try ChildProcess(
            tool.path,
            ["watch", "--model", model, "--store", store, "--entity", "Item", "--ref-key", "name", "--sort", "name", "--for", "600"],
            captureOutput: true)
        var watched = watch.readOutput(timeout: 10) { $0.contains("\"initial\"") }
        var generator = SeededGenerator(seed: UInt64(ProcessInfo.processInfo.environment["OCD_SEED"] ?? "") ?? 7)
        var reported: Set<String> = []  // the names of items whose save returned before a kill
        var batch = 0
        for round in 0..<kills {
            // A script of saves of 1 to 20 items each, every save followed by an echo of its batch number.
            var lines: [String] = []
            var names: [Int: [String]] = [:]
            for _ in 0..<40 {
                batch += 1
                let size = Int.random(in: 1...20, using: &generator)
                names[batch] = (0..<size).map { "b\(batch)-\($0)" }
                for name in names[batch]! { lines.append(#"{"op":"insert","values":{"name":"\#(name)","batch":\#(batch)}}"#) }
                lines += [#"{"op":"save"}"#, #"{"op":"echo","text":"\#(batch)"}"#]
            }
            let script = dir.file("script\(round).jsonl")
            try Data(lines.joined(separator: "\n").utf8).write(to: script)
            let writer = try ChildProcess(
                tool.path,
                ["track", "--model", model, "--store", store, "--entity", "Item", "--ref-key", "name", "--sort", "name", script.path],
                captureOutput: true)
            let delay = Double.random(in: 0.02...0.4, using: &generator)
            let output = writer.readOutput(timeout: delay)
            signalProcess(writer.pid, SIGKILL)
            _ = writer.wait(timeout: 10)
            // The watcher's pipe is read as it goes: a full pipe would block its writes (and so its merges).
            watched += watch.readOutput(timeout: 0.01)
            for line in output.split(separator: "\n") where line.hasPrefix("{\"echo\":\"") {
                let number = Int(line.dropFirst(9).prefix { $0 != "\"" }) ?? -1
                reported.formUnion(names[number] ?? [])
            }
            // The store after the kill: whole, with every reported save, and every save whole or absent.
            let queue = try DatabaseQueue(path: store)
            let (integrity, rows, history) = try queue.read { db in
                (
                    try String.fetchOne(db, sql: "PRAGMA integrity_check"),
                    try Row.fetchAll(db, sql: "SELECT ZNAME, ZBATCH FROM ZITEM").map { (row: Row) -> (String, Int) in (row[0], row[1]) },
                    // Persistent history: each insert recorded, by transaction, with the batch of the row it inserted.
                    try Row.fetchAll(
                        db,
                        sql: """
                            SELECT c.ZTRANSACTIONID, i.ZBATCH FROM ACHANGE c LEFT JOIN ZITEM i ON i.Z_PK = c.ZENTITYPK
                            WHERE c.ZCHANGETYPE = 0
                            """
                    ).map { (row: Row) -> (Int, Int?) in (row[0], row[1]) }
                )
            }
            try queue.close()
            #expect(integrity == "ok", "kill \(round): \(integrity ?? "-")")
            let stored = Set(rows.map(\.0))
            #expect(reported.isSubset(of: stored), "kill \(round): saves reported before the kill are missing")
            // History holds exactly the committed saves: one transaction per save, with an insert for each of its rows.
            #expect(history.count == rows.count, "kill \(round): \(history.count) inserts in history, \(rows.count) rows")
            let batchesByTransaction = Dictionary(grouping: history, by: \.0).mapValues { Set($0.map(\.1)) }
            #expect(
                batchesByTransaction.values.allSatisfy { $0.count == 1 && $0.first! != nil }, "kill \(round): a transaction mixes saves")
            #expect(batchesByTransaction.count == Set(rows.map(\.1)).count, "kill \(round): one transaction per committed save")
            for (number, members) in Dictionary(grouping: rows, by: \.1) {
                let expected = Set(names[number] ?? [])
                if !expected.isEmpty {
                    #expect(Set(members.map(\.0)) == expected, "kill \(round): save \(number) is there in part")
                }
            }
        }
        // The watcher's batches add up to exactly the committed saves (it may still be catching up: wait for it).
        let queue = try DatabaseQueue(path: store)
        let stored = Set(try queue.read { db in try String.fetchAll(db, sql: "SELECT ZNAME FROM ZITEM") })
        try queue.close()
        func reportedInserts() throws -> Set<String> {
            var refs: Set<String> = []
            // Whole lines only: the last piece may still be arriving.
            for line in watched.components(separatedBy: "\n").dropLast() where line.hasPrefix("{\"sections\"") {
                guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
                for change in object["objects"] as? [[String: Any]] ?? [] where change["type"] as? String == "insert" {
                    if let ref = change["ref"] as? String { refs.insert(ref) }
                }
            }
            return refs
        }
        let deadline = Date().addingTimeInterval(60)
        while try reportedInserts() != stored, Date() < deadline { watched += watch.readOutput(timeout: 0.2) }
        signalProcess(watch.pid, SIGTERM)
        watched += watch.readOutput(timeout: 60) { $0.contains("\"final\"") }
        #expect(watched.contains("{\"final\":"), "the watcher stopped on SIGTERM with its final state")
        let inserted = try reportedInserts()
        #expect(inserted == stored, "the watcher reported \(inserted.count) inserts; the store has \(stored.count) items")
        print(
            "SaveCrashTests: \(kills) kills, \(stored.count) items in \(Set(stored.map { $0.split(separator: "-")[0] }).count) saves committed, \(reported.count) reported before a kill; the watcher saw them all"
        )
    }
}

/// Sends `signal` to the process `pid` (`kill(2)`).
private func signalProcess(_ pid: pid_t, _ signal: Int32) { _ = kill(pid, signal) }
