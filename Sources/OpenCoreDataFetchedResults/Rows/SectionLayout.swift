import Foundation

/// The sections of the results: each section's name, row count and first row, kept consistent with each other.
///
/// Rows themselves live in the engine's `ChunkedArray`; the layout maps a row's index in the results to its index path
/// and back. Sections are in result order and a name appears once (the controller's contract: the section key follows
/// the first sort key).
///
/// - Complexity: `indexPath(forIndex:)` is O(log s) for s sections; inserting or removing a row is O(s).
struct SectionLayout: Equatable {
    /// Section names, in order.
    private(set) var names: [String] = []
    /// Rows per section, in order (never 0).
    private(set) var counts: [Int] = []
    /// Index of each section's first row in the results.
    private(set) var starts: [Int] = []

    init() {}

    /// A layout with these sections (counts as loaded).
    init(names: [String], counts: [Int]) {
        self.names = names
        self.counts = counts
        recomputeStarts()
    }

    /// How many rows the sections hold.
    var rowCount: Int { (starts.last ?? 0) + (counts.last ?? 0) }

    /// The index path of the row at `index` in the results (which must be a row of the layout).
    func indexPath(forIndex index: Int) -> IndexPath {
        var low = 0
        var high = starts.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if starts[mid] <= index { low = mid } else { high = mid - 1 }
        }
        return IndexPath(row: index - starts[low], section: low)
    }

    /// The index in the results of the row at `path`, or nil when there is no such row.
    func index(forIndexPath path: IndexPath) -> Int? {
        guard path.count == 2, path.section >= 0, path.section < counts.count, path.row >= 0, path.row < counts[path.section]
        else { return nil }
        return starts[path.section] + path.row
    }

    /// Counts out the row at `index`; its section goes when it was the last row.
    mutating func removeRow(at index: Int) {
        let s = indexPath(forIndex: index).section
        counts[s] -= 1
        if counts[s] == 0 {
            counts.remove(at: s)
            names.remove(at: s)
        }
        recomputeStarts()
    }

    /// The name of the section of the row at `index`.
    func sectionName(ofRowAt index: Int) -> String { names[indexPath(forIndex: index).section] }

    /// Counts in a row inserted at `index` into section `name` (between the rows now at `index - 1` and `index`);
    /// false (and nothing changed) when that would split a section or make a second section of a name.
    mutating func insertRow(at index: Int, name: String) -> Bool {
        // The sections of the rows on either side, as positions in `names`.
        let previous = index > 0 ? indexPath(forIndex: index - 1).section : nil
        let next = index < rowCount ? indexPath(forIndex: index).section : nil
        if let previous, names[previous] == name {
            counts[previous] += 1
        } else if let next, names[next] == name {
            counts[next] += 1
        } else {
            if let previous, let next, previous == next { return false }  // inside another section
            if names.contains(name) { return false }  // the section exists elsewhere
            let s = previous.map { $0 + 1 } ?? 0
            names.insert(name, at: s)
            counts.insert(1, at: s)
        }
        recomputeStarts()
        return true
    }

    private mutating func recomputeStarts() {
        starts = []
        starts.reserveCapacity(counts.count)
        var start = 0
        for count in counts {
            starts.append(start)
            start += count
        }
    }

    /// Checks that names, counts and starts agree (tests call it after every change).
    func _checkInvariants() {
        precondition(names.count == counts.count && counts.count == starts.count, "sections: \(names.count) names, \(counts.count) counts")
        precondition(Set(names).count == names.count, "a section name appears twice: \(names)")
        var start = 0
        for (count, first) in zip(counts, starts) {
            precondition(count > 0, "an empty section in \(counts)")
            precondition(first == start, "section starts \(starts) do not follow counts \(counts)")
            start += count
        }
    }
}
