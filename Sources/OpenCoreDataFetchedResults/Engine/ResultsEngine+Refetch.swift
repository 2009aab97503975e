import Foundation
@_spi(Engine) import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

// The fallback route: re-fetch and diff, for changes the other routes cannot place (windows, resets, sections that
// would split or change order, failures).
extension ResultsEngine {
    // MARK: Fallback: re-fetch and diff

    /// Re-fetches and reports the difference from what the delegate last saw.
    ///
    /// `known` are objects the caller has
    /// for rows (the batch's touched objects); the other rows reported get the context's objects or faults.
    func refetchAndDiff(updated: Set<RowKey>, known: [RowKey: NSManagedObject]) {
        diagnostics.fullRefetches += 1
        let (oldRows, oldSections, oldCounts) = (rows, sectionNames, sectionCounts)
        var loaded: LoadedRows
        do {
            loaded = try load(makeRequest(), strict: false)
            needsRefetch = false
        } catch {
            needsRefetch = true
            onFailure?(error, "re-fetch the results")
            return
        }
        // Rows that stay keep the objects they had; the objects of rows that went are reported with them.
        var objects = known
        for row in oldRows { if let object = row.object, objects[row.key] == nil { objects[row.key] = object } }
        if !objects.isEmpty {
            loaded.rows = ChunkedArray(
                loaded.rows.lazy.map { row in
                    // Not an object the context no longer holds (after a reset, every object it had is invalid).
                    guard row.object == nil, let object = objects[row.key], object._isLive else { return row }
                    return ResultRow(key: row.key, values: row.values, object: object)
                })
        }
        take(loaded)

        func paths(_ list: ChunkedArray<ResultRow>, _ names: [String], _ counts: [Int]) -> [RowKey: (path: IndexPath, placement: Placement)]
        {
            var result: [RowKey: (path: IndexPath, placement: Placement)] = [:]
            result.reserveCapacity(list.count)
            var iterator = list.makeIterator()
            for (s, count) in counts.enumerated() {
                for r in 0..<count {
                    let row = iterator.next()!
                    result[row.key] = (IndexPath(row: r, section: s), Placement(values: row.values, section: names[s]))
                }
            }
            return result
        }
        let old = paths(oldRows, oldSections, oldCounts)
        let new = paths(rows, sectionNames, sectionCounts)
        var movements: [ItemMovement<RowKey>] = []
        for key in Set(old.keys).union(new.keys) {
            let oldEntry = old[key], newEntry = new[key]
            var keysChanged = false
            if let oldEntry, let newEntry { keysChanged = oldEntry.placement != newEntry.placement }
            movements.append(
                ItemMovement(
                    id: key, before: oldEntry?.path, after: newEntry?.path, keysChanged: keysChanged, contentChanged: updated.contains(key))
            )
        }
        deliver(BatchBuilder.batch(sectionsBefore: oldSections, sectionsAfter: sectionNames, items: movements), known: objects)
    }
}
