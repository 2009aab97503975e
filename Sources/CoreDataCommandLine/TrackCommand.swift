import ArgumentParser
import Foundation
import OpenCoreData

/// `coredata track`: run a fetched results controller over a store and a script of edits, printing what a table
/// view would receive.
struct TrackCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "track",
        abstract: "Run a fetched results controller over a script of edits and print every batch a table would receive.",
        discussion: """
            SCRIPT has one JSON object per line: {"op":"insert","entity":E,"values":{…}}, {"op":"update","ref":R,"values":{…}}, \
            {"op":"update","where":F,"values":{…}}, {"op":"delete","ref":R}, {"op":"delete","where":F}, {"op":"process"}, \
            {"op":"save"}, {"op":"background","ops":[…]} (run in a second context that saves; the controller's context \
            merges it), {"op":"child","ops":[…],"save":true|false} (run in a child context of the controller's context, \
            saved into it when "save" is true; the parent is not saved unless a later "save" op says so), \
            {"op":"batch-update","where":F,"values":{…}} and {"op":"batch-delete","where":F} (batch requests on the store, \
            merged into the controller's context), {"op":"wait-remote","count":N,"timeout":S} (wait until N commits by \
            other processes have been merged), {"op":"echo","text":T} (prints {"echo":T}, e.g. to mark that a save \
            returned). A ref is the --ref-key attribute's value; update and delete take an optional "entity". \
            Output, one JSON object per line: {"initial":…}, one object per batch, then {"final":…} from a fresh fetch.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @OptionGroup var controllerOptions: ControllerOptions

    @Option(name: .long, parsing: .unconditional, help: "The fetch offset (0 or more).")
    var offset: Int?

    @Option(name: .customLong("batch-size"), parsing: .unconditional, help: "The fetch batch size (0 or more; 0 means none).")
    var batchSize: Int?

    func validate() throws {
        if let offset, offset < 0 { throw ValidationError("--offset must be 0 or more; got \(offset).") }
        if let batchSize, batchSize < 0 { throw ValidationError("--batch-size must be 0 or more (0 means none); got \(batchSize).") }
    }

    @Option(name: .long, help: "A section cache name.")
    var cache: String?

    @Flag(name: .long, help: "Print the sections after each batch.")
    var snapshots = false

    @Argument(help: ArgumentHelp("The script of edits, one JSON object per line.", valueName: "script.jsonl"))
    var script: String

    func run() throws {
        guard let data = FileManager.default.contents(atPath: script) else { throw ToolFailure("Cannot read \(script).") }
        var lines: [(number: Int, op: [String: Any])] = []
        // Lines are split on bytes, so that text that is not UTF-8 reaches the JSON reader and is refused there.
        for (i, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            if line.allSatisfy({ [0x20, 0x09, 0x0D].contains($0) }) { continue }
            let parsed: Any
            do {
                parsed = try JSONReader.parse(Data(line))
            } catch let error as JSONSyntaxError {
                throw ToolFailure("\(script) line \(i + 1): not valid JSON (column \(error.column): \(error.reason)).")
            }
            guard let op = parsed as? [String: Any] else {
                throw ToolFailure("\(script) line \(i + 1): not a JSON object but \(JSONValues.describe(parsed)).")
            }
            lines.append((i + 1, op))
        }
        let (container, context) = try storeOptions.open(readOnly: false, watchingOtherProcesses: true)
        let remote = RemoteCommits(coordinator: container.persistentStoreCoordinator)
        let console = ToolConsole.current
        try context.performAndWait {
            let (entity, refKey, sectionKey) = (controllerOptions.entity, controllerOptions.refKey, controllerOptions.sectionKey)
            let request = try controllerOptions.request()
            request.fetchOffset = offset ?? 0
            request.fetchBatchSize = batchSize ?? 0
            let controller = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: sectionKey, cacheName: cache)
            let tracker = Tracker(refKey: refKey, snapshots: snapshots, controller: controller) { console.out($0) }
            controller.delegate = tracker
            try controller.performFetch()
            console.out(try JSONValues.line(["initial": tracker.sections()]))
            let runner = ScriptRunner(context: context, container: container, defaultEntity: entity, refKey: refKey, scriptName: script)
            runner.remote = remote
            for (number, op) in lines {
                try runner.run(op, line: number, in: context)
                if let failure = tracker.failure { throw ToolFailure(failure) }
            }
            context.processPendingChanges()
            controller.delegate = nil
            controller.flushCache()  // this process ends soon: the cache must not wait for its timer
            // The final state from a fresh fetch in a new context.
            let fresh = container.newBackgroundContext()
            try fresh.performAndWait {
                let check = NSFetchedResultsController(
                    fetchRequest: request, managedObjectContext: fresh, sectionNameKeyPath: sectionKey, cacheName: nil)
                try check.performFetch()
                let freshTracker = Tracker(refKey: refKey, snapshots: false, controller: check) { _ in }
                console.out(try JSONValues.line(["final": freshTracker.sections()]))
            }
        }
    }
}

/// Turns delegate calls into the tool's JSON lines.
final class Tracker: NSFetchedResultsControllerDelegate {
    let refKey: String
    let snapshots: Bool
    let controller: NSFetchedResultsController<NSManagedObject>
    let emit: (String) -> Void
    private var sectionChanges: [[String: Any]] = []
    private var objectChanges: [[String: Any]] = []
    var failure: String?

    init(refKey: String, snapshots: Bool, controller: NSFetchedResultsController<NSManagedObject>, emit: @escaping (String) -> Void) {
        self.refKey = refKey
        self.snapshots = snapshots
        self.controller = controller
        self.emit = emit
    }

    func ref(_ object: NSManagedObject) -> Any {
        let attribute = object.entity.attributesByName[refKey]
        return JSONValues.jsonValue((try? object.checkedValue(forKey: refKey)) ?? nil, type: attribute?.attributeType)
    }

    func sections() -> [[String: Any]] {
        (controller.sections ?? []).map { section in
            ["name": section.name, "refs": (section.objects ?? []).compactMap { ($0 as? NSManagedObject).map(ref) }]
        }
    }

    func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        sectionChanges = []
        objectChanges = []
    }

    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange sectionInfo: any NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType
    ) {
        sectionChanges.append(["type": type.description, "index": sectionIndex, "name": sectionInfo.name])
    }

    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?
    ) {
        func path(_ p: IndexPath?) -> Any { p.map { [$0.section, $0.row] } ?? NSNull() }
        guard let object = anObject as? NSManagedObject else { return }
        objectChanges.append(["type": type.description, "from": path(indexPath), "to": path(newIndexPath), "ref": ref(object)])
    }

    func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        // Keys in the order the format lists them: sections, objects, after.
        do {
            var text = "{\"sections\":\(try JSONValues.line(sectionChanges)),\"objects\":\(try JSONValues.line(objectChanges))"
            if snapshots { text += ",\"after\":\(try JSONValues.line(sections()))" }
            emit(text + "}")
        } catch {
            failure = "could not write a batch: \(error)"
        }
    }
}

/// Runs script operations against a context (and, for "background", a second context that saves).
final class ScriptRunner {
    let context: NSManagedObjectContext
    let container: NSPersistentContainer
    let defaultEntity: String
    let refKey: String
    let scriptName: String
    /// The other processes' commits seen so far, for "wait-remote".
    var remote: RemoteCommits?

    init(context: NSManagedObjectContext, container: NSPersistentContainer, defaultEntity: String, refKey: String, scriptName: String) {
        self.context = context
        self.container = container
        self.defaultEntity = defaultEntity
        self.refKey = refKey
        self.scriptName = scriptName
    }

    func fail(_ line: Int, _ message: String) -> ToolFailure { ToolFailure("\(scriptName) line \(line): \(message)") }

    func run(_ op: [String: Any], line: Int, in target: NSManagedObjectContext) throws {
        guard let name = op["op"] as? String else { throw fail(line, "missing \"op\"") }
        do {
            switch name {
            case "insert":
                let entityName = op["entity"] as? String ?? defaultEntity
                let values = try valuesField(op, line)
                let object = try NSEntityDescription.checkedInsertNewObject(forEntityName: entityName, into: target)
                try apply(values, to: object, line: line, in: target)
            case "update":
                let values = try valuesField(op, line)
                for object in try targets(op, line: line, in: target) { try apply(values, to: object, line: line, in: target) }
            case "delete":
                for object in try targets(op, line: line, in: target) { target.delete(object) }
            case "process":
                target.processPendingChanges()
            case "save":
                try target.save()
            case "background":
                guard let ops = op["ops"] as? [[String: Any]] else {
                    throw fail(line, "\"background\" needs \"ops\", an array of operations")
                }
                let background = container.newBackgroundContext()
                let saved = SavedNotification()
                let observer = NotificationCenter.default.addObserver(
                    forName: .NSManagedObjectContextDidSave, object: background, queue: nil
                ) {
                    saved.note = $0
                }
                defer { NotificationCenter.default.removeObserver(observer) }
                try background.performAndWait {
                    for inner in ops { try run(inner, line: line, in: background) }
                    try background.save()
                }
                if let note = saved.note { target.mergeChanges(fromContextDidSave: note) }
            case "child":
                guard let ops = op["ops"] as? [[String: Any]] else { throw fail(line, "\"child\" needs \"ops\", an array of operations") }
                guard op["save"] == nil || op["save"] is Bool else { throw fail(line, "\"child\"'s \"save\" must be true or false") }
                let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
                child.parent = target
                try child.performAndWait {
                    for inner in ops { try run(inner, line: line, in: child) }
                    if op["save"] as? Bool == true { try child.save() }
                }
            case "echo":
                ToolConsole.current.out(try JSONValues.line(["echo": op["text"] ?? NSNull()]))
            case "batch-update", "batch-delete", "wait-remote":
                try runStoreOp(name, op, line: line, in: target)
            default:
                throw fail(
                    line,
                    "unknown op \"\(name)\"; expected insert, update, delete, process, save, background, child, batch-update, batch-delete, wait-remote or echo"
                )
            }
        } catch let failure as ToolFailure {
            throw failure
        } catch let error as CoreDataError {
            throw fail(line, error.message)
        }
    }

    func valuesField(_ op: [String: Any], _ line: Int) throws -> [String: Any] {
        guard let values = op["values"] as? [String: Any] else { throw fail(line, "\"\(op["op"] ?? "")\" needs \"values\", a JSON object") }
        return values
    }

    /// The objects an update or delete names: by "ref" or by a "where" predicate.
    private func targets(_ op: [String: Any], line: Int, in target: NSManagedObjectContext) throws -> [NSManagedObject] {
        let entityName = op["entity"] as? String ?? defaultEntity
        let request = NSFetchRequest<NSManagedObject>(entityName: entityName)
        if let format = op["where"] as? String {
            request.predicate = try FetchPredicate(format: format)
            return try target.fetch(request)
        }
        guard let ref = op["ref"] else { throw fail(line, "\"\(op["op"] ?? "")\" needs \"ref\" or \"where\"") }
        guard let object = try lookup(ref, entity: entityName, line: line, in: target) else {
            throw fail(line, "no \(entityName) has \(refKey) = \(ref)")
        }
        return [object]
    }

    private func lookup(_ ref: Any, entity: String, line: Int, in target: NSManagedObjectContext) throws -> NSManagedObject? {
        let description = try target.entity(named: entity)
        guard let attribute = description.attributesByName[refKey] else {
            throw fail(line, "entity '\(entity)' has no --ref-key attribute '\(refKey)'")
        }
        let request = NSFetchRequest<NSManagedObject>(entityName: entity)
        request.predicate = try FetchPredicate(format: "%K == %@", refKey, try JSONValues.attributeValue(ref, for: attribute))
        return try target.fetch(request).first
    }

    private func apply(_ values: [String: Any], to object: NSManagedObject, line: Int, in target: NSManagedObjectContext) throws {
        for key in values.keys.sorted() {
            let value = values[key]!
            guard let property = object.entity.propertiesByName[key] else {
                throw fail(line, "entity '\(object.entity.name)' has no property '\(key)'")
            }
            if let attribute = property as? NSAttributeDescription {
                do {
                    try object.setCheckedValue(try JSONValues.attributeValue(value, for: attribute), forKey: key)
                } catch let failure as ToolFailure {
                    throw fail(line, "key '\(key)' \(failure.message)")
                }
            } else if let relationship = property as? NSRelationshipDescription, let destination = relationship.destinationEntity {
                func find(_ ref: Any) throws -> NSManagedObject {
                    guard let found = try lookup(ref, entity: destination.name, line: line, in: target) else {
                        throw fail(line, "relationship '\(key)': no \(destination.name) has \(refKey) = \(ref)")
                    }
                    return found
                }
                if value is NSNull {
                    try object.setCheckedValue(relationship.isToMany ? [NSManagedObject]() : nil, forKey: key)
                } else if relationship.isToMany {
                    guard let refs = value as? [Any] else { throw fail(line, "relationship '\(key)' is to-many; give an array of refs") }
                    try object.setCheckedValue(try refs.map(find), forKey: key)
                } else {
                    try object.setCheckedValue(try find(value), forKey: key)
                }
            }
        }
    }
}

/// Holds the did-save notification a background context posts (delivered synchronously on the saving thread).
final class SavedNotification: @unchecked Sendable {
    var note: Notification?
}
