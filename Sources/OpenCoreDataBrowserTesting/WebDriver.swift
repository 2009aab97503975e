import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A headless Chromium driven through chromedriver's WebDriver protocol (W3C, JSON over HTTP).
///
/// What a test or a benchmark of a web table needs: open a page, run a script in it, click an element as a user
/// does, open a second tab, take a screenshot. It uses Debian's `chromium` and `chromium-driver`
/// (`/usr/bin/chromium`, `/usr/bin/chromedriver`); check `available` first.
///
/// For example:
/// ```swift
/// let browser = try await WebDriver()
/// try await browser.open(URL(string: "http://127.0.0.1:8080/")!)
/// try await browser.waitUntil("rows", "return document.querySelectorAll('[data-object-id]').length > 0")
/// await browser.quit()
/// ```
public final class WebDriver: @unchecked Sendable {
    /// A WebDriver call that failed, or a browser that did not start; the description says which.
    ///
    /// For example:
    /// ```swift
    /// throw WebDriver.Failure(description: "the server did not start")
    /// ```
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong.
        public let description: String

        /// A failure described by `description`.
        public init(description: String) { self.description = description }
    }

    private let driver: ChildProcess
    private let base: URL
    private let session: String

    /// Debian's `chromium` and `chromium-driver`, when installed.
    public static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")
    }

    /// Starts chromedriver on a free port and a headless browser session with a window of `width` × `height`.
    ///
    /// - Throws: `Failure` when chromedriver or the browser does not start.
    public init(width: Int = 1000, height: Int = 700) async throws {
        var started: (ChildProcess, URL)?
        var problem = "no attempt"
        for _ in 0..<5 where started == nil {
            let port = Int.random(in: 20_000..<60_000)
            let process = try ChildProcess("/usr/bin/chromedriver", ["--port=\(port)", "--allowed-ips=127.0.0.1"])
            let url = URL(string: "http://127.0.0.1:\(port)")!
            for _ in 0..<100 {
                do {
                    _ = try await Self.request(url.appendingPathComponent("status"), "GET", nil)
                    started = (process, url)
                    break
                } catch {
                    problem = "\(error)"
                }
                if let status = process.wait(timeout: 0) {  // the port was taken: try another
                    problem = "chromedriver exited with status \(status)"
                    break
                }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
        }
        guard let (process, url) = started else { throw Failure(description: "chromedriver did not start: \(problem)") }
        driver = process
        base = url
        let capabilities: [String: Any] = [
            "capabilities": [
                "alwaysMatch": [
                    "browserName": "chrome",
                    "goog:chromeOptions": [
                        "binary": "/usr/bin/chromium",
                        "args": [
                            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--window-size=\(width),\(height)",
                        ],
                    ],
                ]
            ]
        ]
        let reply = try await Self.request(url.appendingPathComponent("session"), "POST", capabilities)
        guard let value = reply["value"] as? [String: Any], let id = value["sessionId"] as? String else {
            throw Failure(description: "no session: \(reply)")
        }
        session = id
    }

    /// Ends the session and chromedriver.
    public func quit() async {
        _ = try? await call("DELETE", "", nil)
        kill(driver.pid, SIGTERM)
        driver.wait(timeout: 10)
    }

    /// Opens `url` in the current tab.
    ///
    /// - Throws: `Failure` naming the WebDriver error.
    public func open(_ url: URL) async throws { _ = try await call("POST", "url", ["url": url.absoluteString]) }

    /// The value of `script` (a function body: `return …`) run in the page with `arguments`.
    ///
    /// - Throws: `Failure` naming the WebDriver error (a script error among them).
    @discardableResult
    public func run(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
        try await call("POST", "execute/sync", ["script": script, "args": arguments])
    }

    /// The value `script` passes to its callback (the last argument), for scripts that wait for something.
    ///
    /// - Throws: `Failure` naming the WebDriver error (a script error or timeout among them).
    public func runAsync(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
        try await call("POST", "execute/async", ["script": script, "args": arguments])
    }

    /// Clicks the first element matching `selector`, as a user's click does.
    ///
    /// - Throws: `Failure` when no element matches or it cannot be clicked.
    public func click(_ selector: String) async throws {
        let found = try await call("POST", "element", ["using": "css selector", "value": selector])
        guard let element = (found as? [String: Any])?.values.first as? String else {
            throw Failure(description: "no element \(selector)")
        }
        _ = try await call("POST", "element/\(element)/click", [:])
    }

    /// Opens a new tab and makes it current; returns the old tab's handle.
    ///
    /// - Throws: `Failure` naming the WebDriver error.
    public func openTab() async throws -> String {
        let current = try await call("GET", "window", nil) as? String ?? ""
        let created = try await call("POST", "window/new", ["type": "tab"]) as? [String: Any]
        guard let handle = created?["handle"] as? String else { throw Failure(description: "no new tab") }
        try await switchTo(handle)
        return current
    }

    /// Makes the tab `handle` current.
    ///
    /// - Throws: `Failure` naming the WebDriver error.
    public func switchTo(_ handle: String) async throws { _ = try await call("POST", "window", ["handle": handle]) }

    /// The page as a PNG.
    ///
    /// - Throws: `Failure` naming the WebDriver error.
    public func screenshot() async throws -> Data {
        guard let text = try await call("GET", "screenshot", nil) as? String, let data = Data(base64Encoded: text) else {
            throw Failure(description: "no screenshot")
        }
        return data
    }

    /// Waits until the page's CSS animations and transitions have ended, so that a click lands on what a user would
    /// see there (an element still sliding to its place can be under another one).
    ///
    /// - Throws: `Failure` after `timeout` seconds, or the WebDriver error.
    public func waitUntilStill(timeout: TimeInterval = 30) async throws {
        try await waitUntil("the page's animations to end", timeout: timeout, "return document.getAnimations().length === 0")
    }

    /// Runs `script` until it returns true.
    ///
    /// - Throws: `Failure` naming `what` after `timeout` seconds, or the WebDriver error.
    public func waitUntil(_ what: String, timeout: TimeInterval = 30, _ script: String) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if try await run(script) as? Bool == true { return }
            if Date() > deadline { throw Failure(description: "timed out waiting for \(what)") }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    private func call(_ method: String, _ path: String, _ body: [String: Any]?) async throws -> Any? {
        let url =
            path.isEmpty ? base.appendingPathComponent("session/\(session)") : base.appendingPathComponent("session/\(session)/\(path)")
        let reply = try await Self.request(url, method, body)
        if let value = reply["value"] as? [String: Any], let error = value["error"] as? String {
            throw Failure(description: "\(method) \(path): \(error): \(value["message"] ?? "")")
        }
        return reply["value"]
    }

    private static func request(_ url: URL, _ method: String, _ body: [String: Any]?) async throws -> [String: Any] {
        // chromedriver writes its headers without a space after the colon, which FoundationNetworking's URLSession
        // refuses ("Failed writing header"): a plain HTTP/1.1 exchange on a socket, on a thread of its own so that no
        // test blocks Swift's cooperative threads (the web table's socket writers need them).
        let payload = try body.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()
        let port = UInt16(url.port ?? 80)
        let head =
            "\(method) \(url.path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(payload.count)\r\n\r\n"
        let reply: Data = try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try HTTPExchange.send(Data(head.utf8) + payload, toPort: port) })
            }.start()
        }
        return try JSONSerialization.jsonObject(with: reply) as? [String: Any] ?? [:]
    }
}

/// One HTTP/1.1 request and its response's body, over a blocking socket to 127.0.0.1.
enum HTTPExchange {
    static func send(_ request: Data, toPort port: UInt16) throws -> Data {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw WebDriver.Failure(description: "socket: errno \(errno)") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw WebDriver.Failure(description: "connect to port \(port): errno \(errno)") }
        try request.withUnsafeBytes { bytes in
            var sent = 0
            while sent < bytes.count {
                let count = Glibc.send(socket, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
                guard count > 0 else { throw WebDriver.Failure(description: "send: errno \(errno)") }
                sent += count
            }
        }
        // chromedriver keeps the connection open: the body ends after Content-Length bytes.
        var response = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var expected: Int?
        while expected.map({ response.count < $0 }) ?? true {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count > 0 {
                response.append(contentsOf: buffer[0..<count])
            } else if count == 0 || errno != EINTR {
                break
            }
            if expected == nil, let end = response.range(of: Data("\r\n\r\n".utf8)) {
                let head = String(decoding: response[..<end.lowerBound], as: UTF8.self).lowercased()
                let length = head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                expected = end.upperBound - response.startIndex + (length ?? 0)
            }
        }
        guard let end = response.range(of: Data("\r\n\r\n".utf8)) else { throw WebDriver.Failure(description: "no HTTP response") }
        return response[end.upperBound...]
    }
}
