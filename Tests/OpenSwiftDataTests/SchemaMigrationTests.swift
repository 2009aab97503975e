import OpenSwiftData
import Testing
import _TestSupport

// Three versions of a hiking log, written as SwiftData apps write them: each version's classes nested in its schema.
enum HikesV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Hike.self] }

    @Model final class Hike {
        var name: String
        var miles: Int
        init(name: String, miles: Int) {
            self.name = name
            self.miles = miles
        }
    }
}

enum HikesV2: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Hike.self] }

    @Model final class Hike {
        // Names are unique from this version on: the custom stage removes duplicates first.
        @Attribute(.unique) var name: String
        @Attribute(originalName: "miles") var distance: Int
        var kilometres: Double = 0
        init(name: String, distance: Int) {
            self.name = name
            self.distance = distance
        }
    }
}

enum HikesV3: VersionedSchema {
    static let versionIdentifier = Schema.Version(3, 0, 0)
    static var models: [any PersistentModel.Type] { [Hike.self, Trail.self] }

    @Model final class Hike {
        @Attribute(.unique) var name: String
        var distance: Int
        var kilometres: Double = 0
        var trail: Trail?
        init(name: String, distance: Int) {
            self.name = name
            self.distance = distance
        }
    }

    @Model final class Trail {
        var title: String
        var hikes: [Hike] = []
        init(title: String) { self.title = title }
    }
}

/// What the custom stage's closures saw, for the test to check.
nonisolated(unsafe) var hikesMigrationLog: [String] = []

enum HikesPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [HikesV1.self, HikesV2.self, HikesV3.self] }
    static var stages: [MigrationStage] { [v1ToV2, .lightweight(fromVersion: HikesV2.self, toVersion: HikesV3.self)] }

    static let v1ToV2 = MigrationStage.custom(
        fromVersion: HikesV1.self, toVersion: HikesV2.self,
        willMigrate: { context in
            // At version 1: keep the first hike of each name.
            let hikes = try context.fetch(FetchDescriptor<HikesV1.Hike>(sortBy: [SortDescriptor(\.miles)]))
            hikesMigrationLog.append("will: \(hikes.map(\.name))")
            var seen: Set<String> = []
            for hike in hikes where !seen.insert(hike.name).inserted { context.delete(hike) }
        },
        didMigrate: { context in
            // At version 2: the renamed attribute holds the miles; fill the new one from it.
            let hikes = try context.fetch(FetchDescriptor<HikesV2.Hike>(sortBy: [SortDescriptor(\.name)]))
            hikesMigrationLog.append("did: \(hikes.map { "\($0.name)=\($0.distance)" })")
            for hike in hikes { hike.kilometres = Double(hike.distance) * 1.609 }
        })
}

@Suite(.serialized) struct SchemaMigrationTests {
    @Test func aStoreAtTheFirstVersionMigratesThroughEveryStage() throws {
        let directory = TemporaryDirectory()
        let configuration = ModelConfiguration(url: directory.file("hikes.store"))
        do {
            let container = try ModelContainer(for: Schema(versionedSchema: HikesV1.self), configurations: configuration)
            let context = ModelContext(container)
            for (name, miles) in [("Ridge", 5), ("Lake", 3), ("Ridge", 9)] { context.insert(HikesV1.Hike(name: name, miles: miles)) }
            try context.save()
        }
        hikesMigrationLog = []
        let container = try ModelContainer(
            for: Schema(versionedSchema: HikesV3.self), migrationPlan: HikesPlan.self, configurations: configuration)
        #expect(hikesMigrationLog == [#"will: ["Lake", "Ridge", "Ridge"]"#, #"did: ["Lake=3", "Ridge=5"]"#])
        let context = ModelContext(container)
        let hikes = try context.fetch(FetchDescriptor<HikesV3.Hike>(sortBy: [SortDescriptor(\.name)]))
        #expect(hikes.map(\.name) == ["Lake", "Ridge"])
        #expect(hikes.map(\.distance) == [3, 5])
        #expect(hikes.map(\.kilometres) == [3 * 1.609, 5 * 1.609])
        // Version 3's new model and relationship work on the migrated store.
        let trail = HikesV3.Trail(title: "Coast")
        context.insert(trail)
        hikes[0].trail = trail
        try context.save()
        let reread = try ModelContext(container).fetch(FetchDescriptor<HikesV3.Trail>())
        #expect(reread.first?.hikes.map(\.name) == ["Lake"])
        // Opening again at version 3 runs no stage.
        hikesMigrationLog = []
        _ = try ModelContainer(for: Schema(versionedSchema: HikesV3.self), migrationPlan: HikesPlan.self, configurations: configuration)
        #expect(hikesMigrationLog.isEmpty)
    }

    @Test func aStageNamingAVersionThePlanDoesNotListIsAnError() throws {
        enum Incomplete: SchemaMigrationPlan {
            static var schemas: [any VersionedSchema.Type] { [HikesV1.self] }
            static var stages: [MigrationStage] { [.lightweight(fromVersion: HikesV1.self, toVersion: HikesV2.self)] }
        }
        let directory = TemporaryDirectory()
        let error = #expect(throws: SwiftDataError.self) {
            try ModelContainer(
                for: Schema(versionedSchema: HikesV2.self), migrationPlan: Incomplete.self,
                configurations: ModelConfiguration(url: directory.file("hikes.store")))
        }
        #expect(error?.description.contains("HikesV2") == true, "\(error.map { "\($0)" } ?? "")")
    }

    @Test func versionsCompareByMajorMinorAndPatch() {
        #expect(Schema.Version(1, 2, 3) < Schema.Version(1, 10, 0))
        #expect(Schema.Version(2, 0, 0) > Schema.Version(1, 99, 99))
        #expect(Schema(versionedSchema: HikesV3.self).version.description == "3.0.0")
        #expect(Schema(versionedSchema: HikesV3.self).types.count == 2)
    }
}
