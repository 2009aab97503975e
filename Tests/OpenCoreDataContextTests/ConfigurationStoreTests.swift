import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// A coordinator with one store per configuration of the model, as Core Data apps keep a cache apart from user data:
/// each object is saved to its configuration's store, fetches read every store holding the entity and merge their
/// results in order, relationships do not cross stores, and a save that fails in one store is written to none.
@Suite struct ConfigurationStoreTests {
    let dir = TemporaryDirectory()

    func model() throws -> NSManagedObjectModel {
        try dir.loadModel(
            "Configured",
            """
                <entity name="Folder" representedClassName="Folder" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <relationship name="notes" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Note" inverseName="folder" inverseEntity="Note"/>
                </entity>
                <entity name="Note" representedClassName="Note" syncable="YES">
                    <attribute name="title" optional="YES" attributeType="String"/>
                    <relationship name="folder" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Folder" inverseName="notes" inverseEntity="Folder"/>
                    <relationship name="thumbnails" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Thumbnail" inverseName="note" inverseEntity="Thumbnail"/>
                </entity>
                <entity name="Thumbnail" representedClassName="Thumbnail" syncable="YES">
                    <attribute name="key" optional="YES" attributeType="String"/>
                    <attribute name="size" optional="YES" attributeType="Integer 64" defaultValueString="0" usesScalarValueType="YES"/>
                    <relationship name="note" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Note" inverseName="thumbnails" inverseEntity="Note"/>
                    <uniquenessConstraints>
                        <uniquenessConstraint>
                            <constraint value="key"/>
                        </uniquenessConstraint>
                    </uniquenessConstraints>
                </entity>
                <entity name="Tag" representedClassName="Tag" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <attribute name="weight" optional="YES" attributeType="Integer 64" defaultValueString="0" usesScalarValueType="YES"/>
                </entity>
                <entity name="Scratch" representedClassName="Scratch" syncable="YES">
                    <attribute name="text" optional="YES" attributeType="String"/>
                </entity>
                <configuration name="User">
                    <memberEntity name="Folder"/>
                    <memberEntity name="Note"/>
                    <memberEntity name="Tag"/>
                </configuration>
                <configuration name="Cache">
                    <memberEntity name="Thumbnail"/>
                    <memberEntity name="Tag"/>
                </configuration>
            """)
    }

    /// A coordinator holding the User store, then the Cache store.
    func coordinator(_ model: NSManagedObjectModel) throws -> (
        NSPersistentStoreCoordinator, user: any PersistentStore, cache: any PersistentStore
    ) {
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: model)
        let user = try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, configurationName: "User", at: dir.file("User.sqlite"))
        let cache = try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, configurationName: "Cache", at: dir.file("Cache.sqlite"))
        return (coordinator, user, cache)
    }

    func context(_ coordinator: NSPersistentStoreCoordinator) -> NSManagedObjectContext {
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        context.persistentStoreCoordinator = coordinator
        return context
    }

    /// How many objects of each entity the file holds, read through a coordinator of its own holding only it.
    func counts(in file: String, _ model: NSManagedObjectModel) throws -> [String: Int] {
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(
            ofType: NSSQLiteStoreType, at: dir.file(file), options: [NSReadOnlyPersistentStoreOption: true])
        let context = context(coordinator)
        return try context.performAndWait {
            var counts: [String: Int] = [:]
            for name in ["Folder", "Note", "Thumbnail", "Tag", "Scratch"] {
                counts[name] = try context.count(for: NSFetchRequest<NSManagedObject>(entityName: name))
            }
            return counts
        }
    }

    @Test func eachObjectIsSavedToItsConfigurationsStoreAndReadBackFromIt() throws {
        let model = try model()
        var uris: [String: URL] = [:]
        do {
            let (coordinator, user, cache) = try coordinator(model)
            #expect(user.configurationName == "User" && cache.configurationName == "Cache")
            let context = context(coordinator)
            try context.performAndWait {
                let folder = try context.make("Folder", ["name": "inbox"])
                let note = try context.make("Note", ["title": "hello", "folder": folder])
                let thumbnail = try context.make("Thumbnail", ["key": "t1", "size": 64])
                try context.save()
                #expect(note.objectID.storeIdentifier == user.identifier)
                #expect(thumbnail.objectID.storeIdentifier == cache.identifier)
                #expect(coordinator.persistentStore(for: dir.file("Cache.sqlite")) === cache)
                uris = ["note": note.objectID.uriRepresentation(), "thumbnail": thumbnail.objectID.uriRepresentation()]
                #expect(uris["thumbnail"]!.absoluteString.hasPrefix("x-coredata://\(cache.identifier)/Thumbnail/p"))
            }
        }
        #expect(try counts(in: "User.sqlite", model) == ["Folder": 1, "Note": 1, "Thumbnail": 0, "Tag": 0, "Scratch": 0])
        #expect(try counts(in: "Cache.sqlite", model) == ["Folder": 0, "Note": 0, "Thumbnail": 1, "Tag": 0, "Scratch": 0])

        // Reopened: every object comes back from its own store, relationships included, and URIs still resolve.
        let (coordinator, _, cache) = try coordinator(model)
        let context = context(coordinator)
        try context.performAndWait {
            let notes = try context.objects("Note")
            #expect(notes.map { $0.string("title") } == ["hello"])
            #expect((notes.first?.value(forKey: "folder") as? NSManagedObject)?.string("name") == "inbox")
            let thumbnailID = try #require(coordinator.managedObjectID(forURIRepresentation: uris["thumbnail"]!))
            #expect(thumbnailID.storeIdentifier == cache.identifier)
            #expect(try context.existingObject(with: thumbnailID).value(forKey: "size") as? Int64 == 64)
            let noteID = try #require(coordinator.managedObjectID(forURIRepresentation: uris["note"]!))
            #expect(try context.existingObject(with: noteID).string("title") == "hello")
        }
    }

    @Test func anEntityOfBothConfigurationsIsFetchedFromBothStoresMergedInOrder() throws {
        let model = try model()
        let (coordinator, user, cache) = try coordinator(model)
        let context = context(coordinator)
        try context.performAndWait {
            // Tags go to the User store (added first) unless assigned to the Cache store.
            for (index, name) in ["d", "a", "f", "c", "e", "b", "g"].enumerated() {
                let tag = try context.make("Tag", ["name": name, "weight": index % 3])
                if index.isMultiple(of: 2) { context.assign(tag, to: cache) }
            }
            // Permanent IDs obtained before the save name the store each object goes to.
            let pending = context.insertedObjects.sorted { ($0.string("name") ?? "") < ($1.string("name") ?? "") }
            try context.obtainPermanentIDs(for: pending)
            #expect(pending.count == 7 && pending.allSatisfy { !$0.objectID.isTemporaryID })
            for tag in pending {
                let name = tag.string("name") ?? ""
                #expect(tag.objectID.storeIdentifier == (["d", "f", "e", "g"].contains(name) ? cache : user).identifier, "\(name)")
            }
            try context.save()
            let tags = try context.objects("Tag", sort: ["name"])
            #expect(tags.map { $0.string("name")! } == ["a", "b", "c", "d", "e", "f", "g"])
            let inCache = Set(tags.filter { $0.objectID.storeIdentifier == cache.identifier }.compactMap { $0.string("name") })
            #expect(inCache == ["d", "f", "e", "g"])
        }
        #expect(try counts(in: "User.sqlite", model)["Tag"] == 3)
        #expect(try counts(in: "Cache.sqlite", model)["Tag"] == 4)

        // A fresh context reads the stores: order, offset and limit apply to the merged results.
        let reader = self.context(coordinator)
        try reader.performAndWait {
            let request = NSFetchRequest<NSManagedObject>(entityName: "Tag")
            request.sortDescriptors = [FetchSortDescriptor(key: "weight", ascending: false), FetchSortDescriptor(key: "name")]
            request.fetchOffset = 1
            request.fetchLimit = 4
            // weights: d0 a1 f2 c0 e1 b2 g0 → by weight descending, then name: b f a e c d g
            #expect(try reader.fetch(request).map { $0.string("name")! } == ["f", "a", "e", "c"])
            #expect(try reader.count(for: request) == 4)
            request.fetchLimit = 0
            #expect(try reader.count(for: request) == 6)
            let ids = NSFetchRequest<NSManagedObjectID>(entityName: "Tag")
            ids.resultType = .managedObjectIDResultType
            ids.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: false)]
            let found = try reader.fetch(ids)
            #expect(found.count == 7 && Set(found.compactMap(\.storeIdentifier)) == [user.identifier, cache.identifier])
            #expect(found.map { try? reader.existingObject(with: $0).string("name") } == ["g", "f", "e", "d", "c", "b", "a"])
            // Dictionaries: sorted by a key they do not show, distinct after the merge.
            let weights = NSFetchRequest<NSDictionary>(entityName: "Tag")
            weights.resultType = .dictionaryResultType
            weights.propertiesToFetch = ["weight"]
            weights.returnsDistinctResults = true
            weights.sortDescriptors = [FetchSortDescriptor(key: "weight")]
            #expect(try reader.fetch(weights).map { ($0["weight"] as? Int64) ?? -1 } == [0, 1, 2])
            // affectedStores narrows the search.
            let onlyCache = NSFetchRequest<NSManagedObject>(entityName: "Tag")
            onlyCache.affectedStores = [cache]
            onlyCache.sortDescriptors = [FetchSortDescriptor(key: "name")]
            #expect(try reader.fetch(onlyCache).map { $0.string("name")! } == ["d", "e", "f", "g"])
            // Groups and aggregates come from one store: across both, an error says to name one.
            let perWeight = NSFetchRequest<NSDictionary>(entityName: "Tag")
            perWeight.resultType = .dictionaryResultType
            perWeight.propertiesToFetch = [
                "weight", NSExpressionDescription(name: "count", expression: .function("count:", [.key("name")])),
            ]
            perWeight.propertiesToGroupBy = ["weight"]
            #expect(throws: CoreDataError.self) { try reader.fetch(perWeight) }
            perWeight.affectedStores = [cache]
            #expect(try reader.fetch(perWeight).map { $0["count"] as? Int } == [2, 1, 1])
        }
        // Batch requests reach every store holding the entity.
        try reader.performAndWait {
            let doomed = NSFetchRequest<NSManagedObject>(entityName: "Tag")
            doomed.predicate = try FetchPredicate(format: "weight == 0")
            let delete = NSBatchDeleteRequest(fetchRequest: doomed)
            delete.resultType = .resultTypeCount
            #expect((try reader.execute(delete) as? NSBatchDeleteResult)?.result as? Int == 3)
            #expect(try reader.count(for: NSFetchRequest<NSManagedObject>(entityName: "Tag")) == 4)
        }
    }

    @Test func relationshipsDoNotCrossStoresAndAFailedSaveWritesNoStore() throws {
        let model = try model()
        let (coordinator, _, _) = try coordinator(model)
        let context = context(coordinator)
        try context.performAndWait {
            try context.make("Thumbnail", ["key": "taken"])
            try context.save()
            // A note (User store) pointing at a thumbnail (Cache store): refused, naming the relationship.
            let note = try context.make("Note", ["title": "n"])
            let thumbnail = try context.make("Thumbnail", ["key": "t"])
            thumbnail.setValue(note, forKey: "note")
            let error = try #require(throws: CoreDataError.self) { try context.save() }
            #expect(error.code == .managedObjectExternalRelationship, "\(error)")
            #expect(error.message.contains("'note'") && error.message.contains("another store"), "\(error.message)")
            context.rollback()

            // A save writing both stores, failing in one of them (a uniqueness conflict in the Cache store): the note
            // meant for the User store is not written either.
            try context.make("Note", ["title": "kept out"])
            try context.make("Thumbnail", ["key": "taken"])
            #expect(throws: CoreDataError.self) { try context.save() }
            context.rollback()
        }
        #expect(try counts(in: "User.sqlite", model)["Note"] == 0)
        #expect(try counts(in: "Cache.sqlite", model)["Thumbnail"] == 1)
        try context.performAndWait {
            try context.make("Note", ["title": "now"])
            try context.make("Thumbnail", ["key": "fresh"])
            try context.save()
        }
        #expect(try counts(in: "User.sqlite", model)["Note"] == 1)
        #expect(try counts(in: "Cache.sqlite", model)["Thumbnail"] == 2)
    }

    @Test func anEntityNoStoreHoldsIsNeverFoundAndCannotBeSaved() throws {
        let model = try model()
        let (coordinator, _, cache) = try coordinator(model)
        let context = context(coordinator)
        try context.performAndWait {
            #expect(try context.objects("Scratch").isEmpty)
            try context.make("Scratch", ["text": "nowhere"])
            let error = try #require(throws: CoreDataError.self) { try context.save() }
            #expect(error.message.contains("Scratch") && error.message.contains("'User'"), "\(error.message)")
            context.rollback()
            // Assigned to a store whose configuration does not list the entity: refused at the save.
            let note = try context.make("Note", ["title": "misplaced"])
            context.assign(note, to: cache)
            let misplaced = try #require(throws: CoreDataError.self) { try context.save() }
            #expect(misplaced.message.contains(cache.identifier) && misplaced.message.contains("Note"), "\(misplaced.message)")
        }
        #expect(throws: CoreDataError.self) {
            try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, configurationName: "Nope", at: dir.file("Nope.sqlite"))
        }
        #expect(throws: CoreDataError.self) {
            try coordinator.addPersistentStore(ofType: NSSQLiteStoreType, configurationName: "Cache", at: dir.file("Cache.sqlite"))
        }
    }

    @Test func aContainerLoadsOneStorePerDescribedConfiguration() throws {
        let container = NSPersistentContainer(name: "Configured", managedObjectModel: try model())
        let user = NSPersistentStoreDescription(url: dir.file("U.sqlite"))
        user.configuration = "User"
        let cache = NSPersistentStoreDescription(url: dir.file("C.sqlite"))
        cache.configuration = "Cache"
        container.persistentStoreDescriptions = [user, cache]
        try container.loadPersistentStores()
        let stores = container.persistentStoreCoordinator.persistentStores
        #expect(stores.map(\.configurationName) == ["User", "Cache"])
        let context = container.newBackgroundContext()
        let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        child.parent = context
        try child.performAndWait {
            try child.make("Thumbnail", ["key": "k", "size": 1])
            try child.make("Note", ["title": "t"])
            try child.save()
        }
        try context.performAndWait {
            try context.save()
            #expect(try context.objects("Thumbnail").first?.objectID.storeIdentifier == stores[1].identifier)
            #expect(try context.objects("Note").first?.objectID.storeIdentifier == stores[0].identifier)
        }
        let keys = try child.performAndWait { try child.objects("Thumbnail").map { $0.string("key") } }
        #expect(keys == ["k"])
    }
}
