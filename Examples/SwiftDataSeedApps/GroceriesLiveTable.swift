// The groceries' live table in SwiftData's form: a ModelQuery draws the terminal table the Core Data seed apps show
// (`swift run groceries-swiftdata --live`). Unlike GroceriesWalkThrough.swift, this file is Linux's own: the live table
// is OpenCoreData's, where a SwiftUI app would give the query to a List.

import Foundation
import OpenCoreDataLiveTable
import OpenCoreDataTerminalTable
import OpenSwiftData
import SeedApps

/// The grocery list as a live table driven by a `ModelQuery`.
public enum GroceriesLiveTable {
    /// The table's query: products by name, then price, in sections by name (the Core Data form's controller).
    public static func query(in context: ModelContext) throws -> ModelQuery<Product> {
        try ModelQuery(
            FetchDescriptor<Product>(sortBy: [SortDescriptor(\.name), SortDescriptor(\.price)]), sectionedBy: \.name, in: context)
    }

    /// A live table of `query`, a row per product (`NAME, PRICE`), updated by each of the query's batches.
    public static func table(of query: ModelQuery<Product>) -> LiveTable {
        let table = LiveTable(following: query.fetchedResultsController) { object in
            let product = query.model(of: object)
            return "\(product.name), \(product.price)"
        }
        query.forwardChanges(to: table)
        return table
    }

    /// The table in the terminal, on the store at `url` (filled with the grocery list when empty): `a` adds a product,
    /// `d` deletes the highlighted one, each saved at once; `q` quits.
    ///
    /// - Throws: the store's errors, and `TerminalTableError.notATerminal` without a terminal.
    @MainActor public static func runTerminal(storeURL url: URL) throws {
        let container = try ModelContainer(for: Product.self, configurations: ModelConfiguration(url: url))
        let context = container.mainContext
        context.autosaveEnabled = false
        if try context.fetchCount(FetchDescriptor<Product>()) == 0 {
            for (name, price) in GroceryList.products { context.insert(Product(name: name, price: price)) }
            try context.save()
        }
        let query = try query(in: context)
        let table = table(of: query)
        let view = TerminalTable(table: table, title: "groceries (SwiftData)")
        var added = 0
        view.addKey("a", "add") { _ in
            added += 1
            let (name, price) = GroceryList.products[added % GroceryList.products.count]
            context.insert(Product(name: name, price: price + added))
            try context.save()
        }
        view.addKey("d", "delete") { view in
            guard let indexPath = view.selectedIndexPath else { return }
            context.delete(query.model(of: table.controller.object(at: indexPath)))
            try context.save()
        }
        try view.run()
        withExtendedLifetime(query) {}
    }
}
