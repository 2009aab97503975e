import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// The data set of the predicate agreement suite in a PostgreSQL store of its own (made once, for the whole run, and
/// dropped when the test process exits).
final class PostgreSQLAgreement: @unchecked Sendable {
    let database: PostgreSQLTestDatabase
    let fixture: AgreementFixture

    init() throws {
        database = try PostgreSQLTestDatabase.forTheRun()
        fixture = try AgreementFixture(stack: TestStack(model: makeCompanyModel(), storeAt: database.url))
    }

    static let shared = Result { try PostgreSQLAgreement() }
}

/// Every predicate of the agreement suite selects in PostgreSQL what the in-memory evaluator selects (and so what
/// SQLite selects, which `PredicateAgreementTests` checks): operators, `[c]`/`[d]` folding, `LIKE`, `MATCHES`,
/// to-many quantifiers, aggregates, `SUBQUERY`, arithmetic, key paths through relationships, every attribute type.
@Suite(
    .enabled(
        if: Requirement.postgresIsPresent,
        "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLAgreementTests {
    @Test(arguments: PredicateAgreement.employeePredicates)
    func postgreSQLAndMemoryAgreeOnEmployees(_ format: String) throws {
        let fixture = try PostgreSQLAgreement.shared.get().fixture
        let predicate = try FetchPredicate(format: format, argumentArray: PredicateAgreement.arguments(for: format))
        let (sql, memory) = try fixture.both("Employee", predicate)
        #expect(sql == memory, "PostgreSQL \(sql) vs memory \(memory) for \(format)")
    }

    @Test(arguments: PredicateAgreement.departmentPredicates)
    func postgreSQLAndMemoryAgreeOnDepartments(_ format: String) throws {
        let fixture = try PostgreSQLAgreement.shared.get().fixture
        let predicate = try FetchPredicate(format: format, argumentArray: format.contains("%@") ? [AgreementFixture.reference] : [])
        let (sql, memory) = try fixture.both("Department", predicate)
        #expect(sql == memory, "PostgreSQL \(sql) vs memory \(memory) for \(format)")
    }
}
