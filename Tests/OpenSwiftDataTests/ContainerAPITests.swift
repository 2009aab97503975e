import OpenSwiftData
import Testing

/// A counter of notifications, filled on the posting thread.
private final class Posted: @unchecked Sendable {
    var willSave = 0
    var inserted: [PersistentIdentifier] = []
    var deleted: [PersistentIdentifier] = []
}

@Suite struct ContainerAPITests {
    @Test func configurationsTakeApplesArgumentsAndDeleteAllDataEmptiesEveryStore() throws {
        // The template code of an Apple app: a schema, a configuration with the group and CloudKit arguments.
        let schema = Schema([Journey.self, Leg.self])
        let configuration = ModelConfiguration(
            schema: schema, isStoredInMemoryOnly: true, groupContainer: .none, cloudKitDatabase: .private("iCloud.org.example"))
        let container = try ModelContainer(for: schema, configurations: [configuration])
        let context = ModelContext(container)
        let journey = Journey(title: "West")
        journey.legs = [Leg(from: "Faro", transport: .boat), Leg(from: "Sagres", transport: .train)]
        context.insert(journey)
        try context.save()
        #expect(try context.fetchCount(FetchDescriptor<Leg>()) == 2)
        container.deleteAllData()
        let after = ModelContext(container)
        #expect(try after.fetchCount(FetchDescriptor<Leg>()) == 0)
        #expect(try after.fetchCount(FetchDescriptor<Journey>()) == 0)
        // erase() does the same, and reports what stops it.
        after.insert(Journey(title: "East"))
        try after.save()
        try container.erase()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Journey>()) == 0)
        // A configuration for given classes.
        let forTypes = ModelConfiguration(for: Trip.self, isStoredInMemoryOnly: true)
        #expect(forTypes.schema?.types.count == 1)
    }

    @Test func aBatchedFetchReadsTheSameModelsInOrder() throws {
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        for i in 0..<45 { context.insert(Leg(from: "Place \(1000 + i)", transport: .train)) }
        try context.save()
        let descriptor = FetchDescriptor<Leg>(sortBy: [SortDescriptor(\.from, order: .reverse)])
        let batched = try ModelContext(container).fetch(descriptor, batchSize: 10)
        #expect(batched.count == 45)
        #expect(batched.map(\.from) == (0..<45).reversed().map { "Place \(1000 + $0)" })
        #expect(batched[3] === batched[3])
    }

    @Test func savesPostWillSaveAndDidSaveWithTheIdentifiers() throws {
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let posted = Posted()
        let center = NotificationCenter.default
        let observers = [
            center.addObserver(forName: ModelContext.willSave, object: context, queue: nil) { _ in posted.willSave += 1 },
            center.addObserver(forName: ModelContext.didSave, object: context, queue: nil) { note in
                let info = note.userInfo ?? [:]
                posted.inserted += info[ModelContext.NotificationKey.insertedIdentifiers.rawValue] as? [PersistentIdentifier] ?? []
                posted.deleted += info[ModelContext.NotificationKey.deletedIdentifiers.rawValue] as? [PersistentIdentifier] ?? []
            },
        ]
        defer { observers.forEach(center.removeObserver) }
        let leg = Leg(from: "Tavira", transport: .train)
        context.insert(leg)
        try context.save()
        #expect(posted.willSave == 1)
        #expect(posted.inserted == [leg.persistentModelID])
        #expect(leg.persistentModelID.storeIdentifier != nil)
        let identifier = leg.persistentModelID
        context.delete(leg)
        try context.save()
        #expect(posted.deleted == [identifier])
        // A save with nothing to save posts nothing.
        try context.save()
        #expect(posted.willSave == 2)
        // Several inserts at once (a model and the models it relates to): each one's permanent identifier, once.
        posted.inserted = []
        let journey = Journey(title: "Algarve")
        journey.legs = [Leg(from: "Faro", transport: .boat), Leg(from: "Lagos", transport: .train)]
        context.insert(journey)
        try context.save()
        let expected = [journey.persistentModelID] + journey.legs.map(\.persistentModelID)
        #expect(Set(posted.inserted) == Set(expected) && posted.inserted.count == 3)
        #expect(posted.inserted.allSatisfy { $0.storeIdentifier != nil })
    }

    @Test func identifiersRoundTripAndABadURIIsAnError() throws {
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let leg = Leg(from: "Lagos", transport: .boat)
        context.insert(leg)
        let temporary = leg.persistentModelID
        let decoded = try JSONDecoder().decode(PersistentIdentifier.self, from: JSONEncoder().encode(temporary))
        #expect(decoded == temporary && decoded.hashValue == temporary.hashValue && decoded.storeIdentifier == nil)
        try context.save()
        let saved = leg.persistentModelID
        #expect(saved != temporary && saved.storeIdentifier != nil && saved.entityName == "Leg")
        let json = try JSONEncoder().encode(saved)
        #expect(String(decoding: json, as: UTF8.self).contains("x-coredata:"))
        #expect(try JSONDecoder().decode(PersistentIdentifier.self, from: json) == saved)
        #expect(Set([saved, try JSONDecoder().decode(PersistentIdentifier.self, from: json)]).count == 1)
        let bad = Data(#"{"uri":"https://example.org/Leg/p1","entityName":"Leg"}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(PersistentIdentifier.self, from: bad) }
    }
}
