import Foundation

/// What happened to a section or an object, with Core Data's raw values.
///
/// For example:
/// ```swift
/// switch type { case .insert: insertRows(); case .delete: deleteRows(); case .move: moveRow(); case .update: reloadRow() }
/// ```
public enum NSFetchedResultsChangeType: UInt, Sendable, Hashable, CustomStringConvertible {
    case insert = 1
    case delete = 2
    case move = 3
    case update = 4

    /// The change's name.
    public var description: String {
        switch self {
        case .insert: return "insert"
        case .delete: return "delete"
        case .move: return "move"
        case .update: return "update"
        }
    }
}

extension IndexPath {
    /// A row in a section, as UIKit spells it (Foundation on Linux has no `UITableView` extensions).
    public init(row: Int, section: Int) {
        self.init(indexes: [section, row])
    }

    /// An item in a section, as UIKit spells it for collection views.
    public init(item: Int, section: Int) {
        self.init(indexes: [section, item])
    }

    /// The section (first index).
    public var section: Int { self[0] }
    /// The row (second index).
    public var row: Int { self[1] }
    /// The item (second index).
    public var item: Int { self[1] }
}

/// A section inserted or deleted in one batch.
///
/// Deletes use the index before the batch, inserts the index after.
///
/// For example:
/// ```swift
/// let change = SectionChange(.insert, index: 2, name: "Fruit")
/// ```
public struct SectionChange: Hashable, Sendable, CustomStringConvertible {
    /// What happened: insert, delete, move or update.
    public var type: NSFetchedResultsChangeType
    /// The section's index: before the batch for a delete, after it for an insert.
    public var index: Int
    /// The section's name.
    public var name: String

    /// A section change.
    public init(_ type: NSFetchedResultsChangeType, index: Int, name: String) {
        self.type = type
        self.index = index
        self.name = name
    }

    /// The change as text, as in `section insert at 2: B`.
    public var description: String { "section \(type) at \(index): \(name)" }
}

/// An object's change in one batch, in UITableView batch-update terms.
///
/// Index paths by kind:
/// - `insert`: `to` is the index path after the batch;
/// - `delete`: `from` is the index path before the batch;
/// - `move`: `from` before, `to` after;
/// - `update`: `from` is the index path before the batch (the row stays; its content changed), and `to` is where
///   the row is after the batch (equal to `from` unless other rows moved around it).
///
/// For example:
/// ```swift
/// let moved = RowChange(.move, id: objectID, from: IndexPath(row: 0, section: 0), to: IndexPath(row: 3, section: 1))
/// ```
public struct RowChange<ID: Hashable>: Hashable, CustomStringConvertible {
    /// What happened: insert, delete, move or update.
    public var type: NSFetchedResultsChangeType
    /// The object that changed.
    public var id: ID
    /// Where the row was before the batch (nil for an insert).
    public var from: IndexPath?
    /// Where the row is after the batch (nil for a delete).
    public var to: IndexPath?

    /// A row change.
    public init(_ type: NSFetchedResultsChangeType, id: ID, from: IndexPath?, to: IndexPath?) {
        self.type = type
        self.id = id
        self.from = from
        self.to = to
    }

    /// The change as text, as in `move 7 [0, 1] → [2, 0]`.
    public var description: String {
        func text(_ p: IndexPath?) -> String { p.map { "[\($0.section), \($0.row)]" } ?? "nil" }
        return "\(type) \(id) \(text(from)) → \(text(to))"
    }
}

/// One batch of changes: every section change, then every row change (the order delegates receive them).
///
/// For example:
/// ```swift
/// let batch = ChangeBatch(sections: [], rows: [RowChange(.insert, id: "new", from: nil, to: IndexPath(row: 0, section: 0))])
/// ```
public struct ChangeBatch<ID: Hashable>: CustomStringConvertible {
    /// The section inserts and deletes.
    public var sections: [SectionChange]
    /// The row inserts, deletes, moves and updates.
    public var rows: [RowChange<ID>]

    /// A batch of section and row changes.
    public init(sections: [SectionChange] = [], rows: [RowChange<ID>] = []) {
        self.sections = sections
        self.rows = rows
    }

    /// Whether nothing changed.
    public var isEmpty: Bool { sections.isEmpty && rows.isEmpty }

    /// Each change on its own line.
    public var description: String { (sections.map(\.description) + rows.map(\.description)).joined(separator: "\n") }
}

/// Sections of item identifiers, as a table shows them.
///
/// For example:
/// ```swift
/// let items = SectionedItems([.init(name: "A", items: ["Apple", "Avocado"]), .init(name: "B", items: ["Bread"])])
/// ```
public struct SectionedItems<ID: Hashable>: Equatable {
    /// A section: its name and its items in order.
    ///
    /// For example:
    /// ```swift
    /// let fruit = SectionedItems<String>.Section(name: "Fruit", items: ["Apple"])
    /// ```
    public struct Section: Equatable {
        /// The section's name.
        public var name: String
        /// The section's items, in order.
        public var items: [ID]
        /// A section named `name` holding `items`.
        public init(name: String, items: [ID]) {
            self.name = name
            self.items = items
        }
    }

    /// The sections, in order.
    public var sections: [Section]

    /// Items in `sections`.
    public init(_ sections: [Section] = []) { self.sections = sections }

    /// Every item, section after section.
    public var allItems: [ID] { sections.flatMap(\.items) }
}

extension RowChange: Sendable where ID: Sendable {}
extension ChangeBatch: Sendable where ID: Sendable {}
extension SectionedItems: Sendable where ID: Sendable {}
extension SectionedItems.Section: Sendable where ID: Sendable {}
