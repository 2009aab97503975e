import Foundation
import OpenCoreData
import OpenCoreDataModel
import OpenCoreDataPredicate
import Testing
import _TestSupport

/// Random predicates, generated from the grammar, over random data: the SQL store and the in-memory evaluator must
/// select the same objects, printing a predicate must give a format that parses back to the same predicate, and its
/// keyed archive must read back as a predicate that selects the same objects.
///
/// Every case is seeded; a failure names its seed. Replay one with `OCD_SEED=1234 swift test --filter PredicateProperty`.
struct PredicateGenerator {
    var rng: SeededGenerator
    /// How many TERNARY conditions the expression being generated is inside.
    var ternaries = 0

    static let words = ["Ann", "ann", "ÀNN", "bob", "Bob", "Çelik", "celik", "élodie", "Zoë", "file9", "file10", "", "a\"q", "b\\s", "x y"]

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func chance(_ percent: Int) -> Bool { int(1...100) <= percent }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...(items.count - 1))] }

    mutating func stringLiteral() -> FetchExpression { .value(.string(pick(Self.words))) }

    mutating func options() -> PredicateComparison.Options {
        pick([[], [.caseInsensitive], [.diacriticInsensitive], [.caseInsensitive, .diacriticInsensitive]])
    }

    mutating func stringComparison(_ key: FetchExpression, modifier: PredicateComparison.Modifier = .direct) -> FetchPredicate {
        let op: PredicateComparison.Operator = pick([
            .equal, .notEqual, .lessThan, .greaterThanOrEqual, .beginsWith, .endsWith, .contains, .like, .in,
        ])
        var right = stringLiteral()
        switch op {
        case .like: right = .value(.string(pick(["*", "a*", "*n", "?ob", "*l*", "file?", "*9"])))
        case .in:
            right =
                chance(50)
                ? .aggregate((0..<int(0...3)).map { _ in stringLiteral() } + (chance(20) ? [.constant(.null)] : []))
                : .value(.string(pick(["Ann and bob", "CELIK", "file10"])))
        case .equal, .notEqual: if chance(15) { right = .constant(.null) }
        default: break
        }
        return .comparison(PredicateComparison(key, op, right, modifier: modifier, options: options()))
    }

    mutating func numberLiteral() -> FetchExpression {
        chance(50) ? .value(.integer(Int64(int(-5...70)))) : .value(.double(Double(int(-50...700)) / 2))
    }

    mutating func numberExpression(_ key: String) -> FetchExpression {
        if ternaries < 2, chance(8) {
            // TERNARY(condition, key, literal), either way round: CASE in SQL.
            ternaries += 1
            defer { ternaries -= 1 }
            let condition = comparison()
            let (a, b) = (FetchExpression.key(key), chance(20) ? .constant(.null) : numberLiteral())
            return chance(50) ? .conditional(condition, a, b) : .conditional(condition, b, a)
        }
        if chance(80) { return .key(key) }
        return .arithmetic(pick([.add, .subtract, .multiply, .divide]), .key(key), numberLiteral())
    }

    mutating func numberComparison(_ key: String) -> FetchPredicate {
        let op: PredicateComparison.Operator = pick([
            .equal, .notEqual, .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual, .between, .in,
        ])
        var right = numberLiteral()
        switch op {
        case .between: right = .aggregate([numberLiteral(), numberLiteral()])
        case .in:
            right = .aggregate((0..<int(1...3)).map { _ in numberLiteral() } + (chance(20) ? [.constant(.null)] : []))
            if chance(25) {
                // A set operation on constant lists: computed before the fetch runs, in memory as it evaluates.
                let other = FetchExpression.aggregate((0..<int(0...3)).map { _ in numberLiteral() })
                let function = pick([FetchFunction.unionSet, .intersectSet, .minusSet])
                right = chance(50) ? .function(function.rawValue, [right, other]) : .function(function.rawValue, [other, right])
            }
        case .equal, .notEqual: if chance(20) { right = .constant(.null) }
        default: break
        }
        return .comparison(PredicateComparison(numberExpression(key), op, right))
    }

    mutating func comparison() -> FetchPredicate {
        switch int(0...11) {
        case 0, 1: return stringComparison(.key("name"))
        case 2: return stringComparison(.key("department.name"))
        case 3: return numberComparison("age")
        case 4: return numberComparison("salary")
        case 5: return numberComparison("department.budget")
        case 6: return .comparison(PredicateComparison(.key("active"), pick([.equal, .notEqual]), .value(.bool(chance(50)))))
        case 7: return stringComparison(.key("projects.title"), modifier: pick([.any, .all, .none]))
        case 8:
            return .comparison(
                PredicateComparison(
                    .key("mentees.age"), pick([.lessThan, .greaterThan, .equal]), numberLiteral(), modifier: pick([.any, .all, .none])))
        case 9:
            return .comparison(
                PredicateComparison(
                    .key(pick(["projects.@count", "mentees.@count"])), pick([.equal, .greaterThan, .lessThan]),
                    .value(.integer(Int64(int(0...3))))))
        case 10:
            return .comparison(
                PredicateComparison(
                    .key(pick(["mentees.@sum.age", "mentees.@avg.salary", "mentees.@max.age", "department.employees.@count"])),
                    pick([.greaterThan, .lessThan, .equal]), numberLiteral()))
        default:
            let inner = stringComparison(.keyPath(.variable("p"), ["title"]))
            let count = FetchExpression.keyPath(.subquery(.key("projects"), "p", inner), ["@count"])
            return .comparison(PredicateComparison(count, pick([.equal, .greaterThan]), .value(.integer(Int64(int(0...2))))))
        }
    }

    mutating func predicate(depth: Int = 0) -> FetchPredicate {
        if depth >= 3 || chance(45) { return chance(3) ? pick([.truePredicate, .falsePredicate]) : comparison() }
        switch int(0...2) {
        case 0: return .and((0..<int(2...3)).map { _ in predicate(depth: depth + 1) })
        case 1: return .or((0..<int(2...3)).map { _ in predicate(depth: depth + 1) })
        default: return .not(predicate(depth: depth + 1))
        }
    }
}

@Suite struct PredicatePropertyTests {
    /// Random departments, employees (with nils) and project memberships.
    static func makeData(seed: UInt64) throws -> (TestStack, NSManagedObjectContext) {
        var g = PredicateGenerator(rng: SeededGenerator(seed: seed &* 7919))
        let stack = try TestStack(model: try makeCompanyModel(), inMemory: true)
        let context = stack.context()
        var departments: [NSManagedObject] = []
        for i in 0..<g.int(1...3) {
            departments.append(
                try context.make(
                    "Department",
                    ["name": g.pick(PredicateGenerator.words) + "\(i)", "budget": g.chance(20) ? nil : Decimal(g.int(0...900))]))
        }
        var projects: [NSManagedObject] = []
        for _ in 0..<g.int(0...3) { projects.append(try context.make("Project", ["title": g.pick(PredicateGenerator.words)])) }
        var employees: [NSManagedObject] = []
        for _ in 0..<g.int(3...14) {
            let e = try context.make(
                "Employee",
                [
                    "name": g.pick(PredicateGenerator.words), "age": g.int(0...70),
                    "salary": g.chance(20) ? nil : Double(g.int(-10...600)) / 2,
                    "active": g.chance(50), "department": g.chance(20) ? nil : g.pick(departments),
                ])
            if !employees.isEmpty, g.chance(40) { e.setValue(g.pick(employees), forKey: "mentor") }
            if !projects.isEmpty { e.setValue(projects.filter { _ in g.chance(40) }.prefix(5).map { $0 }, forKey: "projects") }
            employees.append(e)
        }
        // Project.members allows at most five; drop extra members before saving.
        for p in projects {
            let members = (p.value(forKey: "members") as? Set<NSManagedObject>) ?? []
            if members.count > 5 { p.setValue(Array(members.sorted { $0.objectID < $1.objectID }.prefix(5)), forKey: "members") }
        }
        try context.save()
        return (stack, stack.context())
    }

    static var seeds: [UInt64] {
        if let text = ProcessInfo.processInfo.environment["OCD_SEED"], let seed = UInt64(text) { return [seed] }
        let count = Int(ProcessInfo.processInfo.environment["OCD_PROPERTY_CASES"] ?? "") ?? 150
        return (1...UInt64(count)).map { $0 }
    }

    @Test func sqlAndMemoryAgreeOnRandomPredicates() throws {
        var checked = 0
        var nonTrivial = 0
        for seed in Self.seeds {
            let (stack, context) = try Self.makeData(seed: seed)
            _ = stack
            let all = try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Employee"))
            var g = PredicateGenerator(rng: SeededGenerator(seed: seed))
            for n in 0..<15 {
                let predicate = g.predicate()
                let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
                request.predicate = predicate
                let sql: [NSManagedObjectID]
                do {
                    sql = try context.fetch(request).map(\.objectID).sorted()
                } catch {
                    Issue.record("seed \(seed) case \(n): SQL failed for \(predicate): \(error)")
                    continue
                }
                let memory = try all.filter { try predicate.evaluate(with: $0) }.map(\.objectID).sorted()
                #expect(sql == memory, "seed \(seed) case \(n): \(predicate) — SQL \(sql.count) vs memory \(memory.count)")
                if !sql.isEmpty && sql.count < all.count { nonTrivial += 1 }
                let reparsed = try FetchPredicate(format: predicate.canonicalFormat)
                #expect(reparsed == predicate, "seed \(seed) case \(n): print → parse changed \(predicate)")
                // Archived as Apple's archiver writes it and read back, it selects the same objects (NONE comes back
                // as NOT ANY and a negation as a subtraction, so the comparison is of results, not trees).
                let archived = try FetchPredicate(format: ArchivedPredicateReader.predicateFormat(ofArchive: predicate.keyedArchive()))
                let viaArchive = try all.filter { try archived.evaluate(with: $0) }.map(\.objectID).sorted()
                #expect(viaArchive == memory, "seed \(seed) case \(n): archive → read changed \(predicate) into \(archived)")
                checked += 1
            }
        }
        #expect(checked == Self.seeds.count * 15)
        #expect(
            Self.seeds.count == 1 || nonTrivial > checked / 5,
            "too few predicates select some but not all objects (\(nonTrivial)/\(checked))")
    }
}
