import Foundation
import OpenCoreData
import OpenCoreDataLiveTable

/// Why a terminal table cannot run.
public enum TerminalTableError: Error, CustomStringConvertible {
    /// Standard input or output is not a terminal (a pipe, a file).
    case notATerminal

    /// What is wrong.
    public var description: String { "The terminal table needs a terminal on standard input and output." }
}

/// A `LiveTable` shown full-screen in the terminal, as UITableView would show it.
///
/// Section headers, a section index down the right edge, a highlighted row moved with ↑ ↓ PgUp PgDn Home End, and
/// app-defined keys. Each delegate batch redraws only the screen rows it changed; inserted, moved and updated rows are
/// marked for a moment (`+` in green, `~` in yellow), and deleted rows are named on the status line. `q` or Ctrl-C
/// quits; the terminal is restored however the table ends.
///
/// For example:
/// ```swift
/// let view = TerminalTable(table: table, title: "Oil changes")
/// view.addKey("a", "add") { view in try addEntry() }
/// try view.run()
/// ```
public final class TerminalTable {
    /// An app-defined key: what it is called on the help line, and what it does (`selected` is the highlighted row).
    public struct Action {
        /// The key.
        public var key: Character
        /// Its name on the help line.
        public var label: String
        /// What it does.
        public var perform: (_ view: TerminalTable) throws -> Void
    }

    /// The table shown.
    public let table: LiveTable
    /// The line above the table.
    public var title: String
    /// How long inserts, moves, updates and deletes stay marked, in seconds.
    public var markDuration: Double = 1.5
    private var actions: [Action] = []
    private var selection = 0  // a row, counted over all sections
    private var top = 0  // the first screen line of the list shown
    /// Marked rows, by object (a new object's ID changes when it is saved, so the ID cannot key them).
    private var marks: [ObjectIdentifier: (object: NSManagedObject, symbol: String, color: String, until: Date)] = [:]
    private var status: (text: String, until: Date)?
    /// Whether the screen must be drawn again: a key, a batch or a resize came, or a mark or message expires.
    private var dirty = true
    private var nextExpiry: Date?

    /// A terminal view of `table` under `title`.
    public init(table: LiveTable, title: String) {
        self.table = table
        self.title = title
    }

    /// Adds a key the app defines, named `label` on the help line.
    public func addKey(_ key: Character, _ label: String, perform: @escaping (_ view: TerminalTable) throws -> Void) {
        actions.append(Action(key: key, label: label, perform: perform))
    }

    /// The highlighted row's index path, if the table has rows.
    public var selectedIndexPath: IndexPath? { indexPath(ofRow: selection) }

    /// Shows `text` on the status line for a moment.
    public func say(_ text: String) {
        status = (text, Date().addingTimeInterval(markDuration * 2))
        dirty = true
    }

    /// Runs until `q` or Ctrl-C, drawing every batch as it comes (from this context or merged into it).
    ///
    /// Call it on the thread of the table's context (the main thread for a view context): between keys it runs the
    /// main run loop, so that merges scheduled on the main queue arrive.
    ///
    /// - Throws: `TerminalTableError.notATerminal` without a terminal.
    public func run() throws {
        let screen = try TerminalScreen()
        defer { screen.restore() }
        let observation = table.observe { [weak self] update in self?.apply(update) }
        defer { observation.cancel() }
        var lastSize = screen.size
        while true {
            if screen.size != lastSize {
                lastSize = screen.size
                screen.invalidate()
                dirty = true
            }
            if let nextExpiry, nextExpiry <= Date() { dirty = true }
            // Rows are rendered only when something changed, not on every tick.
            if dirty {
                dirty = false
                screen.draw(frame(columns: lastSize.columns, rows: lastSize.rows))
            }
            if let key = screen.readKey(timeout: 0.05) {
                dirty = true
                if !handle(key, pageSize: max(1, lastSize.rows - 4)) { return }
            }
            RunLoop.main.run(until: Date())
        }
    }

    // MARK: Keys and batches

    /// Returns false to quit.
    private func handle(_ key: TerminalKey, pageSize: Int) -> Bool {
        let last = max(0, table.rowCount - 1)
        switch key {
        case .up: selection = max(0, selection - 1)
        case .down: selection = min(last, selection + 1)
        case .pageUp: selection = max(0, selection - pageSize)
        case .pageDown: selection = min(last, selection + pageSize)
        case .home: selection = 0
        case .end: selection = last
        case .interrupt, .closed, .character("q"): return false
        case .character(let character):
            guard let action = actions.first(where: { $0.key == character }) else { return true }
            do {
                try action.perform(self)
            } catch let error as CoreDataError {
                say("error: \(error.message)")
            } catch {
                say("error: \(error)")
            }
        case .other: break
        }
        return true
    }

    private func apply(_ update: LiveTable.Update) {
        dirty = true
        let until = Date().addingTimeInterval(markDuration)
        var deleted: [String] = []
        let context = table.controller.managedObjectContext
        func mark(_ row: LiveTable.Row, _ symbol: String, _ color: String) {
            guard let object = context.registeredObject(for: row.objectID) else { return }
            marks[ObjectIdentifier(object)] = (object, symbol, color, until)
        }
        for change in update.changes {
            switch change {
            case .rowInsert(let to, let row):
                mark(row, "+", "32")
                if let row = self.row(of: to) { selection = row }  // as the seeds scroll to a new row
            case .rowMove(_, _, let row), .rowUpdate(_, _, let row): mark(row, "~", "33")
            case .rowDelete(_, let row): deleted.append(row.text)
            case .sectionInsert, .sectionDelete: break
            }
        }
        if !deleted.isEmpty { status = ("\u{1B}[31m− " + deleted.joined(separator: ", ") + "\u{1B}[0m", until) }
        selection = min(selection, max(0, table.rowCount - 1))
    }

    // MARK: Layout

    /// The screen: the title, the visible part of the list (section headers and rows) with the section index on the
    /// right, the status line and the help line.
    private func frame(columns: Int, rows: Int) -> [String] {
        let now = Date()
        marks = marks.filter { $0.value.until > now }
        if let until = status?.until, until <= now { status = nil }
        nextExpiry = (marks.values.map(\.until) + [status?.until].compactMap { $0 }).min()
        let listHeight = max(1, rows - 3)
        let showsHeaders = table.sections.count > 1 || table.sections.first.map { !$0.name.isEmpty } == true
        let selectedLine = line(ofRow: selection, showsHeaders: showsHeaders)
        if selectedLine < top { top = selectedLine }
        if selectedLine >= top + listHeight { top = selectedLine - listHeight + 1 }
        let index = table.sections.compactMap(\.indexTitle)
        var lines = ["\u{1B}[1m\(title)\u{1B}[0m  \(table.rowCount) rows"]
        for offset in 0..<listHeight {
            var text = entry(atLine: top + offset, showsHeaders: showsHeaders, width: columns - 3)
            if offset < index.count { text += "\u{1B}[\(columns - 1)G\u{1B}[36m\(index[offset])\u{1B}[0m" }
            lines.append(text)
        }
        lines.append(status?.text ?? "")
        let help = ["↑↓ PgUp PgDn move"] + actions.map { "\($0.key) \($0.label)" } + ["q quit"]
        lines.append("\u{1B}[2m" + help.joined(separator: "  ") + "\u{1B}[0m")
        return lines
    }

    /// The text of a line of the list: a section header, a row, or nothing past the end.
    private func entry(atLine line: Int, showsHeaders: Bool, width: Int) -> String {
        var start = 0
        var rowBase = 0
        for (section, info) in table.sections.enumerated() {
            if showsHeaders {
                if line == start { return "\u{1B}[1;4m" + clip(info.name, width) + "\u{1B}[0m" }
                start += 1
            }
            if line < start + info.rowCount {
                let indexPath = IndexPath(row: line - start, section: section)
                let row = table.row(at: indexPath)
                let mark = marks[ObjectIdentifier(table.controller.object(at: indexPath))]
                let prefix = mark.map { "\u{1B}[\($0.color)m\($0.symbol) " } ?? "  "
                let text = prefix + clip(row.text, width - 2) + (mark == nil ? "" : "\u{1B}[0m")
                return rowBase + indexPath.row == selection ? "\u{1B}[7m" + text + "\u{1B}[0m" : text
            }
            start += info.rowCount
            rowBase += info.rowCount
        }
        return ""
    }

    private func line(ofRow row: Int, showsHeaders: Bool) -> Int {
        var remaining = row
        var line = 0
        for info in table.sections {
            if showsHeaders { line += 1 }
            if remaining < info.rowCount { return line + remaining }
            remaining -= info.rowCount
            line += info.rowCount
        }
        return line
    }

    private func indexPath(ofRow row: Int) -> IndexPath? {
        var remaining = row
        for (section, info) in table.sections.enumerated() {
            if remaining < info.rowCount { return IndexPath(row: remaining, section: section) }
            remaining -= info.rowCount
        }
        return nil
    }

    private func row(of indexPath: IndexPath) -> Int? {
        guard table.sections.indices.contains(indexPath.section) else { return nil }
        return table.sections[..<indexPath.section].reduce(0) { $0 + $1.rowCount } + indexPath.row
    }

    private func clip(_ text: String, _ width: Int) -> String {
        let clean = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.map(Character.init))
        return clean.count <= width ? clean : String(clean.prefix(max(0, width - 1))) + "…"
    }
}
