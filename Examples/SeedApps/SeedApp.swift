import ArgumentParser
import Foundation
import OpenCoreData
import OpenCoreDataLiveTable
import OpenCoreDataTerminalTable
import OpenCoreDataWebTable

/// What a seed app is: its model, the entity its table lists, how the table is sorted and sectioned, what a cell shows,
/// and what the app fills in itself.
///
/// For example:
/// ```swift
/// try SeedSession.run(OilChanges.spec, options: options) { print($0) }
/// ```
public struct SeedAppSpec {
    /// The name of the store file in the container's default folder (without extension).
    public var name: String
    /// The model.
    public var model: () throws -> NSManagedObjectModel
    /// The entity the table lists and `add` inserts.
    public var entityName: String
    /// The table's sort.
    public var sortDescriptors: [FetchSortDescriptor]
    /// The table's section key path, if it has sections.
    public var sectionKeyPath: String?
    /// The controller's cache name.
    public var cacheName: String?
    /// The fetch batch size.
    public var fetchBatchSize: Int = 0
    /// A cell's text.
    public var cell: (NSManagedObject) -> String
    /// Completes the values of an insert with what the app fills itself.
    public var defaults: ([String: Any]) -> [String: Any] = { $0 }
    /// The app's own script operations.
    public var operations: [String: LiveTableScript.Operation] = [:]
    /// The values of an object added with a key in the terminal table (before `defaults`).
    public var newObjectValues: () -> [String: Any] = { [:] }
    /// Runs once the table is up, before the script or the terminal (the RSS reader imports `--feed` here).
    public var prepare: (LiveTableScript) throws -> Void = { _ in }
}

/// The options every seed app takes.
///
/// For example:
/// ```swift
/// @OptionGroup var options: SeedOptions   // --store PATH, --script FILE
/// ```
public struct SeedOptions: ParsableArguments {
    /// The store's path (or a PostgreSQL URL), when not the default.
    @Option(
        help: ArgumentHelp(
            "The SQLite store (default: in the container's default folder), or a PostgreSQL store's URL (postgresql://user@host:port/database) that other processes and machines share.",
            valueName: "path-or-url"))
    public var store: String?

    /// The script to run, if any.
    @Option(
        help: ArgumentHelp("Run a scripted session: one JSON object per line; print every delegate call and the table.", valueName: "file"))
    public var script: String?

    /// Whether to serve the table in the browser.
    @Flag(help: "Serve the live table in the browser, on 127.0.0.1 (see --host).")
    public var web = false

    /// The web table's port.
    @Option(parsing: .unconditional, help: ArgumentHelp("The web table's port (0 picks a free one).", valueName: "n"))
    public var port = 8080

    /// The web table's address.
    @Option(
        help: ArgumentHelp(
            "The web table's address: 127.0.0.1 (the default) admits this machine only; any other (0.0.0.0, a LAN address) needs --token.",
            valueName: "address"))
    public var host = "127.0.0.1"

    /// The token a browser must give (`?token=`) when the table is served beyond this machine.
    @Option(
        help: ArgumentHelp(
            "With --host other than loopback: the page is served only to http://HOST:PORT/?token=TOKEN (16 characters or more; OCD_WEB_TOKEN is read when this is not given).",
            valueName: "token"))
    public var token: String?

    /// Options to be filled in by the argument parser.
    public init() {}

    /// Refuses an empty `--store` and a port outside 0…65535, naming the option.
    public func validate() throws {
        if store?.isEmpty == true { throw ValidationError("--store needs the path of a store file: the path given is empty.") }
        if !(0...65_535).contains(port) { throw ValidationError("--port must be between 0 and 65535; got \(port).") }
    }
}

/// A seed app's session: opens the store, shows the table, runs the script.
///
/// For example:
/// ```swift
/// exit(SeedSession.main(OilChanges.self, Array(CommandLine.arguments.dropFirst()), output: { print($0) }, errors: { print($0) }))
/// ```
public enum SeedSession {
    /// Runs `spec` with `options`, writing through `output`.
    ///
    /// - Throws: a store or model error, or `LiveTableScript.Failure` for a bad script line.
    public static func run(_ spec: SeedAppSpec, options: SeedOptions, output: @escaping (String) -> Void) throws {
        let container = NSPersistentContainer(name: spec.name, managedObjectModel: try spec.model())
        let server = options.store.flatMap(URL.init(string:)).flatMap {
            ["postgresql", "postgres"].contains($0.scheme?.lowercased()) ? $0 : nil
        }
        let storeURL =
            server ?? options.store.map { URL(fileURLWithPath: $0) }
            ?? NSPersistentContainer.defaultDirectoryURL().appendingPathComponent("\(spec.name).sqlite")
        if server == nil {
            try FileManager.default.createDirectory(at: storeURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        }
        let description = NSPersistentStoreDescription(url: storeURL)
        // Other processes on the same store (another terminal, another machine on a server) show up live too.
        description.setOption(true as NSNumber, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey)
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        defer { for store in container.persistentStoreCoordinator.persistentStores { try? store.close() } }
        let request = NSFetchRequest<NSManagedObject>(entityName: spec.entityName)
        request.sortDescriptors = spec.sortDescriptors
        request.fetchBatchSize = spec.fetchBatchSize
        let controller = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: container.viewContext, sectionNameKeyPath: spec.sectionKeyPath,
            cacheName: spec.cacheName)
        let table = try LiveTable(controller: controller, cell: spec.cell)
        let script = LiveTableScript(
            table: table, container: container, entityName: spec.entityName, defaults: spec.defaults, operations: spec.operations)
        try spec.prepare(script)
        if let path = options.script {
            // Read through a file handle, so that /dev/null or a pipe (a FIFO) works as a script too.
            guard let data = FileHandle(forReadingAtPath: path)?.readDataToEndOfFile(), let text = String(data: data, encoding: .utf8)
            else {
                throw SeedFailure("Cannot read the script \(path).")
            }
            try script.run(contentsOf: text, output: output)
        } else if options.web {
            runWeb(spec, script: script, options: options)
        } else if isatty(STDIN_FILENO) == 1, isatty(STDOUT_FILENO) == 1 {
            return try runTerminal(spec, script: script)
        }
        LiveTableTranscript.tableLines(of: table).forEach(output)
    }

    /// The terminal table, with the keys every seed app has: add, add in a background context (merged on the main
    /// queue, as seed 001 merges its did-save notifications), delete the highlighted row.
    private static func runTerminal(_ spec: SeedAppSpec, script: LiveTableScript) throws {
        let mergers = [mergeOtherSavesOnTheMainQueue(into: script.context), followOtherProcessesOnTheMainQueue(into: script.context)]
        defer { mergers.forEach(NotificationCenter.default.removeObserver) }
        let actions = SeedActions(spec: spec, script: script)
        let view = TerminalTable(table: script.table, title: spec.name)
        view.addKey("a", "add") { _ in try actions.add() }
        view.addKey("b", "add in background") { _ in actions.backgroundAdd() }
        view.addKey("d", "delete") { view in
            guard let indexPath = view.selectedIndexPath else { return }
            try actions.delete(script.table.controller.object(at: indexPath))
        }
        try view.run()
    }

    /// The web table on `options.host`:`options.port` with the same actions as the terminal's keys, until SIGINT or
    /// SIGTERM; the main thread serves the view context's queue meanwhile.
    private static func runWeb(_ spec: SeedAppSpec, script: LiveTableScript, options: SeedOptions) -> Never {
        let mergers = [mergeOtherSavesOnTheMainQueue(into: script.context), followOtherProcessesOnTheMainQueue(into: script.context)]
        let actions = SeedActions(spec: spec, script: script)
        let web = WebTable(
            table: script.table, title: spec.name,
            actions: [
                .init(name: "add", title: "Add", key: "a") { _, _ in try actions.add() },
                .init(name: "background-add", title: "Add in background", key: "b") { _, _ in actions.backgroundAdd() },
                .init(name: "delete", title: "Delete", key: "d", scope: .row) { object, _ in try object.map(actions.delete) },
            ])
        let name = spec.name
        let (host, port) = (options.host, options.port)
        let token = options.token ?? ProcessInfo.processInfo.environment["OCD_WEB_TOKEN"]
        Task.detached {
            do {
                try await web.run(host: host, port: port, token: token) { port in
                    FileHandle.standardOutput.write(
                        Data("\(name): serving \(WebTable.address(host: host, port: port, token: token))\n".utf8))
                }
                mergers.forEach(NotificationCenter.default.removeObserver)
                exit(0)
            } catch {
                FileHandle.standardError.write(Data("error: \(error)\n".utf8))
                exit(1)
            }
        }
        dispatchMain()
    }

    /// Brings `context` up to the store on the main queue whenever another process commits to it (the coordinator's
    /// remote-change notification): its objects are re-read and its controller reports what changed.
    private static func followOtherProcessesOnTheMainQueue(into context: NSManagedObjectContext) -> any NSObjectProtocol {
        let coordinator = context.persistentStoreCoordinator
        return NotificationCenter.default.addObserver(forName: .NSPersistentStoreRemoteChange, object: coordinator, queue: nil) { _ in
            let target = Unchecked(context)
            DispatchQueue.main.async { target.value.mergeChangesFromStore() }
        }
    }

    /// Merges every other context's save into `context` on the main queue (the view context's own), as seed 001
    /// merges its did-save notifications.
    private static func mergeOtherSavesOnTheMainQueue(into context: NSManagedObjectContext) -> any NSObjectProtocol {
        NotificationCenter.default.addObserver(forName: NSManagedObjectContext.didSaveObjectsNotification, object: nil, queue: nil) {
            notification in
            guard let saver = notification.object as? NSManagedObjectContext, saver !== context else { return }
            let note = Unchecked(notification)
            let target = Unchecked(context)
            DispatchQueue.main.async { target.value.mergeChanges(fromContextDidSave: note.value) }
        }
    }

    /// Parses `arguments` as `Command` and runs it, returning the exit code: 0, 1 for a failure (its message printed
    /// through `errors`), 2 for a usage error.
    public static func main<Command: SeedCommand>(
        _ command: Command.Type, _ arguments: [String], output: @escaping (String) -> Void, errors: (String) -> Void
    ) -> Int32 {
        do {
            let parsed = try Command.parse(arguments)
            try parsed.run(output: output)
            return 0
        } catch let failure as LiveTableScript.Failure {
            errors("error: \(failure)")
            return 1
        } catch let failure as SeedFailure {
            errors("error: \(failure.message)")
            return 1
        } catch let error as CoreDataError {
            errors("error: \(error.message)")
            return 1
        } catch {
            let code = Command.exitCode(for: error)
            if code == .success {
                output(Command.fullMessage(for: error))
                return 0
            }
            errors(Command.fullMessage(for: error))
            return code == .validationFailure ? 2 : 1
        }
    }
}

/// A seed app's command line.
///
/// For example:
/// ```swift
/// struct MyApp: SeedCommand { func run(output: @escaping (String) -> Void) throws { output("hello") } }
/// ```
public protocol SeedCommand: ParsableCommand {
    /// Runs the app, writing through `output`.
    func run(output: @escaping (String) -> Void) throws
}

/// A failure of a seed app with a message for the user (exit code 1).
///
/// For example:
/// ```swift
/// throw SeedFailure("Cannot read the script \(path).")
/// ```
public struct SeedFailure: Error, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    /// A failure with its message.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// What every seed app can do from its terminal keys and its web page, on the view context's queue.
private struct SeedActions {
    let spec: SeedAppSpec
    let script: LiveTableScript

    /// Inserts an object with the app's values into the view context and saves.
    func add() throws {
        try script.insert(values: spec.newObjectValues(), into: script.context)
        try save()
    }

    /// Inserts and saves an object in a background context; the main queue merges the save.
    func backgroundAdd() {
        // The script's insert touches only the context it is given, here the background one, on its queue.
        let backgroundScript = Unchecked(script)
        let values = Unchecked(spec.newObjectValues())
        script.container.performBackgroundTask { background in
            _ = try? backgroundScript.value.insert(values: values.value, into: background)
            try? background.save()
        }
    }

    /// Deletes `object` and saves; a failed save is rolled back (nothing half-done stays in the context).
    func delete(_ object: NSManagedObject) throws {
        script.context.delete(object)
        try save()
    }

    private func save() throws {
        do {
            try script.context.save()
        } catch {
            script.context.rollback()
            throw error
        }
    }
}

/// A value handed to another queue whose use there is safe by construction (each use says why).
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A formatter for `format` in UTC with a fixed locale, so that a script prints the same everywhere.
func utcFormatter(_ format: String) -> DateFormatter {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = format
    return formatter
}
