import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import OpenCoreData
import OpenCoreDataLiveTable

/// A live table in the browser: a small HTTP server on 127.0.0.1 that serves one page showing a `LiveTable`, and
/// pushes each delegate batch to every open page over a WebSocket (`/changes`).
///
/// The page renders only the rows in view and asks for the others by index path as it scrolls, so a table of a
/// million rows opens as fast as one of a hundred. Each batch arrives as UITableView would receive it and is applied
/// to the page's rows and sections with animation, never as a reload. Buttons and keys the app defines (``Action``)
/// come back over the same socket and run on the context's queue; a failure is shown on the page and logged, and the
/// server keeps serving.
///
/// Everything that touches the table, its controller or its objects runs on the queue of the controller's context
/// (`perform`): give it a private-queue context, or a main-queue context and a main thread that runs its run loop.
///
/// For example:
/// ```swift
/// let table = try LiveTable(controller: controller) { entry in "\(entry.value(forKey: "miles") ?? "")" }
/// let web = WebTable(table: table, title: "Oil Changes", actions: [
///     .init(name: "delete", title: "Delete", key: "d", scope: .row) { entry, context in
///         if let entry { context.delete(entry); try context.save() }
///     }
/// ])
/// try await web.run(port: 8080) { port in print("http://127.0.0.1:\(port)/") }
/// ```
public final class WebTable: @unchecked Sendable {
    /// Something the page can ask the app to do: a button above the table (`.table`) or on each row (`.row`).
    ///
    /// For example:
    /// ```swift
    /// let add = WebTable.Action(name: "add", title: "Add", key: "a") { _, context in
    ///     _ = try NSEntityDescription.checkedInsertNewObject(forEntityName: "Entry", into: context)
    ///     try context.save()
    /// }
    /// ```
    public struct Action {
        /// Where the page shows the action.
        ///
        /// For example:
        /// ```swift
        /// let scope: WebTable.Action.Scope = .row
        /// ```
        public enum Scope: String, Sendable {
            /// A button above the table; the handler gets no object.
            case table
            /// A button on each row (and the key acts on the selected row); the handler gets the row's object.
            case row
        }

        /// The name the page sends.
        public var name: String
        /// The button's label.
        public var title: String
        /// A key that triggers the action in the page, if any.
        public var key: String?
        /// Where the page shows it.
        public var scope: Scope
        /// Runs on the context's queue with the row's object (for `.row`) and the context; what it throws is shown.
        public var handler: (NSManagedObject?, NSManagedObjectContext) throws -> Void

        /// An action named `name`, labelled `title`.
        public init(
            name: String, title: String, key: String? = nil, scope: Scope = .table,
            handler: @escaping (NSManagedObject?, NSManagedObjectContext) throws -> Void
        ) {
            self.name = name
            self.title = title
            self.key = key
            self.scope = scope
            self.handler = handler
        }
    }

    let hub: WebTableHub
    private let logger: Logger

    /// Serves `table` under `title`, with `actions` on the page; `logger` hears of bad messages and failed actions.
    public init(table: LiveTable, title: String, actions: [Action] = [], logger: Logger = Logger(label: "OpenCoreDataWebTable")) {
        self.logger = logger
        hub = WebTableHub(table: table, title: title, actions: actions, logger: logger)
    }

    /// Serves the page on `host`:`port` (0 picks a free port) until the task is cancelled or the process gets SIGINT
    /// or SIGTERM; `onReady` gets the port once the server listens.
    ///
    /// Only the server's own page may use the table (see the access rules in the module's documentation): a request
    /// whose `Origin` is another site's is refused, the page's socket must present a secret made when the server
    /// starts, and on a loopback `host` (the default) requests must be addressed to a loopback name. Any other `host`
    /// (`0.0.0.0`, a LAN address) needs `token`: the page is then served only to `http://HOST:PORT/?token=TOKEN`.
    ///
    /// For example:
    /// ```swift
    /// try await web.run(host: "0.0.0.0", port: 8080, token: ProcessInfo.processInfo.environment["TABLE_TOKEN"])
    /// ```
    ///
    /// - Throws: `Failure` when the port is taken, or when a host other machines can reach is given no token (of 16
    ///   characters or more); what the server throws when it cannot listen otherwise.
    public func run(
        host: String = "127.0.0.1", port: Int = 8080, token: String? = nil, onReady: @escaping @Sendable (Int) -> Void = { _ in }
    ) async throws {
        let access = try WebTableAccess(host: host, token: token)
        let router = Router(context: BasicWebSocketRequestContext.self)
        let page = ByteBuffer(string: WebTablePage.html(secret: access.secret))
        let logger = self.logger
        router.get("/") { request, _ in
            if let refusal = access.refusal(authority: request.head.authority, origin: request.headers[.origin]) {
                logger.warning("Web table: refused a request for the page: \(refusal)")
                return Self.refused(.forbidden, refusal)
            }
            guard access.admitsPage(token: request.uri.queryParameters.get("token")) else {
                logger.warning("Web table: refused a request for the page without the right token")
                return Self.refused(.unauthorized, "this table needs its token: open the address its owner gave, ending in ?token=…")
            }
            return Response(
                status: .ok,
                headers: [
                    .contentType: "text/html; charset=utf-8", .cacheControl: "no-store", .init("X-Frame-Options")!: "DENY",
                    .init("Referrer-Policy")!: "no-referrer",
                ],
                body: .init(byteBuffer: page))
        }
        let hub = self.hub
        router.ws(
            "/changes",
            shouldUpgrade: { request, _ in
                let refusal = access.socketRefusal(
                    authority: request.head.authority, origin: request.headers[.origin], secret: request.uri.queryParameters.get("secret"))
                if let refusal {
                    logger.warning("Web table: refused a WebSocket: \(refusal)")
                    throw HTTPError(.forbidden, message: refusal)
                }
                return .upgrade([:])
            },
            onUpgrade: { inbound, outbound, _ in
                await hub.serve(inbound: inbound, outbound: outbound)
            })
        let app = Application(
            router: router, server: .http1WebSocketUpgrade(webSocketRouter: router),
            configuration: .init(address: .hostname(host, port: port), serverName: "OpenCoreDataWebTable"),
            onServerRunning: { channel in onReady(channel.localAddress?.port ?? port) }, logger: logger)
        do {
            try await app.runService()
        } catch  where String(describing: error).contains("Address already in use") {
            throw Failure(description: "\(host):\(port) is in use by another program: choose another port (0 picks a free one).")
        }
    }

    /// What to tell the person who started the server: the page's address and how to stop it; the token, which is
    /// theirs, is never written out.
    ///
    /// For example:
    /// ```swift
    /// print(WebTable.address(host: "127.0.0.1", port: 8080, token: nil))   // http://127.0.0.1:8080/ (Ctrl-C stops)
    /// ```
    public static func address(host: String, port: Int, token: String?) -> String {
        let name = host.contains(":") ? "[\(host)]" : host
        let tail = token == nil ? "" : "?token=<your token>"
        return "http://\(name):\(port)/\(tail) (Ctrl-C stops)"
    }

    private static func refused(_ status: HTTPResponse.Status, _ reason: String) -> Response {
        Response(
            status: status, headers: [.contentType: "text/plain; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: "Refused: \(reason).\n")))
    }

    /// A reason the server could not serve, for the user.
    ///
    /// For example:
    /// ```swift
    /// do { try await web.run(port: 8080) } catch let failure as WebTable.Failure { print(failure) }
    /// ```
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong.
        public let description: String
    }
}
