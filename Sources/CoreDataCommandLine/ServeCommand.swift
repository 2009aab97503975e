import ArgumentParser
import Foundation
import OpenCoreData
import OpenCoreDataLiveTable
import OpenCoreDataWebTable

/// `coredata serve`: a store's objects as a live table in the browser, read-only, following other processes' writes.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a read-only live table of a store's objects in the browser, on 127.0.0.1.",
        discussion: """
            The table follows every process that writes to the store (whatever it is): every --interval milliseconds \
            SQLite is asked whether another connection has committed, and when one has the table's context merges \
            what the store holds and the controller reports the difference to every open page. Stop it with Ctrl-C.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Option(name: .long, help: "The entity to list.")
    var entity: String

    @Option(name: .long, help: ArgumentHelp("An NSPredicate-format filter.", valueName: "format"))
    var predicate: String?

    @Option(name: .long, help: ArgumentHelp("A sort key, repeatable: KEY[:desc][:ci|:localized|:standard].", valueName: "key"))
    var sort: [String] = []

    @Option(name: .long, help: ArgumentHelp("The key path that names each row's section.", valueName: "key"))
    var sectionKey: String?

    @Option(
        name: .long,
        help: ArgumentHelp("What a row shows: attributes or key paths, comma-separated (default: every attribute).", valueName: "a,b"))
    var properties: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The port (0 picks a free one).", valueName: "n"))
    var port = 8080

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The address: 127.0.0.1 (the default) admits this machine only; any other (0.0.0.0, a LAN address) needs --token.",
            valueName: "address"))
    var host = "127.0.0.1"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "With --host other than loopback: the page is served only to http://HOST:PORT/?token=TOKEN (16 characters or more; OCD_WEB_TOKEN is read when this is not given).",
            valueName: "token"))
    var token: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("How often to look for other processes' writes, in milliseconds (10 or more).", valueName: "ms"))
    var interval = 100

    func validate() throws {
        for key in sort { _ = try FetchCommand.sortDescriptor(key) }
        if !(0...65_535).contains(port) { throw ValidationError("--port must be between 0 and 65535; got \(port).") }
        if interval < 10 { throw ValidationError("--interval must be at least 10 milliseconds; got \(interval).") }
    }

    func run() throws {
        let predicate = try self.predicate.map { try FetchPredicate(format: $0) }
        let (container, context) = try storeOptions.open(readOnly: true)
        let entity = try context.entity(named: self.entity)
        let keys = try columns(of: entity)
        // Each column's type, so that a number prints as one (an Integer 1 is not `true`).
        let types = keys.map { (try? entity.resolveKeyPath($0))?.attribute?.attributeType }
        let request = NSFetchRequest<NSManagedObject>(entityName: self.entity)
        request.predicate = predicate
        request.sortDescriptors = try sort.map(FetchCommand.sortDescriptor)
        if sort.isEmpty {
            // A controller needs a sort: by the section key (sections must come in order), then the first column.
            request.sortDescriptors = ([sectionKey] + [keys.first]).compactMap { $0 }.map { FetchSortDescriptor(key: $0) }
        }
        // Following other processes starts before the first fetch: a commit made between the two is then merged (and the
        // merge, queued behind the fetch, only brings the context up to date again), never lost.
        let follower = StoreFollower(context: context, store: container.persistentStoreCoordinator.persistentStores[0], interval: interval)
        try follower.start()
        defer { follower.stop() }
        let table = try context.performAndWait {
            let controller = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: sectionKey, cacheName: nil)
            return try LiveTable(controller: controller) { object in
                zip(keys, types).map { key, type in JSONValues.cell(JSONValues.jsonValue(object.value(forKeyPath: key), type: type)) }
                    .joined(separator: "  ")
            }
        }
        let web = WebTable(
            table: table,
            title:
                "\(self.entity) — \(storeOptions.isServerStore ? storeOptions.storeName : URL(fileURLWithPath: storeOptions.store).lastPathComponent)"
        )
        let console = ToolConsole.current
        let done = DispatchSemaphore(value: 0)
        let outcome = Outcome()
        let (host, port) = (self.host, self.port)
        let token = self.token ?? ProcessInfo.processInfo.environment["OCD_WEB_TOKEN"]
        Task.detached {
            do {
                try await web.run(host: host, port: port, token: token) {
                    console.out("serving \(WebTable.address(host: host, port: $0, token: token))")
                }
            } catch {
                outcome.error = error
            }
            done.signal()
        }
        done.wait()
        if let error = outcome.error as? WebTable.Failure { throw ToolFailure(error.description) }
        if let error = outcome.error { throw ToolFailure("the server stopped: \(error)") }
    }

    /// The attributes or key paths a row shows.
    private func columns(of entity: NSEntityDescription) throws -> [String] {
        guard let properties else { return entity.allAttributes.filter { !$0.isTransient }.map(\.name) }
        let keys = properties.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        if keys.contains(where: \.isEmpty) {
            throw ValidationError("--properties needs property names separated by commas, as in --properties name,price.")
        }
        for key in keys { _ = try entity.resolveKeyPath(key) }
        return keys
    }

    /// How the server's task ended.
    private final class Outcome: @unchecked Sendable {
        var error: (any Error)?
    }
}

/// Follows other processes' commits to the store the context reads.
///
/// Each one seen (through the store's remote-change watcher, every `interval` milliseconds) brings the context and its
/// controller up to the store: from persistent history when the store keeps it and every commit left a transaction,
/// else by re-reading. Re-reads do not queue up: one is scheduled at a time, and it reads the store as it is when it
/// runs.
final class StoreFollower: @unchecked Sendable {
    private let context: NSManagedObjectContext
    private let store: any PersistentStore
    private let interval: Int
    private var watcher: (any RemoteChangeWatching)?
    private let lock = NSLock()
    private var scheduled = false

    init(context: NSManagedObjectContext, store: any PersistentStore, interval: Int) {
        self.context = context
        self.store = store
        self.interval = interval
    }

    func start() throws {
        guard let store = store as? any RemoteChangeStore, store.isShared else { return }
        let followsHistory = ((try? store.startFollowingHistory()) ?? nil) != nil
        watcher = try store.watchRemoteChanges(every: .milliseconds(interval)) { [self] commits in
            // A store with history: the other writers' transactions, merged exactly, when they account for every
            // commit; otherwise (or without history) a re-read.
            if followsHistory, let (others, _) = (try? store.takeOthersHistory(through: commits.historyThrough)) ?? nil,
                let count = commits.count, count <= others.count
            {
                context.perform { [context] in context.mergeHistory(others) }
                return
            }
            let schedule = lock.withLock {
                defer { scheduled = true }
                return !scheduled
            }
            guard schedule else { return }
            context.perform { [self] in
                lock.withLock { scheduled = false }
                context.mergeChangesFromStore()
            }
        }
    }

    func stop() { watcher?.cancel() }
}
