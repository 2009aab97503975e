import Foundation
@_spi(Engine) import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

// The incremental route: a batch of changes placed row by row, O(k log n).
extension ResultsEngine {
    // MARK: Tracking

    func isCandidateKind(_ object: NSManagedObject) -> Bool {
        includesSubentities ? object.entity.isKindOf(entity: entity) : object.entity === entity
    }

    func noteUnsavedRows() {
        unsavedRows = []
        // Read in place, by the key word alone: copying each row would retain and release its object.
        rows.forEachInPlace { row in
            if ResultRow.isUnsaved(at: row), case .unsaved(let object) = row.pointee.key { unsavedRows.insert(ObjectIdentifier(object)) }
        }
    }

    /// Saved objects that had rows as unsaved objects get rows keyed by their new IDs, in place.
    func rekeySaved(_ changes: [NSManagedObjectID: NSManagedObjectID]) {
        var changed: [(index: Int, old: NSManagedObjectID, new: NSManagedObjectID)] = []
        for (old, new) in changes {
            guard let object = context.registeredObject(for: new), unsavedRows.remove(ObjectIdentifier(object)) != nil,
                let i = index(of: object, key: .unsaved(object))
            else { continue }
            let newKey = key(of: new)
            rows[i].key = newKey
            if lookup != nil {
                lookup![newKey] = lookup!.removeValue(forKey: .unsaved(object))
            }
            changed.append((i, old, new))
        }
        if !changed.isEmpty { onIDChange?(changed.sorted { $0.index < $1.index }) }
    }

    /// What a batch touches among the results: objects by row key, the keys whose content changed, the keys deleted.
    struct TouchedRows {
        var objects: [RowKey: NSManagedObject] = [:]
        var contentChanged: Set<RowKey> = []
        var deleted: Set<RowKey> = []
    }

    /// Follows one batch of the context's changes: chooses the route (re-fetch and diff, bulk, incremental) and
    /// reports what changed to the controller.
    func process(_ change: ContextChange) {
        guard isFetched else { return }
        // Saved objects' rows take their new keys first (what follows looks rows up by key).
        if !change.objectIDChanges.isEmpty, !unsavedRows.isEmpty { rekeySaved(change.objectIDChanges) }
        // Objects a merge found already holding the saved values (read here after the save, before its merge) whose
        // rows were placed by the values they had before; nil when only a re-fetch can tell.
        let staleRefreshed = staleRefreshedResults(change)
        // A merge that found every object it wrote already current here (or the same save merged twice) and none of
        // them misplaced changes nothing: the rows, and a lookup table being built from them, stay as they are.
        if change.isEmpty, change.objectIDChanges.isEmpty, !change.didSave, !needsRefetch, staleRefreshed?.isEmpty == true { return }
        rowsVersion += 1
        // After this context's save or a merge, the results are what the store holds: keep the cache current.
        defer { if cacheName != nil, change.didSave || change.origin == .merge { scheduleCacheWrite() } }
        if change.invalidatedAll {
            refetchAndDiff(updated: [], known: [:])
            return
        }
        if needsRefetch || change.storeChanged {
            // The last re-fetch failed, or another process changed the store: what the delegate saw may be stale, so
            // report the whole difference now.
            var updated = Set(change.updates.filter { isCandidateKind($0.object) }.map { key(of: $0.object) })
            // Results whose related objects changed (`shelf.rank`) show new content where they are.
            for (object, keys) in change.updates where !isCandidateKind(object) && !keys.isEmpty && !relatedChains.isEmpty {
                for owner in owners(of: object) ?? [] { updated.insert(key(of: owner)) }
            }
            refetchAndDiff(updated: updated, known: [:])
            return
        }
        guard let touched = touchedRows(by: change, staleRefreshed: staleRefreshed) else { return }  // (it re-fetched)
        if fetchLimit > 0 || fetchOffset > 0 {
            // A window over the results moves when any object of the entity comes, goes or changes — even one
            // outside the window.
            let relevant =
                !touched.objects.isEmpty || change.deleted.contains { isCandidateKind($0) }
                || change.deletedObjectIDs.contains { includesSubentities ? $0.entity.isKindOf(entity: entity) : $0.entity === entity }
            if relevant { refetchAndDiff(updated: touched.contentChanged, known: touched.objects) }
            return
        }
        guard !touched.objects.isEmpty else { return }
        let sectionsBefore = sectionNames
        let after = placementsNow(of: touched)
        if diagnostics.alwaysBulk || touched.objects.count >= max(64, rows.count / 16) {
            // Many changes at once: one pass over the results costs less than k searches and k moves.
            processInBulk(touched: touched.objects, after: after, contentChanged: touched.contentChanged, sectionsBefore: sectionsBefore)
        } else {
            processIncrementally(change, touched: touched, after: after, sectionsBefore: sectionsBefore)
        }
    }

    /// The results' rows a batch touches: inserted, updated and deleted objects of the entity, rows another
    /// context's save deleted, and the owners of related objects that changed.
    ///
    /// Nil when it had to re-fetch instead
    /// (a related object reached through a relationship without an inverse).
    private func touchedRows(by change: ContextChange, staleRefreshed: [RowKey: NSManagedObject]?) -> TouchedRows? {
        var touched = TouchedRows()
        for object in change.inserted where isCandidateKind(object) { touched.objects[key(of: object)] = object }
        for (object, keys) in change.updates where isCandidateKind(object) && !keys.isEmpty {
            let key = key(of: object)
            touched.objects[key] = object
            touched.contentChanged.insert(key)
        }
        for object in change.deleted where isCandidateKind(object) {
            let key = key(of: object)
            guard indexBefore(key, object: object, change) != nil else { continue }
            touched.objects[key] = object
            touched.deleted.insert(key)
        }
        // Rows deleted by another context's save that no object here stood for.
        for id in change.deletedObjectIDs where includesSubentities ? id.entity.isKindOf(entity: entity) : id.entity === entity {
            let key = key(of: id)
            let values = change._deletedAttributeValues[id]
            guard indexBefore(key, guesses: [{ values.flatMap(self.sortValues(fromValues:)) }]) != nil else { continue }
            touched.objects[key] = context.object(with: id)
            touched.deleted.insert(key)
        }
        // Results a merge left misplaced (found already current, placed by the values they had before).
        guard let staleRefreshed else {
            refetchAndDiff(updated: touched.contentChanged, known: touched.objects)
            return nil
        }
        for (key, object) in staleRefreshed where touched.objects[key] == nil {
            touched.objects[key] = object
            touched.contentChanged.insert(key)
        }
        // Objects of other entities that results reach through relationships (`department.name`).
        guard !relatedChains.isEmpty else { return touched }
        for (object, keys) in change.updates where !isCandidateKind(object) && !keys.isEmpty {
            guard let owners = owners(of: object) else {
                refetchAndDiff(updated: touched.contentChanged, known: touched.objects)
                return nil
            }
            for owner in owners {
                let key = key(of: owner)
                guard touched.objects[key] == nil else { continue }
                touched.objects[key] = owner
                touched.contentChanged.insert(key)
            }
        }
        return touched
    }

    /// The results a merge left misplaced, by key; nil when a relationship has no inverse (only a re-fetch can tell).
    ///
    /// Among the objects a merge found already current (`ContextChange._refreshed`: read here after the save and
    /// before its merge), and the results reaching such an object through a relationship: those whose rows sit where
    /// their values no longer put them.
    private func staleRefreshedResults(_ change: ContextChange) -> [RowKey: NSManagedObject]? {
        var stale: [RowKey: NSManagedObject] = [:]
        for object in change._refreshed {
            let candidates: [NSManagedObject]
            if isCandidateKind(object) {
                candidates = [object]
            } else if relatedChains.isEmpty {
                continue
            } else {
                guard let owners = owners(of: object) else { return nil }
                candidates = owners
            }
            for candidate in candidates {
                let key = key(of: candidate)
                if stale[key] == nil, isStale(candidate, key: key) { stale[key] = candidate }
            }
        }
        return stale
    }

    /// Whether the results hold `object` other than where its values now put it: a row at other sort values or in
    /// another section, a row though it no longer matches, or none though it does (a window over the results —
    /// limit or offset — cannot tell, so any object counts as stale there and the window is fetched again).
    ///
    /// O(log n) when the object's row is where its values put it; otherwise the lookup table answers.
    func isStale(_ object: NSManagedObject, key: RowKey) -> Bool {
        guard fetchLimit == 0, fetchOffset == 0 else { return true }
        guard object._isLive, (try? predicate?.evaluate(with: object) ?? true) == true, let now = try? placement(of: object) else {
            return index(ofKey: key) != nil
        }
        let i = insertionIndex(for: now.values, key)
        if i < rows.count, rows[i].key == key { return sections.sectionName(ofRowAt: i) != now.section }
        return true  // a row elsewhere (at the values it had), or none
    }

    /// Where each touched object that is a result now sits.
    private func placementsNow(of touched: TouchedRows) -> [RowKey: Placement] {
        var after: [RowKey: Placement] = [:]
        for (key, object) in touched.objects where !touched.deleted.contains(key) && object._isLive {
            do {
                guard try predicate?.evaluate(with: object) ?? true else { continue }
                after[key] = try placement(of: object)
            } catch {
                continue  // an object whose values cannot be read (its row is gone) is no longer a result
            }
        }
        return after
    }

    /// Applies a batch row by row: each touched row is found where it was (binary search on the values it had), taken
    /// out, and put back where it belongs now — unless its values and section are those it had, in which case it stays.
    ///
    /// O(k log n) searches plus a move of a chunk's tail for each row that comes, goes or moves.
    private func processIncrementally(
        _ change: ContextChange, touched: TouchedRows, after: [RowKey: Placement], sectionsBefore: [String]
    ) {
        // Where each touched object was, before anything moves.
        var before: [RowKey: (index: Int, path: IndexPath)] = [:]
        for (key, object) in touched.objects {
            if let i = indexBefore(key, object: object, change) { before[key] = (i, indexPath(forIndex: i)) }
        }
        // A row whose object still sits where it did (same sort values, same section: an edit of other attributes,
        // the commonest change) stays where it is; the rest are taken out, and those that are in put back (keeping an
        // undo log).
        var oldPlacements: [RowKey: Placement] = [:]
        var arriving = after
        var staying: [(key: RowKey, index: Int)] = []
        for (key, position) in before {
            guard let placement = after[key], sectionsBefore[position.path.section] == placement.section else { continue }
            let row = rows[position.index]
            guard row.values == placement.values else { continue }
            if row.object == nil, let object = touched.objects[key] { rows[position.index].object = object }
            oldPlacements[key] = placement
            arriving[key] = nil
            staying.append((key, position.index))
        }
        let layoutBefore = sections
        var removed: [(index: Int, row: ResultRow)] = []
        for (key, position) in before.sorted(by: { $0.value.index > $1.value.index }) where oldPlacements[key] == nil {
            let row = rows.remove(at: position.index)
            oldPlacements[key] = Placement(values: row.values, section: sectionsBefore[position.path.section])
            removed.append((position.index, row))
            sections.removeRow(at: position.index)
            lookup?.removeValue(forKey: key)
            if case .unsaved(let object) = key { unsavedRows.remove(ObjectIdentifier(object)) }
        }
        guard var finalIndex = insertArriving(arriving, objects: touched.objects),
            BatchBuilder.reorderedSections(sectionsBefore, sectionNames).isEmpty
        else {
            // The change would split a section, or sections changed order (every row of a re-inserted section must
            // be reported): undo, then re-fetch and report the difference.
            undo(arrived: arriving, removed: removed, layout: layoutBefore)
            refetchAndDiff(updated: touched.contentChanged, known: touched.objects)
            return
        }
        placeStaying(staying, removed: removed, finalIndex: &finalIndex)
        reportMovements(
            of: touched.objects, before: before.mapValues(\.path), finalIndex: finalIndex, oldPlacements: oldPlacements, after: after,
            contentChanged: touched.contentChanged, sectionsBefore: sectionsBefore)
    }

    /// Adds to `finalIndex` (which holds the arrivals' final indices) the final index of each row that stayed, from
    /// its index before the batch, the rows taken out before it and the arrivals put in before it: no search.
    ///
    /// A row that stayed at index `p` is at `q = p − r` once the `r` removed rows before it are out. Arrival `j` (in
    /// final order, at final index `F[j]`) went in with `F[j] − j` of the remaining rows before it, so it precedes the
    /// row iff `F[j] − j ≤ q`; those counts grow with `p`, so one walk over each sorted list finds them all.
    private func placeStaying(
        _ staying: [(key: RowKey, index: Int)], removed: [(index: Int, row: ResultRow)], finalIndex: inout [RowKey: Int]
    ) {
        guard !staying.isEmpty else { return }
        let removedIndices = removed.map(\.index).sorted()
        let gaps = finalIndex.values.sorted().enumerated().map { $0.element - $0.offset }
        var (r, a) = (0, 0)
        for (key, p) in staying.sorted(by: { $0.index < $1.index }) {
            while r < removedIndices.count, removedIndices[r] < p { r += 1 }
            let q = p - r
            while a < gaps.count, gaps[a] <= q { a += 1 }
            finalIndex[key] = q + a
            assert(rows[q + a].key == key, "a row that stayed is not where its neighbours' moves put it")
        }
    }

    /// Puts the arriving rows in, from last to first: each insertion lands at or before the earlier ones, shifting
    /// each of them by one, so a row's final index is where it went in plus the number inserted after it (no second
    /// search).
    ///
    /// Nil, with the rows inserted so far left in, when a row would split a section.
    private func insertArriving(_ after: [RowKey: Placement], objects: [RowKey: NSManagedObject]) -> [RowKey: Int]? {
        let entries = Array(after)
        let ascending = Self.resultOrder(values: entries.map(\.value.values), storeOrders: entries.map(\.key.storeOrder), sorts)
        let arriving = ascending.reversed().lazy.map { entries[$0] }
        var finalIndex: [RowKey: Int] = [:]
        for (k, (key, placement)) in arriving.enumerated() {
            let i = insertionIndex(for: placement.values, key)
            finalIndex[key] = i + (arriving.count - 1 - k)
            guard sections.insertRow(at: i, name: placement.section) else { return nil }
            rows.insert(ResultRow(key: key, values: placement.values, object: objects[key]), at: i)
            lookup?[key] = placement.values
            if case .unsaved(let object) = key { unsavedRows.insert(ObjectIdentifier(object)) }
        }
        return finalIndex
    }

    /// Puts the rows back as they were before a batch: takes out the arriving rows that went in (found by binary
    /// search where their placement puts them), puts back the `removed` ones, and the sections as they were.
    private func undo(arrived: [RowKey: Placement], removed: [(index: Int, row: ResultRow)], layout: SectionLayout) {
        for (key, placement) in arrived {
            let i = insertionIndex(for: placement.values, key)
            guard i < rows.count, rows[i].key == key else { continue }  // it had not gone in
            rows.remove(at: i)
            lookup?.removeValue(forKey: key)
        }
        for (index, row) in removed.reversed() {
            rows.insert(row, at: index)
            lookup?[row.key] = row.values
        }
        noteUnsavedRows()
        sections = layout
    }

    /// Delivers the batch for touched rows, from where they were (`before`) and where they are now (`finalIndex`).
    func reportMovements(
        of touched: [RowKey: NSManagedObject], before: [RowKey: IndexPath], finalIndex: [RowKey: Int],
        oldPlacements: [RowKey: Placement], after: [RowKey: Placement], contentChanged: Set<RowKey>, sectionsBefore: [String]
    ) {
        var movements: [ItemMovement<RowKey>] = []
        for key in touched.keys {
            let newPath = finalIndex[key].map(indexPath(forIndex:))
            let oldPath = before[key]
            if oldPath == nil && newPath == nil { continue }
            let keysChanged = oldPath != nil && newPath != nil && oldPlacements[key] != after[key]
            movements.append(
                ItemMovement(
                    id: key, before: oldPath, after: newPath, keysChanged: keysChanged, contentChanged: contentChanged.contains(key)))
        }
        deliver(BatchBuilder.batch(sectionsBefore: sectionsBefore, sectionsAfter: sectionNames, items: movements), known: touched)
    }

    /// Hands a batch to the controller with the objects of its rows: the touched objects, and for other rows (a
    /// re-fetch's diff) the context's objects or faults.
    func deliver(_ batch: ChangeBatch<RowKey>, known: [RowKey: NSManagedObject]) {
        guard !batch.isEmpty else { return }
        var objects: [RowKey: NSManagedObject] = [:]
        for change in batch.rows where objects.index(forKey: change.id) == nil {
            if let object = known[change.id] {
                objects[change.id] = object
            } else if let to = change.to, let i = index(forIndexPath: to) {
                objects[change.id] = object(at: i)  // the row keeps it: the delegate sees the object the results give
            } else {
                objects[change.id] = object(for: change.id)
            }
        }
        onBatch?(batch, objects)
    }
}
