import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

final class SnapshotRecorder: NSFetchedResultsControllerSnapshotDelegate {
    var snapshots: [FetchedResultsSnapshot] = []
    var fineGrainedCalls = 0
    var onSnapshot: ((FetchedResultsSnapshot) -> Void)?
    func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>, didChangeContentWith snapshot: FetchedResultsSnapshot
    ) {
        snapshots.append(snapshot)
        onSnapshot?(snapshot)
    }
    func controllerWillChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) { fineGrainedCalls += 1 }
}

@Suite struct DelegateFormsTests {
    func stack() throws -> (TestStack, NSManagedObjectContext) {
        let model = try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("score", .integer32, default: 0)
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        for (name, score) in [("a", 3), ("b", 1), ("c", 2)] { try context.make("Item", ["name": name, "score": score]) }
        try context.save()
        return (stack, context)
    }

    func controller(_ context: NSManagedObjectContext, section: String? = nil) -> NSFetchedResultsController<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "score")]
        return NSFetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: section, cacheName: nil)
    }

    func names(_ ids: [NSManagedObjectID], _ context: NSManagedObjectContext) -> [String] {
        ids.compactMap { try? context.existingObject(with: $0).string("name") }
    }

    @Test func snapshotDelegateGetsSnapshotsInsteadOfFineGrainedCalls() throws {
        let (stack, context) = try stack()
        _ = stack
        let frc = controller(context, section: "name")
        let recorder = SnapshotRecorder()
        frc.delegate = recorder
        try frc.performFetch()
        #expect(recorder.snapshots.count == 1, "one snapshot after performFetch")
        #expect(recorder.snapshots[0].sectionIdentifiers == ["b", "c", "a"])
        let first = frc.object(at: IndexPath(row: 0, section: 0))
        first.setValue(9, forKey: "score")
        try context.make("Item", ["name": "d", "score": 0])
        context.processPendingChanges()
        #expect(recorder.snapshots.count == 2)
        #expect(recorder.snapshots[1].sectionIdentifiers == ["d", "c", "a", "b"])
        #expect(
            recorder.snapshots[1].reloadedItemIdentifiers == [first.objectID],
            "b moved because its score changed: its cell must be reloaded (d is new, a and c did not change)")
        #expect(recorder.fineGrainedCalls == 0)
        #expect(
            frc.snapshot
                == FetchedResultsSnapshot(
                    sectionIdentifiers: ["d", "c", "a", "b"], itemIdentifiersBySection: recorder.snapshots[1].itemIdentifiersBySection,
                    reloadedItemIdentifiers: []))
    }

    @Test func differenceDelegateTurnsTheOldListIntoTheNewOne() throws {
        let (stack, context) = try stack()
        _ = stack
        let frc = controller(context)
        let recorder = DifferenceRecorder()
        frc.delegate = recorder
        try frc.performFetch()
        recorder.items = frc.snapshot.itemIdentifiers
        let objects = frc.fetchedObjects ?? []
        objects[0].setValue(10, forKey: "score")  // b moves to the end
        context.delete(objects[1])  // c goes
        try context.make("Item", ["name": "e", "score": 5])
        context.processPendingChanges()
        #expect(recorder.differences == 1)
        #expect(recorder.fineGrainedCalls == 0)
        #expect(recorder.items == frc.snapshot.itemIdentifiers)
        #expect(names(recorder.items, context) == ["a", "e", "b"])
    }

    @Test func changesAsAnAsyncSequence() async throws {
        let (stack, context) = try stack()
        _ = stack
        let frc = controller(context)
        try frc.performFetch()
        let stream = frc.changes
        try context.make("Item", ["name": "z", "score": 0])
        context.processPendingChanges()
        var iterator = stream.makeAsyncIterator()
        let change = try #require(await iterator.next())
        #expect(change.rows.map(\.type) == [.insert])
        #expect(change.rows.first?.to == IndexPath(row: 0, section: 0))
        #expect(change.snapshot.numberOfItems == 4)
    }
}

@Suite struct SectionReorderTests {
    /// Sections named by a key that disagrees with the sort (Core Data forbids it; here it works): when sort values
    /// change, sections change order, and the batches must still be ones a table accepts.
    @Test func sectionsThatChangeOrderAreReportedAsDeleteAndInsert() throws {
        let model = try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("score", .integer32, default: 0)
            }
        }
        for seed in UInt64(1)...40 {
            var rng = SeededGenerator(seed: seed)
            let stack = try TestStack(model: model, inMemory: true)
            let context = stack.context()
            for i in 0..<6 { try context.make("Item", ["name": "n\(i)", "score": Int.random(in: 0...50, using: &rng)]) }
            try context.save()
            let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
            request.sortDescriptors = [FetchSortDescriptor(key: "score"), FetchSortDescriptor(key: "name")]
            let frc = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "name", cacheName: nil)
            let recorder = DelegateRecorder()
            frc.delegate = recorder
            try frc.performFetch()
            func items() -> SectionedItems<ObjectIdentifier> { frc.shownItems }
            let table = TableViewModel(items()) { _ in "" }
            var problem: String?
            recorder.onBatch = { batch in
                do {
                    try table.apply(batch, dataSource: items()) { _ in "" }
                    if table.items != items() { problem = "table differs after \(batch)" }
                } catch {
                    problem = "\(error)"
                }
            }
            for _ in 0..<25 {
                let objects = frc.fetchedObjects ?? []
                objects[Int.random(in: 0..<objects.count, using: &rng)].setValue(Int.random(in: 0...50, using: &rng), forKey: "score")
                context.processPendingChanges()
                if let problem { Issue.record("seed \(seed): \(problem)") }
                if problem != nil { break }
            }
            #expect(table.items.sections.map(\.name) == (frc.sections ?? []).map(\.name), "seed \(seed)")
        }
    }
}

/// A subclass with a computed key, as Core Data apps section by a transient "first letter" property.
final class Contact: NSManagedObject {
    @Managed var name: String?

    override func value(forUndefinedKey key: String) -> Any? {
        guard key == "initial" else { return super.value(forUndefinedKey: key) }
        return name.map { String($0.prefix(1)).uppercased() }
    }
}

@Suite struct ComputedSectionKeyTests {
    @Test func sectionsFromAComputedKey() throws {
        let model = try NSManagedObjectModel {
            Entity("Contact", managedObjectClass: Contact.self) { Attribute("name", .string) }
        }
        let stack = try TestStack(model: model, inMemory: true)
        let context = stack.context()
        for name in ["anna", "Bert", "alex", "Cleo", "bob"] {
            let contact = Contact(context: context)
            contact.name = name
        }
        try context.save()
        let request = NSFetchRequest<Contact>(entityName: "Contact")
        request.sortDescriptors = [FetchSortDescriptor(key: "name", comparison: .caseInsensitive)]
        let frc = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "initial", cacheName: nil)
        let recorder = DelegateRecorder()
        frc.delegate = recorder
        try frc.performFetch()
        #expect(frc.sections?.map(\.name) == ["A", "B", "C"])
        #expect(frc.sections?.map(\.numberOfObjects) == [2, 2, 1])
        frc.object(at: IndexPath(row: 0, section: 2)).name = "Dora"
        context.processPendingChanges()
        #expect(recorder.lines.contains("section delete at 2: C") && recorder.lines.contains("section insert at 2: D"))
        #expect(throws: CoreDataError.self) { _ = try frc.object(at: IndexPath(row: 0, section: 0)).checkedValue(forKey: "nickname") }
    }
}
