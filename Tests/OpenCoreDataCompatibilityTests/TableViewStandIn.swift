// What UIKit would be in the seed apps: Linux has no UITableView, so these tests stand in a table that records the
// calls a view controller makes, and checks each batch as UIKit would (through OpenCoreDataTesting's model).
// Only this file and the test suites are the project's own; the seed files hold the apps' Core Data code as written
// for Apple platforms, with `import CoreData` changed to `import OpenCoreDataCompatibility`.
import Foundation
import OpenCoreDataCompatibility

/// A table view's batch-update interface, as the seeds' view controllers call it.
final class TableView {
    enum RowAnimation { case automatic, fade }
    enum ScrollPosition { case top }

    /// Every call, as text, in order.
    private(set) var calls: [String] = []
    private(set) var updateDepth = 0

    func beginUpdates() {
        updateDepth += 1
        calls.append("begin")
    }

    func endUpdates() {
        updateDepth -= 1
        calls.append("end")
    }

    func insertRows(at indexPaths: [IndexPath], with animation: RowAnimation) {
        calls += indexPaths.map { "insert \($0.section).\($0.row)" }
    }

    func deleteRows(at indexPaths: [IndexPath], with animation: RowAnimation) {
        calls += indexPaths.map { "delete \($0.section).\($0.row)" }
    }

    func reloadRows(at indexPaths: [IndexPath], with animation: RowAnimation) {
        calls += indexPaths.map { "reload \($0.section).\($0.row)" }
    }

    func moveRow(at indexPath: IndexPath, to newIndexPath: IndexPath) {
        calls.append("move \(indexPath.section).\(indexPath.row) → \(newIndexPath.section).\(newIndexPath.row)")
    }

    func insertSections(_ sections: IndexSet, with animation: RowAnimation) {
        calls += sections.map { "insert section \($0)" }
    }

    func deleteSections(_ sections: IndexSet, with animation: RowAnimation) {
        calls += sections.map { "delete section \($0)" }
    }

    func scrollToRow(at indexPath: IndexPath, at position: ScrollPosition, animated: Bool) {
        calls.append("scroll \(indexPath.section).\(indexPath.row)")
    }

    func reloadData() { calls.append("reloadData") }

    /// Forgets the calls so far.
    func clear() { calls = [] }
}
