import Foundation
import OpenSwiftData
import Testing
import _TestSupport

/// Properties of every kind a model with a row reads and sets: direct attributes (by the entity's index, through the
/// class's layout) declared out of the entity's order, and an enum, a composite and an optional of each, which go by key.
@Model final class Gadget {
    var zeta: String
    var alpha: Int
    var ratio: Double?
    var when: Date?
    var tag: UUID?
    var link: URL?
    var price: Decimal
    var isOn: Bool
    var size: GadgetSize
    var spec: GadgetSpec?

    init(zeta: String, alpha: Int) {
        self.zeta = zeta
        self.alpha = alpha
        self.price = 0
        self.isOn = false
        self.size = .small
    }
}

enum GadgetSize: String, Codable { case small, large }

struct GadgetSpec: Codable, Equatable {
    var width: Int
    var height: Int
}

@Suite struct ModelRowAccessorTests {
    /// Everything the model's properties hold, as text.
    static func values(_ gadget: Gadget) -> [String] {
        [
            gadget.zeta, "\(gadget.alpha)", "\(String(describing: gadget.ratio))", "\(String(describing: gadget.when))",
            "\(String(describing: gadget.tag))", "\(String(describing: gadget.link))", "\(gadget.price)", "\(gadget.isOn)",
            gadget.size.rawValue, "\(String(describing: gadget.spec))",
        ]
    }

    static func change(_ gadget: Gadget, _ round: Int) {
        gadget.zeta = "z\(round)"
        gadget.alpha = -round
        gadget.ratio = round.isMultiple(of: 2) ? nil : Double(round) / 4
        gadget.when = Date(timeIntervalSinceReferenceDate: Double(round * 1000))
        gadget.tag = round.isMultiple(of: 3) ? nil : UUID()
        gadget.link = URL(string: "https://example.com/\(round)")
        gadget.price = Decimal(round) / 100
        gadget.isOn = round.isMultiple(of: 2)
        gadget.size = round.isMultiple(of: 2) ? .large : .small
        gadget.spec = GadgetSpec(width: round, height: round * 2)
    }

    @Test func modelsWithRowsReadAndSetEveryKindOfProperty() throws {
        let directory = TemporaryDirectory()
        let container = try ModelContainer(for: Gadget.self, configurations: ModelConfiguration(url: directory.file("gadgets.store")))
        let context = ModelContext(container)
        let gadget = Gadget(zeta: "first", alpha: 1)
        context.insert(gadget)
        Self.change(gadget, 1)  // set on an inserted model (its row is new)
        let inserted = Self.values(gadget)
        #expect(inserted[0] == "z1" && inserted[1] == "-1")
        try context.save()
        #expect(Self.values(gadget) == inserted, "a saved model reads what it held")

        // A model a fetch made: its layout is found on first use.
        let reader = ModelContext(container)
        let fetched = try #require(try reader.fetch(FetchDescriptor<Gadget>()).first)
        #expect(Self.values(fetched) == inserted)
        for round in 2...5 {
            Self.change(fetched, round)
            let changed = Self.values(fetched)
            #expect(changed[0] == "z\(round)" && changed[1] == "\(-round)")
            #expect(reader.hasChanges)
            #expect(reader.changedModelsArray.count == 1)
            try reader.save()
            let third = ModelContext(container)
            let again = try #require(try third.fetch(FetchDescriptor<Gadget>()).first)
            #expect(Self.values(again) == changed, "round \(round): what was set on the fetched model was saved")
        }
    }

    /// Predicates over properties set through the row still find them: the values are the stored ones, not only in memory.
    @Test func valuesSetOnAFetchedModelAreWhatAFetchMatches() throws {
        let container = try ModelContainer(for: Gadget.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        for i in 0..<5 { context.insert(Gadget(zeta: "g\(i)", alpha: i)) }
        try context.save()
        let other = ModelContext(container)
        let fetched = try other.fetch(FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.alpha)]))
        fetched[3].alpha = 100
        fetched[3].zeta = "moved"
        try other.save()
        let found = try ModelContext(container).fetch(FetchDescriptor<Gadget>(predicate: #Predicate { $0.alpha > 50 }))
        #expect(found.map(\.zeta) == ["moved"])
    }

    /// A model whose deletion was saved and that goes in again gets a new row: its accessors, which borrow the row and
    /// the context they hold without retaining them, read and set the new one from then on.
    @Test func aModelInsertedAgainReadsAndSetsItsNewRow() throws {
        let container = try ModelContainer(for: Gadget.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let gadget = Gadget(zeta: "first", alpha: 1)
        context.insert(gadget)
        Self.change(gadget, 1)
        try context.save()
        let firstID = gadget.persistentModelID
        context.delete(gadget)
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Gadget>()) == 0)

        context.insert(gadget)
        #expect(gadget.persistentModelID != firstID, "a new row")
        #expect(Self.values(gadget)[0] == "z1", "it reads what it had")
        Self.change(gadget, 6)
        let changed = Self.values(gadget)
        try context.save()
        let stored = try ModelContext(container).fetch(FetchDescriptor<Gadget>())
        #expect(stored.count == 1)
        #expect(stored.map(Self.values) == [changed], "what was set went to the new row and was saved")
        #expect(changeIsObserved(reading: { _ = gadget.alpha }, after: { gadget.alpha = 7 }))
        #expect(gadget.alpha == 7 && context.hasChanges)
    }

    /// A fetched model's registrar is made on its first read, so its changes reach an observation of that read.
    @Test func changesToAFetchedModelAreObserved() throws {
        let container = try ModelContainer(for: Gadget.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        context.insert(Gadget(zeta: "a", alpha: 1))
        try context.save()
        let fetched = try #require(try ModelContext(container).fetch(FetchDescriptor<Gadget>()).first)
        #expect(changeIsObserved(reading: { _ = fetched.zeta }, after: { fetched.zeta = "b" }))
        #expect(changeIsObserved(reading: { _ = fetched.ratio }, after: { fetched.ratio = 2 }))
        #expect(!changeIsObserved(reading: { _ = fetched.zeta }, after: { fetched.alpha = 2 }))
        #expect(fetched.zeta == "b" && fetched.alpha == 2 && fetched.ratio == 2)
    }
}
