import OpenCoreDataModel
@_spi(Engine) import OpenCoreDataStore

// `propertiesToFetch` with managed-object results: the fetch reads the named attributes only, in the statement that
// finds the rows, and its objects are faults that answer those attributes from what it read. Reading any other
// property (or changing any) reads the whole row, as firing a fault does.

/// The values a fetch with `propertiesToFetch` read, one row per object it made or found as a fault.
///
/// Shared by the fetch's objects (`FaultSource.partial`), so a fetch of n objects keeps one array of its values, not
/// n: the values stay while any of its objects is a fault pointing here.
final class PartialRows {
    /// The attribute names read, in the order of each row's values.
    let keys: [String]
    private var values: [AttributeValue] = []
    /// For each concrete entity met: which of `keys` each property index is (-1: not read).
    private var slotsByEntity: [ObjectIdentifier: [Int]] = [:]
    /// The last entity's slots, so that reading the rows of a fetch of one entity does no dictionary lookup each time.
    private var lastSlots: (entity: ObjectIdentifier, slots: [Int])?

    init(keys: [String]) {
        self.keys = keys
    }

    /// How many rows it holds.
    var count: Int { keys.isEmpty ? 0 : values.count / keys.count }

    /// Keeps a row's values; returns its number.
    func append(_ row: ResultKeyValues) -> Int {
        let number = count
        for i in 0..<keys.count { values.append(row[i]) }
        return number
    }

    /// Row `row`'s value of the property at `index` of `entity`, or nil when the fetch did not read it.
    func value(at index: Int, of entity: NSEntityDescription, row: Int) -> AttributeValue? {
        let slots = slots(for: entity)
        guard index < slots.count, slots[index] >= 0 else { return nil }
        return values[row * keys.count + slots[index]]
    }

    private func slots(for entity: NSEntityDescription) -> [Int] {
        let id = ObjectIdentifier(entity)
        if let lastSlots, lastSlots.entity == id { return lastSlots.slots }
        var slots = slotsByEntity[id] ?? []
        if slots.isEmpty {
            slots = Array(repeating: -1, count: entity.allProperties.count)
            for (slot, key) in keys.enumerated() {
                if let index = entity.propertyIndex(named: key) { slots[index] = slot }
            }
            slotsByEntity[id] = slots
        }
        lastSlots = (id, slots)
        return slots
    }

    /// Whether a fetch can read `property` on its own: an attribute kept in one column of the row as the row's
    /// decoder reads it (not transient, not a composite, not binary data Core Data may keep in a file of its own).
    static func reads(_ property: NSPropertyDescription) -> Bool {
        guard let attribute = property as? NSAttributeDescription, !attribute.isTransient else { return false }
        switch attribute.attributeType {
        case .compositeAttributeType, .undefinedAttributeType, .objectIDAttributeType: return false
        case .binaryDataAttributeType: return !attribute.allowsExternalBinaryDataStorage
        default: return true
        }
    }
}

extension NSFetchRequest {
    /// The attributes a managed-object fetch reads with its rows when `propertiesToFetch` names some (nil: whole rows).
    ///
    /// Relationships named there load with the row when first read.
    ///
    /// - Throws: `CoreDataError(.invalidFetchRequest)` for a name that is not a property of the entity, or an item
    ///   that is neither a name nor a property description.
    func partialKeys(for entity: NSEntityDescription) throws -> [String]? {
        guard let properties = propertiesToFetch, !properties.isEmpty else { return nil }
        var keys: [String] = []
        for name in try propertyKeyPaths(for: entity) {
            guard let property = entity.propertiesByName[name] else {
                throw CoreDataError(
                    .invalidFetchRequest,
                    "propertiesToFetch holds '\(name)', which is not a property of \(entity.name); a fetch of objects reads properties of its entity.",
                    entityName: entity.name, key: name)
            }
            if PartialRows.reads(property), !keys.contains(name) { keys.append(name) }
        }
        return keys
    }
}

extension NSManagedObjectContext {
    /// The objects of a fetch with `propertiesToFetch` (`keys` as `NSFetchRequest.partialKeys(for:)` gives them), in
    /// the request's order, made or found as faults holding the values read; nil when the fetch must read whole rows
    /// (a child context, whose parent's changes count; several stores).
    ///
    /// Runs under the context's lock, with pending changes already known not to matter to the request.
    func fetchPartially(_ storeRequest: StoreFetchRequest, keys: [String]) throws -> [NSManagedObject]? {
        guard _parent == nil, let store, let model else { return nil }
        if let router = store as? StoreRouter, router.fetchTargets(storeRequest).count > 1 { return nil }
        let rows = PartialRows(keys: keys)
        var objects: [NSManagedObject] = []
        var last: (number: Int, entity: NSEntityDescription, store: String)?
        try store.forEachResultKey(storeRequest, values: keys) { entityID, primaryKey, values in
            if last?.number != entityID {
                guard let entity = model.entity(withID: entityID) else {
                    throw CoreDataError(
                        .persistentStoreOperation, "The store returned a row of entity number \(entityID), which the model does not have.")
                }
                last = (entityID, entity, store.storeIdentifier(for: entity))
            }
            guard let (_, entity, storeIdentifier) = last else { return }
            let object = object(with: NSManagedObjectID(entity: entity, storeIdentifier: storeIdentifier, primaryKey: primaryKey))
            // A fault of a batched fetch keeps its place in its batch; one read before takes the newer values.
            if object.state == .stored, object.snapshot == nil, !object.isBatchFault {
                object.faultSource = .partial(rows, row: rows.append(values))
            }
            objects.append(object)
        }
        return objects
    }
}

extension NSManagedObject {
    /// Whether it is a fault whose row loads with its batch.
    var isBatchFault: Bool {
        if case .batch? = faultSource { return true }
        return false
    }

    /// The value of the attribute at `index` a fetch with `propertiesToFetch` read for this fault, if it read it and
    /// nothing has changed it here since.
    func partiallyFetchedValue(at index: Int) -> AttributeValue? {
        guard snapshot == nil, case .partial(let rows, let row)? = faultSource, state == .stored || state == .deleted,
            changes[index] == nil
        else { return nil }
        return rows.value(at: index, of: entity, row: row)
    }
}
