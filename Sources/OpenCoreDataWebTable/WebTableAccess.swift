import Foundation

/// Who may use a web table: the server's own page, and no other web page a user happens to have open.
///
/// Browsers let any site open a WebSocket to `ws://127.0.0.1:PORT` and send it anything; they only say which page
/// asked, in `Origin`. So:
/// - a WebSocket upgrade (and any request of the page's own that names an `Origin`) is refused unless `Origin` is
///   the server's own (`http://` and the `Host` the request was sent to);
/// - the socket also needs the server's secret, made anew each time the server starts and written into the page
///   itself: another site cannot read the page (browsers do not share a response across origins without CORS, which
///   this server never grants);
/// - a server on a loopback address answers only requests addressed to a loopback name (`127.0.0.1`, `localhost`,
///   `[::1]`), so a site whose name resolves to 127.0.0.1 (DNS rebinding) is refused as well;
/// - a server on any other address needs a token, chosen by its owner: the page is served only to a request that
///   carries it (`?token=…`). Neither the token nor the secret is logged.
struct WebTableAccess: Sendable {
    /// The per-server secret the page receives and sends back when it opens its socket.
    let secret: String
    /// The token a request for the page must carry, if its owner chose one (required off loopback).
    let token: String?
    /// Whether the server listens on a loopback address only.
    let loopbackOnly: Bool

    /// Access for a server on `host`.
    ///
    /// - Throws: `WebTable.Failure` when `host` is not a loopback address and no token (of 16 characters or more) is
    ///   given.
    init(host: String, token: String?) throws {
        loopbackOnly = Self.isLoopback(host)
        if !loopbackOnly {
            guard let token, token.count >= 16 else {
                throw WebTable.Failure(
                    description:
                        "Serving on \(host), which other machines can reach, needs a token of 16 characters or more (--token): the page is then served only to addresses that carry it."
                )
            }
        }
        self.token = token.flatMap { $0.isEmpty ? nil : $0 }
        secret = Self.randomSecret()
    }

    /// 32 random bytes as hexadecimal text (`SystemRandomNumberGenerator` reads the system's secure source).
    static func randomSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// Whether `host` (a name or an address, with or without brackets or a port) is a loopback one.
    static func isLoopback(_ host: String) -> Bool {
        let name = hostName(host).lowercased()
        if name == "localhost" || name == "::1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The host of a `Host` header or an address: brackets and port removed (`[::1]:8080` → `::1`).
    static func hostName(_ authority: String) -> String {
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            return String(authority[authority.index(after: authority.startIndex)..<close])
        }
        if authority.filter({ $0 == ":" }).count == 1, let colon = authority.firstIndex(of: ":") {
            return String(authority[..<colon])
        }
        return authority
    }

    /// Why a request addressed to `authority` (its `Host`) from a page at `origin` (its `Origin`, if any) is refused,
    /// or nil when it is admitted.
    func refusal(authority: String?, origin: String?) -> String? {
        guard let authority, !authority.isEmpty else { return "the request names no host" }
        if loopbackOnly, !Self.isLoopback(authority) {
            return "the request is addressed to \(Self.hostName(authority)), not to this machine's loopback address"
        }
        if let origin, origin != "http://\(authority)" {
            return "a page from another origin (\(origin)) may not use this table"
        }
        return nil
    }

    /// Why a WebSocket upgrade is refused, or nil: the checks of `refusal(authority:origin:)`, an `Origin` (every
    /// browser sends one), and the secret.
    func socketRefusal(authority: String?, origin: String?, secret sent: String?) -> String? {
        if let refusal = refusal(authority: authority, origin: origin) { return refusal }
        guard origin != nil else { return "a WebSocket upgrade without an Origin is not accepted" }
        guard let sent, Self.equalInConstantTime(sent, secret) else { return "the socket did not present this server's secret" }
        return nil
    }

    /// Whether a request for the page carries the token (always, when none is needed).
    func admitsPage(token sent: String?) -> Bool {
        guard let token else { return true }
        guard let sent else { return false }
        return Self.equalInConstantTime(sent, token)
    }

    /// Compares without stopping at the first difference, so that timing tells nothing of how much matched.
    static func equalInConstantTime(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) {
            difference |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
        }
        return difference == 0
    }
}
