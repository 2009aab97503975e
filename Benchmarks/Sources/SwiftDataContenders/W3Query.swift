import OpenSwiftData

/// W3's item as a SwiftData model: the fixture's entity `Item` and its ten attributes (the section is not optional,
/// as a query's section key path must be a `String`).
@Model final class Item {
    var section: String
    var score: Int64?
    var title: String?
    var flag: Bool?
    var amount: Double?
    var created: Date?
    var note: String?
    var count: Int32?
    var rating: Double?
    var code: String?

    init(section: String, score: Int64) {
        self.section = section
        self.score = score
    }
}

/// Set when a query reports a change (the observation's `onChange` runs on the thread that changes the query).
private final class ChangeFlag: @unchecked Sendable {
    var raised = false
}

/// W3 through SwiftData's API: a `ModelQuery` (sections by `section`, rows by `score`) over a copy of the fixture's
/// store, and the changes W3 makes, each made on a model of the query's context and processed, as a SwiftData app's
/// change reaches its `@Query`.
public final class SwiftDataQueryChanges {
    private let container: ModelContainer
    private let context: ModelContext
    private let query: ModelQuery<Item>
    private var counter = 0
    private var picked: Item?
    private static let letters = (65...90).map { String(UnicodeScalar($0)!) }

    /// The kinds of change, by W3's names.
    public static let kinds = ["edit", "move within section", "move across sections", "insert", "delete"]

    /// A query over the store at `url` (a copy of the fixture's: opening it with the model's schema may migrate it).
    public init(storeAt url: URL) throws {
        container = try ModelContainer(for: Item.self, configurations: ModelConfiguration(url: url))
        context = ModelContext(container)
        query = try ModelQuery(
            FetchDescriptor<Item>(sortBy: [SortDescriptor(\.section), SortDescriptor(\.score)]), sectionedBy: \.section, in: context)
    }

    /// How many models the query holds.
    public var count: Int { query.results.count }

    /// Picks the model the next change works on, as W3 picks an object (untimed).
    public func prepare() {
        counter += 1
        let sections = query.sections
        let section = sections[counter % sections.count]
        picked = section.results[(counter * 7919) % section.results.count]
    }

    /// Makes one change of `kind` on the picked model (or inserts one), processes it, and checks that the query
    /// reported it.
    public func change(_ kind: String) {
        let flag = ChangeFlag()
        withObservationTracking {
            _ = query.results
        } onChange: {
            flag.raised = true
        }
        switch kind {
        case "edit": picked!.title = "edited \(counter)"
        case "move within section": picked!.score = ((picked!.score ?? 0) + 1 + Int64(counter) * 7919) % 1_000_000
        case "move across sections":
            let current = Self.letters.firstIndex(of: picked!.section) ?? 0
            picked!.section = Self.letters[(current + 1 + counter % 25) % 26]
        case "insert": context.insert(Item(section: "M", score: Int64(counter)))
        case "delete": context.delete(picked!)
        default: preconditionFailure("unknown change \(kind)")
        }
        context.processPendingChanges()
        precondition(flag.raised, "the query did not report the \(kind)")
    }
}
