import Foundation
import OpenCoreData

/// One fixture data set with nils, accents, mixed case, relationships and every attribute type; every predicate in
/// the table must select the same objects in SQL (a store fetch) and in memory (`evaluate(with:)`), and print to a
/// format that parses back to the same predicate.
public final class AgreementFixture: @unchecked Sendable {
    /// The stack holding the data set.
    public let stack: TestStack
    /// A context that saved nothing: every object it reads comes from the store.
    public let context: NSManagedObjectContext
    /// The date the data set's dates are near.
    public static let reference = Date(timeIntervalSinceReferenceDate: 700_000_000)

    /// The data set saved in `stack` (a store of `makeCompanyModel()`'s model), read through a new context.
    public init(stack: TestStack) throws {
        self.stack = stack
        let seed = stack.context()
        let rd = try seed.make("Department", ["name": "R&D", "budget": Decimal(string: "1000.50")!])
        let ops = try seed.make("Department", ["name": "Opérations", "budget": Decimal(250)])
        let empty = try seed.make("Department", ["name": "Empty", "budget": nil])
        _ = empty
        let apollo = try seed.make("Project", ["title": "Apollo"])
        let zeus = try seed.make("Project", ["title": "zeus"])
        let rows: [[String: Any?]] = [
            [
                "name": "Ann", "age": 31, "salary": 100.0, "active": true, "department": rd, "rating": Float(4.5),
                "born": Self.reference, "badge": UUID(uuidString: "00000000-0000-0000-0000-000000000001")!,
                "homepage": URL(string: "https://ann.example")!, "photo": Data([1, 2, 3]), "serial": Int64(9_000_000_000),
            ],
            [
                "name": "bob", "age": 45, "salary": 300.5, "active": false, "department": rd, "rating": Float(2),
                "born": Self.reference.addingTimeInterval(-86_400), "level": 3,
            ],
            [
                "name": "Çelik", "age": 28, "salary": 200.0, "active": true, "department": ops,
                "born": Self.reference.addingTimeInterval(86_400),
            ],
            ["name": "celik", "age": 52, "salary": nil, "active": true, "department": ops, "level": 7],
            ["name": "Dee*Star", "age": 0, "salary": 0.0, "active": false, "department": nil],
            ["name": "ÉLODIE", "age": 39, "salary": 150.25, "active": true, "department": nil, "rating": Float(5)],
            ["name": "file10", "age": 20, "salary": 50.0, "department": rd],
            ["name": "file9", "age": 21, "salary": 60.0, "department": rd, "homepage": URL(string: "https://file9.example/x")!],
            ["name": "", "age": 18, "salary": -5.0, "department": ops],
        ]
        var employees: [NSManagedObject] = []
        for row in rows { employees.append(try seed.make("Employee", row)) }
        try seed.make("Manager", ["name": "Max", "age": 60, "salary": 900.0, "department": rd, "headOf": rd])
        apollo.setValue([employees[0], employees[1], employees[2]], forKey: "members")
        zeus.setValue([employees[2]], forKey: "members")
        employees[1].setValue(employees[0], forKey: "mentor")
        employees[2].setValue(employees[0], forKey: "mentor")
        try seed.save()
        context = stack.context()
    }

    /// The data set in a SQLite store.
    public static let shared: AgreementFixture? = try? AgreementFixture(stack: TestStack(model: makeCompanyModel()))

    /// Names selected by a store fetch (SQL) and by evaluating every object in memory.
    public func both(_ entity: String, _ predicate: FetchPredicate) throws -> (sql: [String], memory: [String]) {
        let key = entity == "Project" ? "title" : "name"
        let request = NSFetchRequest<NSManagedObject>(entityName: entity)
        request.predicate = predicate
        let sql = try context.fetch(request).compactMap { $0.string(key) }.sorted()
        let all = try context.fetch(NSFetchRequest<NSManagedObject>(entityName: entity))
        let memory = try all.filter { try predicate.evaluate(with: $0) }.compactMap { $0.string(key) }.sorted()
        return (sql, memory)
    }
}

/// The predicates every back end must answer as the in-memory evaluator does, over `AgreementFixture`'s data.
public enum PredicateAgreement {
    /// Predicates on employees (and managers), over every attribute type and relationship.
    public static let employeePredicates: [String] = [
        "name == 'Ann'", "name == 'ann'", "name ==[c] 'ann'", "name ==[cd] 'celik'", "name ==[d] 'Celik'", "name != 'Ann'",
        "name < 'b'", "name <= 'bob'", "name > 'Z'", "name >=[c] 'D'", "name BEGINSWITH 'f'", "name BEGINSWITH[c] 'F'",
        "name ENDSWITH '9'", "name ENDSWITH[cd] 'ODIE'", "name CONTAINS 'el'", "name CONTAINS[c] 'EL'", "name CONTAINS[cd] 'el'",
        "name LIKE 'file*'", "name LIKE 'file?'", "name LIKE[c] 'ANN'", "name LIKE 'Dee\\\\*Star'", "name LIKE '*'",
        "name MATCHES 'file[0-9]+'", "name MATCHES[c] '[a-z]+'", "name IN {'Ann', 'bob', 'nobody'}", "name IN[c] {'ANN', 'BOB'}",
        "name IN 'Annabel'", "name == ''", "name != ''", "age == 31", "age != 31", "age > 30", "age >= 52", "age < 21",
        "age <= 20", "age BETWEEN {20, 40}", "age IN {0, 18, 99}", "NOT age BETWEEN {20, 40}", "salary > 100",
        "salary == nil", "salary != nil", "NOT salary > 100", "NOT (salary > 100 OR age < 30)", "salary >= 150.25",
        "salary == 300.5", "salary < 0", "salary < age", "salary > age * 5", "salary / 2 > 70", "age + 10 == 41",
        "age - 1 < 20", "-age < -50", "age * 2 ** 2 > 150", "active == YES", "active == NO", "active == 1", "active != TRUE",
        "NOT active == YES", "rating > 3", "rating == 4.5", "rating == nil", "level > 1", "level == 1", "serial > 8000000000",
        "born > %@", "born < %@", "born == %@", "born == nil", "born BETWEEN {%@, %@}", "NOT born > %@",
        "badge == %@", "badge != nil", "homepage == %@", "homepage != nil", "photo == %@", "photo == nil",
        "department.name == 'R&D'", "department.name ==[cd] 'operations'", "department.name == nil", "department == nil",
        "department != nil", "department.budget > 500", "department.budget == 250", "department.budget < 2000.5",
        "NOT department.name == 'R&D'", "department.head.name == 'Max'", "mentor.name == 'Ann'", "mentor == nil",
        "ANY projects.title == 'Apollo'", "ANY projects.title ==[c] 'ZEUS'", "ALL projects.title == 'Apollo'",
        "NONE projects.title == 'zeus'", "projects.@count == 2", "projects.@count > 0", "mentees.@count >= 2",
        "ANY mentees.age > 40", "NOT ANY projects.title BEGINSWITH 'A'", "TRUEPREDICATE", "FALSEPREDICATE",
        "age > 30 AND salary > 100", "age > 30 OR department == nil", "(age > 30 OR name BEGINSWITH 'f') AND NOT active == NO",
        "NOT (NOT salary == nil)", "name IN {nil, 'Ann'}", "salary IN {nil, 100}", "NOT salary IN {100, 200}",
        "NOT name CONTAINS 'e'", "NOT department.budget > 500", "age BETWEEN {40, 20}",
        // Aggregates, subqueries and nested to-many key paths.
        "projects.@count == 1", "mentees.@avg.age > 30", "mentees.@sum.salary > 400", "mentees.@max.age == 45",
        "mentees.@min.name == 'bob'", "mentees.@sum.age == 0", "mentees.@avg.salary == nil", "department.employees.@count > 3",
        "department.employees.@sum.salary > 1000", "department.employees.@max.age == 60",
        "SUBQUERY(projects, $p, $p.title BEGINSWITH 'A').@count == 1", "SUBQUERY(projects, $p, $p.title ==[c] 'ZEUS').@count > 0",
        "SUBQUERY(mentees, $m, $m.salary > 250).@count >= 1", "SUBQUERY(mentees, $m, $m.department == department).@count == 2",
        "SUBQUERY(projects, $p, ANY $p.members.age > 40).@count > 0", "SUBQUERY(projects, $p, $p.members.@count > 2).@count == 1",
        "ANY projects.members.name == 'Çelik'", "ALL projects.members.age > 25", "NONE projects.members.active == NO",
        "ANY mentees.projects.title == 'zeus'", "ANY mentor.projects.title == 'Apollo'", "mentor.projects.@count == 1",
        // More operators, options and combinations.
        "name BEGINSWITH[d] 'Ce'", "name BEGINSWITH[cd] 'CE'", "name ENDSWITH[c] 'LIK'", "name CONTAINS[d] 'lo'",
        "name LIKE[cd] 'e*'", "name LIKE '*i*'", "name LIKE '?'", "name LIKE ''", "name MATCHES '.*[0-9]'",
        "name MATCHES '(?i)ann|BOB'", "name MATCHES '(?i)^ANN$'", "'a\\nb' MATCHES '.*^b$'", "'a\\nb' MATCHES 'a$\\\\n^b'",
        "'a\\nb' MATCHES 'a.b'", "'a\\nb' MATCHES '^b$'", "'a\\nb' MATCHES '(?i)A$.^B'", "name MATCHES 'f.*$'",
        "name IN[cd] {'CELIK', 'elodie'}", "name IN[d] 'Celik und file9'", "name IN {}",
        "NOT name IN {}", "name != nil", "name == nil", "name > ''", "name <[c] 'c'", "name >[cd] 'celik'",
        "name BETWEEN {'a', 'd'}", "name BETWEEN[c] {'a', 'd'}", "age != 0", "age > -1", "age == 31.0", "age < 30.5",
        "age IN {31, 45.0}", "age BETWEEN {31, 31}", "salary BETWEEN {100, 300.5}", "salary IN {100.0, 200}",
        "salary * 2 == 200", "salary + age > 300", "salary - age < 0", "age / 4 == 7.75", "age ** 2 > 2000", "-salary > 0",
        "(age + salary) * 2 > 1000", "age * age == 961", "salary / 0 == nil", "(age - 40) ** 0.5 > 1", "(age - 40) ** 0.5 == nil",
        "(age + 3) ** 3 ** -1 > 3", "level * 2 == 14", "rating * 2 >= 9",
        "active == YES AND age > 30", "active == NO OR salary == nil", "NOT active == NO AND NOT salary == nil",
        "NOT (active == YES AND department == nil)", "born >= %@", "born <= %@", "born != %@", "NOT born < %@",
        "badge == nil", "homepage == nil OR badge != nil", "department.name CONTAINS[cd] 'ERA'", "department.name LIKE 'R*'",
        "department.budget BETWEEN {200, 300}", "department.budget * 2 > 1000", "department.head.age > 50",
        "department.head == nil", "department.head != nil", "mentor.mentor == nil", "mentor.age < age",
        "mentor.salary > salary", "department.employees.@avg.age > 35", "department.name IN {'R&D', 'Empty'}",
        "TRUEPREDICATE AND age > 30", "FALSEPREDICATE OR age > 50", "NOT TRUEPREDICATE", "NOT FALSEPREDICATE",
        "(name BEGINSWITH 'f' OR name BEGINSWITH 'F') AND age < 21", "NOT (NOT (NOT age > 30))",
        "age > 30 AND (salary > 200 OR (department.name == 'Opérations' AND active == YES))",
        // NSExpression's functions.
        "modulus:by:(age, 2) == 0", "modulus:by:(age, 7) == 3", "modulus:by:(salary, 100) > 50", "modulus:by:(age, 0) == nil",
        "modulus:by:(-age, 7) == -3", "abs(salary) == 5", "abs:(age - 40) < 10", "floor(salary) == 300", "ceiling(salary) == 151",
        "trunc(salary / 7) == 14", "floor(rating) == 4", "sqrt(age) > 6", "sqrt(salary) == nil", "ln(age) < 3", "log(age) >= 1.5",
        "exp(age / 10) > 100", "log(salary) == nil", "raise:toPower:(age, 2) > 2000", "add:to:(age, 10) == 41",
        "from:subtract:(age, 1) < 20", "multiply:by:(salary, 2) == 200", "divide:by:(age, 4) == 7.75", "divide:by:(age, 0) == nil",
        "bitwiseAnd:with:(age, 1) == 1", "bitwiseOr:with:(age, 1) == 21", "bitwiseXor:with:(age, 3) == 28",
        "onesComplement(age) == -32", "bitwiseAnd:with:(salary, 4) != 0", "lowercase(name) == 'élodie'",
        "uppercase(name) == 'ÇELIK'", "uppercase(name) == name", "lowercase:(name) == name", "length(name) == 5",
        "length(name) > 6", "length(department.name) == 3", "canonical:(name) == 'celik'", "noindex:(age) == 31",
        "uppercase(department.name) == 'R&D'", "lowercase(name) BEGINSWITH 'f'", "lowercase(name) IN {'ann', 'bob'}",
        "born < now()", "born > now()", "count(projects) == 2", "count:(mentees) >= 2", "sum(mentees.salary) > 400",
        "average(mentees.age) > 30", "max(mentees.age) == 45", "min(mentees.name) == 'bob'", "sum(mentees.age) == 0",
        "average:(mentees.salary) == nil", "sum({1, 2, 3}) == 6", "max(1, 5, 3) == age - 26", "min:({4, 2}) == 2",
        "average({1, 2}) == 1.5", "median({1, 9, 2}) == 2", "mode({1, 2, 2}) == 2", "stddev({2, 4}) == 1", "count({}) == 0",
        "sum(salary) > 100", "count(salary) == 0", "max(age) == 31", "stddev(salary) == 0", "sum(department.employees.age) > 100",
        "count(department.employees) == 5", "modulus:by:(age, level) == 0", "abs(-3) == 3", "lowercase('ABC') == 'abc'",
        "length('😀') == 2", "length(name) == length(lowercase(name))",
        // The bitwise operators (NSExpression's functions), with Swift's shifts.
        "age & 1 == 1", "age | 1 == 21", "age ^ 3 == 28", "~age == -32", "1 << 3 == 8", "age >> 2 == 7", "age << 60 < 0",
        "age << 64 == 0", "-age >> 70 == -1", "age >> -2 == 124", "leftshift:by:(age, level) > 100", "serial >> 30 == 8",
        "age & 3 | 4 == 7", "age + 1 & 6 == 0", "1 ^ 1 == 0 AND age & ~1 == 30", "(age | salary) > 100",
        // ANY, ALL and NONE of one value (of none when it is nil), found by the SQL compiler fuzzer.
        "ALL -nil - -2 < 0", "ALL salary > 100", "ANY salary > 100", "NONE salary > 100", "ANY salary == nil",
        "NONE department.name == 'R&D'", "ALL mentor.age > 30", "ANY -salary < -100", "NONE rating == nil",
        // Subscripts of lists.
        "{31, 45}[FIRST] == age", "age == {18, 20, 21}[LAST]", "{'Ann', 'bob'}[1] ==[c] name", "{1, 2}[5] == nil",
        "projects[SIZE] == 2", "mentees[size] > 1", "{31, 45}[SIZE] == 2", "projects[SIZE] == count(projects)",
        // TERNARY (NSExpression's conditional): CASE in SQL, the condition's unknown taken as false.
        "TERNARY(age > 30, 'senior', 'junior') == 'senior'", "TERNARY(salary > 100, salary, age) > 150",
        "TERNARY(salary == nil, 0, salary) == 0", "TERNARY(salary > 100, 1, 0) == 0", "TERNARY(department.name == 'R&D', age, nil) > 30",
        "TERNARY(active == YES, name, 'x') BEGINSWITH[c] 'a'", "TERNARY(ANY projects.title == 'Apollo', 1, 2) == 1",
        "TERNARY(age > 40, TERNARY(age > 50, 3, 2), 1) == 2", "TERNARY(NOT active == YES, rating, 0.5) < 1",
        "born <= TERNARY(age < 30, %@, born)", "NOT TERNARY(salary > 200, YES, NO) == YES", "TERNARY(TRUEPREDICATE, age, 0) == age",
        // UNION, INTERSECT and MINUS of constant lists, computed before the fetch.
        "age IN {31, 45} UNION {20}", "name IN {'Ann', 'bob'} INTERSECT {'bob', 'Cy'}", "NOT age IN {31, 45} MINUS {45}",
        "age IN {18, 20} UNION {31} MINUS {18}", "ANY projects.title IN {'Apollo'} UNION {'Gemini'}",
        "({1, 2} UNION {2, 3}).@count == level + 2", "name IN[c] {'ANN'} UNION {}", "age IN {} INTERSECT {31}",
        "age IN {31, 31} INTERSECT nil",
    ]

    /// The arguments a predicate of `employeePredicates` with `%@` takes.
    public static func arguments(for format: String) -> [Any?] {
        let count = format.components(separatedBy: "%@").count - 1
        if count == 0 { return [] }
        if format.hasPrefix("born BETWEEN") {
            return [AgreementFixture.reference.addingTimeInterval(-1), AgreementFixture.reference.addingTimeInterval(90_000)]
        }
        if format.hasPrefix("born") || format.hasPrefix("NOT born") { return [AgreementFixture.reference] }
        if format.hasPrefix("badge") { return [UUID(uuidString: "00000000-0000-0000-0000-000000000001")!] }
        if format.hasPrefix("homepage") { return [URL(string: "https://ann.example")!] }
        if format.hasPrefix("photo") { return [Data([1, 2, 3])] }
        return Array(repeating: nil, count: count)
    }

    /// Predicates on departments: to-many quantifiers, aggregates and subqueries.
    public static let departmentPredicates: [String] = [
        "ANY employees.name == 'Ann'", "ANY employees.salary > 250", "ALL employees.salary > 50", "NONE employees.active == NO",
        "employees.@count == 0", "employees.@count >= 4", "ALL employees.age > 10", "NOT ANY employees.age > 55",
        "ANY employees.name CONTAINS[cd] 'ELIK'", "head != nil", "head.name == 'Max'", "budget > 300", "budget == nil",
        "name ==[cd] 'OPERATIONS'", "ANY employees.department.name == 'R&D'",
        "employees.@sum.salary > 500", "employees.@avg.salary > 100", "employees.@max.age > 55", "employees.@min.name == 'Ann'",
        "employees.@sum.age == 0", "employees.@avg.salary == nil", "employees.@min.born < %@",
        "SUBQUERY(employees, $e, $e.salary > 100).@count >= 2", "SUBQUERY(employees, $e, $e.age > 40 AND $e.active == YES).@count == 0",
        "SUBQUERY(employees, $e, ANY $e.projects.title == 'Apollo').@count > 0",
        "SUBQUERY(employees, $e, $e.department.name == name).@count > 0",
        "SUBQUERY(employees, $e, NOT $e.salary > 150).@count == 1", "SUBQUERY(employees, $e, $e.mentor != nil).@count == 1",
        "sum(employees.salary) > 500", "count(employees) >= 4", "max(employees.age) > 55", "min:(employees.name) == 'Ann'",
        "average(employees.salary) > 100", "modulus:by:(budget, 100) > 40", "floor(budget) == 1000", "length(name) > 3",
        "uppercase(name) == 'EMPTY'",
        "ANY employees.projects.title == 'zeus'", "ALL employees.projects.title == 'Apollo'", "NONE employees.projects.title == 'Apollo'",
        "ANY employees.projects.members.name == 'Ann'", "ALL employees.mentees.age > 40", "employees.@count == 0 OR budget > 500",
        "ANY offices.city == 'Paris'", "offices.@count == 0", "head.salary > 500", "ANY employees.salary > budget",
    ]

}
