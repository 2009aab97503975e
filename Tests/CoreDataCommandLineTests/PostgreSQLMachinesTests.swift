import CoreDataCommandLine
import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Several processes on one PostgreSQL server over TCP, as several machines would be: two writer processes and a
/// `coredata watch` process, saves by the thousand, one writer killed -9 in the middle of its work and the server
/// restarted once (`pg_ctl restart`) while the other writes, then a third writer finishing the job.
///
/// Afterwards the watcher has reported exactly the saves that were committed — each insert once, none missing — in
/// commit order (history's transaction numbers never go back from one of its batches to the next), every save is in
/// the store whole or not at all, and history holds one transaction per committed save.
///
/// `OCD_POSTGRES_MACHINES_SAVES` sets the number of saves in all (default 10,000). Needs the `coredata` executable and
/// PostgreSQL's programs (a cluster of the test's own: the shared server must not be restarted).
@Suite(
    .enabled(if: PostgreSQLCluster.canStart, "needs PostgreSQL 15's programs and root to run a cluster as nobody (.ci/run installs them)"),
    .enabled(if: Requirement.executableIsBuilt("coredata"), "needs the coredata executable beside the tests (swift build)"))
struct PostgreSQLMachinesTests {
    let dir = TemporaryDirectory()

    static let model = """
            <entity name="Item" representedClassName="Item" syncable="YES">
                <attribute name="name" attributeType="String"/>
                <attribute name="save" attributeType="Integer 32" defaultValueString="0"/>
            </entity>
        """

    /// A writer's script: saves `range`, each inserting one or two items (`s<save>-<n>`) and echoing its number.
    func script(_ name: String, saves range: Range<Int>) throws -> URL {
        var lines: [String] = []
        for save in range {
            for n in 0..<(save % 2 + 1) { lines.append(#"{"op":"insert","values":{"name":"s\#(save)-\#(n)","save":\#(save)}}"#) }
            lines += [#"{"op":"save"}"#, #"{"op":"echo","text":"\#(save)"}"#]
        }
        let url = dir.file(name + ".jsonl")
        try Data(lines.joined(separator: "\n").utf8).write(to: url)
        return url
    }

    @Test func twoWritersAWatcherAKillAndARestartNothingMissedNothingTwice() throws {
        let tool = try #require(builtExecutable("coredata"))
        let total = Int(ProcessInfo.processInfo.environment["OCD_POSTGRES_MACHINES_SAVES"] ?? "") ?? 10_000
        let cluster = try PostgreSQLCluster()
        let store = cluster.url.absoluteString
        let model = try dir.writeModel("Machines", Self.model).path
        let empty = dir.file("empty.json")
        try Data("[]".utf8).write(to: empty)
        let created = coredata(["import", "--model", model, "--store", store, "--entity", "Item", "--history", empty.path])
        #expect(created.code == 0, "\(created.err)")
        let watch = try ChildProcess(
            tool.path,
            ["watch", "--model", model, "--store", store, "--entity", "Item", "--ref-key", "name", "--sort", "name", "--for", "900"],
            captureOutput: true)
        var watched = watch.readOutput(timeout: 20) { $0.contains("\"initial\"") }
        #expect(watched.contains("\"initial\""), "the watcher started")
        // Writers watch nothing themselves (a predicate no item matches): their output is their echoes.
        func writer(_ name: String, _ range: Range<Int>) throws -> ChildProcess {
            try ChildProcess(
                tool.path,
                [
                    "track", "--model", model, "--store", store, "--entity", "Item", "--ref-key", "name", "--sort", "name", "--predicate",
                    "save < 0", try script(name, saves: range).path,
                ], captureOutput: true)
        }
        let quarter = total / 4
        var outputs = ["a": "", "b": "", "c": ""]
        var processes = ["a": try writer("a", 0..<quarter * 2), "b": try writer("b", quarter * 2..<quarter * 3)]
        func drain(_ seconds: TimeInterval) {
            for (name, process) in processes {
                outputs[name, default: ""] += process.readOutput(timeout: seconds / Double(processes.count + 1))
            }
            watched += watch.readOutput(timeout: seconds / Double(processes.count + 1))
        }
        func echoes(_ name: String) -> [Int] {
            (outputs[name] ?? "").split(separator: "\n").compactMap { line in
                line.hasPrefix("{\"echo\":\"") ? Int(line.dropFirst(9).prefix { $0 != "\"" }) : nil
            }
        }
        let started = Date()
        // Writer a is killed -9 a third of the way through its saves.
        while echoes("a").count < quarter * 2 / 3, Date().timeIntervalSince(started) < 300 { drain(0.05) }
        _ = kill(processes["a"]!.pid, SIGKILL)
        _ = processes["a"]!.wait(timeout: 10)
        outputs["a", default: ""] += processes["a"]!.readOutput(timeout: 0.1)
        processes["a"] = nil
        // The server restarts while writer b is writing.
        while echoes("b").count < quarter / 3, Date().timeIntervalSince(started) < 300 { drain(0.05) }
        try cluster.restart()
        // Writer c does the last quarter (and what a never did).
        processes["c"] = try writer("c", quarter * 3..<total)
        while !processes.isEmpty, Date().timeIntervalSince(started) < 600 {
            drain(0.1)
            for (name, process) in processes where process.wait(timeout: 0) != nil {
                outputs[name, default: ""] += process.readOutput(timeout: 0.2)
                processes[name] = nil
            }
        }
        #expect(processes.isEmpty, "the writers finished within ten minutes")
        // What the store holds: items by save, and history's insert changes by transaction.
        let database = try PostgreSQLTestDatabase.existing(cluster.url)
        let rows = try database.execute("SELECT zname, zsave FROM zitem").compactMap { row -> (String, Int)? in
            guard let name = row[0], let save = row[1].flatMap(Int.init) else { return nil }
            return (name, save)
        }
        let history = try database.execute(
            "SELECT i.zname, c.ztransactionid FROM achange c JOIN zitem i ON i.z_pk = c.zentitypk WHERE c.zchangetype = 0")
        var transactionOf: [String: Int] = [:]
        for row in history { if let name = row[0], let number = row[1].flatMap(Int.init) { transactionOf[name] = number } }
        let stored = Set(rows.map(\.0))
        let committedSaves = Set(rows.map(\.1))
        // Every save whole or absent; every save a writer reported is there.
        for (save, members) in Dictionary(grouping: rows, by: \.1) {
            #expect(members.count == save % 2 + 1, "save \(save) is there in part: \(members.map(\.0))")
        }
        let reported = Set(echoes("a") + echoes("b") + echoes("c"))
        #expect(reported.isSubset(of: committedSaves), "saves reported before a kill or the restart are missing")
        #expect(transactionOf.count == rows.count, "history has \(transactionOf.count) inserts for \(rows.count) items")
        #expect(Set(transactionOf.values).count == committedSaves.count, "one history transaction per committed save")
        // The watcher catches up, then stops with its final state.
        func reportedBatches() throws -> [[String]] {
            try watched.components(separatedBy: "\n").dropLast().filter { $0.hasPrefix("{\"sections\"") }.compactMap { line in
                guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
                return (object["objects"] as? [[String: Any]] ?? []).compactMap { change in
                    change["type"] as? String == "insert" ? change["ref"] as? String : nil
                }
            }
        }
        let deadline = Date().addingTimeInterval(120)
        while Set(try reportedBatches().joined()) != stored, Date() < deadline { watched += watch.readOutput(timeout: 0.2) }
        _ = kill(watch.pid, SIGTERM)
        watched += watch.readOutput(timeout: 60) { $0.contains("\"final\"") }
        #expect(watched.contains("{\"final\":"), "the watcher stopped on SIGTERM with its final state")
        let batches = try reportedBatches()
        let inserts = batches.joined()
        #expect(inserts.count == Set(inserts).count, "the watcher reported \(inserts.count - Set(inserts).count) inserts twice")
        #expect(Set(inserts) == stored, "the watcher reported \(Set(inserts).count) inserts; the store has \(stored.count) items")
        // Commit order: a batch never reports a transaction older than one an earlier batch reported.
        var newest = 0
        var backwards: [String] = []  // what each offending batch held, for the failure's message
        for (index, batch) in batches.enumerated() where !batch.isEmpty {
            let numbers = batch.compactMap { transactionOf[$0] }
            if let oldest = numbers.min(), oldest < newest {
                let held = Set(numbers).sorted()
                let older = held.filter { $0 < newest }.prefix(10).map(String.init).joined(separator: ", ")
                backwards.append(
                    "batch \(index) of \(batches.count) held \(held.count) transactions, \(held[0])–\(held[held.count - 1]), "
                        + "after one had reported \(newest); older: \(older)")
            }
            newest = max(newest, numbers.max() ?? 0)
        }
        let offending = backwards.prefix(5).joined(separator: "; ")
        #expect(backwards.isEmpty, "\(backwards.count) batches reported transactions older than an earlier batch's: \(offending)")
        print(
            "PostgreSQLMachinesTests: \(committedSaves.count) of \(total) saves committed (\(reported.count) reported by their writers) in \(Int(Date().timeIntervalSince(started))) s; the watcher reported \(inserts.count) inserts in \(batches.count) batches"
        )
    }
}
