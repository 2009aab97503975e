import Foundation
import HummingbirdWebSocket
import Logging
import OpenCoreData
import OpenCoreDataLiveTable

/// The pages connected to one table.
///
/// The hub sends each page a snapshot when it connects, every batch after that, and the rows it asks for; and it
/// runs the actions pages send. Its state is touched only on the context's queue, so that a
/// page's snapshot, the batches and the replies to its requests reach it in the order the table went through them.
final class WebTableHub: @unchecked Sendable {
    private let table: LiveTable
    private let context: NSManagedObjectContext
    private let title: String
    private let actions: [WebTable.Action]
    private let logger: Logger
    private var clients: [UUID: AsyncStream<String>.Continuation] = [:]
    private var observation: LiveTableObservation?
    private var saveObserver: (any NSObjectProtocol)?
    /// Objects sent to pages under a temporary ID (inserted, not yet saved), by that ID's URI: a save gives them
    /// permanent IDs, which the pages are then told.
    private var temporary: [String: NSManagedObject] = [:]
    /// Temporary URIs and the permanent ones that replaced them, for actions a page sent before it heard.
    private var renamed: [String: String] = [:]

    /// The most rows one request gets.
    static let maximumRowsPerRequest = 500

    init(table: LiveTable, title: String, actions: [WebTable.Action], logger: Logger) {
        self.table = table
        context = table.controller.managedObjectContext
        self.title = title
        self.actions = actions
        self.logger = logger
    }

    /// Runs `body` on the context's queue, after everything queued before it.
    private func onQueue(_ body: @escaping () -> Void) {
        let box = UncheckedSendable(body)
        context.perform { box.value() }
    }

    /// Serves one page's socket until it closes: what the hub sends goes out in order; what the page sends is
    /// handled on the context's queue in order.
    func serve(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let id = UUID()
        onQueue { self.connect(id, continuation) }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await text in stream {
                    do { try await outbound.write(.text(text)) } catch { break }
                }
            }
            do {
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    switch message {
                    case .text(let text): onQueue { self.receive(text, from: id) }
                    case .binary: onQueue { self.fail(id, "a binary message is not understood: send JSON text") }
                    }
                }
            } catch {
                logger.info("A page's socket closed with an error", metadata: ["error": "\(error)"])
            }
            onQueue { self.disconnect(id) }
        }
    }

    private func connect(_ id: UUID, _ continuation: AsyncStream<String>.Continuation) {
        if observation == nil {
            observation = table.observe { [unowned self] update in broadcast(update) }
            saveObserver = NotificationCenter.default.addObserver(
                forName: NSManagedObjectContext.didSaveObjectsNotification, object: context, queue: nil
            ) { [unowned self] _ in sendPermanentIDs() }
        }
        var message = JSONText.object()
        message.field("t", "hello")
        message.field("title", title)
        message.raw("actions", actionsJSON())
        message.raw("sections", sectionsJSON(table.sections))
        continuation.yield(message.text)
        clients[id] = continuation
    }

    private func disconnect(_ id: UUID) {
        clients.removeValue(forKey: id)?.finish()
    }

    private func broadcast(_ update: LiveTable.Update) {
        guard !clients.isEmpty else { return }
        var message = JSONText.object()
        message.field("t", "batch")
        message.raw("sections", sectionsJSON(update.sections))
        message.raw("changes", JSONText.array(update.changes.map(changeJSON)))
        let text = message.text
        for client in clients.values { client.yield(text) }
    }

    /// Tells every page the permanent IDs that a save gave to objects it knows by temporary ones.
    private func sendPermanentIDs() {
        var pairs: [String] = []
        for (old, object) in temporary {
            if object.objectID.isTemporaryID, object.managedObjectContext != nil { continue }  // not saved yet
            temporary.removeValue(forKey: old)
            guard !object.objectID.isTemporaryID else { continue }  // deleted before it was saved
            let new = object.objectID.uriRepresentation().absoluteString
            if renamed.count > 100_000 { renamed.removeAll() }
            renamed[old] = new
            pairs.append(JSONText.array([JSONText.string(old), JSONText.string(new)]))
        }
        guard !pairs.isEmpty else { return }
        var message = JSONText.object()
        message.field("t", "ids")
        message.raw("ids", JSONText.array(pairs))
        let text = message.text
        for client in clients.values { client.yield(text) }
    }

    /// The URI a page knows the object by; a temporary one is remembered until a save replaces it.
    private func uri(_ id: NSManagedObjectID) -> String {
        let text = id.uriRepresentation().absoluteString
        if id.isTemporaryID, temporary[text] == nil, let object = context.registeredObject(for: id) { temporary[text] = object }
        return text
    }

    private func send(_ id: UUID, _ text: String) {
        clients[id]?.yield(text)
    }

    /// Tells the page (and the log) what went wrong with what it sent.
    func fail(_ id: UUID, _ problem: String) {
        logger.warning("Web table: \(problem)")
        var message = JSONText.object()
        message.field("t", "error")
        message.field("message", problem)
        send(id, message.text)
    }

    // MARK: What pages send

    private func receive(_ text: String, from id: UUID) {
        guard let data = text.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data),
            let fields = object as? [String: Any]
        else {
            return fail(id, "a malformed message (not a JSON object): \(text.prefix(200))")
        }
        switch fields["t"] as? String {
        case "rows": sendRows(fields, to: id)
        case "action": runAction(fields, from: id)
        case let other:
            fail(id, "an unknown message type \(other.map { "'\($0)'" } ?? "(no \"t\")") (expected 'rows' or 'action')")
        }
    }

    private func sendRows(_ fields: [String: Any], to id: UUID) {
        guard let section = (fields["s"] as? NSNumber)?.intValue, let start = (fields["start"] as? NSNumber)?.intValue,
            let count = (fields["count"] as? NSNumber)?.intValue, start >= 0, count >= 0
        else {
            return fail(id, "a rows request needs \"s\", \"start\" and \"count\" as non-negative numbers")
        }
        let rows = table.rows(inSection: section, start..<(start + min(count, Self.maximumRowsPerRequest)))
        var message = JSONText.object()
        message.field("t", "rows")
        message.field("key", fields["key"] as? String ?? "")
        message.field("s", section)
        message.field("start", start)
        message.raw(
            "rows", JSONText.array(rows.map { JSONText.array([JSONText.string(uri($0.objectID)), JSONText.string($0.text)]) }))
        send(id, message.text)
    }

    private func runAction(_ fields: [String: Any], from id: UUID) {
        let name = fields["name"] as? String ?? ""
        guard let action = actions.first(where: { $0.name == name }) else {
            let known = actions.map(\.name).joined(separator: ", ")
            return fail(id, "an unknown action '\(name)' (this table has: \(known.isEmpty ? "none" : known))")
        }
        var object: NSManagedObject?
        if action.scope == .row {
            let sent = fields["id"] as? String ?? ""
            // A page may still know a saved object by its temporary ID.
            let found =
                temporary[sent]
                ?? URL(string: renamed[sent] ?? sent)
                .flatMap { context.persistentStoreCoordinator?.managedObjectID(forURIRepresentation: $0) }
                .flatMap { try? context.existingObject(with: $0) }
            guard let found, !found.isDeleted else {
                return fail(id, "\(action.title): no object \(fields["id"] as? String ?? "(no \"id\")") (it may have been deleted)")
            }
            object = found
        }
        do {
            try action.handler(object, context)
        } catch {
            context.rollback()
            fail(id, "\(action.title) failed: \(error)")
        }
    }

    // MARK: JSON

    private func actionsJSON() -> String {
        JSONText.array(
            actions.map { action in
                var item = JSONText.object()
                item.field("name", action.name)
                item.field("title", action.title)
                item.field("key", action.key ?? "")
                item.field("scope", action.scope.rawValue)
                return item.text
            })
    }

    private func sectionsJSON(_ sections: [LiveTable.Section]) -> String {
        JSONText.array(
            sections.map { JSONText.array([JSONText.string($0.name), JSONText.string($0.indexTitle ?? ""), String($0.rowCount)]) })
    }

    /// A change as the page reads it: a kind, index paths, the object's URI and the cell's text.
    private func changeJSON(_ change: LiveTable.Change) -> String {
        func row(_ kind: String, _ paths: [IndexPath], _ row: LiveTable.Row) -> String {
            JSONText.array(
                [JSONText.string(kind)] + paths.flatMap { [String($0.section), String($0.row)] }
                    + [JSONText.string(uri(row.objectID)), JSONText.string(row.text)])
        }
        switch change {
        case .sectionInsert(let index, let name): return JSONText.array([JSONText.string("si"), String(index), JSONText.string(name)])
        case .sectionDelete(let index, let name): return JSONText.array([JSONText.string("sd"), String(index), JSONText.string(name)])
        case .rowInsert(let at, let item): return row("i", [at], item)
        case .rowDelete(let at, let item): return row("d", [at], item)
        case .rowMove(let from, let to, let item): return row("m", [from, to], item)
        case .rowUpdate(let at, let to, let item): return row("u", [at, to], item)
        }
    }
}

/// A value handed to another queue by code that knows it is used on one queue at a time.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
