import Foundation
import Hummingbird
import Testing
import _TestSupport

@testable import OpenCoreDataWebTable

/// Who may use a web table: the rules, then a page of another origin in a real browser.
@Suite struct WebTableAccessTests {
    @Test func onLoopbackOnlyRequestsAddressedToThisMachineFromItsOwnPageAreAdmitted() throws {
        let access = try WebTableAccess(host: "127.0.0.1", token: nil)
        let another = try WebTableAccess(host: "127.0.0.1", token: nil)
        #expect(access.secret.count == 64 && access.secret != another.secret, "a secret of its own for every server")
        #expect(access.refusal(authority: "127.0.0.1:8080", origin: nil) == nil, "a navigation to the page sends no Origin")
        #expect(access.refusal(authority: "localhost:8080", origin: "http://localhost:8080") == nil)
        #expect(access.refusal(authority: "[::1]:8080", origin: "http://[::1]:8080") == nil)
        // DNS rebinding: a name of the attacker's that resolves to 127.0.0.1.
        #expect(access.refusal(authority: "evil.example:8080", origin: "http://evil.example:8080")?.contains("evil.example") == true)
        #expect(access.refusal(authority: "127.0.0.1:8080", origin: "http://evil.example")?.contains("another origin") == true)
        #expect(access.refusal(authority: "127.0.0.1:8080", origin: "http://127.0.0.1:9999") != nil, "another port is another origin")
        #expect(access.refusal(authority: nil, origin: nil) != nil)
        // The socket needs an Origin and the secret.
        let own = "http://127.0.0.1:8080"
        #expect(access.socketRefusal(authority: "127.0.0.1:8080", origin: own, secret: access.secret) == nil)
        #expect(access.socketRefusal(authority: "127.0.0.1:8080", origin: own, secret: nil)?.contains("secret") == true)
        let wrong = String(access.secret.dropLast()) + (access.secret.hasSuffix("0") ? "1" : "0")
        #expect(access.socketRefusal(authority: "127.0.0.1:8080", origin: own, secret: wrong) != nil)
        #expect(access.socketRefusal(authority: "127.0.0.1:8080", origin: nil, secret: access.secret)?.contains("Origin") == true)
        #expect(access.socketRefusal(authority: "127.0.0.1:8080", origin: "http://evil.example", secret: access.secret) != nil)
        #expect(access.admitsPage(token: nil), "no token on loopback unless one was chosen")
    }

    @Test func anotherAddressNeedsAToken() throws {
        let refusal = #expect(throws: WebTable.Failure.self) { try WebTableAccess(host: "0.0.0.0", token: nil) }
        #expect(refusal?.description.contains("--token") == true, "\(refusal?.description ?? "")")
        #expect(throws: WebTable.Failure.self) { try WebTableAccess(host: "192.0.2.7", token: "short") }
        let access = try WebTableAccess(host: "0.0.0.0", token: "a-token-of-some-length")
        #expect(!access.loopbackOnly)
        #expect(access.refusal(authority: "192.0.2.7:8080", origin: nil) == nil, "any name the machine answers to")
        #expect(access.refusal(authority: "192.0.2.7:8080", origin: "http://evil.example") != nil)
        #expect(access.admitsPage(token: "a-token-of-some-length"))
        #expect(!access.admitsPage(token: "a-token-of-some-lengtH") && !access.admitsPage(token: nil) && !access.admitsPage(token: ""))
        #expect(
            WebTableAccess.isLoopback("127.1.2.3") && WebTableAccess.isLoopback("[::1]:80")
                && !WebTableAccess.isLoopback("127.0.0.1.evil.example"))
        #expect(WebTable.address(host: "0.0.0.0", port: 80, token: "a-token-of-some-length").contains("<your token>"))
        #expect(!WebTable.address(host: "0.0.0.0", port: 80, token: "a-token-of-some-length").contains("a-token-of-some-length"))
    }
}

extension BrowserTests.WebTableBrowserTests {
    /// A page of another origin (another port on this machine) is refused whatever it tries.
    ///
    /// It tries what any website could: open the table's socket without the secret and with it, send a delete, and
    /// read the table's page for its secret. The owner's page still works afterwards.
    @Test func aPageOfAnotherOriginIsRefused() async throws {
        try await withServedTable(fruit: [("Apple", "Pome", 1), ("Pear", "Pome", 2)]) { served, browser in
            try await browser.open(served.url)
            try await waitForPage(browser, toShow: served.expected(), "the owner's page")
            let secret = try await browser.run("return document.querySelector('meta[name=\"ocd-secret\"]').content") as? String ?? ""
            let victim = try await browser.run("return document.querySelector('[data-object-id]').dataset.objectId") as? String ?? ""
            #expect(secret.count == 64 && !victim.isEmpty)

            // The foreign site: a page of its own, on another port.
            let router = Router()
            router.get("/") { _, _ in
                Response(
                    status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                    body: .init(byteBuffer: ByteBuffer(string: "<!doctype html><title>elsewhere</title><p>a page of another site</p>")))
            }
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            let foreign = Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) })
            let server = Task { try await foreign.runService() }
            defer { server.cancel() }
            var iterator = ports.makeAsyncIterator()
            let foreignPort = try #require(await iterator.next())
            try await browser.open(URL(string: "http://127.0.0.1:\(foreignPort)/")!)

            let target = "127.0.0.1:\(served.url.port ?? 0)"
            let outcome =
                try await browser.runAsync(
                    """
                    const [target, secret, victim, done] = arguments;
                    function attempt(url) {
                      return new Promise((resolve) => {
                        let answered = false;
                        const socket = new WebSocket(url);
                        socket.onmessage = (event) => {
                          answered = true;
                          socket.send(JSON.stringify({ t: "action", name: "delete", id: victim }));
                        };
                        socket.onclose = () => resolve(answered ? "answered" : "refused");
                        setTimeout(() => { socket.close(); resolve(answered ? "answered" : "no answer"); }, 4000);
                      });
                    }
                    Promise.all([
                      attempt("ws://" + target + "/changes"),
                      attempt("ws://" + target + "/changes?secret=" + secret),
                      fetch("http://" + target + "/").then((r) => r.text()).then(() => "read", () => "not readable"),
                    ]).then(done);
                    """, [target, secret, victim]) as? [String]
            #expect(outcome == ["refused", "refused", "not readable"], "\(outcome ?? [])")
            let stored = try served.stack.context().objects("Fruit").compactMap { $0.string("name") }.sorted()
            #expect(stored == ["Apple", "Pear"], "nothing was deleted")

            // The owner's page, opened again, works as before.
            try await browser.open(served.url)
            try await waitForPage(browser, toShow: served.expected(), "the owner's page afterwards")
            #expect(try await browser.run("return window.ocdTable.connected") as? Bool == true)
        }
    }
}
