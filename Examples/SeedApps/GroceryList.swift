import ArgumentParser
import Foundation
import OpenCoreData

/// The grocery list (seed 002) as a live table: products sectioned by name, with index titles, cheapest first in
/// each section; `groceries` without options prints the article's walk-through instead.
///
/// For example:
/// ```swift
/// let code = SeedSession.main(GroceryList.self, ["--web", "--port", "8080"], output: { print($0) }, errors: { print($0) })
/// ```
public struct GroceryList: SeedCommand {
    /// The command's name and summary.
    public static let configuration = CommandConfiguration(
        commandName: "groceries",
        abstract: "The grocery list sectioned by name, with index titles, in a live table.",
        discussion: "Without options, groceries prints the walk-through of the article it comes from.")

    @OptionGroup var options: SeedOptions

    /// Whether the terminal table was asked for (it is what a terminal gets without --web or --script anyway).
    @Flag(help: "Show the live table in the terminal.")
    var terminal = false

    /// A command to be filled in by the argument parser.
    public init() {}

    /// The thirty products of the article, in its order.
    public static let products: [(name: String, price: Int)] = [
        ("Donut", 156), ("Soda", 425), ("Soda", 85), ("Cheddar Cheese", 400), ("Flour", 920), ("Parmesan Cheese", 861),
        ("Soda", 76), ("Milk", 633), ("Soda", 635), ("Parmesan Cheese", 718), ("Donut", 701), ("Soda", 176),
        ("Banana", 731), ("Parmesan Cheese", 746), ("Flour", 456), ("Flour", 519), ("Cheddar Cheese", 221), ("Flour", 560),
        ("Parmesan Cheese", 646), ("Donut", 492), ("Banana", 185), ("Soda", 539), ("Parmesan Cheese", 872), ("Banana", 972),
        ("Donut", 821), ("Milk", 409), ("Banana", 334), ("Milk", 734), ("Soda", 448), ("Parmesan Cheese", 345),
    ]

    /// The article's model: `Products` (name, price) and `FavoriteProducts`, which inherits from it; `classes` gives
    /// entities their classes (the walk-through's `@Managed` subclasses).
    public static func model(classes: [String: NSManagedObject.Type] = [:]) throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Products", managedObjectClass: classes["Products"] ?? NSManagedObject.self) {
                Attribute("name", .string)
                Attribute("price", .integer32, default: 0)
            }
            Entity("FavoriteProducts", parent: "Products", managedObjectClass: classes["FavoriteProducts"] ?? NSManagedObject.self)
        }
    }

    /// The app: products sectioned by name (index titles from the names' first letters), sorted by name then price.
    public static var spec: SeedAppSpec {
        var spec = SeedAppSpec(
            name: "Groceries", model: { try model() }, entityName: "Products",
            sortDescriptors: [FetchSortDescriptor(key: "name"), FetchSortDescriptor(key: "price")],
            cell: { product in "\(product.value(forKey: "name") as? String ?? "?")  \(product.value(forKey: "price") as? Int ?? 0)" })
        spec.sectionKeyPath = "name"
        spec.newObjectValues = {
            let product = products.randomElement()!
            return ["name": product.name, "price": Int.random(in: 1...999)]
        }
        // An empty store gets the article's thirty products first.
        spec.prepare = { script in
            guard script.table.rowCount == 0 else { return }
            for product in products { try script.insert(values: ["name": product.name, "price": product.price], into: script.context) }
            try script.context.save()
        }
        return spec
    }

    /// Runs the app.
    public func run(output: @escaping (String) -> Void) throws {
        if terminal, options.script == nil, !options.web, isatty(STDIN_FILENO) == 0 || isatty(STDOUT_FILENO) == 0 {
            throw SeedFailure("--terminal needs a terminal (standard input and output a TTY); try --web or --script FILE.")
        }
        try SeedSession.run(Self.spec, options: options, output: output)
    }
}
