import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

extension NSFetchedResultsController {
    /// What the controller reports, as UIKit's data-source methods would read it (objects by identity).
    var shownItems: SectionedItems<ObjectIdentifier> {
        SectionedItems(
            (sections ?? []).map { section in
                .init(name: section.name, items: (section.objects ?? []).map { ObjectIdentifier($0 as AnyObject) })
            })
    }
}

/// Objects in fetch order grouped into sections by the (string) value of a key path, "" for none: what a fresh fetch
/// says the table should show.
///
/// Without a key path there is always one section, empty or not (Core Data's rule).
func sectioned(_ objects: [NSManagedObject], by keyPath: String?) -> SectionedItems<ObjectIdentifier> {
    var sections: [SectionedItems<ObjectIdentifier>.Section] = []
    for object in objects {
        let name = keyPath.flatMap { (object.value(forKeyPath: $0)).flatMap { $0 as? String } } ?? ""
        if sections.last?.name == name {
            sections[sections.count - 1].items.append(ObjectIdentifier(object))
        } else {
            sections.append(.init(name: name, items: [ObjectIdentifier(object)]))
        }
    }
    if keyPath == nil, sections.isEmpty { sections = [.init(name: "", items: [])] }
    return SectionedItems(sections)
}

/// Records delegate calls as lines and as a change batch (by object identity).
final class DelegateRecorder: NSFetchedResultsControllerDelegate {
    var lines: [String] = []
    var batches: [ChangeBatch<ObjectIdentifier>] = []
    private var current = ChangeBatch<ObjectIdentifier>()
    var onBatch: ((ChangeBatch<ObjectIdentifier>) -> Void)?
    var describe: (Any) -> String = { "\($0)" }

    func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        lines.append("will change")
        current = ChangeBatch()
    }

    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange sectionInfo: any NSFetchedResultsSectionInfo,
        atSectionIndex sectionIndex: Int, for type: NSFetchedResultsChangeType
    ) {
        lines.append("section \(type) at \(sectionIndex): \(sectionInfo.name)")
        current.sections.append(SectionChange(type, index: sectionIndex, name: sectionInfo.name))
    }

    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChange anObject: Any, at indexPath: IndexPath?,
        for type: NSFetchedResultsChangeType, newIndexPath: IndexPath?
    ) {
        func path(_ p: IndexPath?) -> String { p.map { "[\($0.section), \($0.row)]" } ?? "nil" }
        let where_ = type == .insert ? path(newIndexPath) : type == .move ? "\(path(indexPath)) → \(path(newIndexPath))" : path(indexPath)
        lines.append("object \(type) at \(where_): \(describe(anObject))")
        current.rows.append(RowChange(type, id: ObjectIdentifier(anObject as AnyObject), from: indexPath, to: newIndexPath))
    }

    func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) {
        lines.append("did change")
        batches.append(current)
        onBatch?(current)
    }
}

extension DelegateRecorder {
    /// A table model showing what `frc` shows now, to which every batch this recorder receives is applied as UIKit
    /// would apply it (a batch the table refuses is recorded as an issue, with `context` in its message).
    func followedTable(of frc: NSFetchedResultsController<NSManagedObject>, context: String = "") -> TableViewModel<ObjectIdentifier> {
        let table = TableViewModel(frc.shownItems) { _ in "" }
        onBatch = { [frc] batch in
            do { try table.apply(batch, dataSource: frc.shownItems) { _ in "" } } catch {
                Issue.record("\(context)the table refused a batch: \(error)")
            }
        }
        return table
    }
}

@Suite struct FetchedResultsControllerTests {
    func groceries() throws -> (TestStack, NSManagedObjectContext) {
        let model = try NSManagedObjectModel {
            Entity("Products") {
                Attribute("name", .string)
                Attribute("price", .integer32, default: 0)
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        for (name, price) in [("Banana", 185), ("Milk", 409), ("Banana", 334), ("Cheddar Cheese", 221), ("Soda", 76)] {
            try context.make("Products", ["name": name, "price": price])
        }
        try context.save()
        return (stack, context)
    }

    func controller(_ context: NSManagedObjectContext, section: String? = "name") -> NSFetchedResultsController<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Products")
        request.sortDescriptors = [FetchSortDescriptor(key: "name"), FetchSortDescriptor(key: "price")]
        return NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: section, cacheName: nil)
    }

    @Test func sectionsIndexTitlesAndLookups() throws {
        let (stack, context) = try groceries()
        _ = stack
        let frc = controller(context)
        #expect(frc.fetchedObjects == nil && frc.sections == nil)
        try frc.performFetch()
        #expect(frc.sections?.map(\.name) == ["Banana", "Cheddar Cheese", "Milk", "Soda"])
        #expect(frc.sections?.map(\.numberOfObjects) == [2, 1, 1, 1])
        #expect(frc.sectionIndexTitles == ["B", "C", "M", "S"])
        #expect(frc.section(forSectionIndexTitle: "M", at: 2) == 2)
        let first = frc.object(at: IndexPath(row: 1, section: 0))
        #expect(first.value(forKey: "price") as? Int == 334)
        #expect(frc.indexPath(forObject: first) == IndexPath(row: 1, section: 0))
        #expect(frc.fetchedObjects?.count == 5)
        let unsectioned = controller(context, section: nil)
        try unsectioned.performFetch()
        #expect(unsectioned.sections?.count == 1 && unsectioned.sections?.first?.name == "")
    }

    @Test func changingTheRequestAndFetchingAgain() throws {
        let (stack, context) = try groceries()
        _ = stack
        let frc = controller(context)
        try frc.performFetch()
        frc.fetchRequest.predicate = try FetchPredicate(format: "price < %d", 300)
        frc.fetchRequest.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: false), FetchSortDescriptor(key: "price")]
        try frc.performFetch()
        #expect(frc.sections?.map(\.name) == ["Soda", "Cheddar Cheese", "Banana"])
        #expect(frc.fetchedObjects?.compactMap { $0.string("name") } == ["Soda", "Cheddar Cheese", "Banana"])
    }

    @Test func performFetchErrorsSayWhatToFix() throws {
        let (stack, context) = try groceries()
        _ = stack
        let noSort = NSFetchRequest<NSManagedObject>(entityName: "Products")
        let frc = NSFetchedResultsController(fetchRequest: noSort, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
        let error = #expect(throws: CoreDataError.self) { try frc.performFetch() }
        #expect(error?.message.contains("at least one sort descriptor") == true)
        let wrongOrder = NSFetchRequest<NSManagedObject>(entityName: "Products")
        wrongOrder.sortDescriptors = [FetchSortDescriptor(key: "price")]
        let split = NSFetchedResultsController(
            fetchRequest: wrongOrder, managedObjectContext: context, sectionNameKeyPath: "name", cacheName: nil)
        let splitError = #expect(throws: CoreDataError.self) { try split.performFetch() }
        #expect(splitError?.message.contains("does not follow the sort order") == true, "\(splitError?.message ?? "")")
    }

    /// Seed 002: sectioned by name, then "Banana" 1 and "Cheddar Cheese" 1 are inserted.
    @Test func seed002InsertsReportTheRightCalls() throws {
        let (stack, context) = try groceries()
        _ = stack
        let frc = controller(context)
        let recorder = DelegateRecorder()
        recorder.describe = { object in
            let o = object as! NSManagedObject
            return "\(o.string("name") ?? ""), \((o.value(forKey: "price")) as? Int ?? -1)"
        }
        frc.delegate = recorder
        try frc.performFetch()
        try context.make("Products", ["name": "Banana", "price": 1])
        try context.make("Products", ["name": "Cheddar Cheese", "price": 1])
        context.processPendingChanges()
        #expect(
            recorder.lines == [
                "will change", "object insert at [0, 0]: Banana, 1", "object insert at [1, 0]: Cheddar Cheese, 1", "did change",
            ])
        // A new section, a move across sections, and an update in one batch.
        let milk = frc.object(at: IndexPath(row: 0, section: 2))
        milk.setValue("Apple", forKey: "name")
        try context.make("Products", ["name": "Zucchini", "price": 5])
        let soda = frc.object(at: IndexPath(row: 0, section: 3))
        soda.setValue(77, forKey: "price")
        context.processPendingChanges()
        // Milk → Apple leaves a section that empties (deleted) for one that appears (inserted): a delete plus an insert.
        #expect(
            Array(recorder.lines.suffix(9)) == [
                "will change", "section delete at 2: Milk", "section insert at 0: Apple", "section insert at 4: Zucchini",
                "object delete at [2, 0]: Apple, 409", "object insert at [0, 0]: Apple, 409", "object insert at [4, 0]: Zucchini, 5",
                "object update at [3, 0]: Soda, 77", "did change",
            ])
    }

    @Test func settingAValueBackReportsNothingAndNoDelegateMeansNoTracking() throws {
        let (stack, context) = try groceries()
        _ = stack
        let frc = controller(context)
        let recorder = DelegateRecorder()
        frc.delegate = recorder
        try frc.performFetch()
        let object = frc.object(at: IndexPath(row: 0, section: 0))
        object.setValue(999, forKey: "price")
        object.setValue(185, forKey: "price")
        context.processPendingChanges()
        #expect(recorder.lines.isEmpty)
        frc.delegate = nil
        try context.make("Products", ["name": "Kiwi"])
        context.processPendingChanges()
        #expect(recorder.lines.isEmpty)
        #expect(frc.fetchedObjects?.count == 5, "no delegate: the results stay as fetched")
    }
}
