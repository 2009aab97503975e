import Foundation
@_exported import OpenCoreDataChanges

/// Why a table view would reject a batch.
///
/// For example:
/// ```swift
/// do { try table.apply(batch) { cellText($0) } } catch let error as TableViewBatchError { Issue.record("\(error)") }
/// ```
public struct TableViewBatchError: Error, CustomStringConvertible, Equatable {
    /// What UIKit would have complained about.
    public let message: String
    /// An error with its message.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// A stand-in for `UITableView`: holds sections of rows (an item ID and the text its cell shows) and applies
/// change batches with the checks `performBatchUpdates` makes, throwing where UIKit would raise.
///
/// Checks: section and row indexes in range (deletes, moves' sources and updates against the counts before the batch,
/// inserts and moves' destinations against the counts after), nothing deleted, inserted, moved or reloaded twice, no
/// reload of a row that is deleted or moved, no move out of a section being deleted or into one being inserted, and
/// every section's row count after the batch equal to its count before, minus deletes and moves out, plus inserts and
/// moves in. Rows that are inserted, moved or reloaded get their cell text rendered anew; other rows keep the text
/// they had, so a missing update shows as a stale cell.
///
/// For example:
/// ```swift
/// let table = TableViewModel(items) { id in cellText(id) }
/// try table.apply(batch) { id in cellText(id) }
/// #expect(table.items == freshFetch)
/// ```
public final class TableViewModel<ID: Hashable> {
    /// A row: its item and the text its cell shows.
    ///
    /// For example:
    /// ```swift
    /// let texts = table.sections[0].rows.map(\.content)
    /// ```
    public struct Row: Equatable {
        /// The item the row shows.
        public var id: ID
        /// The cell's text, as rendered when the row was last inserted, moved or reloaded.
        public var content: String
    }

    /// A section: its name and rows.
    ///
    /// For example:
    /// ```swift
    /// let names = table.sections.map(\.name)
    /// ```
    public struct Section: Equatable {
        /// The section's name.
        public var name: String
        /// The section's rows, in order.
        public var rows: [Row]
    }

    /// The sections, in order.
    public private(set) var sections: [Section]
    /// Batches applied so far.
    public private(set) var batchesApplied = 0

    /// A table showing `items`, each cell rendered with `render`.
    public init(_ items: SectionedItems<ID>, render: (ID) -> String) {
        sections = items.sections.map { Section(name: $0.name, rows: $0.items.map { Row(id: $0, content: render($0)) }) }
    }

    /// The item IDs the table shows.
    public var items: SectionedItems<ID> {
        SectionedItems(sections.map { .init(name: $0.name, items: $0.rows.map(\.id)) })
    }

    /// The cell texts the table shows.
    public var contents: [[String]] { sections.map { $0.rows.map(\.content) } }

    private func fail(_ message: String) -> TableViewBatchError { TableViewBatchError("Invalid batch update: " + message) }

    private func text(_ p: IndexPath) -> String { "[\(p.section), \(p.row)]" }

    /// Applies a batch.
    ///
    /// For example:
    /// ```swift
    /// try table.apply(batch, dataSource: controllerItems) { id in cellText(id) }
    /// ```
    /// - Parameters:
    ///   - batch: The changes.
    ///   - dataSource: What the data source reports after the batch (as UIKit asks `numberOfSections` and
    ///     `numberOfRowsInSection`); when given, section and row counts must match it, as UIKit requires.
    ///   - render: The cell text for an item, for rows the batch inserts, moves or reloads.
    /// - Throws: `TableViewBatchError` naming the first check the batch fails; the table is then unchanged.
    /// - Complexity: O(n + k log k) for n rows and k changes.
    public func apply(
        _ batch: ChangeBatch<ID>, dataSource: SectionedItems<ID>? = nil, render: (ID) -> String
    ) throws(TableViewBatchError) {
        let sectionPlan = try checkSections(batch, dataSource: dataSource)
        let rowPlan = try checkRows(batch, sectionPlan)
        sections = try rebuild(sectionPlan, rowPlan, dataSource: dataSource, render: render)
        batchesApplied += 1
    }

    /// What a batch does to sections: which go, which come (by their index after the batch), and where each
    /// surviving one lands.
    private struct SectionPlan {
        var before: Int
        var deleted: Set<Int> = []
        var inserted: [Int: String] = [:]
        /// Before-section i that survives is after-section survivorMap[i].
        var survivorMap: [Int: Int] = [:]
        var after: Int { before - deleted.count + inserted.count }
    }

    /// What a batch does to rows, in the index space each change uses.
    private struct RowPlan {
        var deleted: Set<IndexPath> = []
        var movedFrom: Set<IndexPath> = []
        var reloaded: Set<IndexPath> = []
        /// After index path → item (inserts and move destinations).
        var placed: [IndexPath: ID] = [:]
    }

    private func checkSections(_ batch: ChangeBatch<ID>, dataSource: SectionedItems<ID>?) throws(TableViewBatchError) -> SectionPlan {
        var plan = SectionPlan(before: sections.count)
        for change in batch.sections {
            switch change.type {
            case .delete:
                guard change.index >= 0, change.index < plan.before else {
                    throw fail("section delete at \(change.index), but there are \(plan.before) sections before the update")
                }
                guard plan.deleted.insert(change.index).inserted else { throw fail("section \(change.index) deleted twice") }
            case .insert:
                guard plan.inserted[change.index] == nil else { throw fail("section \(change.index) inserted twice") }
                plan.inserted[change.index] = change.name
            case .move, .update:
                throw fail("section \(change.type) is not a change a fetched results controller sends")
            }
        }
        for index in plan.inserted.keys where index < 0 || index >= plan.after {
            throw fail("section insert at \(index), but there are \(plan.after) sections after the update")
        }
        if let dataSource, dataSource.sections.count != plan.after {
            throw fail(
                "invalid number of sections: the data source has \(dataSource.sections.count) after the update, but there were \(plan.before) before, \(plan.inserted.count) inserted and \(plan.deleted.count) deleted"
            )
        }
        var afterIndex = 0
        for i in 0..<plan.before where !plan.deleted.contains(i) {
            while plan.inserted[afterIndex] != nil { afterIndex += 1 }
            plan.survivorMap[i] = afterIndex
            afterIndex += 1
        }
        return plan
    }

    private func checkBefore(_ p: IndexPath?, _ what: String) throws(TableViewBatchError) -> IndexPath {
        guard let p, p.count == 2 else { throw fail("\(what) without a before index path") }
        guard p.section >= 0, p.section < sections.count, p.row >= 0, p.row < sections[p.section].rows.count else {
            throw fail("\(what) at \(text(p)) is out of range before the update")
        }
        return p
    }

    private func checkRows(_ batch: ChangeBatch<ID>, _ sectionPlan: SectionPlan) throws(TableViewBatchError) -> RowPlan {
        var plan = RowPlan()
        for change in batch.rows {
            switch change.type {
            case .delete:
                let p = try checkBefore(change.from, "delete")
                guard plan.deleted.insert(p).inserted else { throw fail("row \(text(p)) deleted twice") }
            case .insert:
                guard let p = change.to, p.count == 2 else { throw fail("insert without an after index path") }
                guard plan.placed[p] == nil else { throw fail("row \(text(p)) inserted twice") }
                plan.placed[p] = change.id
            case .move:
                let from = try checkBefore(change.from, "move")
                guard let to = change.to, to.count == 2 else { throw fail("move without an after index path") }
                if sectionPlan.deleted.contains(from.section) {
                    throw fail("attempt to move row \(text(from)) out of section \(from.section), which is being deleted")
                }
                if sectionPlan.inserted[to.section] != nil {
                    throw fail("attempt to move a row into section \(to.section), which is being inserted")
                }
                guard plan.movedFrom.insert(from).inserted else { throw fail("row \(text(from)) moved twice") }
                guard plan.placed[to] == nil else { throw fail("row \(text(to)) is the destination of two changes") }
                plan.placed[to] = change.id
            case .update:
                let p = try checkBefore(change.from, "reload")
                if sectionPlan.deleted.contains(p.section) {
                    throw fail("attempt to reload row \(text(p)) in section \(p.section), which is being deleted")
                }
                guard plan.reloaded.insert(p).inserted else { throw fail("row \(text(p)) reloaded twice") }
            }
        }
        for p in plan.deleted where plan.movedFrom.contains(p) { throw fail("attempt to delete and move row \(text(p))") }
        for p in plan.reloaded where plan.deleted.contains(p) || plan.movedFrom.contains(p) {
            throw fail("attempt to reload row \(text(p)), which is also deleted or moved")
        }
        return plan
    }

    /// The sections after the batch: survivors keep their rows but those deleted or moved out (reloaded ones
    /// rendered anew), inserted and moved-in rows take their after-positions.
    private func rebuild(
        _ sectionPlan: SectionPlan, _ rowPlan: RowPlan, dataSource: SectionedItems<ID>?, render: (ID) -> String
    ) throws(TableViewBatchError) -> [Section] {
        let after = sectionPlan.after
        var result: [Section?] = Array(repeating: nil, count: after)
        for (index, name) in sectionPlan.inserted { result[index] = Section(name: name, rows: []) }
        var survivors: [Int: [Row]] = [:]
        for (i, j) in sectionPlan.survivorMap {
            var rows: [Row] = []
            for (r, row) in sections[i].rows.enumerated() {
                let p = IndexPath(row: r, section: i)
                if rowPlan.deleted.contains(p) || rowPlan.movedFrom.contains(p) { continue }
                rows.append(rowPlan.reloaded.contains(p) ? Row(id: row.id, content: render(row.id)) : row)
            }
            survivors[j] = rows
            result[j] = Section(name: sections[i].name, rows: [])
        }
        var placedBySection: [Int: [(Int, ID)]] = [:]
        for (p, id) in rowPlan.placed {
            guard p.section >= 0, p.section < after else {
                throw fail("row \(text(p)) is in a section that does not exist after the update")
            }
            placedBySection[p.section, default: []].append((p.row, id))
        }
        for j in 0..<after {
            let kept = survivors[j] ?? []
            let incoming = (placedBySection[j] ?? []).sorted { $0.0 < $1.0 }
            let count = kept.count + incoming.count
            if let dataSource, dataSource.sections[j].items.count != count {
                throw fail(
                    "invalid number of rows in section \(j): the data source has \(dataSource.sections[j].items.count) after the update, but the batch leaves \(kept.count) and inserts or moves in \(incoming.count)"
                )
            }
            var rows: [Row?] = Array(repeating: nil, count: count)
            for (row, id) in incoming {
                guard row >= 0, row < count else {
                    throw fail(
                        "invalid number of rows in section \(j): a row is inserted at \(row) but the section has \(count) rows after the update (\(kept.count) kept + \(incoming.count) inserted or moved in)"
                    )
                }
                rows[row] = Row(id: id, content: render(id))
            }
            var next = kept.makeIterator()
            for r in 0..<count where rows[r] == nil { rows[r] = next.next() }
            result[j]!.rows = rows.map { $0! }
        }
        return result.map { $0! }
    }
}
