import ArgumentParser
import Foundation
import OpenCoreData

/// `coredata import`: load objects from JSON into a store, all in one transaction.
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Insert the objects of a JSON file into a store, in one transaction.",
        discussion: """
            FILE is a JSON array of objects of --entity, or a JSON object whose keys are entity names and whose values \
            are such arrays. Keys are property names; null or a missing key is nil; dates are ISO 8601 strings; binary \
            data is base64. An object may carry "@id" (a string unique in the file); a to-one relationship takes the \
            "@id" of its destination and a to-many an array of them; inverses are set as Core Data sets them. Any bad \
            record fails the whole import and leaves the store as it was.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Option(name: .long, help: "The entity of the objects when FILE is an array.")
    var entity: String?

    @Argument(help: ArgumentHelp("The JSON file.", valueName: "file.json"))
    var file: String

    @Flag(
        name: .long,
        help:
            "Record persistent history (NSPersistentHistoryTrackingKey). A store that has history records every later write, also without this flag."
    )
    var history = false

    @Option(
        name: .long, parsing: .unconditional,
        help: "Objects saved per batch inside the import's one transaction (memory holds one batch; 1 or more).")
    var batchSize = 5_000

    func validate() throws {
        if batchSize < 1 { throw ValidationError("--batch-size must be 1 or more; got \(batchSize).") }
    }

    func run() throws {
        var stream = try JSONRecordStream(path: file)
        let shape = try readingJSON { try stream.begin() }
        switch (shape, entity) {
        case (.array, nil): throw ValidationError("\(file) holds an array; name its entity with --entity.")
        case (.object, _?):
            throw ValidationError("--entity is only for a file holding an array; \(file) holds an object keyed by entity names.")
        default: break
        }
        // A store this import creates is removed again if the import fails, with any folder made for it: a failed
        // import leaves the disk as it was.
        let created = storeOptions.isServerStore ? nil : CreatedPaths(store: URL(fileURLWithPath: storeOptions.store))
        let counts: [String: Int]
        do {
            let (container, context) = try storeOptions.open(readOnly: false, tracksHistory: history)
            defer { for store in container.persistentStoreCoordinator.persistentStores { try? store.close() } }
            guard let store = container.persistentStoreCoordinator.persistentStores.first as? any TransactionalStore else {
                throw ToolFailure("\(storeOptions.storeName) is not a store an import can write in one transaction.")
            }
            let importer = Importer(context: context, batchSize: batchSize)
            // One transaction around every batch's save: all of the file or none of it reaches the store.
            try context.performAndWait {
                try store.performAsOneTransaction {
                    try readingJSON { try importRecords(from: &stream, shape: shape, into: importer) }
                    try importer.finish()
                }
            }
            counts = importer.counts
        } catch {
            created?.remove()
            throw error
        }
        let total = counts.values.reduce(0, +)
        let detail = counts.keys.sorted().map { "\($0): \(counts[$0]!)" }.joined(separator: ", ")
        ToolConsole.current.out("Imported \(total) objects (\(detail)) into \(storeOptions.storeName).")
    }

    /// Hands every record of the file to the importer as it is read.
    private func importRecords(from stream: inout JSONRecordStream, shape: JSONRecordStream.Shape, into importer: Importer) throws {
        func records(of entity: NSEntityDescription) throws {
            var number = 0
            while let record = try stream.nextRecord() {
                number += 1
                try importer.add(record, number: number, of: entity)
            }
        }
        if shape == .array, let entity {
            try records(of: try importer.entity(named: entity))
        } else {
            while let name = try stream.nextEntity() { try records(of: try importer.entity(named: name)) }
        }
        try stream.finish()
    }

    /// Runs `body`, turning what the JSON stream throws into the tool's messages.
    private func readingJSON<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as JSONSyntaxError {
            throw ToolFailure("\(file) is not valid JSON: \(error); nothing was imported.")
        } catch is JSONRecordStream.NotAnArrayOrObject {
            throw ToolFailure("\(file) must hold a JSON array of objects or an object of arrays keyed by entity name.")
        } catch let error as JSONRecordStream.NotAnArray {
            throw ToolFailure("In \(file), the value of \"\(error.key)\" must be an array of objects.")
        }
    }
}

/// The store file and folders that did not exist before a command ran, so that a failure can remove what it made.
struct CreatedPaths {
    /// Paths that did not exist, deepest first: the store's files, then the folders above it up to the first that
    /// existed.
    private let paths: [URL]

    init(store: URL) {
        let manager = FileManager.default
        guard !manager.fileExists(atPath: store.path) else {
            paths = []
            return
        }
        var paths = ["", "-wal", "-shm", "-journal"].map { URL(fileURLWithPath: store.path + $0) }
        var folder = store.deletingLastPathComponent()
        while !manager.fileExists(atPath: folder.path), folder.path != "/" {
            paths.append(folder)
            folder = folder.deletingLastPathComponent()
        }
        self.paths = paths
    }

    /// Removes what exists now of the paths that did not exist before.
    func remove() {
        let manager = FileManager.default
        for url in paths where manager.fileExists(atPath: url.path) {
            // A folder goes only if nothing else was put in it meanwhile.
            var isFolder: ObjCBool = false
            if manager.fileExists(atPath: url.path, isDirectory: &isFolder), isFolder.boolValue,
                (try? manager.contentsOfDirectory(atPath: url.path).isEmpty) != true
            {
                continue
            }
            try? manager.removeItem(at: url)
        }
    }
}

extension String {
    var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}
