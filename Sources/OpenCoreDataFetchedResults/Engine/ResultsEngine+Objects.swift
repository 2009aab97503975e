import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

// Rows, their keys and their objects: what a result is, and the object the delegate and `object(at:)` get.
extension ResultsEngine {
    // MARK: Rows and objects

    /// The number of an entity in the entity table, added on first use.
    func number(of entity: NSEntityDescription) -> Int32 {
        if let n = entityNumbers[ObjectIdentifier(entity)] { return n }
        let n = Int32(entityTable.count)
        entityTable.append(entity)
        entityStores.append(storeIdentifier)
        entityNumbers[ObjectIdentifier(entity)] = n
        return n
    }

    /// The number of an entity's objects in a store other than `storeIdentifier`, added on first use.
    func number(of entity: NSEntityDescription, inStore store: String) -> Int32 {
        if store == storeIdentifier { return number(of: entity) }
        let key = EntityInStore(entity: ObjectIdentifier(entity), store: store)
        if let n = otherStoreNumbers[key] { return n }
        let n = Int32(entityTable.count)
        entityTable.append(entity)
        entityStores.append(store)
        otherStoreNumbers[key] = n
        return n
    }

    /// The key of an object's row (whether or not it is a result).
    func key(of object: NSManagedObject) -> RowKey {
        let id = object.objectID
        return id.isTemporaryID ? .unsaved(object) : key(of: id)
    }

    /// The key of a stored object's row.
    func key(of id: NSManagedObjectID) -> RowKey {
        .stored(entity: number(of: id.entity, inStore: id.storeIdentifier ?? storeIdentifier), primaryKey: id.primaryKey)
    }

    func objectID(for key: RowKey) -> NSManagedObjectID {
        switch key {
        case .stored(let entity, let primaryKey):
            return NSManagedObjectID(entity: entityTable[Int(entity)], storeIdentifier: entityStores[Int(entity)], primaryKey: primaryKey)
        case .unsaved(let object): return object.objectID
        }
    }

    /// The object IDs of the results in `range`.
    func objectIDs(in range: Range<Int>) -> [NSManagedObjectID] {
        rows.elements(in: range).map { objectID(for: $0.key) }
    }

    /// The object of the result at `index`: the one its row keeps, else the context's, else a fault made with the
    /// rest of its page (touching any of them loads the page in one SQL statement).
    ///
    /// The row keeps it from then on.
    func object(at index: Int) -> NSManagedObject {
        let row = rows[index]
        lastHandedOut = (row.key, index)
        if let object = row.object { return object }
        let start = index - index % pageSize
        return objects(in: start..<Swift.min(start + pageSize, rows.count))[index - start]
    }

    /// The objects of the results in `range`; rows without one get the context's object or a fault, made a page at a
    /// time so that each page loads in one SQL statement, and keep it.
    func objects(in range: Range<Int>) -> [NSManagedObject] {
        var result = rows.elements(in: range).map(\.object)
        var missing: [Int] = []
        for (offset, object) in result.enumerated() where object == nil { missing.append(offset) }
        for start in stride(from: 0, to: missing.count, by: pageSize) {
            let page = missing[start..<Swift.min(start + pageSize, missing.count)]
            let made = context._batchFaults(for: page.map { objectID(for: rows[range.lowerBound + $0].key) })
            for (offset, object) in zip(page, made) {
                rows[range.lowerBound + offset].object = object
                result[offset] = object
            }
        }
        return result.map { $0! }
    }

    /// The object for a row key: the context's, or a fault.
    func object(for key: RowKey) -> NSManagedObject {
        if case .unsaved(let object) = key { return object }
        return context.object(with: objectID(for: key))
    }
}

/// An entity's objects in one store, for row keys of an entity that several stores hold.
struct EntityInStore: Hashable {
    let entity: ObjectIdentifier
    let store: String
}
