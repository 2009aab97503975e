import Foundation
@_spi(Engine) import OpenCoreDataChanges
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
        let sorts = self.sorts
        // The arriving rows in result order. Their positions are sorted, not the rows (a row costs far more to move
        // than an index), by their sort values kept beside them (no row is copied per comparison).
        var unsorted: [ResultRow] = []
        var unsortedSections: [String] = []
        var unsortedValues: [SortValues] = []
        unsorted.reserveCapacity(after.count)
        unsortedSections.reserveCapacity(after.count)
        unsortedValues.reserveCapacity(after.count)
        for (key, placement) in after {
            unsorted.append(ResultRow(key: key, values: placement.values, object: touched[key]))
            unsortedSections.append(placement.section)
            unsortedValues.append(placement.values)
        }
        let order = Self.resultOrder(values: unsortedValues, storeOrders: unsorted.map(\.storeOrder), sorts)
        let arrivalSections = order.map { unsortedSections[$0] }
        // One pass over the results: note where touched rows were, take them out, merge the arriving ones in, and
        // lay out the sections as the rows go by. The rows are moved from the old array to the new one, not copied:
        // a copy retains the row's object and strings, and destroying the old array releases them again.
        var before: [RowKey: IndexPath] = [:]
        var oldPlacements: [RowKey: Placement] = [:]
        var removed: [(index: Int, row: ResultRow)] = []
        var merged = ChunkedArray<ResultRow>()
        var finalIndex: [RowKey: Int] = [:]
        var layout = MergedSections()
        // The arriving rows in order where they cannot move while the results are walked: compared in place, each
        // row of the results against the next arrival, without copying the arrival out of an array per comparison.
        let arrivals = UnsafeMutablePointer<ResultRow>.allocate(capacity: max(order.count, 1))
        for (i, position) in order.enumerated() { (arrivals + i).initialize(to: unsorted[position]) }
        // Arrivals are moved out as they are merged (a copy would retain the row's strings and object slot, and
        // destroying the original release them again): only those never merged are left to destroy.
        var next = 0
        // Their sort values as rows keep them, without the objects: a comparison copies what it compares, and
        // copying a managed object's reference costs a slow retain and release (its refcount lives in a side table).
        let arrivalValues = UnsafeMutablePointer<RowBody>.allocate(capacity: max(order.count, 1))
        for (i, position) in order.enumerated() {
            (arrivalValues + i).initialize(to: RowBody(unsortedValues[position], slot: RowBody.empty))
        }
        defer {
            (arrivals + next).deinitialize(count: order.count - next)
            arrivals.deallocate()
            arrivalValues.deinitialize(count: order.count)
            arrivalValues.deallocate()
        }
        var (index, section, row) = (0, 0, 0)
        // Most rows of the results are not touched: a bit per packed key says so without hashing the key.
        let filter = PackedKeyFilter(touched.keys, count: touched.count)
        do {
            // Local copies: no exclusivity check per read of a property of this class.
            let sectionCounts = self.sectionCounts
            var old = rows.drain()
            while let current = old.next() {
                while row == sectionCounts[section] { (section, row) = (section + 1, 0) }
                defer { (index, row) = (index + 1, row + 1) }
                // `index(forKey:)`, not the value: reading the object out retains and releases it (a slow update of
                // its side-table count), for every row of the results.
                if filter.mayContain(packedKey: current.packedKey), touched.index(forKey: current.key) != nil {
                    before[current.key] = IndexPath(row: row, section: section)
                    oldPlacements[current.key] = Placement(values: current.values, section: sectionsBefore[section])
                    removed.append((index, consume current))
                    continue
                }
                while next < order.count, !Self.precedes(current, arrivalValues + next, (arrivals + next).pointee.storeOrder, sorts) {
                    Self.mergeArrival(
                        (arrivals + next).move(), section: arrivalSections[next], into: &merged, finalIndex: &finalIndex, layout: &layout)
                    next += 1
                }
                layout.add(sectionsBefore[section])
                merged.append(consume current)
            }
        }
        while next < order.count {
            Self.mergeArrival(
                (arrivals + next).move(), section: arrivalSections[next], into: &merged, finalIndex: &finalIndex, layout: &layout)
            next += 1
        }
        // A section may not come back after another one (the sort would split it), and sections may not change
        // order (every row of a moved section would have to be reported): the re-fetch and diff handles both, from
        // the rows as they were.
        if layout.splitsASection || !BatchBuilder.reorderedSections(sectionsBefore, layout.names).isEmpty {
            rows = Self.unmerged(merged, arrived: finalIndex, removed: removed)
            refetchAndDiff(updated: contentChanged, known: touched)
            return
        }
        if lookup != nil {
            for key in touched.keys { lookup![key] = after[key]?.values }
        }
        rows = merged
        noteUnsavedRows()
        sections = SectionLayout(names: layout.names, counts: layout.counts)
        reportMovements(
            of: touched, before: before, finalIndex: finalIndex, oldPlacements: oldPlacements, after: after, contentChanged: contentChanged,
            sectionsBefore: sectionsBefore)
    }

    /// The rows as they were before a merge: `merged` without the rows that `arrived`, with the `removed` ones back
    /// at their indices.
    static func unmerged(
        _ merged: consuming ChunkedArray<ResultRow>, arrived: [RowKey: Int], removed: [(index: Int, row: ResultRow)]
    ) -> ChunkedArray<ResultRow> {
        var restored = ChunkedArray<ResultRow>()
        var pending = removed[...]
        var rows = merged.drain()
        while let row = rows.next() {
            guard arrived[row.key] == nil else { continue }
            while let first = pending.first, first.index == restored.count {
                restored.append(first.row)
                pending.removeFirst()
            }
            restored.append(consume row)
        }
        for rest in pending { restored.append(rest.row) }
        return restored
    }

    /// Appends an arriving row of `section` to the merged list, noting its index and section.
    private static func mergeArrival(
        _ arrival: consuming ResultRow, section: String, into merged: inout ChunkedArray<ResultRow>, finalIndex: inout [RowKey: Int],
        layout: inout MergedSections
    ) {
        finalIndex[arrival.key] = merged.count
        layout.add(section)
        merged.append(consume arrival)
    }

    /// The positions of results in result order, given their sort values and store orders (aligned).
    ///
    /// The sort compares the values and store orders kept apart from the rows: comparing rows would copy both for
    /// each comparison (a `switch` over an enum copies it), retaining and releasing their objects. Where the values
    /// encode as byte strings (`SortKeys`: integers, doubles, dates, strings in scalar or case-folded order), each
    /// comparison is one `memcmp`.
    static func resultOrder(values: [SortValues], storeOrders: [(Int8, Int64)], _ sorts: [FetchSortDescriptor]) -> [Int] {
        precondition(storeOrders.count == values.count, "resultOrder needs one store order per result")
        if let keys = SortKeys(values, sorts) {
            return storeOrders.withUnsafeBufferPointer { storeOrders in
                keys.sortedPositions { storeOrders[$0] < storeOrders[$1] }
            }
        }
        var order = Array(values.indices)
        values.withUnsafeBufferPointer { values in
            storeOrders.withUnsafeBufferPointer { storeOrders in
                order.sort { a, b in
                    let c = values[a].order(values[b], sorts)
                    return c != 0 ? c < 0 : storeOrders[a] < storeOrders[b]
                }
            }
        }
        return order
    }
}

/// Section names and counts gathered from rows as they go by in result order, noting a name that comes back after
/// another section.
struct MergedSections {
    private(set) var names: [String] = []
    private(set) var counts: [Int] = []
    /// A section's rows are not together.
    private(set) var splitsASection = false
    private var seen: Set<String> = []

    mutating func add(_ name: String) {
        if let last = names.last, last == name {
            counts[counts.count - 1] += 1
            return
        }
        if !seen.insert(name).inserted { splitsASection = true }
        names.append(name)
        counts.append(1)
    }
}
