import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Batch insert, update and delete requests: rows written in SQL without objects, values checked, delete rules
/// applied as Core Data documents, results of each type, and merges into contexts whose observers report them.
@Suite struct BatchRequestTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Folder") {
                Attribute("name", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "folder", deleteRule: .cascadeDeleteRule)
                Relationship("labels", to: "Label", toMany: true, inverse: "folders")
            }
            Entity("Item") {
                Attribute("title", .string, optional: false)
                Attribute("score", .integer32, default: 0)
                Attribute("done", .boolean, default: false)
                Relationship("folder", to: "Folder", inverse: "items")
                Relationship("owner", to: "Owner", inverse: "items")
            }
            Entity("Owner") {
                Attribute("name", .string)
                Relationship("items", to: "Item", toMany: true, inverse: "owner", deleteRule: .denyDeleteRule)
            }
            Entity("Label") {
                Attribute("text", .string)
                Relationship("folders", to: "Folder", toMany: true, inverse: "labels")
            }
        }
    }

    func titles(_ stack: TestStack, _ format: String? = nil) throws -> [String] {
        let context = stack.context()
        return try context.performAndWait { try context.objects("Item", format, sort: ["title"]).compactMap { $0.string("title") } }
    }

    @Test func batchInsertWritesRowsAndReturnsWhatItIsAsked() throws {
        let stack = try TestStack(model: try Self.model())
        let context = stack.context()
        let request = NSBatchInsertRequest(entityName: "Item", objects: (0..<10_000).map { ["title": "t\($0)", "score": $0 % 100] })
        request.resultType = .objectIDs
        let ids = try #require((try context.execute(request) as? NSBatchInsertResult)?.result as? [NSManagedObjectID])
        #expect(ids.count == 10_000 && Set(ids).count == 10_000 && ids.allSatisfy { !$0.isTemporaryID })
        try context.performAndWait {
            let item = try context.existingObject(with: ids[42])
            #expect(
                item.string("title") == "t42" && item.value(forKey: "score") as? Int32 == 42 && item.value(forKey: "done") as? Bool == false
            )
        }
        // A handler fills one row per call until it says it is done.
        var next = 0
        let handled = NSBatchInsertRequest(entityName: "Item") { row in
            guard next < 3 else { return true }
            row["title"] = "h\(next)"
            next += 1
            return false
        }
        handled.resultType = .count
        #expect((try context.execute(handled) as? NSBatchInsertResult)?.result as? Int == 3)
        #expect(try titles(stack, "title BEGINSWITH 'h'") == ["h0", "h1", "h2"])
        // Keys are checked: nothing of a bad request is written.
        for (rows, expected) in [
            ([["title": "ok"], ["title": "x", "colour": "red"]], "'colour', which is not a stored attribute of Item"),
            ([["title": "ok"], ["title": "x", "score": "high"]], "score"),
            ([["title": "ok"], ["score": 1]], "Row 2 of the batch insert into Item has no value for 'title'"),
        ] as [([[String: Any]], String)] {
            let error = #expect(throws: CoreDataError.self) { try context.execute(NSBatchInsertRequest(entityName: "Item", objects: rows)) }
            #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
        }
        #expect(try titles(stack, "title == 'ok'").isEmpty)
    }

    @Test func batchUpdateChangesMatchingRowsAndTheirVersions() throws {
        let stack = try TestStack(model: try Self.model())
        let setup = stack.context()
        try setup.performAndWait {
            for i in 0..<20 { try setup.make("Item", ["title": "t\(i)", "score": i]) }
            try setup.save()
        }
        // A context holding an unsaved change to a row the batch updates meets a conflict at its save.
        let holder = stack.context()
        let held = try holder.performAndWait {
            let item = try #require(try holder.objects("Item", "title == 't3'").first)
            item.setValue("mine", forKey: "title")
            return item
        }
        let request = NSBatchUpdateRequest(entityName: "Item")
        request.predicate = try FetchPredicate(format: "score < 5")
        request.propertiesToUpdate = ["done": true, "score": 100]
        request.resultType = .updatedObjectIDsResultType
        let ids = try #require((try setup.execute(request) as? NSBatchUpdateResult)?.result as? [NSManagedObjectID])
        #expect(ids.count == 5)
        #expect(try titles(stack, "done == YES AND score == 100") == ["t0", "t1", "t2", "t3", "t4"])
        let conflict = #expect(throws: CoreDataError.self) { try holder.performAndWait { try holder.save() } }
        #expect(conflict?.code == .managedObjectMerge && held.string("title") == "mine")
        let count = NSBatchUpdateRequest(entityName: "Item")
        count.propertiesToUpdate = ["score": 1]
        count.resultType = .updatedObjectsCountResultType
        #expect((try setup.execute(count) as? NSBatchUpdateResult)?.result as? Int == 20)
        let bad = NSBatchUpdateRequest(entityName: "Item")
        bad.propertiesToUpdate = ["folder": NSNull()]
        #expect((#expect(throws: CoreDataError.self) { try setup.execute(bad) })?.key == "folder")
        let typed = NSBatchUpdateRequest(entityName: "Item")
        typed.propertiesToUpdate = ["score": "lots"]
        #expect((#expect(throws: CoreDataError.self) { try setup.execute(typed) }) != nil)
        #expect(try titles(stack, "score == 1").count == 20, "the bad requests changed nothing")
    }

    @Test func batchDeleteAppliesDeleteRules() throws {
        let stack = try TestStack(model: try Self.model())
        let setup = stack.context()
        let (folderID, ownerID) = try setup.performAndWait {
            let folder = try setup.make("Folder", ["name": "f"])
            let other = try setup.make("Folder", ["name": "other"])
            let label = try setup.make("Label", ["text": "red"])
            label.setValue(Set([folder, other]), forKey: "folders")
            let owner = try setup.make("Owner", ["name": "o"])
            try setup.make("Item", ["title": "in f", "folder": folder])
            try setup.make("Item", ["title": "owned", "folder": other, "owner": owner])
            try setup.make("Item", ["title": "loose"])
            try setup.save()
            return (folder.objectID, owner.objectID)
        }
        // Cascade: the folder's item goes with it; its label link goes; the label stays.
        let byID = NSBatchDeleteRequest(objectIDs: [folderID])
        byID.resultType = .resultTypeObjectIDs
        let deleted = try #require((try setup.execute(byID) as? NSBatchDeleteResult)?.result as? [NSManagedObjectID])
        #expect(deleted.count == 2 && deleted.contains(folderID))
        #expect(try titles(stack) == ["loose", "owned"])
        let reader = stack.context()
        try reader.performAndWait {
            let label = try #require(try reader.objects("Label").first)
            #expect((label.value(forKey: "folders") as? Set<NSManagedObject>)?.map { $0.string("name") } == ["other"])
        }
        // Deny: an owner with items cannot be batch-deleted; nothing is.
        let denied = #expect(throws: CoreDataError.self) { try setup.execute(NSBatchDeleteRequest(objectIDs: [ownerID])) }
        #expect(denied?.code == .validationRelationshipDeniedDelete && denied?.key == "items", "\(denied?.message ?? "")")
        // By predicate, with nullify: the owned item goes; its owner's to-many forgets it, and the owner can go then.
        let fetch = NSFetchRequest<NSManagedObject>(entityName: "Item")
        fetch.predicate = try FetchPredicate(format: "title == 'owned'")
        let byPredicate = NSBatchDeleteRequest(fetchRequest: fetch)
        byPredicate.resultType = .resultTypeCount
        #expect((try setup.execute(byPredicate) as? NSBatchDeleteResult)?.result as? Int == 1)
        _ = try setup.execute(NSBatchDeleteRequest(objectIDs: [ownerID]))
        #expect(try titles(stack) == ["loose"])
        let bad = NSFetchRequest<NSManagedObject>(entityName: "Item")
        bad.predicate = try FetchPredicate(format: "colour == 'red'")
        #expect((#expect(throws: CoreDataError.self) { try setup.execute(NSBatchDeleteRequest(fetchRequest: bad)) }) != nil)
        #expect(try titles(stack) == ["loose"])
    }

    @Test func mergingABatchResultReportsItToTheContextsObservers() throws {
        let stack = try TestStack(model: try Self.model())
        let view = stack.context()
        let kept = try view.performAndWait {
            let items = try (0..<3).map { i in try view.make("Item", ["title": "t" + String(i), "score": i]) }
            try view.save()
            return items
        }
        var changes: [ContextChange] = []
        let observation = view.addChangeObserver { changes.append($0) }
        defer { observation.cancel() }
        let worker = stack.context()
        let insert = NSBatchInsertRequest(entityName: "Item", objects: [["title": "new"]])
        insert.resultType = .objectIDs
        let inserted = (try worker.execute(insert) as? NSBatchInsertResult)?.result as? [NSManagedObjectID] ?? []
        let update = NSBatchUpdateRequest(entityName: "Item")
        update.predicate = try FetchPredicate(format: "title == 't1'")
        update.propertiesToUpdate = ["score": 50]
        update.resultType = .updatedObjectIDsResultType
        let updated = (try worker.execute(update) as? NSBatchUpdateResult)?.result as? [NSManagedObjectID] ?? []
        let delete = NSBatchDeleteRequest(objectIDs: [kept[2].objectID])
        delete.resultType = .resultTypeObjectIDs
        let deleted = (try worker.execute(delete) as? NSBatchDeleteResult)?.result as? [NSManagedObjectID] ?? []
        NSManagedObjectContext.mergeChanges(
            fromRemoteContextSave: [NSInsertedObjectsKey: inserted, NSUpdatedObjectsKey: updated, NSDeletedObjectsKey: deleted],
            into: [view])
        #expect(updated.count == 1 && inserted.count == 1 && deleted.count == 1, "\(updated) \(inserted) \(deleted)")
        let change = try #require(changes.last)
        #expect(change.inserted.map { $0.string("title") } == ["new"])
        #expect(change.updated.map { $0.object.string("title") } == ["t1"] && change.updated.first?.keys.contains("score") == true)
        #expect(change.deleted.map(\.objectID) == [kept[2].objectID])
        #expect(view.performAndWait { kept[1].value(forKey: "score") as? Int32 } == 50)
    }
}
