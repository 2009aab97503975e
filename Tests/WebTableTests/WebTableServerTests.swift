import Foundation
import Logging
import OpenCoreData
import OpenCoreDataLiveTable
import OpenCoreDataWebTable
import Testing
import _TestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The server without a browser.
@Suite struct WebTableServerTests {
    @Test func aPortInUseIsNamedWithWhatToDo() async throws {
        let served = try await BrowserTests.WebTableBrowserTests.Served(fruit: [("Apple", "Pome", 1)])
        defer { served.server.cancel() }
        let port = try #require(served.url.port)
        let second = WebTable(table: served.table, title: "Second", logger: BrowserTests.WebTableBrowserTests.Served.quietLogger)
        do {
            try await second.run(port: port)
            Issue.record("a second server listened on the same port")
        } catch let failure as WebTable.Failure {
            #expect(failure.description == "127.0.0.1:\(port) is in use by another program: choose another port (0 picks a free one).")
        }
    }

    @Test func aServerBeyondLoopbackNeedsATokenAndAdmitsOnlyPagesThatGiveIt() async throws {
        let served = try await BrowserTests.WebTableBrowserTests.Served(fruit: [("Apple", "Pome", 1)])
        defer { served.server.cancel() }
        let open = WebTable(table: served.table, title: "Open", logger: BrowserTests.WebTableBrowserTests.Served.quietLogger)
        let refusal = await #expect(throws: WebTable.Failure.self) { try await open.run(host: "0.0.0.0", port: 0) }
        #expect(refusal?.description.contains("--token") == true, "\(refusal?.description ?? "")")
        // With a token, the page is served only to a request that carries it.
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let server = Task { try await open.run(host: "0.0.0.0", port: 0, token: "sixteen-chars-or-more") { continuation.yield($0) } }
        defer { server.cancel() }
        var iterator = ports.makeAsyncIterator()
        let port = try #require(await iterator.next())
        func status(_ query: String) async throws -> Int {
            let (_, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/\(query)")!)
            return (response as? HTTPURLResponse)?.statusCode ?? 0
        }
        #expect(try await status("") == 401)
        #expect(try await status("?token=sixteen-chars-or-morE") == 401)
        #expect(try await status("?token=sixteen-chars-or-more") == 200)
    }
}
