import Foundation
import OpenSwiftData
import Testing
import _TestSupport

/// A context does not keep the models it hands out alive: a row's model lives while someone holds it, and a later
/// fetch or lookup of the row makes a new one once it has gone (the row remembers its model without a reference).
@Suite struct ModelLifetimeTests {
    static func container(trips count: Int) throws -> ModelContainer {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let setup = ModelContext(container)
        for i in 0..<count {
            setup.insert(Trip(name: "T\(i)", startDate: Date(timeIntervalSinceReferenceDate: Double(i)), code: String(format: "C%03d", i)))
        }
        try setup.save()
        return container
    }

    @Test func aModelLivesWhileHeldAndARowGetsANewOneAfter() throws {
        let context = ModelContext(try Self.container(trips: 3))
        let byCode = FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.code)])
        weak var released: Trip?
        let id: PersistentIdentifier
        do {
            let trips = try context.fetch(byCode)
            released = trips[0]
            id = trips[0].persistentModelID
            #expect(try context.fetch(byCode)[0] === trips[0], "the same model while it is held")
            #expect(context.model(for: id) === trips[0])
        }
        #expect(released == nil, "nobody holds the model, so it is gone")
        let fresh = try context.fetch(byCode)[0]
        #expect(fresh.code == "C000" && fresh.persistentModelID == id)
        #expect(context.model(for: id) === fresh)
    }

    /// Models released on other threads while the context looks their rows up: every model handed out is alive and
    /// reads its row (a dying one is never handed out; its row gets a new model).
    @Test func modelsReleasedOnOtherThreadsWhileTheirRowsAreLookedUp() throws {
        final class Holder: @unchecked Sendable { var trips: [Trip]? }
        let context = ModelContext(try Self.container(trips: 40))
        let byCode = FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.code)])
        var handedOut = 0
        for round in 0..<30 {
            let holder = Holder()
            let ids: [PersistentIdentifier]
            do {
                let trips = try context.fetch(byCode)
                ids = trips.map(\.persistentModelID)
                holder.trips = trips
            }
            let start = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            let releaser = Thread {
                start.wait()
                holder.trips = nil
                done.signal()
            }
            releaser.start()
            start.signal()
            for (i, id) in ids.enumerated() {
                let trip = try #require(context.model(for: id) as? Trip, "round \(round), row \(i)")
                #expect(trip.code == String(format: "C%03d", i), "round \(round)")
                handedOut += 1
            }
            done.wait()
        }
        #expect(handedOut == 30 * 40)
    }
}
