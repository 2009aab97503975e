import Foundation

/// Where one object was and is, for building a batch.
///
/// `BatchBuilder` and this type are the engine's, not API: public only as SPI (`@_spi(Engine)`), because Swift 6.3
/// does not specialize a `package` function's inlinable body in another module, and the batch builder must be
/// specialized for the engine's row keys (see `BatchBuilder.batch`).
@_spi(Engine) public struct ItemMovement<ID: Hashable> {
    /// The object's identifier in the batch.
    public var id: ID
    /// The index path before the batch, or nil if the object was not in the results.
    public var before: IndexPath?
    /// The index path after the batch, or nil if the object is not in the results.
    public var after: IndexPath?
    /// Whether the values that place the object (sort keys, section key) changed.
    public var keysChanged: Bool
    /// Whether any other value of the object changed.
    public var contentChanged: Bool

    /// A movement from `before` to `after` (nil for outside the results).
    @inlinable
    public init(id: ID, before: IndexPath?, after: IndexPath?, keysChanged: Bool, contentChanged: Bool) {
        self.id = id
        self.before = before
        self.after = after
        self.keysChanged = keysChanged
        self.contentChanged = contentChanged
    }
}

/// Turns the before/after positions of the objects a change touched into a batch a table view accepts.
///
/// Rules (UITableView `performBatchUpdates` semantics, see ARCHITECTURE.md "Index-path rules"):
/// - a section whose name disappears is deleted (before index), one that appears is inserted (after index);
/// - an object that appears is an insert (after path), one that disappears a delete (before path);
/// - an object whose placing values changed is a move when its place changed — including when it keeps its index but
///   other rows of its section were inserted, deleted or moved, since its neighbours may have changed;
/// - any other changed object is an update at its before path;
/// - an object leaving a deleted section or entering an inserted one is a delete plus an insert (UIKit rejects a
///   move out of a deleted section or into an inserted one): the only case where an object appears twice.
///
/// - Complexity: O(k log k + s) for k touched objects and s sections.
@_spi(Engine) public enum BatchBuilder {
    /// The batch that takes a table from `sectionsBefore` to `sectionsAfter`, given where each touched object was and
    /// is.
    ///
    /// Inlinable so that the engine's call is specialized for its row keys: generic, each change was copied, hashed and
    /// appended through value witnesses (half the cost of building a batch of 1,000 changes).
    @inlinable
    public static func batch<ID: Hashable>(
        sectionsBefore: [String], sectionsAfter: [String], items: [ItemMovement<ID>]
    ) -> ChangeBatch<ID> {
        var sectionChanges: [SectionChange] = []
        var deletedSections: Set<Int> = []
        var insertedSections: Set<Int> = []
        // (Most batches keep the sections as they were: then there is nothing to compare name by name.)
        if sectionsBefore != sectionsAfter {
            let afterNames = Set(sectionsAfter)
            let beforeNames = Set(sectionsBefore)
            for (i, name) in sectionsBefore.enumerated() where !afterNames.contains(name) {
                deletedSections.insert(i)
                sectionChanges.append(SectionChange(.delete, index: i, name: name))
            }
            for (i, name) in sectionsAfter.enumerated() where !beforeNames.contains(name) {
                insertedSections.insert(i)
                sectionChanges.append(SectionChange(.insert, index: i, name: name))
            }
            // Sections that survive but changed order (a first sort key that disagrees with the section key) cannot be
            // moved in a batch: the fewest of them are deleted and inserted again (those off a longest run in order).
            for (before, after) in reorderedSections(sectionsBefore, sectionsAfter) {
                deletedSections.insert(before)
                insertedSections.insert(after)
                sectionChanges.append(SectionChange(.delete, index: before, name: sectionsBefore[before]))
                sectionChanges.append(SectionChange(.insert, index: after, name: sectionsAfter[after]))
            }
        }
        sectionChanges.sort { a, b in
            if a.type != b.type { return a.type == .delete }
            return a.type == .delete ? a.index > b.index : a.index < b.index
        }

        var deletes: [RowChange<ID>] = [], inserts: [RowChange<ID>] = [], moves: [RowChange<ID>] = [], updates: [RowChange<ID>] = []
        // Sections (by name) with rows inserted, deleted or moved by a definite change.
        var touched: Set<String> = []
        var pending: [ItemMovement<ID>] = []  // keys changed, same place: a move only if its section was touched
        for item in items {
            switch (item.before, item.after) {
            case (nil, let after?):
                inserts.append(RowChange(.insert, id: item.id, from: nil, to: after))
                touched.insert(sectionsAfter[after.section])
            case (let before?, nil):
                deletes.append(RowChange(.delete, id: item.id, from: before, to: nil))
                touched.insert(sectionsBefore[before.section])
            case (let before?, let after?):
                let samePlace = sectionsBefore[before.section] == sectionsAfter[after.section] && before.row == after.row
                if deletedSections.contains(before.section) || insertedSections.contains(after.section) {
                    deletes.append(RowChange(.delete, id: item.id, from: before, to: nil))
                    inserts.append(RowChange(.insert, id: item.id, from: nil, to: after))
                    touched.insert(sectionsBefore[before.section])
                    touched.insert(sectionsAfter[after.section])
                } else if item.keysChanged && !samePlace {
                    moves.append(RowChange(.move, id: item.id, from: before, to: after))
                    touched.insert(sectionsBefore[before.section])
                    touched.insert(sectionsAfter[after.section])
                } else if item.keysChanged {
                    pending.append(item)
                } else if item.contentChanged {
                    updates.append(RowChange(.update, id: item.id, from: before, to: after))
                }
            case (nil, nil):
                continue
            }
        }
        for item in pending {
            let before = item.before!, after = item.after!
            if touched.contains(sectionsBefore[before.section]) {
                moves.append(RowChange(.move, id: item.id, from: before, to: after))
            } else {
                updates.append(RowChange(.update, id: item.id, from: before, to: after))
            }
        }
        var rows: [RowChange<ID>] = []
        rows.reserveCapacity(deletes.count + inserts.count + moves.count + updates.count)
        appendSorted(deletes, byDestination: false, descending: true, to: &rows)
        appendSorted(inserts, byDestination: true, descending: false, to: &rows)
        appendSorted(moves, byDestination: true, descending: false, to: &rows)
        appendSorted(updates, byDestination: false, descending: false, to: &rows)
        return ChangeBatch(sections: sectionChanges, rows: rows)
    }

    /// Appends `changes` ordered by one of their (non-nil) index paths: `to` if `byDestination`, else `from`.
    ///
    /// The sort is on (section, row) integers and
    /// positions, not on the changes themselves: this function is generic over the ID type, and sorting generic values
    /// (copied through value witnesses, compared as `IndexPath`s) cost most of building a batch of 1,000 changes. (A
    /// flag, not a key path: a key path into a generic type is made anew by the runtime at every call, a fifth of a
    /// one-change batch.)
    @inlinable
    static func appendSorted<ID: Hashable>(
        _ changes: [RowChange<ID>], byDestination: Bool, descending: Bool, to rows: inout [RowChange<ID>]
    ) {
        guard !changes.isEmpty else { return }
        var order: [(section: Int, row: Int, position: Int)] = []
        order.reserveCapacity(changes.count)
        for (position, change) in changes.enumerated() {
            let p = (byDestination ? change.to : change.from)!
            order.append((p.section, p.row, position))
        }
        if descending {
            order.sort { ($0.section, $0.row) > ($1.section, $1.row) }
        } else {
            order.sort { ($0.section, $0.row) < ($1.section, $1.row) }
        }
        for entry in order { rows.append(changes[entry.position]) }
    }

    /// Surviving sections whose relative order changed, as (before index, after index) pairs: every survivor not on
    /// one longest increasing run of after-indexes.
    public static func reorderedSections(_ before: [String], _ after: [String]) -> [(Int, Int)] {
        guard before != after else { return [] }
        var afterIndex: [String: Int] = [:]
        for (i, name) in after.enumerated() { afterIndex[name] = i }
        let survivors = before.enumerated().compactMap { i, name in afterIndex[name].map { (i, $0) } }
        guard survivors.count > 1 else { return [] }
        // Longest increasing subsequence of after-indexes (patience sorting with back links).
        var tails: [Int] = []  // positions in `survivors`
        var previous = [Int](repeating: -1, count: survivors.count)
        for (k, pair) in survivors.enumerated() {
            var low = 0, high = tails.count
            while low < high {
                let mid = (low + high) / 2
                if survivors[tails[mid]].1 < pair.1 { low = mid + 1 } else { high = mid }
            }
            if low > 0 { previous[k] = tails[low - 1] }
            if low == tails.count { tails.append(k) } else { tails[low] = k }
        }
        var keep: Set<Int> = []
        var k = tails.last ?? -1
        while k >= 0 {
            keep.insert(k)
            k = previous[k]
        }
        return survivors.enumerated().filter { !keep.contains($0.offset) }.map(\.element)
    }
}
