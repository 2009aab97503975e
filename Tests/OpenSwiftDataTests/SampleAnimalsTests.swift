import OpenSwiftData
import Testing
import _TestSupport

/// The sample app's code (SampleAnimals.swift) run against a store file, as the app would use it.
@Suite struct SampleAnimalsTests {
    @Test @MainActor func thePreviewContainerHoldsTheSampleData() throws {
        let container = try AnimalSamples.previewContainer()
        let context = container.mainContext
        #expect(try context.fetchCount(FetchDescriptor<AnimalCategory>()) == 3)
        #expect(try context.fetchCount(FetchDescriptor<Animal>()) == 6)
        let mammals = try #require(try context.fetch(FetchDescriptor<AnimalCategory>(predicate: #Predicate { $0.name == "Mammal" })).first)
        #expect(Set(mammals.animals.map(\.name)) == ["Red Fox", "Giraffe", "Lion"])
        #expect(mammals.animals.allSatisfy { $0.category === mammals })
    }

    @Test func searchDietsUniqueNamesCascadeAndABackgroundImport() async throws {
        let directory = TemporaryDirectory()
        let configuration = ModelConfiguration(url: directory.file("animals.store"))
        let container = try ModelContainer(for: AnimalCategory.self, Animal.self, configurations: configuration)
        let context = ModelContext(container)
        AnimalSamples.insert(into: context)
        try context.save()

        // The search field: everything when empty, else by name ignoring case.
        #expect(try context.fetch(Animal.search("")).count == 6)
        #expect(try context.fetch(Animal.search("O")).map(\.name) == ["Barn Owl", "Cockatiel", "Lion", "Red Fox"])
        // A diet, newest first; the enum, the Codable struct and the array read back from the store.
        let herbivores = try ModelContext(container).fetch(Animal.eating(.herbivorous))
        #expect(herbivores.map(\.name) == ["Iguana", "Cockatiel", "Giraffe"])
        #expect(herbivores.first?.diet == .herbivorous)
        #expect(herbivores.first?.habitat == Habitat(region: "Savanna", climate: "Dry", altitude: nil))
        #expect(herbivores.first?.displayName == "Iguana (Herbivore)")
        #expect(herbivores.first?.isHighlighted == false)

        // An import on the actor's own context: a new category, and animals in an existing one.
        let importer = AnimalImporter(modelContainer: container)
        let afterFish = try await importer.importAnimals([("Clownfish", .omnivorous), ("Pike", .carnivorous)], categoryName: "Fish")
        #expect(afterFish == 8)
        let afterBirds = try await importer.importAnimals([("Kestrel", .carnivorous)], categoryName: "Bird")
        #expect(afterBirds == 9)
        let reader = ModelContext(container)
        let birds = try #require(try reader.fetch(FetchDescriptor<AnimalCategory>(predicate: #Predicate { $0.name == "Bird" })).first)
        #expect(Set(birds.animals.map(\.name)) == ["Barn Owl", "Cockatiel", "Kestrel"])
        #expect(try reader.fetchCount(FetchDescriptor<AnimalCategory>()) == 4)

        // A category inserted again by name updates the stored one (unique), and deleting it deletes its animals.
        reader.insert(AnimalCategory(name: "Bird"))
        try reader.save()
        #expect(try reader.fetchCount(FetchDescriptor<AnimalCategory>()) == 4)
        try reader.delete(model: AnimalCategory.self, where: #Predicate { $0.name == "Bird" })
        try reader.save()
        #expect(try reader.fetchCount(FetchDescriptor<Animal>()) == 6)
        #expect(try reader.fetch(Animal.search("owl")).isEmpty)
    }
}
