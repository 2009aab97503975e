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

    func run() throws {
        guard let data = FileManager.default.contents(atPath: file) else { throw ToolFailure("Cannot read \(file).") }
        let json: Any
        do {
            json = try JSONReader.parse(data)
        } catch let error as JSONSyntaxError {
            throw ToolFailure("\(file) is not valid JSON: \(error); nothing was imported.")
        }
        var batches: [(entity: String, records: [Any])] = []
        switch json {
        case let array as [Any]:
            guard let entity else {
                throw ValidationError("\(file) holds an array; name its entity with --entity.")
            }
            batches = [(entity, array)]
        case let object as [String: Any]:
            if entity != nil {
                throw ValidationError("--entity is only for a file holding an array; \(file) holds an object keyed by entity names.")
            }
            for name in object.keys.sorted() {
                guard let records = object[name] as? [Any] else {
                    throw ToolFailure("In \(file), the value of \"\(name)\" must be an array of objects.")
                }
                batches.append((name, records))
            }
        default:
            throw ToolFailure("\(file) must hold a JSON array of objects or an object of arrays keyed by entity name.")
        }

        // A store this import creates is removed again if the import fails, with any folder made for it: a failed
        // import leaves the disk as it was.
        let created = CreatedPaths(store: URL(fileURLWithPath: storeOptions.store))
        let counts: [String: Int]
        do {
            let (container, context) = try storeOptions.open(readOnly: false)
            defer { for store in container.persistentStoreCoordinator.persistentStores { try? store.close() } }
            let importer = Importer(context: context)
            counts = try context.performAndWait { try importer.run(batches) }
        } catch {
            created.remove()
            throw error
        }
        let total = counts.values.reduce(0, +)
        let detail = counts.keys.sorted().map { "\($0): \(counts[$0]!)" }.joined(separator: ", ")
        ToolConsole.current.out("Imported \(total) objects (\(detail)) into \(storeOptions.store).")
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

/// Creates objects, then sets attributes, then relationships by "@id", then saves once.
final class Importer {
    let context: NSManagedObjectContext
    private var byID: [String: NSManagedObject] = [:]
    private var labels: [String: String] = [:]  // object ID URI → record label, for error messages

    init(context: NSManagedObjectContext) { self.context = context }

    struct Record {
        let label: String
        let object: NSManagedObject
        let fields: [String: Any]
    }

    func run(_ batches: [(entity: String, records: [Any])]) throws -> [String: Int] {
        var records: [Record] = []
        var counts: [String: Int] = [:]
        for (entityName, items) in batches {
            let entity = try context.entity(named: entityName)
            if entity.isAbstract {
                throw ToolFailure("Entity '\(entityName)' is abstract; import objects of one of its subentities.")
            }
            for (index, item) in items.enumerated() {
                var label = "record #\(index + 1) of '\(entityName)'"
                guard let fields = item as? [String: Any] else {
                    throw ToolFailure("\(label.capitalizedFirst) is \(JSONValues.describe(item)), not a JSON object.")
                }
                if let id = fields["@id"] {
                    guard let id = id as? String else { throw ToolFailure("\(label.capitalizedFirst): \"@id\" must be a string.") }
                    label += " (@id \"\(id)\")"
                }
                let object = try NSEntityDescription.checkedInsertNewObject(forEntityName: entityName, into: context)
                if let id = fields["@id"] as? String {
                    if byID[id] != nil { throw ToolFailure("\(label.capitalizedFirst): \"@id\" \"\(id)\" is used twice in the file.") }
                    byID[id] = object
                }
                labels[object.objectID.uriRepresentation().absoluteString] = label
                records.append(Record(label: label, object: object, fields: fields))
                counts[entityName, default: 0] += 1
            }
        }
        for record in records { try setAttributes(record) }
        for record in records { try setRelationships(record) }
        do {
            try context.save()
        } catch let error as CoreDataError {
            throw ToolFailure("Nothing was imported: " + relabel(error.message))
        }
        return counts
    }

    private func setAttributes(_ record: Record) throws {
        let entity = record.object.entity
        for key in record.fields.keys.sorted() where key != "@id" {
            guard let property = entity.propertiesByName[key] else {
                throw ToolFailure(
                    "\(record.label.capitalizedFirst): unknown key '\(key)' (entity '\(entity.name)' has: \(entity.propertiesByName.keys.sorted().joined(separator: ", ")))."
                )
            }
            guard let attribute = property as? NSAttributeDescription else { continue }
            do {
                try record.object.setCheckedValue(try JSONValues.attributeValue(record.fields[key]!, for: attribute), forKey: key)
            } catch let failure as ToolFailure {
                throw ToolFailure("\(record.label.capitalizedFirst): key '\(key)' \(failure.message).")
            } catch let error as CoreDataError {
                throw ToolFailure("\(record.label.capitalizedFirst): key '\(key)': \(error.message)")
            }
        }
    }

    private func setRelationships(_ record: Record) throws {
        let entity = record.object.entity
        for key in record.fields.keys.sorted() {
            guard let relationship = entity.relationshipsByName[key], let value = record.fields[key] else { continue }
            func resolve(_ ref: Any) throws -> NSManagedObject {
                guard let id = ref as? String else {
                    throw ToolFailure(
                        "\(record.label.capitalizedFirst): relationship '\(key)' takes \"@id\" strings, got \(JSONValues.describe(ref)).")
                }
                guard let target = byID[id] else {
                    throw ToolFailure(
                        "\(record.label.capitalizedFirst): relationship '\(key)' refers to \"@id\" \"\(id)\", which no record in the file has."
                    )
                }
                return target
            }
            let newValue: Any?
            if value is NSNull {
                newValue = relationship.isToMany ? [NSManagedObject]() : nil
            } else if relationship.isToMany {
                guard let refs = value as? [Any] else {
                    throw ToolFailure(
                        "\(record.label.capitalizedFirst): relationship '\(key)' is to-many; give an array of \"@id\" strings.")
                }
                newValue = try refs.map(resolve)
            } else {
                newValue = try resolve(value)
            }
            do {
                try record.object.setCheckedValue(newValue, forKey: key)
            } catch let error as CoreDataError {
                throw ToolFailure("\(record.label.capitalizedFirst): relationship '\(key)': \(error.message)")
            }
        }
    }

    /// Replaces object-ID URIs in a message with the records they came from.
    private func relabel(_ message: String) -> String {
        var text = message
        for (uri, label) in labels where text.contains(uri) {
            text = text.replacingOccurrences(of: "object \(uri)", with: label).replacingOccurrences(of: uri, with: label)
        }
        return text
    }
}

extension String {
    var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}
