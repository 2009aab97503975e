import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

/// Employees sectioned by their department's name and filtered by its budget: renaming a department, changing its
/// budget, deleting it or moving employees must all reach the controller (Core Data's controller misses the first
/// three), and every batch must be one a table accepts.
@Suite struct RelatedObjectTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Department") {
                Attribute("name", .string)
                Attribute("budget", .integer32, default: 0)
                Relationship("employees", to: "Employee", toMany: true, inverse: "department")
            }
            Entity("Employee") {
                Attribute("name", .string)
                Relationship("department", to: "Department", inverse: "employees")
            }
        }
    }

    @Test func changesToRelatedObjectsAreNoticed() throws {
        let seeds: [UInt64] = ProcessInfo.processInfo.environment["OCD_SEED"].flatMap(UInt64.init).map { [$0] } ?? Array(1...60)
        var batches = 0
        for seed in seeds {
            var rng = SeededGenerator(seed: seed)
            func int(_ r: ClosedRange<Int>) -> Int { Int.random(in: r, using: &rng) }
            let names = ["Art", "Bio", "Chem", "Dev", "Eng", "Fin"]
            let stack = try TestStack(model: try Self.model(), inMemory: true)
            let context = stack.context()
            var departments: [NSManagedObject] = []
            for i in 0..<4 { departments.append(try context.make("Department", ["name": names[i], "budget": int(0...200)])) }
            for i in 0..<10 { try context.make("Employee", ["name": "e\(i)", "department": departments[int(0...3)]]) }
            try context.save()

            let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
            request.sortDescriptors = [FetchSortDescriptor(key: "department.name"), FetchSortDescriptor(key: "name")]
            request.predicate = try FetchPredicate(format: "department.budget > 100 OR department == nil")
            let frc = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "department.name", cacheName: nil)
            let recorder = DelegateRecorder()
            frc.delegate = recorder
            try frc.performFetch()
            func items() -> SectionedItems<ObjectIdentifier> { frc.shownItems }
            func fresh() throws -> SectionedItems<ObjectIdentifier> { sectioned(try context.fetch(request), by: "department.name") }
            let table = TableViewModel(items()) { _ in "" }
            var problem: String?
            recorder.onBatch = { batch in
                do { try table.apply(batch, dataSource: items()) { _ in "" } } catch { problem = "\(error)\n\(batch)" }
            }
            for step in 0..<25 {
                let liveDepartments = departments.filter { $0._isLive }
                let employees = try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Employee"))
                let op = int(0...5)
                switch op {
                case 0:
                    if let d = liveDepartments.randomElement(using: &rng) { d.setValue(names[int(0...5)] + "\(step)", forKey: "name") }
                case 1: if let d = liveDepartments.randomElement(using: &rng) { d.setValue(int(0...200), forKey: "budget") }
                case 2:
                    if let e = employees.randomElement(using: &rng) {
                        e.setValue(liveDepartments.randomElement(using: &rng), forKey: "department")
                    }
                case 3: if liveDepartments.count > 1, let d = liveDepartments.randomElement(using: &rng) { context.delete(d) }
                case 4: try context.make("Employee", ["name": "n\(step)", "department": liveDepartments.randomElement(using: &rng)])
                default: try context.save()
                }
                context.processPendingChanges()
                if problem == nil, table.items != (try fresh()) {
                    func describe(_ items: SectionedItems<ObjectIdentifier>) -> String {
                        items.sections.map { "\($0.name):\($0.items.count)" }.joined(separator: " ")
                    }
                    problem =
                        "step \(step) (operation \(op)): the table differs from a fresh fetch\n table: \(describe(table.items))\n fetch: \(describe(try fresh()))\n controller: \(describe(items()))"
                }
                if let problem {
                    Issue.record("seed \(seed): \(problem)")
                    break
                }
            }
            batches += table.batchesApplied
        }
        #expect(batches > seeds.count * 5, "batches: \(batches)")
    }
}

@Suite struct RelatedRenameTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Relationship("shelf", to: "Shelf", inverse: "items")
            }
            Entity("Shelf") {
                Attribute("label", .string)
                Attribute("rank", .integer32, default: 0)
                Relationship("items", to: "Item", toMany: true, inverse: "shelf")
            }
        }
    }

    /// Renaming a shelf to the label of another merges its items into that section.
    @Test(arguments: [0, 4]) func renamingIntoAnExistingSection(batchSize: Int) throws {
        let stack = try TestStack(model: try Self.model(), inMemory: true)
        let context = stack.context()
        let left = try context.make("Shelf", ["label": "Left", "rank": 1])
        let right = try context.make("Shelf", ["label": "Right", "rank": 2])
        try context.make("Item", ["name": "a", "shelf": left])
        try context.make("Item", ["name": "b", "shelf": right])
        try context.save()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "shelf.label"), FetchSortDescriptor(key: "name")]
        request.predicate = try FetchPredicate(format: "shelf.rank < 4")
        request.fetchBatchSize = batchSize
        let frc = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "shelf.label", cacheName: nil)
        let recorder = DelegateRecorder()
        frc.delegate = recorder
        try frc.performFetch()
        right.setValue("Left", forKey: "label")
        left.setValue("Top", forKey: "label")
        context.processPendingChanges()
        #expect(frc.sections?.map(\.name) == ["Left", "Top"], "\(recorder.lines)")
    }
}
