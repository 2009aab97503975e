import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

// Where a row is: binary search on sort values, and the key lookup table (built in the background after a fetch).
extension ResultsEngine {
    // MARK: Positions

    /// Whether row `a` (placement `pa`, key `ka`) sorts before row `b` under `sorts`.
    ///
    /// The descriptors are passed in so
    /// that loops comparing many times read `sorts` (a property of this class, checked for exclusive access on each
    /// read) once.
    @inline(__always)
    static func precedes(_ pa: Placement, _ ka: RowKey, _ pb: Placement, _ kb: RowKey, _ sorts: [FetchSortDescriptor]) -> Bool {
        let c = pa.values.order(pb.values, sorts)
        return c != 0 ? c < 0 : ka.storeOrder < kb.storeOrder
    }

    /// Whether a row placed at `pa` with key `ka` sorts before the row at `b` under `sorts`, reading `b` where it is.
    @inline(__always)
    static func precedes(_ pa: Placement, _ ka: RowKey, _ b: UnsafePointer<ResultRow>, _ sorts: [FetchSortDescriptor]) -> Bool {
        let c = pa.values.order(b.pointee.placement.values, sorts)
        return c != 0 ? c < 0 : ka.storeOrder < b.pointee.key.storeOrder
    }

    /// Whether the row at `a` sorts before the row at `b` under `sorts`, reading both rows where they are (a sort of
    /// rows by position would otherwise copy both rows for every comparison).
    @inline(never)
    static func precedes(_ a: UnsafePointer<ResultRow>, _ b: UnsafePointer<ResultRow>, _ sorts: [FetchSortDescriptor]) -> Bool {
        let c = a.pointee.placement.values.order(b.pointee.placement.values, sorts)
        return c != 0 ? c < 0 : a.pointee.key.storeOrder < b.pointee.key.storeOrder
    }

    /// The first index whose row does not precede (`placement`, `key`).
    func insertionIndex(for placement: Placement, _ key: RowKey) -> Int {
        let sorts = self.sorts
        return rows.partitioningIndex { row in !Self.precedes(row.placement, row.key, placement, key, sorts) }
    }

    /// Where the row of `key` is, given where it sits.
    func position(of key: RowKey, at placement: Placement) -> Int? {
        let i = insertionIndex(for: placement, key)
        if i < rows.count, rows[i].key == key { return i }
        return rows.firstIndex { $0.key == key }  // only if the store order of equal keys changed under us
    }

    /// The placement of a result's row by key, building the lookup table if this is the first time one is needed.
    func placement(forKey key: RowKey) -> Placement? {
        if let lookup { return lookup[key] }
        // A table being built for these very rows is waited for rather than built a second time.
        if let build = pendingBuild, rows.isUnchangedCopy(of: build.rows) {
            build.done.wait()
            pendingBuild = nil
            lookup = build.table
            return build.table[key]
        }
        diagnostics.lookupBuilds += 1
        let table = Self.lookupTable(rows)
        lookup = table
        return table[key]
    }

    static func lookupTable(_ rows: ChunkedArray<ResultRow>) -> [RowKey: Placement] {
        var table: [RowKey: Placement] = [:]
        table.reserveCapacity(rows.count)
        for row in rows { table[row.key] = row.placement }
        return table
    }

    /// Whether the lookup table is built (for tests).
    var hasLookup: Bool { lookup != nil }

    /// Builds the lookup table off the context's queue from a copy of the rows (a copy of a chunked array shares its
    /// storage until either side writes), and installs it on the context's queue if no change came in the meantime;
    /// otherwise the first change has built it already.
    ///
    /// A tracking controller over many rows thus has the table before
    /// its first change, without the fetch or the first change paying for it.
    func buildLookupInBackground() {
        let build = LookupBuild(rows: rows, version: rowsVersion)
        pendingBuild = build
        diagnostics.lookupBuilds += 1
        let engine = WeakEngine(self)
        let context = self.context
        DispatchQueue.global(qos: .utility).async {
            build.table = Self.lookupTable(build.rows)
            build.done.signal()
            context.performHousekeeping {
                defer { (build.rows, build.table) = (ChunkedArray(), [:]) }
                guard let engine = engine.engine else { return }
                if engine.pendingBuild === build { engine.pendingBuild = nil }
                guard engine.lookup == nil, engine.rowsVersion == build.version else { return }
                engine.lookup = build.table
            }
        }
    }

    /// The index of `key`'s row as `change` begins to apply.
    ///
    /// Until a change has needed the lookup table, the
    /// object's placement before the change (its values now, with the originals of the attributes the change edited)
    /// is tried first: O(log n) and no table, whenever the row found there is the key's; and an unsaved object that
    /// has no row needs no search. Otherwise the table answers (built on first need).
    func indexBefore(_ key: RowKey, object: NSManagedObject, _ change: ContextChange) -> Int? {
        guard lookup == nil else { return index(ofKey: key) }
        // A row a merged save deleted can no longer be read (its object is invalid, or a fault of a row that is
        // gone): its values as the saving context knew them come first.
        let deletedValues = change._deletedAttributeValues[object.objectID]
        return indexBefore(
            key,
            guesses: [
                { deletedValues.flatMap(self.placement(fromValues:)) },
                { self.placementBefore(object, originals: change._originalAttributeValues[ObjectIdentifier(object)]) },
            ])
    }

    /// `indexBefore` with guesses of the placement (the first whose row is the key's wins), made only as needed.
    func indexBefore(_ key: RowKey, guesses: [() -> Placement?]) -> Int? {
        if lookup == nil {
            if case .unsaved(let unsaved) = key, !unsavedRows.contains(ObjectIdentifier(unsaved)) { return nil }
            for guess in guesses {
                guard let placement = guess() else { continue }
                let i = insertionIndex(for: placement, key)
                if i < rows.count, rows[i].key == key { return i }
            }
        }
        return index(ofKey: key)
    }

    /// A placement from attribute values by key (a deleted row's, as the context that deleted it knew them); nil
    /// unless every sort key and the section key are attributes of the entity itself, all present.
    func placement(fromValues values: [String: AttributeValue]) -> Placement? {
        var sortValues: [AttributeValue] = []
        for path in sortKeyPaths {
            guard path.count == 1, let value = values[path[0]] else { return nil }
            sortValues.append(value)
        }
        var section = ""
        if let sectionKeyPath {
            guard sectionKeyIsKey, let value = values[sectionKeyPath], let type = sectionKeyAttributeType else { return nil }
            section = Self.sectionName(for: NSManagedObjectContext._objectValue(value, type: type))
        }
        return Placement(values: SortValues(sortValues, count: sortValues.count), section: section)
    }

    /// Where an object sat before a change: its placement now, with `originals` in place of the current values of
    /// the attributes the change edited (sort keys and a section key that are the object's own attributes).
    ///
    /// Nil
    /// when its values cannot be read.
    func placementBefore(_ object: NSManagedObject, originals: [String: AttributeValue]?) -> Placement? {
        guard var values = try? sortKeyPaths.map({ try object._sortValue(forKeyPath: $0) }) else { return nil }
        if let originals {
            for (i, path) in sortKeyPaths.enumerated() where path.count == 1 {
                if let original = originals[path[0]] { values[i] = original }
            }
        }
        let section: String
        if let originals, sectionKeyIsKey, let sectionKeyPath, let original = originals[sectionKeyPath], let type = sectionKeyAttributeType
        {
            section = Self.sectionName(for: NSManagedObjectContext._objectValue(original, type: type))
        } else {
            guard let now = try? sectionName(of: object) else { return nil }
            section = now
        }
        return Placement(values: SortValues(values, count: values.count), section: section)
    }

    /// The index of a result by key.
    func index(ofKey key: RowKey) -> Int? {
        guard let placement = placement(forKey: key) else { return nil }
        return position(of: key, at: placement)
    }

    /// The index of an object in the results.
    ///
    /// Before any change has needed the lookup table, the object's values now
    /// are tried first (they are where its row sits unless it changed since): O(log n), no table built.
    func index(of object: NSManagedObject) -> Int? {
        index(of: object, key: key(of: object))
    }

    func index(of object: NSManagedObject, key: RowKey) -> Int? {
        if lookup == nil, object._isLive, let now = try? placement(of: object) {
            let i = insertionIndex(for: now, key)
            if i < rows.count, rows[i].key == key { return i }
        }
        return index(ofKey: key)
    }

    /// Checks that the section layout describes the rows, row by row (tests call it after every batch).
    ///
    /// - Complexity: O(n).
    func _checkInvariants() {
        sections._checkInvariants()
        precondition(sections.rowCount == rows.count, "the sections count \(sections.rowCount) rows, the results hold \(rows.count)")
        var iterator = rows.makeIterator()
        for (name, count) in zip(sections.names, sections.counts) {
            for _ in 0..<count {
                let row = iterator.next()
                precondition(row?.placement.section == name, "a row of section '\(row?.placement.section ?? "?")' is counted in '\(name)'")
            }
        }
    }

    func indexPath(forIndex index: Int) -> IndexPath { sections.indexPath(forIndex: index) }

    func index(forIndexPath path: IndexPath) -> Int? { sections.index(forIndexPath: path) }
}
