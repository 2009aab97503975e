import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

// Where a row is: binary search on sort values, and the key lookup table (built in the background after a fetch).
extension ResultsEngine {
    // MARK: Positions

    /// Whether row `a` (sort values `va`, key `ka`) sorts before row `b` under `sorts`.
    ///
    /// The descriptors are passed in so
    /// that loops comparing many times read `sorts` (a property of this class, checked for exclusive access on each
    /// read) once.
    @inline(__always)
    static func precedes(_ va: SortValues, _ ka: RowKey, _ vb: SortValues, _ kb: RowKey, _ sorts: [FetchSortDescriptor]) -> Bool {
        let c = va.order(vb, sorts)
        return c != 0 ? c < 0 : ka.storeOrder < kb.storeOrder
    }

    /// Whether row `a` sorts before a row whose values are at `b` and whose store order is `bOrder`, under `sorts`.
    @inline(__always)
    static func precedes(
        _ a: borrowing ResultRow, _ b: UnsafePointer<RowBody>, _ bOrder: (Int8, Int64), _ sorts: [FetchSortDescriptor]
    ) -> Bool {
        let c = a.body.order(b.pointee, sorts)
        return c != 0 ? c < 0 : a.storeOrder < bOrder
    }

    /// Whether the row at `a` sorts before a row whose values are at `b` (`bValues` their `comparedValues`) and whose
    /// store order is `bOrder`, under `sorts`, reading the row where it is (`RowBody.order(_:_:_:_:)`).
    @inline(__always)
    static func precedes(
        _ a: UnsafePointer<ResultRow>, _ b: UnsafePointer<RowBody>, _ bValues: RowBody.Values, _ bOrder: (Int8, Int64),
        _ sorts: [FetchSortDescriptor]
    ) -> Bool {
        let c = RowBody.order(ResultRow.body(at: a), b, bValues, sorts)
        return c != 0 ? c < 0 : ResultRow.storeOrder(at: a) < bOrder
    }

    /// The first index whose row does not precede (`values`, `key`).
    func insertionIndex(for values: SortValues, _ key: RowKey) -> Int {
        let sorts = self.sorts
        let order = key.storeOrder
        // The values kept as a row keeps them: compared case to case with the rows, without an `AttributeValue`
        // made per comparison.
        let target = RowBody(values, slot: RowBody.empty)
        let targetValues = target.comparedValues
        return withUnsafePointer(to: target) { target in
            rows.partitioningIndex { row in !Self.precedes(row, target, targetValues, order, sorts) }
        }
    }

    /// Where the row of `key` is, given its sort values.
    func position(of key: RowKey, at values: SortValues) -> Int? {
        let i = insertionIndex(for: values, key)
        if i < rows.count, rows[i].key == key { return i }
        return rows.firstIndex { $0.key == key }  // only if the store order of equal keys changed under us
    }

    /// The sort values of a result's row by key, building the lookup table if this is the first time one is needed.
    func sortValues(forKey key: RowKey) -> SortValues? {
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

    static func lookupTable(_ rows: ChunkedArray<ResultRow>) -> [RowKey: SortValues] {
        var table: [RowKey: SortValues] = [:]
        table.reserveCapacity(rows.count)
        for row in rows { table[row.key] = row.values }
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
    /// object's sort values before the change (its values now, with the originals of the attributes the change edited)
    /// is tried first: O(log n) and no table, whenever the row found there is the key's; and an unsaved object that
    /// has no row needs no search. Otherwise the table answers (built on first need).
    func indexBefore(_ key: RowKey, object: NSManagedObject, _ change: ContextChange) -> Int? {
        // The row handed out last, if it is still where it was (checked by its key: rows move as changes come).
        if let (handed, index) = lastHandedOut, handed == key, index < rows.count, rows[index].key == key { return index }
        guard lookup == nil else { return index(ofKey: key) }
        // A row a merged save deleted can no longer be read (its object is invalid, or a fault of a row that is
        // gone): its values as the saving context knew them come first.
        let deletedValues = change._deletedAttributeValues[object.objectID]
        return indexBefore(
            key,
            guesses: [
                { deletedValues.flatMap(self.sortValues(fromValues:)) },
                { self.sortValuesBefore(object, originals: change._originalAttributeValues[ObjectIdentifier(object)]) },
            ])
    }

    /// `indexBefore` with guesses of the sort values (the first whose row is the key's wins), made only as needed.
    func indexBefore(_ key: RowKey, guesses: [() -> SortValues?]) -> Int? {
        if lookup == nil {
            if case .unsaved(let unsaved) = key, !unsavedRows.contains(ObjectIdentifier(unsaved)) { return nil }
            for guess in guesses {
                guard let values = guess() else { continue }
                let i = insertionIndex(for: values, key)
                if i < rows.count, rows[i].key == key { return i }
            }
        }
        return index(ofKey: key)
    }

    /// Sort values from attribute values by key (a deleted row's, as the context that deleted it knew them); nil
    /// unless every sort key is an attribute of the entity itself, present.
    func sortValues(fromValues values: ValuesBefore) -> SortValues? {
        var sortValues: [AttributeValue] = []
        for path in sortKeyPaths {
            guard path.count == 1, let value = values.attribute(named: path[0]) else { return nil }
            sortValues.append(value)
        }
        return SortValues(sortValues, count: sortValues.count)
    }

    /// An object's sort values before a change: its values now, with `originals` in place of the current values of
    /// the attributes the change edited (sort keys that are the object's own attributes).
    ///
    /// Nil when its values cannot be read.
    func sortValuesBefore(_ object: NSManagedObject, originals: ValuesBefore?) -> SortValues? {
        guard var values = try? object._sortValues(forKeyPaths: sortKeyPaths) else { return nil }
        if let originals {
            for (i, path) in sortKeyPaths.enumerated() where path.count == 1 {
                if let original = originals.attribute(named: path[0]) { values[i] = original }
            }
        }
        return SortValues(values, count: values.count)
    }

    /// The index of a result by key.
    func index(ofKey key: RowKey) -> Int? {
        guard let values = sortValues(forKey: key) else { return nil }
        return position(of: key, at: values)
    }

    /// The index of an object in the results.
    ///
    /// Before any change has needed the lookup table, the object's values now
    /// are tried first (they are where its row sits unless it changed since): O(log n), no table built.
    func index(of object: NSManagedObject) -> Int? {
        index(of: object, key: key(of: object))
    }

    func index(of object: NSManagedObject, key: RowKey) -> Int? {
        if lookup == nil, object._isLive, let now = try? sortValues(of: object) {
            let i = insertionIndex(for: now, key)
            if i < rows.count, rows[i].key == key { return i }
        }
        return index(ofKey: key)
    }

    /// Checks that the rows are in order and that the section layout counts them; each row whose object is in memory
    /// and not a fault must be in the section its values give now, unless the context holds edits not yet processed
    /// (tests call it after every batch).
    ///
    /// - Complexity: O(n).
    func _checkInvariants() {
        sections._checkInvariants()
        precondition(sections.rowCount == rows.count, "the sections count \(sections.rowCount) rows, the results hold \(rows.count)")
        let sorts = self.sorts
        let objectsAreCurrent = !context._hasUnprocessedChanges
        var previous: ResultRow?
        for (index, row) in rows.enumerated() {
            if let previous {
                precondition(previous.body.order(row.body, sorts) <= 0, "row \(index) sorts before row \(index - 1)")
            }
            let object: NSManagedObject? =
                switch row.key {
                case .unsaved(let object): object
                case .stored: row.object ?? context.registeredObject(for: objectID(for: row.key))
                }
            if objectsAreCurrent, let object, object._isLive, !object.isFault, let name = try? sectionName(of: object) {
                let counted = sections.sectionName(ofRowAt: index)
                precondition(name == counted, "row \(index) belongs in section '\(name)' and is counted in '\(counted)'")
            }
            previous = row
        }
    }

    func indexPath(forIndex index: Int) -> IndexPath { sections.indexPath(forIndex: index) }

    func index(forIndexPath path: IndexPath) -> Int? { sections.index(forIndexPath: path) }
}
