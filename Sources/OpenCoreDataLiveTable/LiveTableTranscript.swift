import Foundation
import OpenCoreData

/// The lines a scripted session prints: each delegate call of a batch as the seed apps' table views receive it, and
/// the table, one row per line.
///
/// The form is the groceries demo's: `will change content`, `section insert at 0: NAME`,
/// `object insert at [0, 0]: CELL TEXT`, `object move at [0, 3] to [0, 0]: CELL TEXT`, `did change content`.
///
/// For example:
/// ```swift
/// let token = table.observe { update in LiveTableTranscript.lines(for: update).forEach { print($0) } }
/// ```
public enum LiveTableTranscript {
    /// The delegate calls of one batch, one line each, between `will change content` and `did change content`.
    public static func lines(for update: LiveTable.Update) -> [String] {
        ["will change content"] + update.changes.map(line(for:)) + ["did change content"]
    }

    /// One change as a line.
    public static func line(for change: LiveTable.Change) -> String {
        switch change {
        case .sectionInsert(let index, let name): return "section insert at \(index): \(name)"
        case .sectionDelete(let index, let name): return "section delete at \(index): \(name)"
        case .rowInsert(let at, let row): return "object insert at \(path(at)): \(row.text)"
        case .rowDelete(let at, let row): return "object delete at \(path(at)): \(row.text)"
        case .rowMove(let from, let to, let row): return "object move at \(path(from)) to \(path(to)): \(row.text)"
        case .rowUpdate(let at, _, let row): return "object update at \(path(at)): \(row.text)"
        }
    }

    /// `rows: N`, then one `[S, R]: CELL TEXT` line per row of the table, in order.
    ///
    /// - Complexity: O(n) renders for n rows.
    public static func tableLines(of table: LiveTable) -> [String] {
        var lines = ["rows: \(table.rowCount)"]
        for (section, info) in table.sections.enumerated() {
            for (row, content) in table.rows(inSection: section, 0..<info.rowCount).enumerated() {
                lines.append("\(path(IndexPath(row: row, section: section))): \(content.text)")
            }
        }
        return lines
    }

    /// `[S, R]`.
    public static func path(_ indexPath: IndexPath) -> String { "[\(indexPath.section), \(indexPath.row)]" }
}
