import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Hostile input to the predicate language: trees too deep to walk safely are refused with a syntax error, trees
/// at the limit work in every pass, and fetch windows near `Int.max` do not trap.
@Suite struct PredicateLimitsTests {
    static let limit = FetchPredicate.maximumDepth

    /// Format strings too deep to accept, by name (the strings themselves are too long to print as test arguments).
    static let tooDeep: [String: String] = [
        "2,000 '('": String(repeating: "(", count: 2_000) + "a == 1" + String(repeating: ")", count: 2_000),
        "20,000 NOT": String(repeating: "NOT ", count: 20_000) + "a == 1",
        "20,000 !": String(repeating: "!", count: 20_000) + "a == 1",
        "20,000 unary -": "a == " + String(repeating: "-", count: 20_000) + "1",
        "3,000 '{'": "a IN " + String(repeating: "{", count: 3_000) + "1" + String(repeating: "}", count: 3_000),
        "a 3,000-term sum": "a == 1" + String(repeating: "+1", count: 2_999),
        "a 3,000-term product": "a == 2" + String(repeating: "*2", count: 2_999),
        "3,000 '**'": "a == 2" + String(repeating: "**2", count: 2_999),
        "SUBQUERY 300 deep": nestedSubqueries(300),
        "(a + …) 300 deep": String(repeating: "(1 + ", count: 300) + "1" + String(repeating: ")", count: 300) + " == a",
    ]

    @Test(arguments: tooDeep.keys.sorted())
    func formatStringsNestedTooDeeplyAreRefusedWithASyntaxError(_ label: String) throws {
        let format = try #require(Self.tooDeep[label])
        do {
            let parsed = try FetchPredicate(format: format)
            Issue.record("\(label): parsed a tree \(parsed.depth) levels deep")
        } catch let error as CoreDataError {
            #expect(error.code == .predicateSyntax, "\(label)")
            #expect(error.message.contains("nests more than \(Self.limit) levels"), "\(label): \(error.message.prefix(200))")
        } catch {
            Issue.record("\(label): unexpected \(error)")
        }
    }

    @Test func predicatesJustBelowTheLimitParseEvaluateAndFetch() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.performAndWait {
            try context.make("Department", ["name": "Toys", "budget": Decimal(5)])
            try context.save()
        }
        // Each of these is nearly as deep as the parser lets a tree of its kind be: the parser, the printer and the
        // in-memory evaluator handle them (SQLite's own parser gives up near 50 nested parentheses; see below).
        let depth = Self.limit - 4
        let even = depth - depth % 2
        let parenthesized = depth / 2 - 2  // each "(0 + …)" is two levels for the parser, one in the tree
        let formats: [(format: String, treeDepth: Int)] = [
            (String(repeating: "NOT ", count: even) + "name == 'Toys'", even + 2),
            ("budget == 5" + String(repeating: "+0", count: depth), depth + 2),
            ("5 == " + String(repeating: "-", count: even) + "budget", even + 2),
            (
                "budget == " + String(repeating: "(0 + ", count: parenthesized) + "5" + String(repeating: ")", count: parenthesized),
                parenthesized + 2
            ),
        ]
        let department = try context.performAndWait { try #require(try context.objects("Department").first) }
        for (format, treeDepth) in formats {
            let predicate = try FetchPredicate(format: format)
            #expect(predicate.depth == treeDepth && predicate.depth <= Self.limit, "\(format.prefix(40))…: depth \(predicate.depth)")
            #expect(try FetchPredicate(format: predicate.canonicalFormat) == predicate)
            #expect(try context.performAndWait { try predicate.evaluate(with: department) }, "\(format.prefix(40))…")
        }
        // Through SQL: 40 levels fetch; 250 fail with an error that says why, not a crash.
        for (levels, fetches) in [(40, true), (250, false)] {
            let format = String(repeating: "NOT ", count: levels) + "name == 'Toys'"
            do {
                let found = try context.performAndWait { try context.objects("Department", format) }
                #expect(fetches && found.count == 1, "\(levels) NOTs")
            } catch let error as CoreDataError {
                #expect(!fetches, "\(levels) NOTs: \(error.message.prefix(200))")
                #expect(error.message.contains("nested too deeply for SQLite"), "\(error.message.prefix(200))")
                #expect(error.sqliteResultCode == 1 && error.sql?.hasPrefix("SELECT") == true)
            }
        }
    }

    @Test func aLongAndListCompilesToSQLThatSQLiteAccepts() throws {
        // SQLite refuses expressions more than 1,000 deep, and reads a flat `a AND b AND …` one level per term.
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let terms = (0..<3_000).map { "name != 'x\($0)'" }
        try context.performAndWait {
            try context.make("Department", ["name": "Toys"])
            try context.save()
            #expect(try context.objects("Department", terms.joined(separator: " AND ")).count == 1)
            #expect(try context.objects("Department", terms.joined(separator: " OR ")).count == 1)
        }
    }

    @Test func aTreeTooDeepBuiltInCodeIsRefusedByTheFetchNotCompiled() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        var predicate = try FetchPredicate(format: "name == 'Toys'")
        for _ in 0..<(Self.limit + 10) { predicate = .not(predicate) }
        #expect(predicate.depth == Self.limit + 12)  // the NOTs, the comparison, its constant
        let request = NSFetchRequest<NSManagedObject>(entityName: "Department")
        request.predicate = predicate
        let error = #expect(throws: CoreDataError.self) { try context.performAndWait { try context.fetch(request) } }
        #expect(error?.message.contains("nests \(Self.limit + 12) levels deep") == true, "\(String(describing: error))")
    }

    @Test func fetchWindowsNearIntMaxWithPendingChangesDoNotTrap() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.performAndWait {
            for name in ["A", "B", "C"] { try context.make("Department", ["name": name]) }
            try context.save()
            try context.make("Department", ["name": "D"])  // pending: the fetch merges it in memory
            #expect(try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Department")).count == 4)
            for (offset, limit, expected) in [(Int.max - 1, 10, 0), (1, Int.max, 3), (Int.max, Int.max, 0), (0, Int.max - 2, 4)] {
                let request = NSFetchRequest<NSManagedObject>(entityName: "Department")
                request.sortDescriptors = [FetchSortDescriptor(key: "name")]
                request.fetchOffset = offset
                request.fetchLimit = limit
                let names = try context.fetch(request).map { $0.string("name") ?? "?" }
                #expect(names.count == expected, "offset \(offset), limit \(limit): \(names)")
            }
        }
    }
}

/// `SUBQUERY(employees, $e0, SUBQUERY(employees, $e1, … name == 'x').@count > 0).@count > 0`, `levels` deep.
private func nestedSubqueries(_ levels: Int) -> String {
    var inner = "name == 'x'"
    for level in (0..<levels).reversed() {
        inner = "SUBQUERY(employees, $e\(level), \(inner)).@count > 0"
    }
    return inner
}
