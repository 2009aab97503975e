// A small SwiftData app's model and data code in the style of Apple's SwiftData samples (written for this project, not
// copied): to-many relationships declared with an inferred type, a unique name, an enum and a Codable struct as
// properties, a search predicate, sample data for previews and a background importer. It uses only SwiftData's API:
// with `import OpenSwiftData` changed to `import SwiftData` it is an Apple-platform file.
import OpenSwiftData

enum Diet: String, Codable, CaseIterable {
    case herbivorous = "Herbivore"
    case carnivorous = "Carnivore"
    case omnivorous = "Omnivore"
}

struct Habitat: Codable, Equatable {
    var region: String
    var climate: String
    var altitude: Int?
}

@Model
final class AnimalCategory {
    @Attribute(.unique) var name: String
    // Deleting a category deletes its animals.
    @Relationship(deleteRule: .cascade, inverse: \Animal.category)
    var animals = [Animal]()

    init(name: String) {
        self.name = name
    }
}

@Model
final class Animal {
    var name: String
    var diet: Diet
    var habitat: Habitat?
    var nicknames: [String] = []
    var category: AnimalCategory?
    var addedAt = Date(timeIntervalSinceReferenceDate: 0)
    @Transient var isHighlighted = false

    init(name: String, diet: Diet, habitat: Habitat? = nil) {
        self.name = name
        self.diet = diet
        self.habitat = habitat
    }

    /// A name for lists: the animal's, with its diet.
    var displayName: String { "\(name) (\(diet.rawValue))" }
}

extension Animal {
    /// The animals whose name contains `searchText` (all when it is empty), by name.
    static func search(_ searchText: String) -> FetchDescriptor<Animal> {
        FetchDescriptor<Animal>(
            predicate: #Predicate { searchText.isEmpty || $0.name.localizedStandardContains(searchText) },
            sortBy: [SortDescriptor(\.name)])
    }

    /// The animals of a diet, newest first.
    static func eating(_ diet: Diet) -> FetchDescriptor<Animal> {
        let raw = diet.rawValue
        var descriptor = FetchDescriptor<Animal>(sortBy: [SortDescriptor(\.addedAt, order: .reverse)])
        descriptor.predicate = #Predicate { $0.diet.rawValue == raw }
        return descriptor
    }
}

/// Sample data, as an app's previews and first launch use it.
enum AnimalSamples {
    static let categories: [(String, [(String, Diet)])] = [
        ("Mammal", [("Red Fox", .omnivorous), ("Giraffe", .herbivorous), ("Lion", .carnivorous)]),
        ("Bird", [("Barn Owl", .carnivorous), ("Cockatiel", .herbivorous)]),
        ("Reptile", [("Iguana", .herbivorous)]),
    ]

    /// Inserts the sample categories and their animals.
    static func insert(into context: ModelContext) {
        var day = 0.0
        for (name, animals) in categories {
            let category = AnimalCategory(name: name)
            context.insert(category)
            for (animalName, diet) in animals {
                day += 1
                let animal = Animal(name: animalName, diet: diet, habitat: Habitat(region: "Savanna", climate: "Dry", altitude: nil))
                animal.addedAt = Date(timeIntervalSinceReferenceDate: day * 86_400)
                animal.category = category
                context.insert(animal)
            }
        }
    }

    /// A container in memory with the sample data, for previews.
    @MainActor static func previewContainer() throws -> ModelContainer {
        let container = try ModelContainer(
            for: AnimalCategory.self, Animal.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        insert(into: container.mainContext)
        try container.mainContext.save()
        return container
    }
}

/// Imports animals off the main actor, as apps load data downloaded in the background.
@ModelActor
actor AnimalImporter {
    /// Inserts an animal of `categoryName` per row (the category made when it does not exist yet); returns how many
    /// animals the store then has.
    func importAnimals(_ rows: [(name: String, diet: Diet)], categoryName: String) throws -> Int {
        let existing = try modelContext.fetch(FetchDescriptor<AnimalCategory>(predicate: #Predicate { $0.name == categoryName }))
        let category = existing.first ?? AnimalCategory(name: categoryName)
        if existing.isEmpty { modelContext.insert(category) }
        for row in rows {
            let animal = Animal(name: row.name, diet: row.diet)
            animal.category = category
            modelContext.insert(animal)
        }
        try modelContext.save()
        return try modelContext.fetchCount(FetchDescriptor<Animal>())
    }
}
