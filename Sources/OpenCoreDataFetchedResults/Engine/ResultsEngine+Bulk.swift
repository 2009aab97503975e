import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

// The bulk route: a large batch applied in one pass over the results, O(n + k log k).
extension ResultsEngine {
    /// Applies a large batch in passes over the results: take the touched rows out while walking the results once
    /// (which also gives their old paths and placements), sort those that are in now, merge them with the rest, and
    /// count sections again.
    ///
    /// O(n + k log k) instead of O(k log n) searches plus k moves; worth it once k is a sizeable
    /// fraction of n.
    func processInBulk(
        touched: [RowKey: NSManagedObject], after: [RowKey: Placement], contentChanged: Set<RowKey>, sectionsBefore: [String]
    ) {
        diagnostics.bulkBatches += 1
        // The arriving rows in result order. Their positions are sorted, not the rows: the sort copies and destroys
        // the elements it moves, and a row costs far more to copy than an index.
        let sorts = self.sorts
        let unsorted = after.map { ResultRow(key: $0.key, placement: $0.value, object: touched[$0.key]) }
        let arriving = unsorted.withUnsafeBufferPointer { rows in
            rows.indices.sorted { a, b in Self.precedes(rows[a].placement, rows[a].key, rows[b].placement, rows[b].key, sorts) }
                .map { rows[$0] }
        }
        // One pass over the results: note where touched rows were, leave them out, and merge the arriving ones in.
        var before: [RowKey: IndexPath] = [:]
        var oldPlacements: [RowKey: Placement] = [:]
        var merged = ChunkedArray<ResultRow>()
        var finalIndex: [RowKey: Int] = [:]
        var next = 0
        var (section, row) = (0, 0)
        do {
            // A local copy: no exclusivity check per read of a property of this class.
            let sectionCounts = self.sectionCounts
            for current in rows {
                while row == sectionCounts[section] { (section, row) = (section + 1, 0) }
                defer { row += 1 }
                if touched[current.key] != nil {
                    before[current.key] = IndexPath(row: row, section: section)
                    oldPlacements[current.key] = current.placement
                    continue
                }
                while next < arriving.count,
                    !Self.precedes(current.placement, current.key, arriving[next].placement, arriving[next].key, sorts)
                {
                    finalIndex[arriving[next].key] = merged.count
                    merged.append(arriving[next])
                    next += 1
                }
                merged.append(current)
            }
        }
        for arrival in arriving[next...] {
            finalIndex[arrival.key] = merged.count
            merged.append(arrival)
        }
        // A section may not come back after another one (the sort would split it), and sections may not change
        // order (every row of a moved section would have to be reported): the re-fetch and diff handles both.
        // Both are checked before anything changes, so the diff starts from what the delegate last saw.
        var seen: Set<String> = []
        var sectionsAfter: [String] = []
        for current in merged where current.placement.section != sectionsAfter.last {
            guard seen.insert(current.placement.section).inserted else {
                refetchAndDiff(updated: contentChanged, known: touched)
                return
            }
            sectionsAfter.append(current.placement.section)
        }
        if !BatchBuilder.reorderedSections(sectionsBefore, sectionsAfter).isEmpty {
            refetchAndDiff(updated: contentChanged, known: touched)
            return
        }
        if lookup != nil {
            for key in touched.keys { lookup![key] = after[key] }
        }
        rows = merged
        noteUnsavedRows()
        sections = SectionLayout(rowSections: rows.lazy.map(\.placement.section))
        reportMovements(
            of: touched, before: before, finalIndex: finalIndex, oldPlacements: oldPlacements, after: after, contentChanged: contentChanged,
            sectionsBefore: sectionsBefore)
    }
}
