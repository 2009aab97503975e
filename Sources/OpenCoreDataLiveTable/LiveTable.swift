import Foundation
import OpenCoreData

/// A fetched results controller seen as a table: sections with their index titles and row counts, the text of any row
/// on demand, and each delegate batch as one `Update` — the contract a terminal or web front end draws from.
///
/// The table is the controller's delegate. It renders a row's text only when asked (`row(at:)`) or when a batch touches
/// the row, so a table of a million rows costs what its visible rows cost. A deleted row's text is rendered during the
/// batch, while the object still reads its last values.
///
/// For example:
/// ```swift
/// let table = try LiveTable(controller: controller) { entry in "\(entry.value(forKey: "miles") ?? "")" }
/// let token = table.observe { update in for change in update.changes { print(change) } }
/// ```
public final class LiveTable: NSFetchedResultsControllerDelegate {
    /// A section: its name, index title and number of rows.
    ///
    /// For example:
    /// ```swift
    /// let titles = table.sections.compactMap(\.indexTitle)
    /// ```
    public struct Section: Equatable, Sendable {
        /// The section's name (the value of the section key path; "" without one).
        public var name: String
        /// The section's index title, as the controller gives it.
        public var indexTitle: String?
        /// How many rows the section holds.
        public var rowCount: Int
    }

    /// A row: the object it shows and the text of its cell.
    ///
    /// For example:
    /// ```swift
    /// let text = table.row(at: IndexPath(row: 0, section: 0)).text
    /// ```
    public struct Row: Equatable, Sendable {
        /// The object's ID.
        public var objectID: NSManagedObjectID
        /// The cell's text.
        public var text: String
    }

    /// One change of a batch, with UITableView's index-path rules: deletes and a move's source before the batch,
    /// inserts and a move's destination after it; an update is at the row's index path before the batch (`to` is
    /// where it is after).
    ///
    /// For example:
    /// ```swift
    /// if case .rowInsert(let at, let row) = change { highlight(at, row.text) }
    /// ```
    public enum Change: Equatable, Sendable {
        /// A section inserted at `index` (after the batch).
        case sectionInsert(index: Int, name: String)
        /// A section deleted from `index` (before the batch).
        case sectionDelete(index: Int, name: String)
        /// A row inserted at `at` (after the batch).
        case rowInsert(at: IndexPath, row: Row)
        /// A row deleted from `at` (before the batch); `row` holds its last text.
        case rowDelete(at: IndexPath, row: Row)
        /// A row moved from `from` (before) to `to` (after), with its text after the batch.
        case rowMove(from: IndexPath, to: IndexPath, row: Row)
        /// A row whose content changed in place: at `at` before the batch, at `to` after it.
        case rowUpdate(at: IndexPath, to: IndexPath, row: Row)
    }

    /// One delegate batch: its changes in delivery order, and the sections after it.
    ///
    /// For example:
    /// ```swift
    /// let token = table.observe { update in redraw(update.changes, sections: update.sections) }
    /// ```
    public struct Update: Equatable, Sendable {
        /// The changes, sections first, as the delegate received them.
        public var changes: [Change]
        /// The sections after the batch.
        public var sections: [Section]
    }

    /// The controller the table shows.
    public let controller: NSFetchedResultsController<NSManagedObject>
    private let cell: (NSManagedObject) -> String
    /// The sections now.
    public private(set) var sections: [Section] = []
    private var pending: [Change] = []
    private var observers: [UUID: (Update) -> Void] = [:]

    /// Shows `controller` (fetching it now), with each row's text made by `cell`.
    ///
    /// - Throws: what `performFetch()` throws.
    public init(controller: NSFetchedResultsController<NSManagedObject>, cell: @escaping (NSManagedObject) -> String) throws {
        self.controller = controller
        self.cell = cell
        controller.delegate = self
        try controller.performFetch()
        sections = Self.sections(of: controller)
    }

    /// Shows `controller`, fetched already and with a delegate of its own that hands the table each delegate call
    /// (OpenSwiftData's `ModelQuery`, for the seed apps' live tables in SwiftData's form).
    package init(following controller: NSFetchedResultsController<NSManagedObject>, cell: @escaping (NSManagedObject) -> String) {
        self.controller = controller
        self.cell = cell
        sections = Self.sections(of: controller)
    }

    /// The number of rows in all sections.
    public var rowCount: Int { sections.reduce(0) { $0 + $1.rowCount } }

    /// The row at `indexPath`, rendered now.
    ///
    /// - Complexity: O(log s) to find the row, and one render.
    public func row(at indexPath: IndexPath) -> Row {
        let object = controller.object(at: indexPath)
        return Row(objectID: object.objectID, text: cell(object))
    }

    /// The rows of `section` in `range` (clamped to the section), rendered now.
    public func rows(inSection section: Int, _ range: Range<Int>) -> [Row] {
        guard sections.indices.contains(section) else { return [] }
        let bounded = range.clamped(to: 0..<sections[section].rowCount)
        return bounded.map { row(at: IndexPath(row: $0, section: section)) }
    }

    /// The index path of the object with `objectID`, when the table shows it.
    public func indexPath(of objectID: NSManagedObjectID) -> IndexPath? {
        guard let object = controller.managedObjectContext.registeredObject(for: objectID) else { return nil }
        return controller.indexPath(forObject: object)
    }

    /// Calls `handler` with every batch from now on, until the returned token is cancelled or released.
    public func observe(_ handler: @escaping (Update) -> Void) -> LiveTableObservation {
        let id = UUID()
        observers[id] = handler
        return LiveTableObservation { [weak self] in self?.observers[id] = nil }
    }

    // MARK: NSFetchedResultsControllerDelegate

    /// Starts collecting a batch.
    public func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        pending = []
    }

    /// Records a section insert or delete.
    public func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange sectionInfo: any NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType
    ) {
        switch type {
        case .insert: pending.append(.sectionInsert(index: sectionIndex, name: sectionInfo.name))
        case .delete: pending.append(.sectionDelete(index: sectionIndex, name: sectionInfo.name))
        default: break
        }
    }

    /// Records a row change, rendering the row's text now (a deleted object still reads its last values).
    public func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?
    ) {
        guard let object = anObject as? NSManagedObject else { return }
        let row = Row(objectID: object.objectID, text: cell(object))
        switch (type, indexPath, newIndexPath) {
        case (.insert, _, let to?): pending.append(.rowInsert(at: to, row: row))
        case (.delete, let from?, _): pending.append(.rowDelete(at: from, row: row))
        case (.move, let from?, let to?): pending.append(.rowMove(from: from, to: to, row: row))
        case (.update, let from?, let to): pending.append(.rowUpdate(at: from, to: to ?? from, row: row))
        default: break
        }
    }

    /// Ends the batch: updates the sections and hands the batch to every observer.
    public func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        sections = Self.sections(of: self.controller)
        let update = Update(changes: pending, sections: sections)
        pending = []
        for handler in observers.values { handler(update) }
    }

    private static func sections(of controller: NSFetchedResultsController<NSManagedObject>) -> [Section] {
        (controller.sections ?? []).map { Section(name: $0.name, indexTitle: $0.indexTitle, rowCount: $0.numberOfObjects) }
    }
}

/// Keeps a `LiveTable` observer registered; `cancel()` or releasing it stops the calls.
///
/// For example:
/// ```swift
/// let observation = table.observe { update in redraw(update) }
/// observation.cancel()
/// ```
public final class LiveTableObservation {
    private var onCancel: (() -> Void)?

    init(_ onCancel: @escaping () -> Void) { self.onCancel = onCancel }

    /// Stops the calls.
    public func cancel() {
        onCancel?()
        onCancel = nil
    }

    deinit { onCancel?() }
}
