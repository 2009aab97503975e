import Foundation
import SeedApps
import Testing
import _TestSupport

/// The terminal table, driven in tmux as a person would: keys in with send-keys, the screen read back with capture-pane.
///
/// Needs `tmux` and the `oil-changes` executable beside the test bundle (`swift build` makes it); without
/// them the test is skipped, saying why.
@Suite struct TerminalTableTests {
    let dir = TemporaryDirectory()

    static var executable: URL? { builtExecutable("oil-changes") }

    static var tmuxPath: String? {
        ["/usr/bin/tmux", "/usr/local/bin/tmux", "/bin/tmux"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs tmux with `arguments` and returns what it printed (`ChildProcess` waits for it by its own ID).
    @discardableResult
    func tmux(_ arguments: [String]) throws -> String {
        // The server that `new-session` starts would inherit a pipe and keep it open: it gets nothing to write to.
        guard arguments.first != "new-session" else {
            try ChildProcess(Self.tmuxPath!, arguments).wait(timeout: 30)
            return ""
        }
        return try ChildProcess.run(Self.tmuxPath!, arguments, timeout: 30).output
    }

    /// The screen once `condition` holds, or after 10 seconds.
    func screen(_ session: String, until condition: (String) -> Bool) throws -> String {
        var text = ""
        for _ in 0..<100 {
            text = try tmux(["capture-pane", "-t", session, "-p"])
            if condition(text) { return text }
            Thread.sleep(forTimeInterval: 0.1)
        }
        return text
    }

    @Test(
        .enabled(if: Requirement.tmuxIsPresent, "needs tmux"),
        .enabled(if: Requirement.executableIsBuilt("oil-changes"), "needs the oil-changes executable (swift build)"))
    func keysAddAndDeleteRowsBackgroundSavesArriveAndTheTerminalComesBack() throws {
        let executable = try #require(Self.executable)
        try #require(Self.tmuxPath != nil)
        let store = dir.file("oil.sqlite").path
        let session = "ocd-\(UUID().uuidString.prefix(8))"
        try tmux([
            "new-session", "-d", "-s", session, "-x", "90", "-y", "16",
            "'\(executable.path)' --store '\(store)'; echo EXITED $?; sleep 30",
        ])
        defer { _ = try? tmux(["kill-session", "-t", session]) }
        var text = try screen(session) { $0.contains("OilChanges  0 rows") }
        #expect(text.contains("a add") && text.contains("q quit"), "\(text)")

        try tmux(["send-keys", "-t", session, "a"])
        text = try screen(session) { $0.contains("1 rows") && $0.contains("Oil change") }
        #expect(text.contains("+ ") && text.contains("Oil change"), "a new row is marked: \(text)")
        text = try screen(session) { !$0.contains("+ ") }
        #expect(!text.contains("+ ") && text.contains("Oil change"), "for a moment only: \(text)")

        try tmux(["send-keys", "-t", session, "b"])  // saved in a background context, merged on the main queue
        text = try screen(session) { $0.contains("2 rows") && $0.components(separatedBy: "Oil change").count == 3 }
        #expect(text.contains("2 rows"), "\(text)")

        try tmux(["send-keys", "-t", session, "d"])
        text = try screen(session) { $0.contains("1 rows") && $0.contains("− ") }
        #expect(text.contains("1 rows") && text.contains("− "), "a delete is named on the status line: \(text)")

        try tmux(["send-keys", "-t", session, "C-c"])
        text = try screen(session) { $0.contains("EXITED") }
        #expect(text.contains("EXITED 0") && !text.contains("q quit"), "Ctrl-C quits and gives the screen back: \(text)")

        var lines: [String] = []
        let code = SeedSession.main(OilChanges.self, ["--store", store], output: { lines.append($0) }, errors: { _ in })
        #expect(code == 0 && lines.first == "rows: 1", "the store kept what the keys did: \(lines)")
    }

    /// The groceries in SwiftData's form: the same terminal table, driven by a `ModelQuery`.
    @Test(
        .enabled(if: Requirement.tmuxIsPresent, "needs tmux"),
        .enabled(if: Requirement.executableIsBuilt("groceries-swiftdata"), "needs the groceries-swiftdata executable (swift build)"))
    func aModelQueryDrivesTheTerminalTable() throws {
        let executable = try #require(builtExecutable("groceries-swiftdata"))
        try #require(Self.tmuxPath != nil)
        let store = dir.file("groceries.store").path
        let count = GroceryList.products.count
        func start(_ session: String) throws {
            try tmux([
                "new-session", "-d", "-s", session, "-x", "90", "-y", "16",
                "'\(executable.path)' --live --store '\(store)'; echo EXITED $?; sleep 30",
            ])
        }
        let session = "ocd-\(UUID().uuidString.prefix(8))"
        try start(session)
        defer { _ = try? tmux(["kill-session", "-t", session]) }
        var text = try screen(session) { $0.contains("groceries (SwiftData)  \(count) rows") }
        #expect(text.contains("\(count) rows") && text.contains("a add"), "\(text)")

        try tmux(["send-keys", "-t", session, "a"])
        text = try screen(session) { $0.contains("\(count + 1) rows") && $0.contains("+ ") }
        #expect(text.contains("\(count + 1) rows") && text.contains("+ "), "the query's insert reaches the table, marked: \(text)")

        try tmux(["send-keys", "-t", session, "d"])
        text = try screen(session) { $0.contains("\(count) rows") && $0.contains("− ") }
        #expect(text.contains("\(count) rows") && text.contains("− "), "a delete is named on the status line: \(text)")

        try tmux(["send-keys", "-t", session, "q"])
        text = try screen(session) { $0.contains("EXITED") }
        #expect(text.contains("EXITED 0"), "q quits: \(text)")

        // Opened again, the store kept what the keys did (one added, one deleted).
        let again = "ocd-\(UUID().uuidString.prefix(8))"
        try start(again)
        defer { _ = try? tmux(["kill-session", "-t", again]) }
        text = try screen(again) { $0.contains("groceries (SwiftData)") }
        #expect(text.contains("\(count) rows"), "\(text)")
        try tmux(["send-keys", "-t", again, "q"])
    }
}
