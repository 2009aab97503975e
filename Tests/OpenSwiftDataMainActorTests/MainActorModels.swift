// Model files as an app target whose default isolation is the main actor declares them: the models `nonisolated` (so
// that predicates, sorts and model actors can use their key paths and conformances off the main actor), everything
// else on the main actor. This target is compiled with `-default-isolation MainActor`.
import OpenSwiftData
import Testing

@Model nonisolated final class Shelf {
    var name: String
    var position: Int = 0
    @Relationship(deleteRule: .cascade, inverse: \Volume.shelf) var volumes: [Volume] = []

    init(name: String, position: Int = 0) {
        self.name = name
        self.position = position
    }
}

@Model nonisolated final class Volume {
    var title: String
    var pages: Int
    var shelf: Shelf?

    init(title: String, pages: Int) {
        self.title = title
        self.pages = pages
    }
}

/// Adds volumes off the main actor, as an app imports in the background.
@ModelActor actor VolumeImporter {
    func add(_ titles: [String], toShelfNamed name: String) throws {
        let shelf = try modelContext.fetch(FetchDescriptor<Shelf>(predicate: #Predicate { $0.name == name })).first ?? Shelf(name: name)
        for title in titles { shelf.volumes.append(Volume(title: title, pages: title.count * 100)) }
        modelContext.insert(shelf)
        try modelContext.save()
    }
}

@Suite struct MainActorModelTests {
    /// The main context, a model actor and a live query over models declared for main-actor default isolation; the
    /// container lists only `Shelf` (`Volume` joins through the relationship).
    @Test func modelsOfAMainActorTargetSaveFetchAndObserve() async throws {
        let container = try ModelContainer(for: Shelf.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = container.mainContext
        let shelf = Shelf(name: "Fiction", position: 1)
        shelf.volumes = [Volume(title: "Dune", pages: 412)]
        context.insert(shelf)
        try context.save()
        try await VolumeImporter(modelContainer: container).add(["Emma", "Ulysses"], toShelfNamed: "Fiction")
        let query = try ModelQuery(
            FetchDescriptor<Volume>(predicate: #Predicate { $0.pages > 100 }, sortBy: [SortDescriptor(\.title)]),
            in: ModelContext(container))
        #expect(query.results.map(\.title) == ["Dune", "Emma", "Ulysses"])
        let shelves = try ModelContext(container).fetch(FetchDescriptor<Shelf>())
        #expect(shelves.map(\.name) == ["Fiction"] && shelves.first?.volumes.count == 3)
    }
}
