import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// The server restarting under a store (`pg_ctl restart`, on a cluster of the test's own): saves after it work on new
/// connections, a controller watching other writers' commits misses none made while it was down and reports each once.
@Suite(
    .enabled(if: PostgreSQLCluster.canStart, "needs PostgreSQL 15's programs and root to run a cluster as nobody (.ci/run installs them)"))
struct PostgreSQLRestartTests {
    let remote = RemoteChangeTests()

    @Test func aRestartedServerLosesNothingAndReportsNothingTwice() throws {
        let cluster = try PostgreSQLCluster()
        let model = try remote.model()
        let writer = try remote.container(cluster.url, model, watching: false)
        let watched = try remote.container(cluster.url, model, watching: true)
        // A watcher of the watched store's own, adding up the commits it reports (several may come in one report).
        let store = try #require(watched.persistentStoreCoordinator.persistentStores.first as? PostgreSQLStore)
        let counter = RemoteChangeTests.Counter()
        let watcher = try store.watchRemoteChanges(every: .milliseconds(5)) { commits in
            counter.lock.withLock { counter.value += commits.count ?? 1_000 }
        }
        defer { watcher.cancel() }
        try remote.seedABC(in: writer)
        let view = try RemoteChangeTests.Watching(watched, waitingFor: 3)
        #expect(view.names() == ["a", "b", "c"])
        try cluster.restart()
        // The writer's pooled connections died with the server: its next save runs on a new one, whole.
        _ = try remote.insertMoveAndDelete(in: writer)
        // The watcher's listening connection died too: it listens again, reads the counter and finds the commit.
        #expect(eventually(within: 10) { view.names() == ["d", "c", "a"] }, "\(view.names())")
        #expect(view.batchesGiveTheList, "each change reported once")
        // Down, then up again with a commit made by a program in between: found, once.
        try cluster.stop()
        try cluster.start()
        let direct = writer.newBackgroundContext()
        try direct.performAndWait {
            try direct.objects("Item", "name == 'c'").first?.setCheckedValue(-5, forKey: "score")
            try direct.save()
        }
        #expect(eventually(within: 10) { view.names() == ["c", "d", "a"] }, "\(view.names())")
        #expect(view.batchesGiveTheList)
        // (The writer is in this process, so its saves also reach the view as saves.) The watcher reports the seeding
        // and the two commits made around the restarts — each exactly once, however they are grouped — and no more at
        // the next poll.
        #expect(eventually(within: 10) { counter.lock.withLock { counter.value } == 3 }, "\(counter.lock.withLock { counter.value })")
        Thread.sleep(forTimeInterval: 2.5)
        #expect(counter.lock.withLock { counter.value } == 3, "nothing missed, nothing twice")
    }

    /// A save the server's stop cuts off is rolled back whole: the store holds all of an earlier save and none of it.
    @Test func aSaveCutOffByTheServerStoppingWritesNothing() throws {
        let cluster = try PostgreSQLCluster()
        let model = try remote.model()
        let container = try remote.container(cluster.url, model, watching: false)
        let context = container.newBackgroundContext()
        try context.performAndWait {
            try context.make("Item", ["name": "kept", "score": 1])
            try context.save()
        }
        let store = try #require(container.persistentStoreCoordinator.persistentStores.first as? PostgreSQLStore)
        struct Stop: Error {}
        // A transaction of many saves, the server stopped before it commits.
        #expect(throws: (any Error).self) {
            try store.performAsOneTransaction {
                try context.performAndWait {
                    for n in 0..<50 { try context.make("Item", ["name": "lost \(n)", "score": n]) }
                    try context.save()
                }
                try cluster.stop()
            }
        }
        try cluster.start()
        let fresh = try remote.container(cluster.url, model, watching: false).newBackgroundContext()
        let names = try fresh.performAndWait { try fresh.objects("Item").compactMap { $0.string("name") } }
        #expect(names == ["kept"])
    }
}
