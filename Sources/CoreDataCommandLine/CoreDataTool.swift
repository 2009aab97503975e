import ArgumentParser
import Foundation
import OpenCoreData

/// Where the tool writes: standard output and error, or buffers (tests run commands in-process).
///
/// For example:
/// ```swift
/// let console = ToolConsole(echo: false)
/// let status = CoreDataTool.run(["fetch", "--help"], console: console)
/// print(status, console.output)
/// ```
public final class ToolConsole: @unchecked Sendable {
    private let lock = NSLock()
    private let echo: Bool
    private var outBuffer = ""
    private var errBuffer = ""

    /// A console that writes to the process's standard output and error when `echo` is true, and always records.
    public init(echo: Bool) { self.echo = echo }

    /// Everything written to standard output.
    public var output: String { lock.withLock { outBuffer } }
    /// Everything written to standard error.
    public var errorOutput: String { lock.withLock { errBuffer } }

    func out(_ text: String) {
        lock.withLock { outBuffer += text + "\n" }
        if echo { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }
    }

    func err(_ text: String) {
        lock.withLock { errBuffer += text + "\n" }
        if echo { FileHandle.standardError.write(Data((text + "\n").utf8)) }
    }

    @TaskLocal static var current = ToolConsole(echo: true)
}

/// `coredata`: inspect and script OpenCoreData stores from the terminal.
///
/// For example:
/// ```swift
/// exit(CoreDataTool.run(Array(CommandLine.arguments.dropFirst())))
/// ```
public struct CoreDataTool: ParsableCommand {
    /// The command's name, summary and subcommands (`import`, `fetch`, `info`, `migrate`, `track`, `watch`, `serve`).
    public static let configuration = CommandConfiguration(
        commandName: "coredata",
        abstract: "Load data into an OpenCoreData store and query it with NSPredicate-format predicates.",
        subcommands: [
            ImportCommand.self, FetchCommand.self, InfoCommand.self, MigrateCommand.self, TrackCommand.self, WatchCommand.self,
            ServeCommand.self,
        ])

    /// A command to be filled in by the argument parser.
    public init() {}

    /// Runs the tool with `arguments` (without the program name) and returns the process exit code: 0 on success,
    /// 1 when the command fails (the message names the problem), 2 for a usage error (with the usage text).
    public static func run(_ arguments: [String], console: ToolConsole = ToolConsole(echo: true)) -> Int32 {
        ToolConsole.$current.withValue(console) {
            do {
                var command = try parseAsRoot(arguments)
                try command.run()
                return 0
            } catch let error as CoreDataError {
                console.err("error: \(error.message)")
                return 1
            } catch let error as ToolFailure {
                console.err("error: \(error.message)")
                return 1
            } catch {
                let code = exitCode(for: error)
                let message = fullMessage(for: error)
                if code == .success {
                    console.out(message)
                    return 0
                }
                if code == .validationFailure {
                    console.err(message)
                    return 2
                }
                console.err(message.isEmpty ? "error: \(error)" : message)
                return 1
            }
        }
    }
}

/// A failure of a command with a message for the user (exit code 1).
struct ToolFailure: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// The options every command takes to open a store.
struct StoreOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The model: a .xcdatamodeld bundle (or one version folder inside it), a .xcdatamodel folder, or a compiled .mom or .momd. Without it, the model the store caches (stores Apple's Core Data wrote since iOS 12).",
            valueName: "path"))
    var model: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The SQLite store file, or a PostgreSQL store's URL (postgresql://user@host:port/database; a password in it is never printed).",
            valueName: "path or URL"))
    var store: String

    /// The store's URL: a PostgreSQL URL as given, else the file's.
    var storeURL: URL {
        if let url = URL(string: store), StoreKind.isPostgreSQL(url) { return url }
        return URL(fileURLWithPath: store)
    }

    /// Whether the store is on a PostgreSQL server rather than in a file.
    var isServerStore: Bool { StoreKind.isPostgreSQL(URL(string: store)) }

    /// The store as messages name it: a file's path, a URL without its password.
    var storeName: String { isServerStore ? PostgreSQLLocation.masked(storeURL) : store }

    func validate() throws {
        if store.isEmpty { throw ValidationError("--store needs the path of a store file: the path given is empty.") }
        if model?.isEmpty == true { throw ValidationError("--model needs the path of a model: the path given is empty.") }
    }

    /// The model given, or the one the store caches; and where it came from (`file` or `store`).
    func loadModel() throws -> (model: NSManagedObjectModel, source: String) {
        guard let model else {
            do {
                return (try NSManagedObjectModel.cachedModel(ofStoreAt: storeURL), "store")
            } catch let error as CoreDataError where error.message.contains("model cache") {
                throw ToolFailure(
                    error.message.replacingOccurrences(of: "give the model that wrote it", with: "give the model with --model"))
            }
        }
        let modelURL = URL(fileURLWithPath: model)
        guard FileManager.default.fileExists(atPath: modelURL.path) else {
            throw ToolFailure("No model at \(model).")
        }
        return (try NSManagedObjectModel(contentsOf: modelURL), "file")
    }

    /// Loads the model and opens the store (read-only, or creating it).
    func open(readOnly: Bool, watchingOtherProcesses: Bool = false, tracksHistory: Bool = false) throws -> (
        NSPersistentContainer, NSManagedObjectContext
    ) {
        let managedObjectModel = try loadModel().model
        let storeURL = storeURL
        let container = NSPersistentContainer(
            name: isServerStore ? "Store" : storeURL.deletingPathExtension().lastPathComponent, managedObjectModel: managedObjectModel)
        let description = NSPersistentStoreDescription(url: storeURL)
        description.isReadOnly = readOnly
        if watchingOtherProcesses { description.setOption(true, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey) }
        if tracksHistory { description.setOption(true, forKey: NSPersistentHistoryTrackingKey) }
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        return (container, container.newBackgroundContext())
    }
}
