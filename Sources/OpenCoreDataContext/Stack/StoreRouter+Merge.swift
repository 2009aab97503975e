import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
@_spi(Engine) import OpenCoreDataStore

// A fetch that reads several stores, merged; a save split into one request per store.
extension StoreRouter {
    /// Runs `request` on each store of `targets` and merges the results: sorted by the request's sort descriptors (the
    /// comparison the stores' SQL uses), then the order of the stores, then each store's order; the offset and limit
    /// then apply to the whole.
    func mergedFetch(_ request: StoreFetchRequest, from targets: [Int]) throws -> StoreFetchResult {
        // Each store hands over what may fall in the window: its first offset + limit results.
        var each = request
        each.fetchOffset = 0
        each.fetchLimit = request.fetchLimit > 0 ? request.fetchLimit + request.fetchOffset : 0
        let sorts = request.sortDescriptors
        switch request.resultKind {
        case .count:
            var total = 0
            for position in targets {
                if case .count(let n) = try stores[position].execute(each) { total += n }
            }
            let afterOffset = max(0, total - request.fetchOffset)
            return .count(request.fetchLimit > 0 ? min(afterOffset, request.fetchLimit) : afterOffset)
        case .rows, .objectIDs:
            var keyed: [(id: NSManagedObjectID, store: Int, values: [AttributeValue])] = []
            for position in targets {
                let storeID = stores[position].identifier
                try stores[position].forEachResultKey(each, values: sorts.map(\.key)) { entityID, primaryKey, values in
                    guard let entity = model.entity(withID: entityID) else { return }
                    let id = NSManagedObjectID(entity: entity, storeIdentifier: storeID, primaryKey: primaryKey)
                    keyed.append((id, position, (0..<values.count).map { values[$0] }))
                }
            }
            keyed = request.window(StoreFetchRequest.ordered(keyed, by: sorts) { $0.values })
            if case .objectIDs = request.resultKind { return .objectIDs(keyed.map(\.id)) }
            var rows: [NSManagedObjectID: RowSnapshot] = [:]
            for (position, entries) in Dictionary(grouping: keyed, by: \.store) {
                rows.merge(try stores[position].rows(for: entries.map(\.id))) { first, _ in first }
            }
            return .rows(keyed.compactMap { rows[$0.id] })
        case .grouped:
            // (Groups and aggregates of rows in several stores would have to be combined here, column by column.)
            throw CoreDataError(
                .invalidFetchRequest,
                "A fetch of \(request.entity.name) with fetched expressions or grouping reads several stores; name one in affectedStores.",
                entityName: request.entity.name)
        case .dictionaries(let paths):
            let extra = sorts.map(\.key).filter { !paths.contains($0) }.uniqued()
            each.resultKind = .dictionaries(paths + extra)
            var all: [[String: AttributeValue]] = []
            for position in targets {
                if case .dictionaries(let found) = try stores[position].execute(each) { all += found }
            }
            if request.returnsDistinctResults { return .dictionaries(request.orderedDistinct(all, droppingKeys: extra)) }
            all = StoreFetchRequest.ordered(all, by: sorts) { row in sorts.map { row[$0.key] ?? .null } }
            if !extra.isEmpty { all = all.map { $0.filter { !extra.contains($0.key) } } }
            return .dictionaries(request.window(all))
        }
    }
}

/// A save split by store: each change goes to the store its object belongs to (a new object's: `position(forNew:)`).
struct SplitSave {
    /// The request for each store (by position).
    private(set) var parts: [Int: StoreSaveRequest] = [:]
    /// Where each insert of the original request went: its store and its index among that store's inserts.
    private(set) var insertPlaces: [(store: Int, index: Int)] = []
    private var newPositions: [NSManagedObjectID: Int] = [:]
    private let router: StoreRouter
    private let blank: StoreSaveRequest

    init(_ request: StoreSaveRequest, router: StoreRouter) throws {
        self.router = router
        var blank = StoreSaveRequest()
        blank.conflictPolicy = request.conflictPolicy
        blank.historyAuthor = request.historyAuthor
        self.blank = blank
        for insert in request.inserts { newPositions[insert.objectID] = try router.position(forNew: insert.objectID) }
        for insert in request.inserts {
            let position = newPositions[insert.objectID]!
            for (index, value) in insert.values.enumerated() { try check(value, of: insert.objectID, property: index, in: position) }
            insertPlaces.append((position, parts[position]?.inserts.count ?? 0))
            parts[position, default: blank].inserts.append(insert)
        }
        for update in request.updates {
            let position = try place(update.objectID)
            for (index, value) in update.changes { try check(value, of: update.objectID, property: index, in: position) }
            parts[position, default: blank].updates.append(update)
        }
        for delete in request.deletes { parts[try place(delete.objectID), default: blank].deletes.append(delete) }
        for link in request.linkChanges {
            let position = try place(link.source)
            try check(link.destination, from: link.source, relationship: link.relationship.name, in: position)
            parts[position, default: blank].linkChanges.append(link)
        }
        for order in request.orderChanges {
            let position = try place(order.source)
            for destination in order.destinations {
                try check(destination, from: order.source, relationship: order.relationship.name, in: position)
            }
            parts[position, default: blank].orderChanges.append(order)
        }
    }

    private func place(_ objectID: NSManagedObjectID) throws -> Int {
        if let position = newPositions[objectID] { return position }
        return try router.position(forNew: objectID)
    }

    /// Refuses a to-one value leading into another store.
    private func check(_ value: SnapshotValue, of objectID: NSManagedObjectID, property index: Int, in position: Int) throws {
        guard case .toOne(let destination?) = value else { return }
        try check(destination, from: objectID, relationship: objectID.entity.allProperties[index].name, in: position)
    }

    private func check(_ destination: NSManagedObjectID, from source: NSManagedObjectID, relationship: String, in position: Int) throws {
        let target = try place(destination)
        guard target != position else { return }
        let stores = router.stores
        throw CoreDataError(
            .managedObjectExternalRelationship,
            "The relationship '\(relationship)' of \(source.entity.name) \(source) leads to \(destination.entity.name) \(destination), which belongs to another store (\(stores[target].identifier), configuration '\(stores[target].configurationName)'; this object's is \(stores[position].identifier), configuration '\(stores[position].configurationName)'). Relationships cannot cross stores; use a fetched property to refer across them.",
            entityName: source.entity.name, key: relationship)
    }
}
