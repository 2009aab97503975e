import ArgumentParser
import Foundation
import OpenCoreData

/// `coredata migrate`: moves a store to a version of its model by lightweight migration and says what changed.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract:
            "Migrate a store to a version of its model (the bundle's current one unless --to names another) by lightweight migration, and print what changed. A migration that fails leaves the store as it was."
    )

    @Option(
        name: .long,
        help: ArgumentHelp("The model: a .xcdatamodeld bundle, one version folder inside it, or a .xcdatamodel folder.", valueName: "path"))
    var model: String

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The SQLite store file, or a PostgreSQL store's URL (postgresql://user@host:port/database; a password in it is never printed).",
            valueName: "path-or-url"))
    var store: String

    @Option(name: .long, help: ArgumentHelp("The version to migrate to: its folder's name in the bundle.", valueName: "version"))
    var to: String?

    func run() throws {
        var modelURL = URL(fileURLWithPath: model)
        if let to {
            let name = to.hasSuffix(".xcdatamodel") ? to : to + ".xcdatamodel"
            modelURL = modelURL.appendingPathComponent(name)
        }
        guard FileManager.default.fileExists(atPath: modelURL.path) else {
            throw ToolFailure(to == nil ? "No model at \(model)." : "No version '\(to ?? "")' in \(model).")
        }
        let server = URL(string: store).flatMap { StoreKind.isPostgreSQL($0) ? $0 : nil }
        let url = server ?? URL(fileURLWithPath: store)
        let name = server.map(PostgreSQLLocation.masked) ?? store
        if server == nil, !FileManager.default.fileExists(atPath: store) { throw ToolFailure("No store at \(store).") }
        let destination = try NSManagedObjectModel(contentsOf: modelURL)
        guard let migrate = try StoreKind.require(NSSQLiteStoreType, at: url).migrate else {
            throw ToolFailure("\(name) cannot be migrated.")
        }
        let changes = try migrate(url, destination, nil)
        let console = ToolConsole.current
        if changes.isEmpty {
            console.out("\(name) is already at this version of the model; nothing changed.")
        } else {
            console.out("Migrated \(name):\n" + changes.map { "  " + $0 }.joined(separator: "\n"))
        }
    }
}
