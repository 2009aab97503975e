import Foundation
import OpenCoreData

/// Runs a scripted session against a live table, for tests and demos: one JSON object per line, each applied and saved
/// before the next is read.
///
/// Operations: `{"op":"add","values":{…}}` inserts in the table's context and saves; `{"op":"background-add",
/// "values":{…}}` inserts and saves in a background context, which the table's context then merges, as a
/// `NSManagedObjectContextDidSave` observer does; `{"op":"delete","row":[S,R]}` deletes the object at that index path
/// and saves; `{"op":"edit","row":[S,R],"values":{…}}` sets values and saves. An app adds its own operations through
/// `operations`. Values are attribute names with JSON values; dates are ISO 8601 strings; `defaults` fills what the
/// app fills itself (a creation date). A bad line throws `Failure` naming the line; the lines before it stay applied,
/// and nothing of it or after it is.
///
/// For example:
/// ```swift
/// let script = LiveTableScript(table: table, container: container, entityName: "Entry")
/// try script.run(contentsOf: text) { print($0) }
/// ```
public final class LiveTableScript {
    /// A line of the script that could not be applied.
    ///
    /// For example:
    /// ```swift
    /// do { try script.run(contentsOf: text) { print($0) } } catch let failure as LiveTableScript.Failure { print(failure.line) }
    /// ```
    public struct Failure: Error, CustomStringConvertible {
        /// The line's number, from 1.
        public let line: Int
        /// What is wrong with it.
        public let message: String
        /// `line N: message`.
        public var description: String { "line \(line): \(message)" }
    }

    /// An app's own operation: gets the line's fields and the script (for `insert(values:into:)` and the table).
    public typealias Operation = (_ fields: [String: Any], _ script: LiveTableScript) throws -> Void

    /// The table the script drives.
    public let table: LiveTable
    /// The container, for background contexts.
    public let container: NSPersistentContainer
    /// The entity `add` and `background-add` insert.
    public let entityName: String
    private let defaults: ([String: Any]) -> [String: Any]
    private let operations: [String: Operation]

    /// A script over `table`, inserting objects of `entityName`; `defaults` completes the values of an insert, and
    /// `operations` adds app-specific operations by name.
    public init(
        table: LiveTable, container: NSPersistentContainer, entityName: String,
        defaults: @escaping ([String: Any]) -> [String: Any] = { $0 }, operations: [String: Operation] = [:]
    ) {
        self.table = table
        self.container = container
        self.entityName = entityName
        self.defaults = defaults
        self.operations = operations
    }

    /// The table's context.
    public var context: NSManagedObjectContext { table.controller.managedObjectContext }

    /// Applies each line of `text`, printing every batch the table receives through `output`.
    ///
    /// - Throws: `Failure` for the first line that cannot be applied.
    public func run(contentsOf text: String, output: @escaping (String) -> Void) throws {
        let observation = table.observe { update in LiveTableTranscript.lines(for: update).forEach(output) }
        defer { observation.cancel() }
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
            do {
                try apply(String(line))
            } catch {
                // Nothing of a bad line stays: what it inserted or changed before failing is rolled back.
                context.rollback()
                let message = (error as? Failure)?.message ?? (error as? CoreDataError)?.message ?? "\(error)"
                throw Failure(line: index + 1, message: message)
            }
        }
    }

    private func apply(_ line: String) throws {
        guard let data = line.data(using: .utf8), let fields = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw Failure(line: 0, message: "not a JSON object: \(line)")
        }
        guard let op = fields["op"] as? String else { throw Failure(line: 0, message: "no \"op\" (a string) in \(line)") }
        switch op {
        case "add":
            try insert(values: try values(fields), into: context)
            try context.save()
        case "background-add":
            try backgroundAdd(try values(fields))
        case "delete":
            context.delete(try object(fields))
            try context.save()
        case "edit":
            let object = try object(fields)
            try set(try values(fields), on: object)
            try context.save()
        default:
            guard let operation = operations[op] else {
                let known = (["add", "background-add", "delete", "edit"] + operations.keys.sorted()).joined(separator: ", ")
                throw Failure(line: 0, message: "unknown op '\(op)' (expected one of: \(known))")
            }
            try operation(fields, self)
        }
    }

    /// Inserts an object of `entityName` into `context` with `values` (completed by the script's defaults).
    ///
    /// - Throws: `Failure` for an unknown key or a value the attribute cannot hold.
    @discardableResult
    public func insert(values: [String: Any], into context: NSManagedObjectContext) throws -> NSManagedObject {
        let object = try NSEntityDescription.checkedInsertNewObject(forEntityName: entityName, into: context)
        try set(defaults(values), on: object)
        return object
    }

    /// Inserts and saves in a background context, then merges that save into the table's context.
    private func backgroundAdd(_ values: [String: Any]) throws {
        try mergingBackgroundSaves {
            let background = container.newBackgroundContext()
            try background.performAndWait {
                try insert(values: values, into: background)
                try background.save()
            }
        }
    }

    /// Runs `work`, then merges into the table's context every save that other contexts made meanwhile, in order —
    /// what an app's `NSManagedObjectContextDidSave` observer does, done before the next line is read.
    ///
    /// For example:
    /// ```swift
    /// try script.mergingBackgroundSaves { queue.addOperations([importOperation], waitUntilFinished: true) }
    /// ```
    public func mergingBackgroundSaves(_ work: () throws -> Void) throws {
        let saved = SavedNotifications()
        let target = context
        let observer = NotificationCenter.default.addObserver(
            forName: NSManagedObjectContext.didSaveObjectsNotification, object: nil, queue: nil
        ) { notification in
            guard let saver = notification.object as? NSManagedObjectContext, saver !== target else { return }
            saved.append(notification)
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try work()
        for notification in saved.all() { context.mergeChanges(fromContextDidSave: notification) }
    }

    private func values(_ fields: [String: Any]) throws -> [String: Any] {
        guard let values = fields["values"] else { return [:] }
        guard let object = values as? [String: Any] else { throw Failure(line: 0, message: "\"values\" must be a JSON object") }
        return object
    }

    /// The object at the line's `"row": [S, R]`.
    private func object(_ fields: [String: Any]) throws -> NSManagedObject {
        guard let pair = fields["row"] as? [Any], pair.count == 2, let section = (pair[0] as? NSNumber)?.intValue,
            let row = (pair[1] as? NSNumber)?.intValue
        else {
            throw Failure(line: 0, message: "\"row\" must be [section, row]")
        }
        guard table.sections.indices.contains(section), (0..<table.sections[section].rowCount).contains(row) else {
            throw Failure(line: 0, message: "no row [\(section), \(row)] (the table has \(table.sections.map(\.rowCount)) rows by section)")
        }
        return table.controller.object(at: IndexPath(row: row, section: section))
    }

    private func set(_ values: [String: Any], on object: NSManagedObject) throws {
        let entity = object.entity
        for key in values.keys.sorted() {
            guard let attribute = entity.attributesByName[key] else {
                throw Failure(
                    line: 0,
                    message:
                        "unknown key '\(key)' (entity '\(entity.name)' has: \(entity.attributesByName.keys.sorted().joined(separator: ", ")))"
                )
            }
            var value = values[key]
            if value is NSNull { value = nil }
            if attribute.attributeType == .dateAttributeType, let text = value as? String {
                guard let date = Self.date(text) else {
                    throw Failure(line: 0, message: "key '\(key)' needs an ISO 8601 date, not \"\(text)\"")
                }
                value = date
            }
            do {
                try object.setCheckedValue(value, forKey: key)
            } catch let error as CoreDataError {
                throw Failure(line: 0, message: "key '\(key)': \(error.message)")
            }
        }
    }

    private static func date(_ text: String) -> Date? { ISO8601Dates.date(from: text) }
}

/// The did-save notifications of background contexts, handed from the posting threads to the script's.
private final class SavedNotifications: @unchecked Sendable {
    private let lock = NSLock()
    private var notifications: [Notification] = []

    func append(_ notification: Notification) { lock.withLock { notifications.append(notification) } }
    func all() -> [Notification] { lock.withLock { notifications } }
}
