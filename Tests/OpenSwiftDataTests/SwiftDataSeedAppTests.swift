import OpenSwiftData
import SeedApps
import SwiftDataSeedApps
import Testing

/// The groceries walk-through in SwiftData's form prints what the data says, block by block.
@Suite struct SwiftDataSeedAppTests {
    /// The lines of the block titled `title` (without its heading and blank line).
    func block(_ title: String, in lines: [String]) -> [String] {
        guard let start = lines.firstIndex(where: { $0.hasPrefix("== \(title) (") }) else { return ["missing block \(title)"] }
        return Array(lines[(start + 1)...].prefix { !$0.isEmpty && !$0.hasPrefix("==") })
    }

    func line(_ product: (name: String, price: Int)) -> String { "NAME: \(product.name), PRICE: \(product.price)" }

    @Test func theWalkThroughsBlocksMatchTheListItComesFrom() async throws {
        var lines: [String] = []
        try await GroceriesWalkThrough.run(storeURL: nil) {
            lines.append(contentsOf: $0.split(separator: "\n", omittingEmptySubsequences: false).map(String.init))
        }
        let products = GroceryList.products
        let sorted = products.sorted { ($0.name, $0.price) < ($1.name, $1.price) }
        #expect(block("Sorted by name, then price", in: lines) == sorted.map(line))
        #expect(
            block("name == \"Cheddar Cheese\"", in: lines).sorted() == products.filter { $0.name == "Cheddar Cheese" }.map(line).sorted())
        #expect(
            block("name contains \"Cheese\" and price < 500, sorted by name, price", in: lines)
                == sorted.filter { $0.name.contains("Cheese") && $0.price < 500 }.map(line))
        let byPrice = products.sorted { $0.price < $1.price }
        #expect(
            block("The 12 cheapest (fetchLimit 12, sorted by price)", in: lines).map { $0.split(separator: " ").last! }
                == byPrice.prefix(12).map { Substring("\($0.price)") })
        let counts = Dictionary(grouping: products, by: \.name).mapValues(\.count)
        #expect(block("ModelQuery sections, by name", in: lines) == counts.keys.sorted().map { "\($0): \(counts[$0]!)" })
        #expect(Array(lines.suffix(2)) == ["object insert at [0, 0]: Banana, 1", "object insert at [1, 0]: Cheddar Cheese, 1"])
    }
}
