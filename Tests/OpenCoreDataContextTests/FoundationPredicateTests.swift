import Foundation
import OpenCoreData
import Testing
import _TestSupport

final class Shop: NSManagedObject {
    @Managed var name: String?
    @Managed var rating: Double
    @Managed var open: Bool
    @Managed var owner: Person?
    @Managed var items: Set<Item>
}

final class Person: NSManagedObject {
    @Managed var name: String?
    @Managed var age: Int32
}

final class Item: NSManagedObject {
    @Managed var title: String?
    @Managed var price: Int32
    @Managed var shop: Shop?
}

@Suite struct FoundationPredicateTests {
    func makeStack() throws -> (TestStack, NSManagedObjectContext) {
        let model = try NSManagedObjectModel {
            Entity("Shop", managedObjectClass: Shop.self) {
                Attribute("name", .string)
                Attribute("rating", .double)
                Attribute("open", .boolean)
                Relationship("owner", to: "Person")
                Relationship("items", to: "Item", toMany: true, inverse: "shop")
            }
            Entity("Person", managedObjectClass: Person.self) {
                Attribute("name", .string)
                Attribute("age", .integer32)
            }
            Entity("Item", managedObjectClass: Item.self) {
                Attribute("title", .string)
                Attribute("price", .integer32)
                Relationship("shop", to: "Shop", inverse: "items")
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        let people = [("Ann", 30), ("Bob", 60)].map { name, age -> Person in
            let p = Person(context: context)
            p.name = name
            p.age = Int32(age)
            return p
        }
        for (i, (name, rating, open)) in [("Cheese Shop", 4.5, true), ("Bakery", 3.0, false), ("Chemist", 2.0, true), ("Deli", 5.0, true)]
            .enumerated()
        {
            let shop = Shop(context: context)
            shop.name = name
            shop.rating = rating
            shop.open = open
            shop.owner = i < 2 ? people[i] : nil
            for j in 0..<i {
                let item = Item(context: context)
                item.title = "\(name) item \(j)"
                item.price = Int32(100 * (j + 1))
                item.shop = shop
            }
        }
        try context.save()
        _ = people
        return (stack, stack.context())
    }

    /// The `#Predicate` and the format string select the same shops, and translate to the same tree.
    func check(_ predicate: Predicate<Shop>, _ format: String, _ context: NSManagedObjectContext) throws -> [String] {
        let translated = try FetchPredicate(predicate)
        let request = NSFetchRequest<Shop>(entityName: "Shop")
        request.sortDescriptors = [FetchSortDescriptor(key: "name")]
        request.predicate = translated
        let viaFoundation = try context.fetch(request).compactMap(\.name)
        request.predicate = try FetchPredicate(format: format)
        let viaFormat = try context.fetch(request).compactMap(\.name)
        #expect(viaFoundation == viaFormat, "\(translated) vs \(format)")
        return viaFoundation
    }

    @Test func comparisonsAndLogic() throws {
        let (stack, context) = try makeStack()
        _ = stack
        #expect(
            try check(#Predicate<Shop> { $0.rating > 3.0 && $0.open }, "rating > 3.0 AND open == YES", context) == ["Cheese Shop", "Deli"])
        #expect(
            try check(#Predicate<Shop> { !$0.open || $0.rating <= 2.0 }, "NOT open == YES OR rating <= 2.0", context) == [
                "Bakery", "Chemist",
            ])
        #expect(try check(#Predicate<Shop> { $0.name == "Deli" }, "name == 'Deli'", context) == ["Deli"])
        #expect(
            try check(#Predicate<Shop> { $0.name != nil && $0.rating * 2 >= 9 }, "name != nil AND rating * 2 >= 9", context) == [
                "Cheese Shop", "Deli",
            ])
        #expect(try check(#Predicate<Shop> { -$0.rating < -4.0 }, "-rating < -4.0", context) == ["Cheese Shop", "Deli"])
    }

    @Test func stringsRelationshipsAndCollections() throws {
        let (stack, context) = try makeStack()
        _ = stack
        #expect(try check(#Predicate<Shop> { $0.name?.starts(with: "Che") == true }, "name BEGINSWITH 'Che'", context).count >= 0)
        #expect(try check(#Predicate<Shop> { ($0.name ?? "").contains("e") }, "name CONTAINS 'e'", context).isEmpty == false)
        #expect(
            try check(#Predicate<Shop> { ($0.owner?.name ?? "nobody") == "nobody" }, "owner.name == nil", context) == ["Chemist", "Deli"])
        #expect(try check(#Predicate<Shop> { $0.owner?.age == 60 }, "owner.age == 60", context) == ["Bakery"])
        #expect(try check(#Predicate<Shop> { $0.owner!.name == "Ann" }, "owner.name == 'Ann'", context) == ["Cheese Shop"])
        #expect(try check(#Predicate<Shop> { $0.owner == nil }, "owner == nil", context) == ["Chemist", "Deli"])
        #expect(try check(#Predicate<Shop> { $0.items.count >= 2 }, "items.@count >= 2", context) == ["Chemist", "Deli"])
        #expect(try check(#Predicate<Shop> { $0.items.contains { $0.price > 250 } }, "ANY items.price > 250", context) == ["Deli"])
        #expect(
            try check(#Predicate<Shop> { $0.items.allSatisfy { $0.price < 250 } }, "ALL items.price < 250", context) == [
                "Bakery", "Cheese Shop", "Chemist",
            ])
        let names = ["Deli", "Bakery"]
        #expect(try check(#Predicate<Shop> { names.contains($0.name ?? "") }, "name IN {'Deli', 'Bakery'}", context).isEmpty == false)
    }

    @Test func integerArithmeticRangesAndStringCounts() throws {
        let (stack, context) = try makeStack()
        defer { withExtendedLifetime(stack) {} }
        #expect(
            try check(#Predicate<Shop> { $0.items.count % 2 == 1 }, "modulus:by:(items.@count, 2) == 1", context) == ["Bakery", "Deli"])
        #expect(try check(#Predicate<Shop> { $0.items.count / 2 == 1 }, "trunc(items.@count / 2) == 1", context) == ["Chemist", "Deli"])
        let (low, high) = (1, 2)
        #expect(
            try check(#Predicate<Shop> { (low...high).contains($0.items.count) }, "items.@count BETWEEN {1, 2}", context) == [
                "Bakery", "Chemist",
            ])
        #expect(try check(#Predicate<Shop> { (low..<high).contains($0.items.count) }, "items.@count == 1", context) == ["Bakery"])
        let ratings = 2.5...4.5
        #expect(
            try check(#Predicate<Shop> { ratings.contains($0.rating) }, "rating BETWEEN {2.5, 4.5}", context) == ["Bakery", "Cheese Shop"])
        #expect(try check(#Predicate<Shop> { $0.name?.count == 4 }, "length(name) == 4", context) == ["Deli"])
        #expect(try check(#Predicate<Shop> { $0.name?.isEmpty == false }, "name != ''", context).count == 4)
    }

    @Test func unsupportedConstructsAreNamed() throws {
        let error = #expect(throws: CoreDataError.self) {
            _ = try FetchPredicate(#Predicate<Shop> { $0.items.first?.price == 100 })
        }
        #expect(error?.code == .unsupported)
        #expect(error?.message.contains("on Set") == true, "\(error?.message ?? "")")
    }

    @Test func sortDescriptorsTranslate() throws {
        let (stack, context) = try makeStack()
        _ = stack
        let byRating = try FetchSortDescriptor(SortDescriptor(\Shop.rating, order: .reverse))
        #expect(byRating == FetchSortDescriptor(key: "rating", ascending: false))
        let byName = try FetchSortDescriptor(SortDescriptor(\Shop.name, comparator: .lexical))
        #expect(byName.key == "name" && byName.ascending)
        let byOwner = try FetchSortDescriptor(SortDescriptor(\Shop.owner?.age))
        #expect(byOwner.key == "owner.age")
        let viaComparator = try FetchSortDescriptor(KeyPathComparator(\Shop.owner?.age, order: .reverse))
        #expect(viaComparator == FetchSortDescriptor(key: "owner.age", ascending: false))
        let request = NSFetchRequest<Shop>(entityName: "Shop")
        request.sortDescriptors = [byRating]
        #expect(try context.fetch(request).compactMap(\.name) == ["Deli", "Cheese Shop", "Bakery", "Chemist"])
    }
}
