import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Dictionary fetches of computed columns (`NSExpressionDescription`), grouped by values (`propertiesToGroupBy`) and
/// filtered by group (`havingPredicate`), in SQL on both engines.
@Suite struct ExpressionDescriptionTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Shop") {
                Attribute("name", .string)
                Relationship("sales", to: "Sale", toMany: true, inverse: "shop")
            }
            Entity("Sale") {
                Attribute("category", .string)
                Attribute("amount", .double)
                Attribute("units", .integer32)
                Attribute("price", .decimal)
                Attribute("day", .date)
                Relationship("shop", to: "Shop", inverse: "sales")
            }
            Entity("Refund", parent: "Sale") {
                Attribute("reason", .string)
            }
            Entity("Outlet", parent: "Shop") {
                Attribute("owner", .string)
            }
        }
    }

    /// A container with two shops and seven sales (one a refund), saved.
    static func filled(_ places: StorePlaces) throws -> NSPersistentContainer {
        let container = NSPersistentContainer(name: "Sales", managedObjectModel: try model())
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: try places.url("Sales"))]
        try container.loadPersistentStores()
        let context = container.viewContext
        try context.performAndWait {
            let north = try context.make("Shop", ["name": "North"])
            let south = try context.make("Outlet", ["name": "South"])
            let sales: [(String, Double, Int32, String, Int, NSManagedObject)] = [
                ("food", 10.5, 1, "1.25", 1, north), ("food", 4.5, 3, "2.50", 2, south), ("toys", 20, 2, "10", 3, north),
                ("toys", 5, 1, "0.75", 4, north), ("books", 12, 4, "3", 5, south), ("food", 1, 1, "1", 6, north),
            ]
            for (category, amount, units, price, day, shop) in sales {
                let sale = try context.make(
                    "Sale",
                    [
                        "category": category, "amount": amount, "units": units, "price": Decimal(string: price)!,
                        "day": Date(timeIntervalSince1970: Double(day) * 86_400),
                    ])
                sale.setValue(shop, forKey: "shop")
            }
            let refund = try context.make("Refund", ["category": "books", "amount": -12.0, "units": -1, "reason": "torn"])
            refund.setValue(south, forKey: "shop")
            try context.save()
        }
        return container
    }

    static func request(
        _ fetched: [Any], groupBy: [Any]? = nil, having: String? = nil, sort: [FetchSortDescriptor] = [], predicate: String? = nil
    ) throws -> NSFetchRequest<NSDictionary> {
        let request = NSFetchRequest<NSDictionary>(entityName: "Sale")
        request.resultType = .dictionaryResultType
        request.propertiesToFetch = fetched
        request.propertiesToGroupBy = groupBy
        request.havingPredicate = try having.map { try FetchPredicate(format: $0, argumentArray: []) }
        request.sortDescriptors = sort
        request.predicate = try predicate.map { try FetchPredicate(format: $0, argumentArray: []) }
        return request
    }

    static func statistic(_ name: String, _ function: String, _ keyPath: String, _ type: NSAttributeType = .undefinedAttributeType)
        -> NSExpressionDescription
    {
        NSExpressionDescription(name: name, expression: .function(function, [.key(keyPath)]), resultType: type)
    }

    @Test func aggregatesPerGroupComeInGroupOrderWithTheirTypes() throws {
        try Self.aggregatesPerGroupComeInGroupOrderWithTheirTypes(StorePlaces(.sqlite))
    }

    static func aggregatesPerGroupComeInGroupOrderWithTheirTypes(_ places: StorePlaces) throws {
        let context = try filled(places).viewContext
        let request = try request(
            [
                "category", statistic("total", "sum:", "amount"), statistic("units", "sum:", "units"),
                statistic("count", "count:", "amount"),
                statistic("most", "max:", "amount"), statistic("mean", "average:", "units"), statistic("first", "min:", "day"),
            ], groupBy: ["category"])
        let rows = try context.performAndWait { try context.fetch(request) }
        #expect(rows.map { $0["category"] as? String } == ["books", "food", "toys"])
        #expect(rows.map { ($0["total"] as? NSNumber)?.doubleValue } == [0, 16, 25])
        #expect(rows.map { $0["units"] as? Int } == [3, 5, 3])
        #expect(rows.map { $0["count"] as? Int } == [2, 3, 2])
        #expect(rows.map { ($0["most"] as? NSNumber)?.doubleValue } == [12, 10.5, 20])
        #expect(rows.map { ($0["mean"] as? NSNumber)?.doubleValue } == [1.5, 5.0 / 3, 1.5])
        // A refund has no day: min: skips it, as SQL's MIN does.
        #expect(rows.map { ($0["first"] as? Date)?.timeIntervalSince1970 } == [5 * 86_400, 86_400, 3 * 86_400])
        // Integer sums are integers; the sum of doubles a double.
        #expect(rows.map { "\($0["units"]!)" } == ["3", "5", "3"] && rows.map { "\($0["total"]!)" } == ["0.0", "16.0", "25.0"])
    }

    @Test func aggregatesWithoutGroupingSumUpEveryMatchingRow() throws {
        try Self.aggregatesWithoutGroupingSumUpEveryMatchingRow(StorePlaces(.sqlite))
    }

    static func aggregatesWithoutGroupingSumUpEveryMatchingRow(_ places: StorePlaces) throws {
        let context = try filled(places).viewContext
        let all = try request([statistic("total", "sum:", "amount", .doubleAttributeType), statistic("count", "count:", "amount")])
        let rows = try context.performAndWait { try context.fetch(all) }
        #expect(rows.count == 1)
        #expect((rows[0]["total"] as? Double) == 41 && (rows[0]["count"] as? Int) == 7)
        // Filtered by the request's predicate; nothing matching: a sum of 0, a count of 0, no maximum.
        let none = try request(
            [statistic("total", "sum:", "amount"), statistic("count", "count:", "amount"), statistic("most", "max:", "amount")],
            predicate: "amount > 1000")
        let empty = try context.performAndWait { try context.fetch(none) }
        #expect(empty.count == 1)
        #expect((empty[0]["total"] as? NSNumber)?.doubleValue == 0 && (empty[0]["count"] as? Int) == 0 && empty[0]["most"] is NSNull)
        // The decimal prices: summed as doubles.
        let prices = try request([statistic("total", "sum:", "price")], predicate: "category == 'food'")
        #expect(try context.performAndWait { try context.fetch(prices) }.first?["total"] as? Double == 4.75)
    }

    @Test func havingSortAndRelationshipsGroupAsCoreDataDoes() throws {
        try Self.havingSortAndRelationshipsGroupAsCoreDataDoes(StorePlaces(.sqlite))
    }

    static func havingSortAndRelationshipsGroupAsCoreDataDoes(_ places: StorePlaces) throws {
        let container = try filled(places)
        let context = container.viewContext
        // HAVING names a fetched column as a key path or as a variable; sorted by an aggregate, descending.
        for having in ["total > 10", "$total > 10"] {
            let request = try request(
                ["category", statistic("total", "sum:", "amount")], groupBy: ["category"], having: having,
                sort: [FetchSortDescriptor(key: "total", ascending: false)])
            let rows = try context.performAndWait { try context.fetch(request) }
            #expect(rows.map { $0["category"] as? String } == ["toys", "food"], "having \(having)")
        }
        // Grouped by a to-one's attribute and by the relationship itself (the shop's object ID).
        let byShop = try request(
            ["shop.name", "shop", statistic("count", "count:", "amount")], groupBy: ["shop.name", "shop"],
            sort: [FetchSortDescriptor(key: "shop.name")])
        let rows = try context.performAndWait { try context.fetch(byShop) }
        let shops = try context.performAndWait { try context.objects("Shop", sort: ["name"]) }
        #expect(rows.map { $0["shop.name"] as? String } == ["North", "South"])
        #expect(rows.map { $0["count"] as? Int } == [4, 3])
        #expect(rows.map { $0["shop"] as? NSManagedObjectID } == shops.map(\.objectID))
        // (The outlet's ID is an Outlet's: the destination row's entity is read.)
        #expect(rows.map { ($0["shop"] as? NSManagedObjectID)?.entity.name } == ["Shop", "Outlet"])
        // SELF as a column: each object's ID, of its own entity (the refund's is a Refund's).
        let ids = try request(
            [NSExpressionDescription(name: "id", expression: .evaluatedObject, resultType: .objectIDAttributeType), "category"],
            sort: [FetchSortDescriptor(key: "amount")])
        let idRows = try context.performAndWait { try context.fetch(ids) }
        let sales = try context.performAndWait { try context.objects("Sale", sort: ["amount"]) }
        #expect(idRows.map { $0["id"] as? NSManagedObjectID } == sales.map(\.objectID))
        #expect((idRows.first?["id"] as? NSManagedObjectID)?.entity.name == "Refund")
        // A per-row expression as a column, with a distinct result.
        let lowered = try request(
            [NSExpressionDescription(name: "upper", expression: .function("uppercase:", [.key("category")]))],
            sort: [FetchSortDescriptor(key: "category")])
        lowered.returnsDistinctResults = true
        let upper = try context.performAndWait { try context.fetch(lowered) }.compactMap { $0["upper"] as? String }
        #expect(Set(upper) == ["BOOKS", "FOOD", "TOYS"] && upper.count == 3)
        // Two object columns whose entities have subentities, the first nil in a row: each reads its own entity.
        try context.performAndWait {
            try context.make("Refund", ["category": "none", "amount": -100.0])
            try context.save()
        }
        let both = try request(
            ["shop", NSExpressionDescription(name: "id", expression: .evaluatedObject, resultType: .objectIDAttributeType)],
            sort: [FetchSortDescriptor(key: "amount")])
        let pairs = try context.performAndWait { try context.fetch(both) }
        #expect(pairs.first?["shop"] is NSNull && (pairs.first?["id"] as? NSManagedObjectID)?.entity.name == "Refund")
        #expect((pairs.dropFirst().first?["shop"] as? NSManagedObjectID)?.entity.name == "Outlet")
        #expect(pairs.count == 8)
        // A child context reads the same groups from the store.
        let child = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        child.parent = context
        let again = try request(["category", statistic("count", "count:", "amount")], groupBy: ["category"])
        #expect(try child.performAndWait { try child.fetch(again) }.map { $0["count"] as? Int } == [2, 3, 1, 2])
    }

    @Test func pendingChangesAreLeftOutAndMistakesAreErrorsNamingThem() throws {
        try Self.pendingChangesAreLeftOutAndMistakesAreErrorsNamingThem(StorePlaces(.sqlite))
    }

    static func pendingChangesAreLeftOutAndMistakesAreErrorsNamingThem(_ places: StorePlaces) throws {
        let context = try filled(places).viewContext
        try context.performAndWait {
            // Core Data leaves unsaved changes out of dictionary results.
            try context.make("Sale", ["category": "food", "amount": 100.0])
            let count = try request([statistic("count", "count:", "amount")])
            #expect(try context.fetch(count).first?["count"] as? Int == 7)
            func message(_ request: NSFetchRequest<NSDictionary>) -> String {
                do {
                    _ = try context.fetch(request)
                    return "no error"
                } catch { return "\(error)" }
            }
            #expect(
                message(try request(["category", "amount", statistic("t", "sum:", "amount")], groupBy: ["category"])).contains("'amount'"))
            #expect(message(try request(["category", statistic("m", "median:", "amount")], groupBy: ["category"])).contains("median:"))
            #expect(
                message(try request(["category"], groupBy: ["category"], sort: [FetchSortDescriptor(key: "units")])).contains("'units'"))
            #expect(message(try request(["category"], having: "category == 'food'")).contains("havingPredicate"))
            #expect(message(try request([statistic("t", "sum:", "category")])).contains("not numbers"))
            #expect(message(try request([statistic("t", "sum:", "nope")])).contains("nope"))
            #expect(message(try request([NSExpressionDescription()])).contains("no expression"))
        }
    }
}

/// The same fetches on a PostgreSQL store.
@Suite(.enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLExpressionDescriptionTests {
    @Test func aggregatesPerGroupComeInGroupOrderWithTheirTypes() throws {
        try ExpressionDescriptionTests.aggregatesPerGroupComeInGroupOrderWithTheirTypes(StorePlaces(.postgreSQL))
    }
    @Test func aggregatesWithoutGroupingSumUpEveryMatchingRow() throws {
        try ExpressionDescriptionTests.aggregatesWithoutGroupingSumUpEveryMatchingRow(StorePlaces(.postgreSQL))
    }
    @Test func havingSortAndRelationshipsGroupAsCoreDataDoes() throws {
        try ExpressionDescriptionTests.havingSortAndRelationshipsGroupAsCoreDataDoes(StorePlaces(.postgreSQL))
    }
    @Test func pendingChangesAreLeftOutAndMistakesAreErrorsNamingThem() throws {
        try ExpressionDescriptionTests.pendingChangesAreLeftOutAndMistakesAreErrorsNamingThem(StorePlaces(.postgreSQL))
    }
}
