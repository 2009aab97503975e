// The managed object model a schema maps to, read through Core Data's descriptions (this file declares no models, so
// the builder's `Attribute` and SwiftData's do not meet).
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenSwiftData

@Suite struct SchemaMappingTests {
    /// Each attribute of `entity` as a short description: its type, then its elements, transformer and options.
    static func summary(_ attribute: NSAttributeDescription) -> String {
        if attribute.attributeType == .compositeAttributeType {
            return "composite("
                + attribute.elements.map { $0.elements.isEmpty ? $0.name : $0.name + summary($0).dropFirst(9) }.joined(separator: ", ")
                + ")"
        }
        var parts = [
            attribute.attributeType == .transformableAttributeType
                ? "transformable(\(attribute.valueTransformerName ?? ""))" : attribute.attributeType.xcodeName.lowercased()
        ]
        if attribute.allowsExternalBinaryDataStorage { parts.append("external") }
        if attribute.preservesValueInHistoryOnDeletion { parts.append("preserved") }
        if let modifier = attribute.versionHashModifier { parts.append(modifier) }
        return parts.joined(separator: " ")
    }

    @Test func eachKindOfCodableAndTheAttributeOptions() throws {
        ValueTransformer.setValueTransformer(CommaListTransformer(), forName: NSValueTransformerName("CommaListTransformer"))
        let container = try ModelContainer(for: Office.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let entity = try #require(container.persistentContainer.managedObjectModel.entity(named: "Office"))
        let attributes = Dictionary(uniqueKeysWithValues: entity.attributesByName.map { ($0.key, Self.summary($0.value)) })
        #expect(attributes["address"] == "composite(street, city, postcode, floor, climate, location(latitude, longitude), since)")
        #expect(attributes["tags"]?.hasPrefix("transformable(OpenSwiftData.PropertyList<") == true, "\(attributes)")
        #expect(attributes["hours"]?.hasPrefix("transformable(OpenSwiftData.PropertyList<") == true, "\(attributes)")
        #expect(attributes["aliases"] == "transformable(CommaListTransformer)")
        #expect(attributes["floorPlan"] == "binary external", "\(attributes)")
        #expect(attributes["code"] == "string preserved v2", "\(attributes)")
        let climate = try #require(entity.attributesByName["address"]?.elements.first { $0.name == "climate" })
        #expect(climate.attributeType == .stringAttributeType)
    }

    /// Listing a model brings in the models its relationships reach, transitively, as SwiftData's schema does: a
    /// container for `Folder` alone has `Note` (a folder's notes) and `Tag` (a note's tags), related as declared, and
    /// saves and fetches all three.
    @Test func theModelsARelationshipReachesJoinTheSchema() throws {
        #expect(Schema([Folder.self]).types.map { "\($0)" } == ["Folder", "Note", "Tag"])
        #expect(Schema([Tag.self]).types.map { "\($0)" } == ["Tag", "Note", "Folder"])
        let container = try ModelContainer(for: Folder.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let model = container.persistentContainer.managedObjectModel
        #expect(Set(model.entities.map(\.name)) == ["Folder", "Note", "Tag"])
        let notes = try #require(model.entity(named: "Note")?.relationshipsByName["tags"])
        #expect(notes.destinationEntity?.name == "Tag" && notes.inverseRelationship?.name == "notes" && notes.isToMany)
        let context = ModelContext(container)
        let folder = Folder(name: "Work")
        let note = Note(title: "Plan", body: "", folder: folder)
        note.tags = [Tag(name: "q3")]
        context.insert(note)  // the folder and the tag go in with it
        try context.save()
        let fetched = try ModelContext(container).fetch(FetchDescriptor<Tag>())
        #expect(fetched.map(\.name) == ["q3"])
        #expect(fetched.first?.notes.map(\.title) == ["Plan"] && fetched.first?.notes.first?.folder?.name == "Work")
    }

    /// `relationshipKeyPathsForPrefetching` names the relationships whose rows the fetch reads with its results: reading
    /// the notes' folders and tags afterwards reads no row from the store.
    @Test func prefetchingReadsTheRelationshipsWithTheFetch() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("notes.store")
        // Written by a container of its own, closed before the store is read: a save seen by the reading container
        // (its remote-change notification merged) would rightly drop the rows kept for faults.
        do {
            let setup = ModelContext(try ModelContainer(for: Folder.self, configurations: ModelConfiguration(url: url)))
            for f in 0..<3 {
                let folder = Folder(name: "F\(f)")
                for n in 0..<3 {
                    let note = Note(title: "N\(f)\(n)", body: "", folder: folder)
                    note.tags = (0..<n).map { Tag(name: "T\(f)\(n)\($0)") }
                    setup.insert(note)
                }
            }
            try setup.save()
        }
        let container = try ModelContainer(for: Folder.self, configurations: ModelConfiguration(url: url))
        var descriptor = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])
        descriptor.relationshipKeyPathsForPrefetching = [\.folder, \.tags, \.title]
        let context = ModelContext(container)
        #expect(try context.fetchRequest(descriptor).relationshipKeyPathsForPrefetching == ["folder", "tags"])
        let store = try #require(container.persistentContainer.persistentStoreCoordinator.persistentStores.first as? SQLiteStore)
        let notes = try context.fetch(descriptor)
        let afterFetch = store.rowsRead
        let read = notes.map { "\($0.title) \($0.folder?.name ?? "-") \($0.tags.map(\.name).sorted())" }
        #expect(read.first == "N00 F0 []" && read.last == "N22 F2 [\"T220\", \"T221\"]")
        #expect(store.rowsRead == afterFetch, "rows read after the fetch: \(store.rowsRead - afterFetch)")
    }

    /// `propertiesToFetch` reads the attributes it names with the fetch; a model reads the rest of its row when one of
    /// its other properties is first read.
    @Test func propertiesToFetchReadTheNamedAttributesOnly() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("notes.store")
        do {
            let setup = ModelContext(try ModelContainer(for: Folder.self, configurations: ModelConfiguration(url: url)))
            for n in 0..<4 { setup.insert(Note(title: "N\(n)", body: "body \(n)", folder: nil)) }
            try setup.save()
        }
        let container = try ModelContainer(for: Folder.self, configurations: ModelConfiguration(url: url))
        var descriptor = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])
        descriptor.propertiesToFetch = [\.title, \.isPinned]
        let context = ModelContext(container)
        #expect(try context.fetchRequest(descriptor).propertiesToFetch?.compactMap { $0 as? String } == ["title", "isPinned"])
        let store = try #require(container.persistentContainer.persistentStoreCoordinator.persistentStores.first as? SQLiteStore)
        let notes = try context.fetch(descriptor)
        let afterFetch = store.rowsRead
        #expect(notes.map(\.title) == ["N0", "N1", "N2", "N3"])
        #expect(store.rowsRead == afterFetch, "rows read for fetched titles: \(store.rowsRead - afterFetch)")
        #expect(notes[2].body == "body 2")
        #expect(store.rowsRead == afterFetch + 1, "rows read for one body: \(store.rowsRead - afterFetch)")
        notes[3].title = "renamed"
        #expect(notes[3].title == "renamed" && notes[3].body == "body 3")
    }

    /// A model subclass's entity is a subentity of its superclass's, declaring only its own properties; the
    /// superclass joins the schema when only the subclass is listed.
    @Test func aModelSubclassIsASubentity() throws {
        let container = try ModelContainer(
            for: BusinessOuting.self, Waypoint.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let model = container.persistentContainer.managedObjectModel
        #expect(Set(model.entities.map(\.name)) == ["BusinessOuting", "Waypoint", "Outing"])
        let business = try #require(model.entity(named: "BusinessOuting"))
        #expect(business.superentity?.name == "Outing")
        #expect(Set(business.attributesByName.keys) == ["name", "destination", "startDate", "perDiem", "company"])
        #expect(Set(business.properties.map(\.name)) == ["perDiem", "company"])
        #expect(model.entity(named: "Outing")?.subentities.map(\.name) == ["BusinessOuting"])
    }
}
