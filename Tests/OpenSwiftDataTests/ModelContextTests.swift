import OpenSwiftData
import Testing
import _TestSupport

@Model final class Trip {
    var name: String
    var startDate: Date
    @Attribute(.unique) var code: String
    var budget: Double = 100
    var notes: String?
    var nights: Int = 1
    @Transient var isSelected = false

    init(name: String, startDate: Date, code: String) {
        self.name = name
        self.startDate = startDate
        self.code = code
    }
}

@Suite struct ModelContextTests {
    @Test func insertSaveAndFetchInANewContext() throws {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let trip = Trip(name: "Lisbon", startDate: Date(timeIntervalSinceReferenceDate: 1000), code: "LIS")
        trip.notes = "by train"
        #expect(trip.budget == 100)
        context.insert(trip)
        #expect(trip.modelContext === context)
        #expect(context.hasChanges)
        trip.nights = 3
        try context.save()
        let other = ModelContext(container)
        let fetched = try other.fetch(FetchDescriptor<Trip>())
        #expect(fetched.count == 1)
        let first = try #require(fetched.first)
        #expect(first !== trip)
        #expect(first.name == "Lisbon")
        #expect(first.code == "LIS")
        #expect(first.notes == "by train")
        #expect(first.nights == 3)
        #expect(first.budget == 100)
        #expect(first.startDate == Date(timeIntervalSinceReferenceDate: 1000))
        #expect(first.isSelected == false)
    }
}

enum Transport: String, Codable, Sendable {
    case train, plane, boat
}

@Model final class Journey {
    var title: String
    @Relationship(deleteRule: .cascade, inverse: \Leg.journey) var legs: [Leg] = []
    var id: UUID
    var link: URL?
    var photo: Data?
    var cost: Decimal = 0

    init(title: String) {
        self.title = title
        self.id = UUID()
    }
}

@Model final class Leg {
    var from: String
    var transport: Transport
    var backup: Transport?
    var journey: Journey?

    init(from: String, transport: Transport) {
        self.from = from
        self.transport = transport
    }
}

@Suite struct ModelRelationshipTests {
    @Test func relatedModelsAreInsertedWithTheModelThatPointsToThemAndSurviveAReopen() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("journeys.store")
        let id: UUID
        do {
            let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(url: url))
            let context = ModelContext(container)
            let journey = Journey(title: "Coast")
            id = journey.id
            journey.link = URL(string: "https://example.org/coast")
            journey.photo = Data([1, 2, 3])
            journey.cost = Decimal(string: "12.50")!
            let first = Leg(from: "Porto", transport: .train)
            first.backup = .boat
            journey.legs = [first, Leg(from: "Lisbon", transport: .plane)]
            context.insert(journey)
            #expect(context.insertedModelsArray.count == 3)
            #expect(first.modelContext === context)
            #expect(first.journey === journey)
            try context.save()
        }
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(url: url))
        let context = ModelContext(container)
        let journeys = try context.fetch(FetchDescriptor<Journey>())
        let journey = try #require(journeys.first)
        #expect(journeys.count == 1)
        #expect(journey.id == id)
        #expect(journey.link == URL(string: "https://example.org/coast"))
        #expect(journey.photo == Data([1, 2, 3]))
        #expect(journey.cost == Decimal(string: "12.50")!)
        let legs = try context.fetch(FetchDescriptor<Leg>(sortBy: [SortDescriptor(\.from)]))
        #expect(legs.map(\.from) == ["Lisbon", "Porto"])
        #expect(legs.map(\.transport) == [.plane, .train])
        #expect(legs.map(\.backup) == [nil, .boat])
        #expect(legs.allSatisfy { $0.journey === journey })
        #expect(Set(journey.legs.map(\.from)) == ["Lisbon", "Porto"])
        // The cascade rule: deleting the journey deletes its legs.
        context.delete(journey)
        try context.save()
        #expect(try context.fetchCount(FetchDescriptor<Leg>()) == 0)
    }

    @Test func sortLimitOffsetAndCount() throws {
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        for name in ["d", "b", "a", "c", "e"] { context.insert(Leg(from: name, transport: .boat)) }
        try context.save()
        var descriptor = FetchDescriptor<Leg>(sortBy: [SortDescriptor(\.from, order: .reverse)])
        descriptor.fetchLimit = 2
        descriptor.fetchOffset = 1
        #expect(try context.fetch(descriptor).map(\.from) == ["d", "c"])
        #expect(try context.fetchCount(FetchDescriptor<Leg>()) == 5)
        #expect(try context.fetchIdentifiers(descriptor).count == 2)
    }

    @Test func identifiersFindTheModelInAnotherContext() throws {
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let leg = Leg(from: "Faro", transport: .train)
        // Before the insert: a temporary identifier that names the model's entity, the same each time it is read.
        #expect(leg.persistentModelID.entityName == "Leg")
        #expect(leg.persistentModelID == leg.persistentModelID)
        #expect(leg.persistentModelID.storeIdentifier == nil)
        context.insert(leg)
        try context.save()
        let identifier = leg.persistentModelID
        #expect(identifier.entityName == "Leg")
        #expect(identifier.storeIdentifier != nil)
        let encoded = try JSONEncoder().encode(identifier)
        let decoded = try JSONDecoder().decode(PersistentIdentifier.self, from: encoded)
        #expect(decoded == identifier)
        let other = ModelContext(container)
        let found = try #require(other.model(for: decoded) as? Leg)
        #expect(found.from == "Faro")
        #expect(found !== leg)
        let registered: Leg? = context.registeredModel(for: identifier)
        #expect(registered === leg)
    }

    @Test func rollbackAndUnsavedState() throws {
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let leg = Leg(from: "Braga", transport: .train)
        context.insert(leg)
        try context.save()
        leg.from = "Guimarães"
        #expect(leg.hasChanges)
        #expect(context.changedModelsArray.count == 1)
        context.rollback()
        #expect(leg.from == "Braga")
        #expect(!context.hasChanges)
        context.delete(leg)
        #expect(leg.isDeleted)
        #expect(context.deletedModelsArray.count == 1)
        #expect(leg.modelContext === context)
        // Once the deletion is saved the model has left the context (SwiftData's behaviour): no context, not
        // "deleted" any more, and the context lists no deleted models.
        try context.save()
        #expect(leg.modelContext == nil && !leg.isDeleted && context.deletedModelsArray.isEmpty)
        #expect(Leg(from: "Faro", transport: .boat).modelContext == nil)
    }

    /// An app's undo, as SwiftData apps set it up (`mainContext.undoManager = UndoManager()`): each processed set of
    /// changes is a step; undoing an insert removes the model and its cascade, redoing brings them back.
    @Test @MainActor func undoAndRedoThroughTheContextsUndoManager() throws {
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = container.mainContext
        context.undoManager = UndoManager()
        let journey = Journey(title: "Minho")
        journey.legs = [Leg(from: "Braga", transport: .train)]
        context.insert(journey)
        context.processPendingChanges()
        journey.title = "Minho by rail"
        context.processPendingChanges()
        #expect(context.undoManager?.canUndo == true)
        context.undoManager?.undo()
        #expect(journey.title == "Minho")
        context.undoManager?.undo()
        #expect(try context.fetchCount(FetchDescriptor<Journey>()) == 0)
        #expect(try context.fetchCount(FetchDescriptor<Leg>()) == 0)
        context.undoManager?.redo()
        context.undoManager?.redo()
        try context.save()
        let fresh = ModelContext(container)
        #expect(try fresh.fetch(FetchDescriptor<Journey>()).map(\.title) == ["Minho by rail"])
        #expect(try fresh.fetch(FetchDescriptor<Leg>()).map(\.from) == ["Braga"])
        context.rollback()
        #expect(context.undoManager?.canUndo == false)
    }
}

/// Inserting models that are not new (deleted ones, ones whose deletion was saved, other contexts' ones, ones of
/// classes the schema lacks); none stops the program.
@Suite struct ModelReinsertionTests {
    func container() throws -> ModelContainer {
        try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    }

    /// Undoing a delete, as apps do: the model whose deletion was saved goes in again (here or in another context) as
    /// a new row with its values, related to the rows it was related to.
    @Test func aModelWhoseDeletionWasSavedGoesInAgainWithItsValues() throws {
        let container = try container()
        let context = ModelContext(container)
        let journey = Journey(title: "Coast")
        let leg = Leg(from: "Porto", transport: .train)
        leg.backup = .boat
        leg.journey = journey
        context.insert(leg)
        try context.save()
        let oldID = leg.persistentModelID
        context.delete(leg)
        try context.save()
        // Deleted and saved: it reads its values, and relates to nothing (it used to stop the program).
        #expect(leg.modelContext == nil && leg.from == "Porto" && leg.journey == nil)
        let other = ModelContext(container)
        other.insert(leg)
        #expect(leg.modelContext === other && other.insertedModelsArray.count == 1)
        try other.save()
        #expect(leg.persistentModelID != oldID)
        let stored = try ModelContext(container).fetch(FetchDescriptor<Leg>())
        #expect(stored.map(\.from) == ["Porto"] && stored.map(\.backup) == [.boat])
        #expect(stored.first?.journey?.title == "Coast")
        // In its own context too.
        other.delete(leg)
        try other.save()
        other.insert(leg)
        try other.save()
        #expect(try other.fetchCount(FetchDescriptor<Leg>()) == 1 && leg.journey?.title == "Coast")
    }

    /// A journey deleted with its legs (a cascade) and inserted again with them: they relate again.
    @Test func modelsDeletedTogetherRelateAgainWhenInsertedAgain() throws {
        let container = try container()
        let context = ModelContext(container)
        let journey = Journey(title: "Coast")
        journey.legs = [Leg(from: "Porto", transport: .train), Leg(from: "Faro", transport: .plane)]
        context.insert(journey)
        try context.save()
        let legs = journey.legs
        context.delete(journey)
        try context.save()
        #expect(try context.fetchCount(FetchDescriptor<Leg>()) == 0)
        context.insert(journey)
        for leg in legs { context.insert(leg) }
        try context.save()
        let fresh = ModelContext(container)
        let stored = try #require(try fresh.fetch(FetchDescriptor<Journey>()).first)
        #expect(Set(stored.legs.map(\.from)) == ["Porto", "Faro"])
    }

    /// An insert rolled back: the model keeps the values it was made with, and can go in again.
    @Test func aModelWhoseInsertWasRolledBackKeepsItsValuesAndGoesInAgain() throws {
        let context = ModelContext(try container())
        let leg = Leg(from: "Faro", transport: .boat)
        context.insert(leg)
        context.rollback()
        #expect(leg.modelContext == nil && leg.from == "Faro" && leg.transport == .boat)
        context.insert(leg)
        try context.save()
        let stored = try ModelContext(context.container).fetch(FetchDescriptor<Leg>())
        #expect(stored.map(\.from) == ["Faro"] && stored.map(\.transport) == [.boat])
    }

    @Test func insertingADeletedModelUndoesTheDeletion() throws {
        let context = ModelContext(try container())
        let leg = Leg(from: "Braga", transport: .train)
        context.insert(leg)
        try context.save()
        context.delete(leg)
        #expect(leg.isDeleted)
        context.insert(leg)
        #expect(!leg.isDeleted && context.deletedModelsArray.isEmpty)
        try context.save()
        #expect(try context.fetchCount(FetchDescriptor<Leg>()) == 1)
    }

    /// Another context's model, or a model of a class the schema does not have, is not inserted: the next save throws
    /// why (once), and the context's other changes are saved by the save after it.
    @Test func aRefusedInsertIsThrownByTheNextSave() throws {
        let container = try container()
        let first = ModelContext(container)
        let leg = Leg(from: "Braga", transport: .train)
        first.insert(leg)
        let second = ModelContext(container)
        second.insert(leg)
        second.insert(Journey(title: "Kept"))
        #expect(leg.modelContext === first)
        let error = #expect(throws: SwiftDataError.self) { try second.save() }
        #expect(error?.description.contains("belongs to another model context") == true)
        try second.save()
        #expect(try second.fetchCount(FetchDescriptor<Journey>()) == 1)
        // The container has legs and journeys (a leg's relationship brings them in), not trips.
        let narrow = try ModelContainer(for: Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(narrow)
        context.insert(Trip(name: "Elsewhere", startDate: .now, code: "E"))
        let missing = #expect(throws: SwiftDataError.self) { try context.save() }
        #expect(missing?.description.contains("Trip is not in the container's schema") == true)
        context.insert(Trip(name: "Again", startDate: .now, code: "A"))
        context.rollback()
        try context.save()
    }
}

@Suite struct ModelUniquenessTests {
    @Test func insertingAModelWithAStoredUniqueValueUpdatesThatRow() throws {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        context.insert(Trip(name: "Lisbon", startDate: Date(timeIntervalSinceReferenceDate: 0), code: "LIS"))
        context.insert(Trip(name: "Porto", startDate: Date(timeIntervalSinceReferenceDate: 0), code: "OPO"))
        try context.save()
        let again = ModelContext(container)
        let update = Trip(name: "Lisboa", startDate: Date(timeIntervalSinceReferenceDate: 5), code: "LIS")
        again.insert(update)
        try again.save()
        let trips = try ModelContext(container).fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.code)]))
        #expect(trips.map(\.code) == ["LIS", "OPO"])
        #expect(trips.map(\.name) == ["Lisboa", "Porto"])
        #expect(trips[0].startDate == Date(timeIntervalSinceReferenceDate: 5))
    }

    /// Models of one save with the same unique value become one row, the later values winning (an import of a feed
    /// that repeats an item, as Apple's earthquakes sample inserts every feature it reads).
    @Test func modelsOfOneSaveWithTheSameUniqueValueBecomeOne() throws {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        for (name, code) in [("Lisbon", "LIS"), ("Porto", "OPO"), ("Lisboa", "LIS"), ("Lisbon city", "LIS")] {
            context.insert(Trip(name: name, startDate: Date(timeIntervalSinceReferenceDate: 0), code: code))
        }
        try context.save()
        let trips = try ModelContext(container).fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.code)]))
        #expect(trips.map(\.code) == ["LIS", "OPO"])
        #expect(trips.map(\.name) == ["Lisbon city", "Porto"])
    }
}

@Suite struct ModelObservationTests {
    @Test func changingAPersistedPropertyTellsItsObservers() throws {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let trip = Trip(name: "Lisbon", startDate: .now, code: "LIS")
        context.insert(trip)
        let changed = Changes()
        withObservationTracking {
            _ = trip.name
        } onChange: {
            changed.count += 1
        }
        trip.budget = 5  // not read in the tracking closure: no change reported
        #expect(changed.count == 0)
        trip.name = "Lisboa"
        #expect(changed.count == 1)
        #expect(trip.name == "Lisboa")
    }

    /// A model's registrar is made on its first read: changes made before any read tell no one (there is no one to
    /// tell), and an observation that starts later, on an unsaved model or an inserted one, hears the changes after it.
    @Test func aModelChangedBeforeItWasReadIsObservedOnceRead() throws {
        let trip = Trip(name: "Lisbon", startDate: .now, code: "LIS")
        trip.notes = "first"  // changed before any read: no registrar yet
        trip.budget = 250
        #expect(changeIsObserved(reading: { _ = trip.notes }, after: { trip.notes = "second" }))
        #expect(!changeIsObserved(reading: { _ = trip.notes }, after: { trip.budget = 300 }))
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let other = Trip(name: "Porto", startDate: .now, code: "OPO")
        other.nights = 3
        context.insert(other)
        other.nights = 4  // inserted, never read: still no registrar
        #expect(changeIsObserved(reading: { _ = other.nights }, after: { other.nights = 5 }))
        #expect(trip.notes == "second" && trip.budget == 300 && other.nights == 5)
        // A fetched model (made by the context, not by its initializer) too.
        try context.save()
        let fetched = try ModelContext(container).fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.code == "OPO" }))[0]
        #expect(changeIsObserved(reading: { _ = fetched.name }, after: { fetched.name = "Oporto" }))
    }

    @MainActor @Test func theMainContextSavesAndOtherContextsSeeIt() throws {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let main = container.mainContext
        #expect(main === container.mainContext)
        #expect(main.autosaveEnabled)
        main.insert(Trip(name: "Faro", startDate: .now, code: "FAO"))
        try main.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 1)
    }

    @Test func aContainerWhoseConfigurationForbidsSavingThrows() throws {
        let container = try ModelContainer(
            for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true, allowsSave: false))
        let context = ModelContext(container)
        context.insert(Trip(name: "Faro", startDate: .now, code: "FAO"))
        #expect(throws: SwiftDataError.self) { try context.save() }
    }
}

/// A counter the observation callback can update.
final class Changes: @unchecked Sendable {
    var count = 0
}

@Suite struct ModelAutosaveTests {
    @Test func aContextWithAutosaveSavesOnItsQueue() async throws {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        #expect(!context.autosaveEnabled)
        context.autosaveEnabled = true
        context.insert(Trip(name: "Faro", startDate: .now, code: "FAO"))
        let reader = ModelContext(container)
        var saved = 0
        for _ in 0..<200 where saved == 0 {
            try await Task.sleep(for: .milliseconds(10))
            saved = try reader.fetchCount(FetchDescriptor<Trip>())
        }
        #expect(saved == 1)
        #expect(!context.hasChanges)
    }

    /// Inserts on the caller's thread and merges on the context's queue take turns under the context's lock.
    ///
    /// A model context's calls run on the caller's thread under its context's lock; other contexts' saves merge into
    /// it on its queue under the same lock. Inserting and fetching on one thread while another context saves and
    /// merges, over and over, neither deadlocks nor loses a model (a hang here is the failure).
    @Test func insertsOnTheCallersThreadWhileOtherSavesMergeIn() async throws {
        let directory = TemporaryDirectory()
        let container = try ModelContainer(
            for: Trip.self, configurations: ModelConfiguration(url: directory.url.appendingPathComponent("merge.store")))
        let writer = Task.detached {
            let other = ModelContext(container)
            for i in 0..<200 {
                other.insert(Trip(name: "Other \(i)", startDate: .now, code: "O\(i)"))
                try other.save()
            }
        }
        let context = ModelContext(container)
        for i in 0..<400 {
            context.insert(Trip(name: "Here \(i)", startDate: .now, code: "H\(i)"))
            if i % 50 == 49 {
                try context.save()
                _ = try context.fetchCount(FetchDescriptor<Trip>())
            }
        }
        try await writer.value
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 600)
        #expect(try context.fetchCount(FetchDescriptor<Trip>()) == 600)
    }
}
