import GRDB
import OpenSwiftData
import Testing
import _TestSupport

@Suite struct ConfigurationTests {
    static func rows(_ table: String, in url: URL) throws -> Int? {
        try storeFile(url).read { db in
            try db.tableExists(table) ? try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") : nil
        }
    }

    @Test func eachConfigurationKeepsItsModelsInItsOwnStore() throws {
        let directory = TemporaryDirectory()
        let journeysURL = directory.file("journeys.store")
        let tripsURL = directory.file("trips.store")
        func open() throws -> ModelContainer {
            try ModelContainer(
                for: Journey.self, Leg.self,
                configurations: ModelConfiguration("journeys", schema: Schema([Journey.self, Leg.self]), url: journeysURL),
                // Trip joins the container through its configuration's schema.
                ModelConfiguration("trips", schema: Schema([Trip.self]), url: tripsURL))
        }
        do {
            let context = ModelContext(try open())
            let journey = Journey(title: "North")
            journey.legs = [Leg(from: "Porto", transport: .train)]
            context.insert(journey)
            context.insert(Trip(name: "Lisbon", startDate: Date(timeIntervalSinceReferenceDate: 0), code: "LIS"))
            try context.save()
        }
        #expect(try Self.rows("ZJOURNEY", in: journeysURL) == 1)
        #expect(try Self.rows("ZLEG", in: journeysURL) == 1)
        #expect(try Self.rows("ZTRIP", in: tripsURL) == 1)
        // (The other store has no rows of them: no table, or an empty one.)
        #expect(try Self.rows("ZTRIP", in: journeysURL) ?? 0 == 0)
        #expect(try Self.rows("ZJOURNEY", in: tripsURL) ?? 0 == 0)
        // Opened again, the container reads each model from its store.
        let context = ModelContext(try open())
        #expect(try context.fetch(FetchDescriptor<Trip>()).map(\.code) == ["LIS"])
        #expect(try context.fetch(FetchDescriptor<Journey>()).first?.legs.map(\.from) == ["Porto"])
    }

    @Test func aReadOnlyConfigurationRefusesSavesOfItsModelsOnly() throws {
        let directory = TemporaryDirectory()
        let container = try ModelContainer(
            for: Journey.self, Leg.self, Trip.self,
            configurations: ModelConfiguration("journeys", schema: Schema([Journey.self, Leg.self]), isStoredInMemoryOnly: true),
            ModelConfiguration(
                "reference", schema: Schema([Trip.self]), url: directory.file("ref.store"), allowsSave: false))
        let context = ModelContext(container)
        context.insert(Journey(title: "South"))
        try context.save()
        context.insert(Trip(name: "Faro", startDate: Date(timeIntervalSinceReferenceDate: 0), code: "FAO"))
        let error = #expect(throws: SwiftDataError.self) { try context.save() }
        #expect(error?.description.contains("Trip") == true, "\(error.map { "\($0)" } ?? "")")
    }

    @Test func twoConfigurationsWithOneNameAreAnError() throws {
        let error = #expect(throws: SwiftDataError.self) {
            try ModelContainer(
                for: Trip.self,
                configurations: ModelConfiguration("same", isStoredInMemoryOnly: true),
                ModelConfiguration("same", isStoredInMemoryOnly: true))
        }
        #expect(error?.description.contains("same") == true)
    }
}
