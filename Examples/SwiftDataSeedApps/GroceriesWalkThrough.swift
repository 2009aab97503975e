// The groceries walk-through (Examples/groceries, in Core Data's form) written the SwiftData way: a @Model class, a
// ModelContainer, FetchDescriptors with #Predicate, and a ModelQuery where the Core Data form has a fetched results
// controller. The file compiles against Apple's SwiftData with its first import changed to `import SwiftData` (and
// ModelQuery, which has no SwiftData counterpart outside SwiftUI, replaced by @Query).

import OpenSwiftData
import SeedApps

/// A product of the grocery list.
@Model public final class Product {
    /// The product's name.
    public var name: String
    /// Its price, in cents.
    public var price: Int

    /// A product.
    public init(name: String, price: Int) {
        self.name = name
        self.price = price
    }
}

/// The walk-through: each block of the Core Data form's output, made with SwiftData's API.
public enum GroceriesWalkThrough {
    /// Runs the walk-through against a store at `url` (replaced), or in memory, writing each line to `output`.
    public static func run(storeURL url: URL?, output: (String) -> Void) async throws {
        let configuration: ModelConfiguration
        if let url {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
            configuration = ModelConfiguration(url: url)
        } else {
            configuration = ModelConfiguration(isStoredInMemoryOnly: true)
        }
        let container = try ModelContainer(for: Product.self, configurations: configuration)
        let context = ModelContext(container)
        for (name, price) in GroceryList.products { context.insert(Product(name: name, price: price)) }
        try context.save()
        output("Saved \(GroceryList.products.count) products\n")

        func block(_ title: String, _ products: [Product]) {
            output("== \(title) (\(products.count))")
            for product in products { output("NAME: \(product.name), PRICE: \(product.price)") }
            output("")
        }

        let byName = [SortDescriptor(\Product.name), SortDescriptor(\Product.price)]
        block("Sorted by name, then price", try context.fetch(FetchDescriptor(sortBy: byName)))

        let exact = #Predicate<Product> { $0.name == "Cheddar Cheese" }
        block("name == \"Cheddar Cheese\"", try context.fetch(FetchDescriptor(predicate: exact)))

        let cheese = #Predicate<Product> { $0.name.contains("Cheese") && $0.price < 500 }
        block(
            "name contains \"Cheese\" and price < 500, sorted by name, price",
            try context.fetch(FetchDescriptor(predicate: cheese, sortBy: byName)))

        var cheapest = FetchDescriptor<Product>(sortBy: [SortDescriptor(\.price)])
        cheapest.fetchLimit = 12
        block("The 12 cheapest (fetchLimit 12, sorted by price)", try context.fetch(cheapest))
        cheapest.fetchOffset = 2
        block("The same with fetchOffset 2", try context.fetch(cheapest))

        // The live query, sectioned by name (the Core Data form's fetched results controller).
        let query = try ModelQuery(FetchDescriptor<Product>(sortBy: byName), sectionedBy: \.name, in: ModelContext(container))
        output("== ModelQuery sections, by name (\(query.sections.count))")
        for section in query.sections { output("\(section.name): \(section.results.count)") }
        output("")

        output("== Inserting \"Banana\" 1 and \"Cheddar Cheese\" 1: the query's batch")
        var batches = query.changes.makeAsyncIterator()
        context.insert(Product(name: "Banana", price: 1))
        context.insert(Product(name: "Cheddar Cheese", price: 1))
        try context.save()
        if let batch = await batches.next() {
            let names = Dictionary(query.results.map { ($0.persistentModelID, "\($0.name), \($0.price)") }, uniquingKeysWith: { a, _ in a })
            for change in batch.sections { output("section \(change.type) at \(change.index): \(change.name)") }
            for change in batch.rows {
                let at = [change.from, change.to].compactMap { $0 }.map { "[\($0.section), \($0.row)]" }.joined(separator: " to ")
                output("object \(change.type) at \(at): \(names[change.id] ?? "?")")
            }
        }
    }
}
