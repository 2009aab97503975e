import ArgumentParser
import Foundation
import OpenCoreData

/// `coredata info`: what a store says about itself, and how its model matches it (never writes to it).
struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract:
            "Print a store's metadata, UUID, entities with their counts, and whether the model matches it. Nothing is written to the store."
    )

    @OptionGroup var storeOptions: StoreOptions

    @Option(name: .long, help: "Output format: json or table.")
    var format: FetchCommand.Format = .json

    func run() throws {
        let store = storeOptions.storeName
        let url = storeOptions.storeURL
        let metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
        var info: [String: Any] = [
            "store": store, "uuid": metadata["NSStoreUUID"] as? String ?? "", "metadata": Self.json(metadata),
        ]
        do {
            let (model, source) = try storeOptions.loadModel()
            var description: [String: Any] = [
                "source": source, "versionHashes": model.entityVersionHashesByName.mapValues { $0.base64EncodedString() },
            ]
            if let stored = metadata["NSStoreModelVersionHashes"] as? [String: Data] {
                // Core Data's own test: the store's recorded hashes against the model's.
                let current = model.entityVersionHashesByName
                description["hashesMatchStore"] = model.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata)
                description["entitiesWithOtherHashes"] = Set(stored.keys).union(current.keys).filter { stored[$0] != current[$0] }.sorted()
            }
            do {
                info["entities"] = try Self.counts(model: model, url: url)
                description["matchesStore"] = true
            } catch let error as CoreDataError {
                description["matchesStore"] = false
                description["mismatch"] = error.message
            }
            info["model"] = description
        } catch let failure as ToolFailure {
            info["model"] = NSNull()
            ToolConsole.current.err("coredata: note: \(failure.message) Printing the metadata only.")
        }
        ToolConsole.current.out(format == .json ? try JSONValues.encode(info) : Self.table(info))
    }

    /// Each entity's own objects and those of its subentities too, from a read-only open with `model`.
    static func counts(model: NSManagedObjectModel, url: URL) throws -> [[String: Any]] {
        let container = NSPersistentContainer(name: "Info", managedObjectModel: model)
        let description = NSPersistentStoreDescription(url: url)
        description.isReadOnly = true
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        return try context.performAndWait {
            try model.entities.sorted { $0.entityID < $1.entityID }.map { entity in
                let own = NSFetchRequest<NSManagedObject>(entityName: entity.name)
                own.includesSubentities = false
                let all = NSFetchRequest<NSManagedObject>(entityName: entity.name)
                return [
                    "name": entity.name, "count": try context.count(for: own), "countIncludingSubentities": try context.count(for: all),
                ]
            }
        }
    }

    /// Metadata as JSON values: data in base64, dates in ISO 8601.
    static func json(_ value: Any) -> Any {
        switch value {
        case let d as Data: return d.base64EncodedString()
        case let d as Date: return ISO8601DateFormatter().string(from: d)
        case let d as [String: Any]: return d.mapValues(json)
        case let a as [Any]: return a.map(json)
        case let s as String: return s
        case let n as NSNumber: return n
        default: return "\(value)"
        }
    }

    /// The information as lines of `key: value`.
    static func table(_ info: [String: Any]) -> String {
        var lines = ["store: \(info["store"] ?? "")", "uuid: \(info["uuid"] ?? "")"]
        if let model = info["model"] as? [String: Any] {
            lines.append(
                "model: from \(model["source"] ?? ""), matches the store: \((model["matchesStore"] as? Bool) == true ? "yes" : "no")")
            if let mismatch = model["mismatch"] { lines.append("  \(mismatch)") }
        }
        for entity in info["entities"] as? [[String: Any]] ?? [] {
            lines.append(
                "entity \(entity["name"] ?? ""): \(entity["count"] ?? 0) own, \(entity["countIncludingSubentities"] ?? 0) with subentities")
        }
        let metadata = info["metadata"] as? [String: Any] ?? [:]
        for key in metadata.keys.sorted() { lines.append("metadata \(key): \(FetchCommand.printable("\(metadata[key]!)"))") }
        return lines.joined(separator: "\n")
    }
}
