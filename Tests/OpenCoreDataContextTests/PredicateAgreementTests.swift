import Foundation
import OpenCoreData
import Testing
import _TestSupport

@Suite struct PredicateAgreementTests {
    @Test(arguments: PredicateAgreement.employeePredicates)
    func sqlAndMemoryAgreeOnEmployees(_ format: String) throws {
        let fixture = try #require(AgreementFixture.shared)
        let predicate = try FetchPredicate(format: format, argumentArray: PredicateAgreement.arguments(for: format))
        let (sql, memory) = try fixture.both("Employee", predicate)
        #expect(sql == memory, "SQL \(sql) vs memory \(memory) for \(format)")
        #expect(try FetchPredicate(format: predicate.canonicalFormat) == predicate, "print → parse: \(predicate.canonicalFormat)")
    }

    @Test(arguments: PredicateAgreement.departmentPredicates)
    func sqlAndMemoryAgreeOnDepartments(_ format: String) throws {
        let fixture = try #require(AgreementFixture.shared)
        let predicate = try FetchPredicate(format: format, argumentArray: format.contains("%@") ? [AgreementFixture.reference] : [])
        let (sql, memory) = try fixture.both("Department", predicate)
        #expect(sql == memory, "SQL \(sql) vs memory \(memory) for \(format)")
        #expect(try FetchPredicate(format: predicate.canonicalFormat) == predicate, "print → parse: \(predicate.canonicalFormat)")
    }

    @Test func theTableHasAtLeastTwoHundredPredicates() {
        #expect(PredicateAgreement.employeePredicates.count + PredicateAgreement.departmentPredicates.count >= 200)
    }

    @Test func substitutionVariablesFillATemplate() throws {
        let fixture = try #require(AgreementFixture.shared)
        let template = try FetchPredicate(
            format: "age > $MIN AND name BEGINSWITH[c] $PREFIX AND SUBQUERY(projects, $p, $p.title == $TITLE).@count > 0")
        #expect(template.freeVariables == ["MIN", "PREFIX", "TITLE"])
        let filled = try template.withSubstitutionVariables(["MIN": 30, "PREFIX": "B", "TITLE": "Apollo"])
        #expect(filled.freeVariables.isEmpty)
        let (sql, memory) = try fixture.both("Employee", filled)
        #expect(sql == ["bob"] && memory == sql)
        let missing = #expect(throws: CoreDataError.self) { _ = try template.withSubstitutionVariables(["MIN": 1]) }
        #expect(missing?.message.contains("No value was given for $") == true)
        let unfilled = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        unfilled.predicate = template
        let error = #expect(throws: CoreDataError.self) { _ = try fixture.context.fetch(unfilled) }
        #expect(error?.message.contains("withSubstitutionVariables") == true)
    }

    @Test func theTableIsNotTrivial() throws {
        // Guard against a fixture where every predicate selects everything or nothing.
        let fixture = try #require(AgreementFixture.shared)
        var sizes: Set<Int> = []
        for format in PredicateAgreement.employeePredicates {
            let predicate = try FetchPredicate(format: format, argumentArray: PredicateAgreement.arguments(for: format))
            sizes.insert(try fixture.both("Employee", predicate).sql.count)
        }
        #expect(sizes.count >= 8, "result sizes seen: \(sizes.sorted())")
    }

    @Test func spotChecksOfExpectedResults() throws {
        let fixture = try #require(AgreementFixture.shared)
        func names(_ format: String) throws -> [String] { try fixture.both("Employee", try FetchPredicate(format: format)).sql }
        #expect(try names("name ==[cd] 'celik'") == ["celik", "Çelik"])
        #expect(try names("salary == nil") == ["celik"])
        #expect(try names("NOT salary > 100") == ["", "Ann", "Dee*Star", "celik", "file10", "file9"])
        #expect(try names("name LIKE 'Dee\\\\*Star'") == ["Dee*Star"])
        #expect(try names("ANY projects.title == 'Apollo'") == ["Ann", "bob", "Çelik"])
        #expect(try names("mentees.@count >= 2") == ["Ann"])
    }
}
