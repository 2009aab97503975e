// W6's `@Model` contender, in a module of its own: it imports OpenSwiftData only, as a SwiftData file would (the
// benchmark's other files import OpenCoreData, whose model builder has names SwiftData's macros also use).
import OpenSwiftData

/// W6's item as a SwiftData model: the same ten attributes.
@Model final class ModelItem {
    var section: String?
    var score: Int64
    var title: String?
    var flag: Bool
    var amount: Double
    var created: Date?
    var note: String?
    var count: Int32
    var rating: Double
    var code: String?

    init(
        section: String?, score: Int64, title: String?, flag: Bool, amount: Double, created: Date?, note: String?, count: Int32,
        rating: Double, code: String?
    ) {
        self.section = section
        self.score = score
        self.title = title
        self.flag = flag
        self.amount = amount
        self.created = created
        self.note = note
        self.count = count
        self.rating = rating
        self.code = code
    }
}

/// One row of W6's data, as plain values.
public struct ModelRow: Sendable {
    let section: String
    let score: Int64
    let title: String
    let flag: Bool
    let amount: Double
    let created: Double
    let note: String
    let count: Int64
    let rating: Double
    let code: String

    /// A row.
    public init(
        section: String, score: Int64, title: String, flag: Bool, amount: Double, created: Double, note: String, count: Int64,
        rating: Double, code: String
    ) {
        (self.section, self.score, self.title, self.flag, self.amount) = (section, score, title, flag, amount)
        (self.created, self.note, self.count, self.rating, self.code) = (created, note, count, rating, code)
    }
}

/// W6 with SwiftData's API: a model container on a fresh file, the models made and inserted, one save.
public final class SwiftDataInsert {
    private let container: ModelContainer

    /// A container whose store is a new file at `url`.
    public init(url: URL) throws {
        container = try ModelContainer(for: ModelItem.self, configurations: ModelConfiguration(url: url))
    }

    /// Makes a model per row in a new context, inserts each, saves; returns the times taken to make and insert the
    /// models and to save (seconds since `now()`'s origin).
    public func run(_ rows: [ModelRow], now: () -> UInt64) throws -> (objectsDone: UInt64, saveDone: UInt64) {
        let context = ModelContext(container)
        for row in rows {
            context.insert(
                ModelItem(
                    section: row.section, score: row.score, title: row.title, flag: row.flag, amount: row.amount,
                    created: Date(timeIntervalSinceReferenceDate: row.created), note: row.note, count: Int32(row.count),
                    rating: row.rating, code: row.code))
        }
        let objectsDone = now()
        try context.save()
        return (objectsDone, now())
    }
}

/// W6's accessors with SwiftData's API: models inserted and saved, then each model's attributes read and set.
public final class SwiftDataAccessors {
    private let container: ModelContainer
    private let context: ModelContext
    private let models: [ModelItem]

    /// A container on a new file at `url` holding a saved model for each row.
    public init(url: URL, rows: [ModelRow]) throws {
        container = try ModelContainer(for: ModelItem.self, configurations: ModelConfiguration(url: url))
        let context = ModelContext(container)
        context.autosaveEnabled = false
        self.context = context
        models = rows.map { row in
            let model = ModelItem(
                section: nil, score: 0, title: nil, flag: false, amount: 0, created: nil, note: nil, count: 0, rating: 0, code: nil)
            context.insert(model)
            Self.fill(model, row)
            return model
        }
        try context.save()
    }

    private static func fill(_ model: ModelItem, _ row: ModelRow) {
        model.section = row.section
        model.score = row.score
        model.title = row.title
        model.flag = row.flag
        model.amount = row.amount
        model.created = Date(timeIntervalSinceReferenceDate: row.created)
        model.note = row.note
        model.count = Int32(row.count)
        model.rating = row.rating
        model.code = row.code
    }

    /// Reads every attribute of each model, then sets each to the next row's value; returns a sum of what it read.
    public func readAndSet(_ rows: [ModelRow]) -> Int {
        var checksum = 0
        for (index, model) in models.enumerated() {
            checksum &+= (model.section?.utf8.count ?? 0) &+ Int(model.score) &+ (model.title?.utf8.count ?? 0)
            checksum &+= (model.flag ? 1 : 0) &+ Int(model.amount) &+ Int(model.created?.timeIntervalSinceReferenceDate ?? 0)
            checksum &+= (model.note?.utf8.count ?? 0) &+ Int(model.count) &+ Int(model.rating) &+ (model.code?.utf8.count ?? 0)
            Self.fill(model, rows[(index + 1) % rows.count])
        }
        return checksum
    }
}
