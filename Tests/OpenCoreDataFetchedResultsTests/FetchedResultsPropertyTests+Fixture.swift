import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// The property test's model, and how it renders and re-fetches the table it checks.
extension FetchedResultsPropertyTests {
    /// Whether the configuration reads the related shelf (then cells show it, so a stale shelf shows as a stale cell).
    static func readsShelf(_ config: Configuration) -> Bool {
        "\(config)".contains("shelf")
    }

    /// Items and shelves; a configuration for them and one for an entity the test never touches, so that a coordinator
    /// with a store per configuration can stand in for the usual one.
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel(configurations: ["Main": ["Item", "Shelf"], "Side": ["Scratch"]]) {
            Entity("Scratch") { Attribute("text", .string) }
            Entity("Item") {
                Attribute("name", .string)
                Attribute("group", .string)
                Attribute("score", .integer32, default: 0)
                Attribute("tag", .string)
                Attribute("hidden", .boolean, default: false)
                Relationship("shelf", to: "Shelf", inverse: "items")
            }
            Entity("Shelf") {
                Attribute("label", .string)
                Attribute("rank", .integer32, default: 0)
                Relationship("items", to: "Item", toMany: true, inverse: "shelf")
            }
        }
    }

    static func render(_ object: NSManagedObject, _ config: Configuration) -> String {
        let keys = ["name", "group", "score", "tag", "hidden"] + (readsShelf(config) ? ["shelf.label", "shelf.rank"] : [])
        let fields = keys.map { key -> String in
            let value: Any? = (object.value(forKeyPath: key)) ?? nil
            return value.map { "\($0)" } ?? "nil"
        }
        return fields.joined(separator: "|")
    }

    /// The table a fresh fetch gives, by object identity.
    static func freshItems(_ context: NSManagedObjectContext, _ config: Configuration) throws -> SectionedItems<ObjectIdentifier> {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.sortDescriptors = config.sorts
        request.predicate = try config.predicate.map { try FetchPredicate(format: $0) }
        request.fetchLimit = config.limit
        request.fetchOffset = config.offset
        return sectioned(try context.fetch(request), by: config.section)
    }
}
