import GRDB
import OpenSwiftData
import Testing
import _TestSupport

@ModelActor actor TripImporter {
    func importTrips(_ codes: [String]) throws -> [PersistentIdentifier] {
        let trips = codes.map { Trip(name: "Trip \($0)", startDate: Date(timeIntervalSinceReferenceDate: 0), code: $0) }
        for trip in trips { modelContext.insert(trip) }
        try modelContext.save()
        return trips.map(\.persistentModelID)
    }

    func names() throws -> [String] {
        try modelContext.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.code)])).map(\.name)
    }
}

@Suite struct ModelActorTests {
    @Test func anActorWorksInAContextOfItsOwn() async throws {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let importer = TripImporter(modelContainer: container)
        #expect(importer.modelContainer === container)
        let ids = try await importer.importTrips(["OPO", "LIS"])
        #expect(ids.count == 2)
        #expect(try await importer.names() == ["Trip LIS", "Trip OPO"])
        // Another context of the container finds the actor's saved models by their identifiers.
        let context = ModelContext(container)
        let found = ids.compactMap { context.model(for: $0) as? Trip }.map(\.code)
        #expect(found == ["OPO", "LIS"])
    }

    @Test func enumerateWalksEveryModelInBatchesAndRejectsChangesUnlessAllowed() throws {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        for i in 0..<25 { context.insert(Trip(name: "t\(i)", startDate: .now, code: String(format: "C%02d", i))) }
        try context.save()
        var codes: [String] = []
        try context.enumerate(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.code)]), batchSize: 4) { codes.append($0.code) }
        #expect(codes == (0..<25).map { String(format: "C%02d", $0) })
        #expect(throws: SwiftDataError.self) {
            try context.enumerate(FetchDescriptor<Trip>(), batchSize: 4) { $0.nights += 1 }
        }
        context.rollback()
        try context.enumerate(FetchDescriptor<Trip>(), batchSize: 4, allowEscapingMutations: true) { $0.nights += 1 }
        try context.save()
        #expect(try ModelContext(container).fetch(FetchDescriptor<Trip>()).allSatisfy { $0.nights == 2 })
    }
}

@Model final class Person {
    #Unique<Person>([\.email], [\.givenName, \.familyName])
    #Index<Person>([\.familyName])
    var email: String
    var givenName: String
    var familyName: String
    var age: Int = 0

    init(email: String, givenName: String, familyName: String) {
        self.email = email
        self.givenName = givenName
        self.familyName = familyName
    }
}

@Suite struct UniqueAndIndexTests {
    @Test func eachUniqueGroupUpsertsAndTheIndexExists() throws {
        let directory = TemporaryDirectory()
        let container = try ModelContainer(
            for: Person.self, configurations: ModelConfiguration(url: directory.file("people.store")))
        let context = ModelContext(container)
        context.insert(Person(email: "ana@example.org", givenName: "Ana", familyName: "Silva"))
        context.insert(Person(email: "rui@example.org", givenName: "Rui", familyName: "Costa"))
        try context.save()
        // Same name pair, new email: the row with that name pair is updated.
        let renamed = Person(email: "ana.silva@example.org", givenName: "Ana", familyName: "Silva")
        renamed.age = 40
        let other = ModelContext(container)
        other.insert(renamed)
        try other.save()
        let people = try ModelContext(container).fetch(FetchDescriptor<Person>(sortBy: [SortDescriptor(\.givenName)]))
        #expect(people.map(\.email) == ["ana.silva@example.org", "rui@example.org"])
        #expect(people.map(\.age) == [40, 0])
        // The store file has the index on ZFAMILYNAME and the unique indexes of both groups.
        let indexed = try storeFile(directory.file("people.store")).read { db in
            try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ZPERSON' AND sql IS NOT NULL")
        }
        #expect(indexed.contains { $0.contains("ZFAMILYNAME") && !$0.contains("UNIQUE") }, "\(indexed)")
        #expect(indexed.contains { $0.contains("UNIQUE") && $0.contains("ZEMAIL") }, "\(indexed)")
        #expect(indexed.contains { $0.contains("UNIQUE") && $0.contains("ZGIVENNAME") && $0.contains("ZFAMILYNAME") }, "\(indexed)")
    }
}
