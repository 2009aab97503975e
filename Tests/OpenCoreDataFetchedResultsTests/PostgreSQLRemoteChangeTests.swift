import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Commits by other writers of the same PostgreSQL store reach a watching coordinator's controllers.
///
/// Another coordinator's saves and a program's plain SQL (no history: the context re-reads) arrive; the watching
/// coordinator's own saves post nothing. With `notify=off` the poll alone finds them.
@Suite(.enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLRemoteChangeTests {
    let remote = RemoteChangeTests()

    func run(notify: Bool) throws {
        let database = try PostgreSQLTestDatabase()
        let url = try #require(URL(string: database.url.absoluteString + (notify ? "" : "?notify=off")))
        let model = try remote.model()
        let other = try remote.container(url, model, watching: false)
        let watched = try remote.container(url, model, watching: true)
        let counter = RemoteChangeTests.Counter()
        let observer = NotificationCenter.default.addObserver(
            forName: .NSPersistentStoreRemoteChange, object: watched.persistentStoreCoordinator, queue: nil
        ) { _ in counter.lock.withLock { counter.value += 1 } }
        defer { NotificationCenter.default.removeObserver(observer) }
        try remote.seedABC(in: other)
        #expect(eventually { counter.lock.withLock { counter.value } >= 1 }, "the seeding is another writer's commit")
        let view = try RemoteChangeTests.Watching(watched, waitingFor: 3)
        let names = view.names
        #expect(names() == ["a", "b", "c"])
        let started = Date()
        _ = try remote.insertMoveAndDelete(in: other)
        #expect(eventually { names() == ["d", "c", "a"] }, "\(names())")
        print(
            "PostgreSQLRemoteChangeTests (notify \(notify ? "on" : "off")): another coordinator's save reached the controller in \(Int(Date().timeIntervalSince(started) * 1000)) ms"
        )
        #expect(view.batchesGiveTheList)
        // A program writing plain SQL (no history, no version change): found by the commit counter, re-read.
        _ = try database.execute("UPDATE zitem SET zscore = -1 WHERE zname = 'c'")
        #expect(eventually { names() == ["c", "d", "a"] }, "\(names())")
        #expect(view.batchesGiveTheList)
        // The watched coordinator's own saves are not remote.
        Thread.sleep(forTimeInterval: notify ? 0.2 : 0.5)
        let before = counter.lock.withLock { counter.value }
        let own = watched.newBackgroundContext()
        try own.performAndWait {
            try own.make("Item", ["name": "e", "score": 5])
            try own.save()
        }
        Thread.sleep(forTimeInterval: notify ? 0.3 : 0.6)
        #expect(counter.lock.withLock { counter.value } == before, "own saves post no remote change")
    }

    @Test func anotherWritersCommitsAndPlainSQLReachTheController() throws { try run(notify: true) }

    @Test func withoutNotificationsThePollFindsThem() throws { try run(notify: false) }

    /// With history on PostgreSQL: other writers' commits merged from their transactions, exactly; plain SQL (which
    /// records none) found by the commit counter and re-read — alone, and back to back with a history commit.
    @Test(arguments: [true, false])
    func historyMergesExactlyWhatAnotherWriterChanged(notify: Bool) throws {
        let database = try PostgreSQLTestDatabase()
        let url = try #require(URL(string: database.url.absoluteString + (notify ? "" : "?notify=off")))
        try remote.historyMergesExactly(at: url) { sql in _ = try database.execute(sql) }
    }
}
