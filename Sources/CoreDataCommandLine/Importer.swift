import Foundation
import OpenCoreData

/// Inserts records read one at a time, saving every `batchSize` objects and resetting the context, so that memory
/// holds one batch, not the file; the caller wraps the whole run in one store transaction, so that a failure anywhere
/// imports nothing.
///
/// Relationships refer to records by `"@id"`, from either side or both: a to-many relationship holds the records it
/// lists and those that name it through the inverse. A reference to a record already inserted is set at once. A reference to
/// a record later in the file waits, by the `"@id"` it names, and is set when that record is inserted (from either
/// side, so that inverses fill as Core Data fills them). A record that cannot be saved before its references are
/// set — a required relationship that refers forward, or one it does not give (a later record may fill it through the
/// inverse) — waits whole until the end of the file, when the waiting records are inserted together.
///
/// For example:
/// ```swift
/// let importer = Importer(context: context, batchSize: 5_000)
/// try importer.add(["@id": "a", "name": "Ann"], number: 1, of: try importer.entity(named: "Person"))
/// try importer.finish()
/// ```
final class Importer {
    let context: NSManagedObjectContext
    let batchSize: Int
    /// How many objects of each entity were read.
    private(set) var counts: [String: Int] = [:]

    private struct Record {
        let label: String
        let entity: NSEntityDescription
        let id: String?
        let fields: [String: Any]
        /// The `"@id"`s each relationship key names (keys whose value is not null), read once.
        let references: [String: [String]]
    }

    /// A relationship of an inserted object that names a record not inserted yet.
    private struct Waiting {
        var source: NSManagedObjectID
        let key: String
        let label: String
    }

    /// The object of each `"@id"` inserted so far: temporary IDs in the unsaved batch, permanent ones after.
    private var objectIDs: [String: NSManagedObjectID] = [:]
    /// The `"@id"`s of records that wait until the end.
    private var heldBackIDs: Set<String> = []
    private var heldBack: [Record] = []
    /// References to records not inserted yet, by the `"@id"` they name.
    private var waiting: [String: [Waiting]] = [:]
    /// The objects inserted since the last save, and the waiting references they made.
    private var batch: [(record: Record, object: NSManagedObject)] = []
    private var batchWaiting: [(id: String, index: Int, source: NSManagedObject)] = []
    /// Object-ID URIs → record labels for the unsaved batch, so that a save error names records, not URIs.
    private var labels: [String: String] = [:]

    init(context: NSManagedObjectContext, batchSize: Int) {
        self.context = context
        self.batchSize = max(1, batchSize)
    }

    /// The entity records of `name` are for.
    ///
    /// - Throws: `CoreDataError(.unknownEntity)`, or `ToolFailure` for an abstract entity.
    func entity(named name: String) throws -> NSEntityDescription {
        let entity = try context.entity(named: name)
        if entity.isAbstract {
            throw ToolFailure("Entity '\(name)' is abstract; import objects of one of its subentities.")
        }
        return entity
    }

    /// Imports the `number`th record (from 1) of `entity`'s array.
    ///
    /// - Throws: `ToolFailure` naming the record and key, or the save's error for a batch.
    func add(_ item: Any, number: Int, of entity: NSEntityDescription) throws {
        var label = "record #\(number) of '\(entity.name)'"
        guard let fields = item as? [String: Any] else {
            throw ToolFailure("\(label.capitalizedFirst) is \(JSONValues.describe(item)), not a JSON object.")
        }
        var id: String?
        if let raw = fields["@id"] {
            guard let raw = raw as? String else { throw ToolFailure("\(label.capitalizedFirst): \"@id\" must be a string.") }
            label += " (@id \"\(raw)\")"
            guard objectIDs[raw] == nil, !heldBackIDs.contains(raw) else {
                throw ToolFailure("\(label.capitalizedFirst): \"@id\" \"\(raw)\" is used twice in the file.")
            }
            id = raw
        }
        counts[entity.name, default: 0] += 1
        var references: [String: [String]] = [:]
        for (key, relationship) in entity.relationshipsByName {
            guard let value = fields[key], !(value is NSNull) else { continue }
            references[key] = try self.references(value, key: key, isToMany: relationship.isToMany, label: label)
        }
        let record = Record(label: label, entity: entity, id: id, fields: fields, references: references)
        let forward = forwardKeys(of: record)
        if mustWait(record, forward: forward) {
            if let id { heldBackIDs.insert(id) }
            heldBack.append(record)
            return
        }
        let object = try insert(record)
        try setRelationships(of: record, object: object, skipping: forward)
        batch.append((record, object))
        try settleWaiting(for: record, object: object)
        if batch.count >= batchSize { try saveBatch() }
    }

    /// Inserts the records that waited, sets what still waits for them, and saves.
    ///
    /// - Throws: `ToolFailure` for a reference to an `"@id"` that no record has, or the save's error.
    func finish() throws {
        try saveBatch()
        let records = heldBack
        heldBack = []
        // Inserted together, so that they may refer to one another; then their relationships.
        let objects = try records.map { try insert($0) }
        for (record, object) in zip(records, objects) {
            try setRelationships(of: record, object: object, skipping: forwardKeys(of: record))
            batch.append((record, object))
        }
        for (record, object) in zip(records, objects) { try settleWaiting(for: record, object: object) }
        // Every record is inserted: what still waits names an "@id" that no record has.
        if let (id, references) = waiting.min(by: { $0.key < $1.key }), let reference = references.first {
            throw dangling(id, key: reference.key, label: reference.label)
        }
        try saveBatch()
    }

    // MARK: Records

    private func dangling(_ id: String, key: String, label: String) -> ToolFailure {
        ToolFailure("\(label.capitalizedFirst): relationship '\(key)' refers to \"@id\" \"\(id)\", which no record in the file has.")
    }

    private func insert(_ record: Record) throws -> NSManagedObject {
        let object = try NSEntityDescription.checkedInsertNewObject(forEntityName: record.entity.name, into: context)
        if let id = record.id { objectIDs[id] = object.objectID }
        labels[object.objectID.uriRepresentation().absoluteString] = record.label
        try setAttributes(of: record, object: object)
        return object
    }

    /// Whether a record must wait for the end: a required relationship refers forward or is not given.
    private func mustWait(_ record: Record, forward: Set<String>) -> Bool {
        record.entity.relationshipsByName.values.contains { relationship in
            guard !relationship.isOptional || relationship.minCount > 0 else { return false }
            if forward.contains(relationship.name) { return true }
            let value = record.fields[relationship.name]
            guard value == nil || value is NSNull else { return false }
            // Not given: a record before it that refers to it may fill it through the inverse.
            let fills = record.id.flatMap { waiting[$0] } ?? []
            return !fills.contains { $0.source.entity.relationshipsByName[$0.key]?.inverseRelationship?.name == relationship.name }
        }
    }

    /// The relationship keys of a record that name a record not inserted yet.
    private func forwardKeys(of record: Record) -> Set<String> {
        Set(record.references.filter { $0.value.contains { objectIDs[$0] == nil && $0 != record.id } }.keys)
    }

    /// The `"@id"` strings a relationship's value names.
    private func references(_ value: Any, key: String, isToMany: Bool, label: String) throws -> [String] {
        let items: [Any]
        if isToMany {
            guard let array = value as? [Any] else {
                throw ToolFailure("\(label.capitalizedFirst): relationship '\(key)' is to-many; give an array of \"@id\" strings.")
            }
            items = array
        } else {
            items = [value]
        }
        return try items.map { item in
            guard let id = item as? String else {
                throw ToolFailure(
                    "\(label.capitalizedFirst): relationship '\(key)' takes \"@id\" strings, got \(JSONValues.describe(item)).")
            }
            return id
        }
    }

    private func setAttributes(of record: Record, object: NSManagedObject) throws {
        let entity = record.entity
        for key in record.fields.keys.sorted() where key != "@id" {
            guard let property = entity.propertiesByName[key] else {
                throw ToolFailure(
                    "\(record.label.capitalizedFirst): unknown key '\(key)' (entity '\(entity.name)' has: \(entity.propertiesByName.keys.sorted().joined(separator: ", ")))."
                )
            }
            guard let attribute = property as? NSAttributeDescription else { continue }
            do {
                try object.setCheckedValue(try JSONValues.attributeValue(record.fields[key]!, for: attribute), forKey: key)
            } catch let failure as ToolFailure {
                throw ToolFailure("\(record.label.capitalizedFirst): key '\(key)' \(failure.message).")
            } catch let error as CoreDataError {
                throw ToolFailure("\(record.label.capitalizedFirst): key '\(key)': \(error.message)")
            }
        }
    }

    /// Sets the relationships whose references are all inserted; a key in `skipping` waits for the record it names.
    private func setRelationships(of record: Record, object: NSManagedObject, skipping forward: Set<String>) throws {
        for key in record.fields.keys.sorted() {
            guard let relationship = record.entity.relationshipsByName[key], let value = record.fields[key] else { continue }
            let newValue: Any?
            if value is NSNull {
                newValue = relationship.isToMany ? [NSManagedObject]() : nil
            } else {
                let references = record.references[key] ?? []
                if forward.contains(key) {
                    // What is inserted now is set now; the rest as each record it names is inserted.
                    for id in references where objectIDs[id] == nil {
                        waiting[id, default: []].append(Waiting(source: object.objectID, key: key, label: record.label))
                        batchWaiting.append((id, waiting[id]!.count - 1, object))
                    }
                    for id in references where objectIDs[id] != nil {
                        try link(object, key: key, to: context.object(with: objectIDs[id]!), label: record.label)
                    }
                    continue
                }
                let objects = try references.map { id in
                    guard let objectID = objectIDs[id] else { throw dangling(id, key: key, label: record.label) }
                    return context.object(with: objectID)
                }
                if relationship.isToMany {
                    // Members other records of the file added through the inverse stay: a file lists a relationship
                    // from either side, or from both.
                    let added = try object.checkedValue(forKey: key) as? Set<NSManagedObject> ?? []
                    newValue = added.isEmpty ? objects : Array(added.union(objects))
                } else {
                    if let target = objects.first { try setToOne(object, relationship, to: target, label: record.label) }
                    continue
                }
            }
            do {
                try object.setCheckedValue(newValue, forKey: key)
            } catch let error as CoreDataError {
                throw ToolFailure("\(record.label.capitalizedFirst): relationship '\(key)': \(error.message)")
            }
        }
    }

    /// Sets the references that waited for `record`, now inserted as `object`.
    private func settleWaiting(for record: Record, object: NSManagedObject) throws {
        guard let id = record.id, let references = waiting.removeValue(forKey: id) else { return }
        for reference in references {
            try link(context.object(with: reference.source), key: reference.key, to: object, label: reference.label)
        }
    }

    /// Adds `target` to `source`'s relationship `key`: sets a to-one; adds to a to-many (through a to-one inverse when
    /// there is one, which costs nothing however many the to-many holds).
    private func link(_ source: NSManagedObject, key: String, to target: NSManagedObject, label: String) throws {
        guard let relationship = source.entity.relationshipsByName[key] else { return }
        if !relationship.isToMany { return try setToOne(source, relationship, to: target, label: label) }
        if let inverse = relationship.inverseRelationship, !inverse.isToMany {
            return try setToOne(target, inverse, to: source, label: label)
        }
        do {
            let members = try source.checkedValue(forKey: key) as? Set<NSManagedObject> ?? []
            try source.setCheckedValue(Array(members.union([target])), forKey: key)
        } catch let error as CoreDataError {
            throw ToolFailure("\(label.capitalizedFirst): relationship '\(key)': \(error.message)")
        }
    }

    /// Sets a to-one relationship of `object`.
    ///
    /// When the destination was saved in an earlier batch and the inverse is to-many, the set is primitive: the
    /// store keeps the relationship in `object`'s row alone, and keeping the destination's to-many in step would load
    /// all of its members, for every new member, which made importing many objects that share one destination
    /// quadratic in time and unbounded in memory.
    private func setToOne(_ object: NSManagedObject, _ relationship: NSRelationshipDescription, to target: NSManagedObject, label: String)
        throws
    {
        do {
            if relationship.inverseRelationship?.isToMany == true, !target.objectID.isTemporaryID {
                try object.setCheckedPrimitiveValue(target, forKey: relationship.name)
            } else {
                try object.setCheckedValue(target, forKey: relationship.name)
            }
        } catch let error as CoreDataError {
            throw ToolFailure("\(label.capitalizedFirst): relationship '\(relationship.name)': \(error.message)")
        }
    }

    // MARK: Saving

    /// Saves the batch, gives its waiting references their permanent source IDs, and empties the context.
    private func saveBatch() throws {
        guard context.hasChanges else { return }
        do {
            try context.save()
        } catch let error as CoreDataError {
            throw ToolFailure("Nothing was imported: " + relabel(error.message))
        }
        for (record, object) in batch { if let id = record.id { objectIDs[id] = object.objectID } }
        for (id, index, source) in batchWaiting where waiting[id] != nil {
            // One that still waits (a settled one is gone) names its source by the saved ID.
            waiting[id]![index].source = source.objectID
        }
        batch = []
        batchWaiting = []
        labels = [:]
        context.reset()
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
