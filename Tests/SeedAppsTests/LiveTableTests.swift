import Foundation
import OpenCoreData
import OpenCoreDataLiveTable
import Testing
import _TestSupport

/// The live table over a sectioned controller: sections with index titles, rows rendered on demand, batches as updates.
@Suite struct LiveTableTests {
    func makeTable() throws -> (TestStack, LiveTable) {
        let model = try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("group", .string)
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.container.viewContext
        for (name, group) in [("apple", "Fruit"), ("pear", "Fruit"), ("leek", "Vegetable")] {
            try context.make("Item", ["name": name, "group": group])
        }
        try context.save()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "name")]
        let controller = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "group", cacheName: nil)
        let table = try LiveTable(controller: controller) { item in (item.value(forKey: "name") as? String ?? "?").uppercased() }
        return (stack, table)
    }

    @Test func sectionsAndRowsOnDemand() throws {
        let (stack, table) = try makeTable()
        _ = stack
        #expect(table.sections.map(\.name) == ["Fruit", "Vegetable"])
        #expect(table.sections.map(\.indexTitle) == ["F", "V"])
        #expect(table.sections.map(\.rowCount) == [2, 1])
        #expect(table.rowCount == 3)
        #expect(table.rows(inSection: 0, 0..<10).map(\.text) == ["APPLE", "PEAR"], "the range is clamped to the section")
        #expect(table.rows(inSection: 5, 0..<1).isEmpty)
        let leek = table.row(at: IndexPath(row: 0, section: 1))
        #expect(leek.text == "LEEK" && table.indexPath(of: leek.objectID) == IndexPath(row: 0, section: 1))
    }

    @Test func eachBatchIsOneUpdateWithTheTextOfWhatItTouched() throws {
        let (stack, table) = try makeTable()
        let context = table.controller.managedObjectContext
        var updates: [LiveTable.Update] = []
        let observation = table.observe { updates.append($0) }
        // The only vegetable leaves (its section goes, its text still known); a new section comes.
        let leek = context.object(with: table.row(at: IndexPath(row: 0, section: 1)).objectID)
        context.delete(leek)
        try context.make("Item", ["name": "salt", "group": "Spice"])
        try context.save()
        #expect(updates.count == 1)
        let changes = try #require(updates.first).changes
        #expect(changes.contains(.sectionDelete(index: 1, name: "Vegetable")), "\(changes)")
        #expect(changes.contains(.sectionInsert(index: 1, name: "Spice")), "\(changes)")
        #expect(
            changes.contains {
                if case .rowDelete(IndexPath(row: 0, section: 1), let row) = $0 { return row.text == "LEEK" } else { return false }
            })
        #expect(
            changes.contains {
                if case .rowInsert(IndexPath(row: 0, section: 1), let row) = $0 { return row.text == "SALT" } else { return false }
            })
        #expect(updates.first?.sections.map(\.name) == ["Fruit", "Spice"] && table.sections.map(\.name) == ["Fruit", "Spice"])
        #expect(
            LiveTableTranscript.tableLines(of: table) == ["rows: 3", "[0, 0]: APPLE", "[0, 1]: PEAR", "[1, 0]: SALT"])
        // A cancelled observation hears nothing more.
        observation.cancel()
        try context.make("Item", ["name": "fig", "group": "Fruit"])
        try context.save()
        #expect(updates.count == 1)
        _ = stack
    }
}
