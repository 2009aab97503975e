import Foundation
import OpenCoreData
import OpenCoreDataModel
import Testing
import _TestSupport

/// The migration tests that do not depend on SQLite's files, on a PostgreSQL store: every version step, refusals that
/// leave every table as it was, relationships converted, entities moved into an inheritance tree and out, and stages.
@Suite(.enabled(if: Requirement.postgresIsPresent, "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLMigrationTests {
    @Test func aStoreFollowsItsModelThroughFourVersions() throws {
        try MigrationTests().aStoreFollowsItsModelThroughFourVersions(StorePlaces(.postgreSQL))
    }
    @Test func aMigrationTheModelRefusesLeavesTheStoreAsItWas() throws {
        try MigrationTests().aMigrationTheModelRefusesLeavesTheStoreAsItWas(StorePlaces(.postgreSQL))
    }
    @Test func toOneAndToManyRelationshipsConvert() throws {
        try MigrationTests().toOneAndToManyRelationshipsConvert(StorePlaces(.postgreSQL))
    }
    @Test func entitiesMoveIntoAnInheritanceTreeAndOut() throws {
        try MigrationTests().entitiesMoveIntoAnInheritanceTreeAndOut(StorePlaces(.postgreSQL))
    }
    @Test func aStagedMigrationRunsItsHandlersAroundEachCustomStage() throws {
        try MigrationTests().aStagedMigrationRunsItsHandlersAroundEachCustomStage(StorePlaces(.postgreSQL))
    }

    /// The migration builds its tables in a schema made for it: a schema of the user's with the name an earlier
    /// version used (`ocd_migrating`) keeps its rows, and no building schema is left behind.
    @Test func aMigrationLeavesTheDatabasesOtherSchemasAlone() throws {
        let places = StorePlaces(.postgreSQL)
        let url = try places.url("Schemas")
        _ = try MigrationTests().seed(url)
        let database = try places.database("Schemas")
        _ = try database.execute("CREATE SCHEMA ocd_migrating")
        _ = try database.execute("CREATE TABLE ocd_migrating.kept (id bigint)")
        _ = try database.execute("INSERT INTO ocd_migrating.kept VALUES (41), (42)")
        let report = try MigrationTests.migrateStore(at: url, to: try MigrationTests().model(MigrationTests.v3))
        #expect(report.changes.contains("renamed entity Folder to Group"), "\(report.changes)")
        #expect(try database.execute("SELECT id FROM ocd_migrating.kept ORDER BY id") == [["41"], ["42"]])
        let schemas = try database.execute("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'ocd\\_%' ORDER BY 1")
        #expect(schemas == [["ocd_migrating"]], "only the user's schema: \(schemas)")
    }
}
