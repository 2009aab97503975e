import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

/// Controllers over a coordinator with one store per configuration: over an entity one store holds (results stream
/// from it, object IDs carry its identifier) and over an entity both stores hold (results merged from the two, rows of
/// equal primary keys in different stores kept apart), through random edits and saves.
@Suite struct ConfigurationControllerTests {
    let dir = TemporaryDirectory()

    func stack() throws -> (NSPersistentStoreCoordinator, user: any PersistentStore, cache: any PersistentStore) {
        let model = try NSManagedObjectModel(configurations: ["User": ["Tag"], "Cache": ["Tag", "Thumbnail"]]) {
            Entity("Tag") {
                Attribute("name", .string)
                Attribute("group", .string)
                Attribute("weight", .integer64, default: 0)
            }
            Entity("Thumbnail") {
                Attribute("key", .string)
                Attribute("size", .integer64, default: 0)
            }
        }
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: model)
        let user = try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, configurationName: "User", at: dir.file("User.sqlite"))
        let cache = try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, configurationName: "Cache", at: dir.file("Cache.sqlite"))
        return (coordinator, user, cache)
    }

    /// A controller on `context` whose delegate's batches are applied to a table model, checked after every change.
    func watch(_ request: NSFetchRequest<NSManagedObject>, _ context: NSManagedObjectContext, sections: String?, cacheName: String? = nil)
        throws -> (NSFetchedResultsController<NSManagedObject>, DelegateRecorder, TableViewModel<ObjectIdentifier>)
    {
        let frc = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: sections, cacheName: cacheName)
        let recorder = DelegateRecorder()
        frc.delegate = recorder
        try frc.performFetch()
        let table = recorder.followedTable(of: frc)
        return (frc, recorder, table)
    }

    @Test func aControllerOverAnEntityOfOneStoreCarriesThatStoresObjectIDs() throws {
        let (coordinator, _, cache) = try stack()
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        context.persistentStoreCoordinator = coordinator
        try context.performAndWait {
            for size in [3, 1, 2] { try context.make("Thumbnail", ["key": "k\(size)", "size": size]) }
            try context.save()
            context.reset()
            let request = NSFetchRequest<NSManagedObject>(entityName: "Thumbnail")
            request.sortDescriptors = [FetchSortDescriptor(key: "size")]
            let (frc, recorder, table) = try watch(request, context, sections: nil, cacheName: "thumbnails-\(UUID().uuidString)")
            #expect(frc.fetchedObjects?.map { $0.value(forKey: "key") as? String } == ["k1", "k2", "k3"])
            #expect(frc.fetchedObjects?.allSatisfy { $0.objectID.storeIdentifier == cache.identifier } == true)
            let first = frc.object(at: IndexPath(item: 0, section: 0))
            #expect(try context.existingObject(with: first.objectID) === first)
            first.setValue(9, forKey: "size")
            try context.save()
            #expect(frc.fetchedObjects?.map { $0.value(forKey: "key") as? String } == ["k2", "k3", "k1"])
            #expect(recorder.lines.contains("object move at [0, 0] → [0, 2]: \(first)"), "\(recorder.lines)")
            #expect(frc.shownItems == table.items)
        }
    }

    @Test func aControllerOverAnEntityOfBothStoresFollowsRandomEdits() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["OCD_SEED"] ?? "") ?? UInt64.random(in: 0..<1_000_000)
        var random = SeededGenerator(seed: seed)
        let (coordinator, user, cache) = try stack()
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        context.persistentStoreCoordinator = coordinator
        try context.performAndWait {
            // Equal primary keys in both stores from the start: p1 is a tag in each.
            for (name, store) in [("a", user), ("b", cache), ("c", user), ("d", cache)] {
                let tag = try context.make("Tag", ["name": name, "group": "g\(name.count)", "weight": 1])
                context.assign(tag, to: store)
            }
            try context.save()
            let request = NSFetchRequest<NSManagedObject>(entityName: "Tag")
            request.sortDescriptors = [
                FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "weight"), FetchSortDescriptor(key: "name"),
            ]
            let (frc, recorder, table) = try watch(request, context, sections: "group")
            #expect(Set(frc.fetchedObjects?.compactMap(\.objectID.storeIdentifier) ?? []) == [user.identifier, cache.identifier])
            for step in 0..<60 {
                let tags = try context.objects("Tag")
                switch Int.random(in: 0..<5, using: &random) {
                case 0, 1:
                    let tag = try context.make(
                        "Tag",
                        [
                            "name": "n\(step)", "group": "g\(Int.random(in: 1...3, using: &random))",
                            "weight": Int.random(in: 0..<4, using: &random),
                        ])
                    context.assign(tag, to: Bool.random(using: &random) ? user : cache)
                case 2 where !tags.isEmpty:
                    tags.randomElement(using: &random)!.setValue(Int.random(in: 0..<4, using: &random), forKey: "weight")
                case 3 where !tags.isEmpty:
                    tags.randomElement(using: &random)!.setValue("g\(Int.random(in: 1...3, using: &random))", forKey: "group")
                case _ where !tags.isEmpty:
                    context.delete(tags.randomElement(using: &random)!)
                default: break
                }
                if Int.random(in: 0..<3, using: &random) == 0 { try context.save() } else { context.processPendingChanges() }
                let fresh = sectioned(try context.fetch(request), by: "group")
                #expect(frc.shownItems == fresh, "seed \(seed), step \(step)")
                #expect(table.items == frc.shownItems, "seed \(seed), step \(step)")
                if frc.shownItems != fresh || table.items != frc.shownItems { break }
            }
            try context.save()
            // A second context reading the stores afresh agrees with the controller.
            let reader = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
            reader.persistentStoreCoordinator = coordinator
            let stored = try reader.performAndWait { try reader.fetch(request).map(\.objectID) }
            #expect(frc.fetchedObjects?.map(\.objectID) == stored, "seed \(seed)")
            #expect(!recorder.batches.isEmpty)
        }
    }
}
