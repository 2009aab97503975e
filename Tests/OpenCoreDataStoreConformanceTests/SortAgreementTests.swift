import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Every sort comparison orders a store's fetches as memory does.
///
/// Every sort comparison (binary, case-insensitive, localized, localized case-insensitive, localized standard) orders a
/// store's fetches — objects, IDs, dictionaries, a controller's results, with and without a window — exactly as the
/// in-memory comparison (`FetchSortDescriptor.compareValues`) orders the same values. SQLite compares through its
/// registered collations; PostgreSQL sorts the comparisons no server collation matches in memory.
@Suite struct SortAgreementTests {
    /// Words whose orders differ between the comparisons: case, accents, digits, width, punctuation, empty and nil.
    static let words: [String?] = [
        "apple", "Apple", "Äpfel", "apfel", "banana", "Banana", "item 2", "item 10", "item 1", "éclair", "Eclair", "eclair", "Zebra",
        "zebra", "ß", "ss", "ｆｕｌｌ", "full", "", nil, "a-b", "ab", "a b", "Ω", "ω", "日本", "中文",
    ]

    static func stack(_ places: StorePlaces) throws -> TestStack {
        let model = try NSManagedObjectModel {
            Entity("Word") {
                Attribute("text", .string)
                Attribute("rank", .integer64)
            }
        }
        let stack = try TestStack(model: model, storeAt: try places.url("Sorts"))
        let context = stack.context()
        try context.performAndWait {
            // Inserted in a scrambled order, so that no order comes for free from the keys.
            for (rank, word) in words.enumerated().sorted(by: { ($0.offset * 7) % 27 < ($1.offset * 7) % 27 }) {
                try context.make("Word", ["text": word, "rank": Int64(rank)])
            }
            try context.save()
        }
        return stack
    }

    static func check(_ places: StorePlaces) throws {
        let stack = try stack(places)
        let context = stack.context()
        let windows = [(0, 0), (5, 0), (4, 3), (0, 20), (3, 30)]
        for comparison in FetchSortDescriptor.Comparison.allCases {
            for ascending in [true, false] {
                let sorts = [
                    FetchSortDescriptor(key: "text", ascending: ascending, comparison: comparison), FetchSortDescriptor(key: "rank"),
                ]
                let expected = words.enumerated().sorted { a, b in
                    let c = sorts[0].compareValues(a.element.map { .string($0) } ?? .null, b.element.map { .string($0) } ?? .null)
                    if c != 0 { return ascending ? c < 0 : c > 0 }
                    return a.offset < b.offset
                }.map { Int64($0.offset) }
                for (limit, offset) in windows {
                    let window = Array(expected.dropFirst(offset).prefix(limit == 0 ? expected.count : limit))
                    let label = "\(comparison) \(ascending ? "ascending" : "descending") limit \(limit) offset \(offset)"
                    let request = NSFetchRequest<NSManagedObject>(entityName: "Word")
                    request.sortDescriptors = sorts
                    request.fetchLimit = limit
                    request.fetchOffset = offset
                    let objects = try context.performAndWait { try context.fetch(request).map { $0.value(forKey: "rank") as? Int64 ?? -1 } }
                    #expect(objects == window, "objects, \(label)")
                    let ids = NSFetchRequest<NSManagedObjectID>(entityName: "Word")
                    ids.resultType = .managedObjectIDResultType
                    ids.sortDescriptors = sorts
                    ids.fetchLimit = limit
                    ids.fetchOffset = offset
                    let ranks = try context.performAndWait {
                        try context.fetch(ids).map { try context.existingObject(with: $0).value(forKey: "rank") as? Int64 ?? -1 }
                    }
                    #expect(ranks == window, "object IDs, \(label)")
                    let dictionaries = NSFetchRequest<NSDictionary>(entityName: "Word")
                    dictionaries.resultType = .dictionaryResultType
                    dictionaries.propertiesToFetch = ["rank", "text"]
                    dictionaries.sortDescriptors = sorts
                    dictionaries.fetchLimit = limit
                    dictionaries.fetchOffset = offset
                    let rows = try context.performAndWait {
                        try context.fetch(dictionaries).map { ($0["rank"] as? NSNumber)?.int64Value ?? -1 }
                    }
                    #expect(rows == window, "dictionaries, \(label)")
                }
                // A controller's results (its own fetch path: keys and sort values).
                let request = NSFetchRequest<NSManagedObject>(entityName: "Word")
                request.sortDescriptors = sorts
                let controller = NSFetchedResultsController(
                    fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: nil, cacheName: nil)
                let listed = try context.performAndWait {
                    try controller.performFetch()
                    return (controller.fetchedObjects ?? []).map { $0.value(forKey: "rank") as? Int64 ?? -1 }
                }
                #expect(listed == expected, "controller, \(comparison) \(ascending ? "ascending" : "descending")")
            }
        }
    }

    @Test func everyComparisonOrdersSQLiteFetchesAsMemoryDoes() throws { try Self.check(StorePlaces(.sqlite)) }

    @Test(.enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
    func everyComparisonOrdersPostgreSQLFetchesAsMemoryDoes() throws { try Self.check(StorePlaces(.postgreSQL)) }
}
