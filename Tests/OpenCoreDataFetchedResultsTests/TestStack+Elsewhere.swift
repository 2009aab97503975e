import Foundation
import OpenCoreData
import Testing
import _TestSupport

extension NSFetchedResultsController where ResultType == NSManagedObject {
    /// The `name` of each result, section by section.
    var namesBySection: [[String]] {
        (sections ?? []).map { ($0.objects ?? []).map { ($0 as! NSManagedObject).value(forKey: "name") as! String } }
    }
}

extension TestStack {
    /// Runs `edit` in a new context of the stack and saves it; returns the save's notification, merged nowhere.
    func saveElsewhere(_ edit: (NSManagedObjectContext) throws -> Void) throws -> Notification {
        let other = context()
        let box = FetchedResultsPropertyTests.NoteBox()
        let observer = NotificationCenter.default.addObserver(
            forName: NSManagedObjectContext.didSaveObjectsNotification, object: other, queue: nil
        ) { box.note = $0 }
        defer { NotificationCenter.default.removeObserver(observer) }
        try other.performAndWait {
            try edit(other)
            try other.save()
        }
        return try #require(box.note)
    }

    /// The `name` of each stored item matching `predicate`, grouped by `group` and sorted by group and score, read in a
    /// fresh context: what a controller sectioned by group shows once it is up to date.
    func storedNamesBySection(predicate: String? = nil) throws -> [[String]] {
        let fresh = context()
        return try fresh.performAndWait {
            let items = try fresh.objects("Item", predicate ?? "TRUEPREDICATE", sort: ["group", "score"])
            return Dictionary(grouping: items) { $0.value(forKey: "group") as! String }.sorted { $0.key < $1.key }
                .map { $0.value.map { $0.value(forKey: "name") as! String } }
        }
    }
}
