import Foundation

/// What happened to a section or an object, with Core Data's raw values.
public enum NSFetchedResultsChangeType: UInt, Sendable, Hashable, CustomStringConvertible {
    case insert = 1
    case delete = 2
    case move = 3
    case update = 4

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
public struct SectionChange: Hashable, Sendable, CustomStringConvertible {
    public var type: NSFetchedResultsChangeType
    public var index: Int
    public var name: String

    public init(_ type: NSFetchedResultsChangeType, index: Int, name: String) {
        self.type = type
        self.index = index
        self.name = name
    }

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
public struct RowChange<ID: Hashable>: Hashable, CustomStringConvertible {
    public var type: NSFetchedResultsChangeType
    public var id: ID
    public var from: IndexPath?
    public var to: IndexPath?

    public init(_ type: NSFetchedResultsChangeType, id: ID, from: IndexPath?, to: IndexPath?) {
        self.type = type
        self.id = id
        self.from = from
        self.to = to
    }

    public var description: String {
        func text(_ p: IndexPath?) -> String { p.map { "[\($0.section), \($0.row)]" } ?? "nil" }
        return "\(type) \(id) \(text(from)) → \(text(to))"
    }
}

/// One batch of changes: every section change, then every row change (the order delegates receive them).
public struct ChangeBatch<ID: Hashable>: CustomStringConvertible {
    public var sections: [SectionChange]
    public var rows: [RowChange<ID>]

    public init(sections: [SectionChange] = [], rows: [RowChange<ID>] = []) {
        self.sections = sections
        self.rows = rows
    }

    public var isEmpty: Bool { sections.isEmpty && rows.isEmpty }

    public var description: String { (sections.map(\.description) + rows.map(\.description)).joined(separator: "\n") }
}

/// Sections of item identifiers, as a table shows them.
public struct SectionedItems<ID: Hashable>: Equatable {
    public struct Section: Equatable {
        public var name: String
        public var items: [ID]
        public init(name: String, items: [ID]) {
            self.name = name
            self.items = items
        }
    }

    public var sections: [Section]

    public init(_ sections: [Section] = []) { self.sections = sections }

    /// Every item, section after section.
    public var allItems: [ID] { sections.flatMap(\.items) }
}

extension RowChange: Sendable where ID: Sendable {}
extension ChangeBatch: Sendable where ID: Sendable {}
extension SectionedItems: Sendable where ID: Sendable {}
extension SectionedItems.Section: Sendable where ID: Sendable {}
