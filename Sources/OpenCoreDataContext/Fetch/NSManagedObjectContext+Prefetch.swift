import OpenCoreDataModel
import OpenCoreDataStore

// `relationshipKeyPathsForPrefetching`: the rows a fetch's objects reach through relationships, read a statement per
// relationship (and per 500 keys) with the fetch, rather than one fault per object when each is first read.

/// The rows and to-many destinations prefetching read, kept by the context for the faults that need them later.
///
/// The objects reached are held by nobody (a registry does not keep its stored objects alive), so a department read with its employees
/// is a new fault when an employee's `department` is next read. That fault takes its row from here instead of the
/// store (Core Data keeps such rows in its row cache). They stay while nothing may have changed them (an object made
/// again for each source that reads it takes the same row) and are dropped when rows read earlier may be out of date
/// (a change delivered — a save, a catch-up, an edit —, a merge of a save to the same store), or once older than the
/// context's `stalenessInterval`.
struct PrefetchedRows {
    /// When the oldest of them was read.
    var readAt = ContinuousClock.now
    var rows: [NSManagedObjectID: RowSnapshot] = [:]
    var toMany: [NSManagedObjectID: [Int: [NSManagedObjectID]]] = [:]

    var isEmpty: Bool { rows.isEmpty && toMany.isEmpty }
}

extension NSManagedObjectContext {
    /// The row prefetching read for `objectID`, if still current.
    func prefetchedRow(for objectID: NSManagedObjectID) -> RowSnapshot? {
        guard !prefetched.rows.isEmpty, currentPrefetched() else { return nil }
        return prefetched.rows[objectID]
    }

    /// The destinations prefetching read for the to-many relationship at `index` of `objectID`, if still current.
    func prefetchedToMany(for objectID: NSManagedObjectID, at index: Int) -> [NSManagedObjectID]? {
        guard !prefetched.toMany.isEmpty, currentPrefetched() else { return nil }
        return prefetched.toMany[objectID]?[index]
    }

    /// Whether what prefetching read is still current (no older than `stalenessInterval`); drops it when not.
    private func currentPrefetched() -> Bool {
        if stalenessInterval < 0 || prefetched.readAt.duration(to: .now) <= .seconds(stalenessInterval) { return true }
        dropPrefetched()
        return false
    }

    /// Forgets what prefetching read (rows read earlier may be out of date).
    func dropPrefetched() {
        if !prefetched.isEmpty { prefetched = PrefetchedRows() }
    }

    /// Loads, for `objects`, the rows each key path's relationships reach, and each to-many relationship's destinations.
    ///
    /// Key paths such as `"department"`, `"department.head"`, `"employees"`. Runs under the context's lock.
    ///
    /// - Throws: `CoreDataError(.invalidFetchRequest)` when a key path names something that is not a relationship of
    ///   the objects it reaches; the store's errors.
    func prefetch(_ keyPaths: [String], of objects: [NSManagedObject]) throws {
        guard !objects.isEmpty, let store else { return }
        if prefetched.isEmpty || !currentPrefetched() { prefetched.readAt = .now }
        for keyPath in keyPaths {
            var level = objects
            for name in keyPath.split(separator: ".").map(String.init) {
                try loadRows(of: level, from: store)
                level = try destinations(of: level, through: name, keyPath: keyPath, store: store)
                if level.isEmpty { break }
            }
            try loadRows(of: level, from: store)
        }
    }

    /// The objects `sources`' relationship `name` reaches (each once, in the order first reached); a to-many's
    /// destinations are read for all the sources at once.
    private func destinations(
        of sources: [NSManagedObject], through name: String, keyPath: String, store: any StoreEngine
    ) throws -> [NSManagedObject] {
        // The sources may be of several entities (subentities): grouped by the relationship they have under `name`.
        var groups: [(relationship: NSRelationshipDescription, index: Int, sources: [NSManagedObject])] = []
        var groupOf: [ObjectIdentifier: Int] = [:]
        for source in sources {
            guard let index = source.entity.propertyIndex(named: name),
                let relationship = source.entity.allProperties[index] as? NSRelationshipDescription
            else {
                throw CoreDataError(
                    .invalidFetchRequest,
                    "relationshipKeyPathsForPrefetching holds '\(keyPath)', but '\(name)' is not a relationship of \(source.entity.name).",
                    entityName: source.entity.name, key: name)
            }
            if let group = groupOf[ObjectIdentifier(relationship)] {
                groups[group].sources.append(source)
            } else {
                groupOf[ObjectIdentifier(relationship)] = groups.count
                groups.append((relationship, index, [source]))
            }
        }
        var reached: [NSManagedObject] = []
        var seen: Set<ObjectIdentifier> = []
        func reach(_ id: NSManagedObjectID) {
            let destination = object(with: id)
            if seen.insert(ObjectIdentifier(destination)).inserted { reached.append(destination) }
        }
        for (relationship, index, sources) in groups {
            if relationship.isToMany {
                let unread = sources.filter { $0.state == .stored && $0.toManyCommitted[index] == nil }
                if !unread.isEmpty, !relationship.isTransient {
                    let found = try store.relatedObjectIDs(ofEach: unread.map(\.objectID), relationship: relationship)
                    for source in unread {
                        let ids = found[source.objectID] ?? []
                        source.toManyCommitted[index] = ids
                        prefetched.toMany[source.objectID, default: [:]][index] = ids
                    }
                }
                for source in sources { for id in source.toManyCommitted[index] ?? [] { reach(id) } }
            } else {
                for source in sources {
                    guard let snapshot = source.snapshot, index < snapshot.values.count, case .toOne(let id?) = snapshot.values[index]
                    else { continue }
                    reach(id)
                }
            }
        }
        return reached
    }

    /// Reads the rows of the stored objects among `objects` that are faults, in as few statements as the store can.
    private func loadRows(of objects: [NSManagedObject], from store: any StoreEngine) throws {
        let faults = objects.filter { $0.snapshot == nil && $0.state == .stored && !$0.objectID.isTemporaryID }
        guard !faults.isEmpty else { return }
        let rows = try store.rows(for: faults.map(\.objectID))
        for object in faults {
            guard let row = rows[object.objectID] else { continue }
            fulfill(object, with: row)
            prefetched.rows[object.objectID] = row
        }
    }
}
