// Observation's own share of W6's accessor workload: `@Model` classes are `@Observable`, as SwiftData's are, so each of
// their reads reports an access to the model's registrar and each set a will-set and a did-set; `@Managed` properties
// report nothing. An `@Observable` class with the same ten properties and no store pays exactly that share, which is
// how much more a `@Model` may cost than `@Managed` for the same reads and sets.
import Foundation
import Observation

/// W6's item as a plain `@Observable` class: the same ten attributes, kept in the object.
@Observable final class ObservedItem {
    var section: String?
    var score: Int64 = 0
    var title: String?
    var flag = false
    var amount = 0.0
    var created: Date?
    var note: String?
    var count: Int32 = 0
    var rating = 0.0
    var code: String?

    init() {}
}

/// W6's accessors on `@Observable` objects with no store: Observation's cost for the reads and sets the `@Model` and
/// `@Managed` contenders make.
public final class ObservationAccessors {
    private let items: [ObservedItem]

    /// An object for each row, filled with its values (as the other contenders' objects are before they are timed).
    public init(rows: [ModelRow]) {
        items = rows.map { row in
            let item = ObservedItem()
            Self.fill(item, row)
            return item
        }
    }

    private static func fill(_ item: ObservedItem, _ row: ModelRow) {
        item.section = row.section
        item.score = row.score
        item.title = row.title
        item.flag = row.flag
        item.amount = row.amount
        item.created = Date(timeIntervalSinceReferenceDate: row.created)
        item.note = row.note
        item.count = Int32(row.count)
        item.rating = row.rating
        item.code = row.code
    }

    /// Reads every attribute of each object, then sets each to the next row's value; returns a sum of what it read.
    public func readAndSet(_ rows: [ModelRow]) -> Int {
        var checksum = 0
        for (index, item) in items.enumerated() {
            checksum &+= (item.section?.utf8.count ?? 0) &+ Int(item.score) &+ (item.title?.utf8.count ?? 0)
            checksum &+= (item.flag ? 1 : 0) &+ Int(item.amount) &+ Int(item.created?.timeIntervalSinceReferenceDate ?? 0)
            checksum &+= (item.note?.utf8.count ?? 0) &+ Int(item.count) &+ Int(item.rating) &+ (item.code?.utf8.count ?? 0)
            Self.fill(item, rows[(index + 1) % rows.count])
        }
        return checksum
    }
}
