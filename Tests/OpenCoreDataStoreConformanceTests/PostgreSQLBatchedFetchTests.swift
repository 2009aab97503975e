import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataStore

/// A batched fetch on the PostgreSQL store (`OCD_POSTGRES_URL`; `.ci/run` starts a throwaway cluster): its rows come
/// from the store's keyed read by primary key, forwards, backwards and out of order, as on SQLite.
@Suite(
    .enabled(
        if: Requirement.postgresIsPresent,
        "no PostgreSQL server (OCD_POSTGRES_URL is not set)"))
struct PostgreSQLBatchedFetchTests {
    @Test func aBatchedFetchReadsEveryRowInOrderAndTheKeyedReadAgreesWithTheReadByID() throws {
        let database = try PostgreSQLTestDatabase()
        let model = try NSManagedObjectModel {
            Entity("Row") {
                Attribute("n", .integer64)
                Attribute("label", .string)
            }
        }
        let container = NSPersistentContainer(name: "PG", managedObjectModel: model)
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: database.url)]
        try container.loadPersistentStores()
        let writer = container.newBackgroundContext()
        try writer.performAndWait {
            for n in 0..<1_234 { try writer.make("Row", ["n": n, "label": "row \(n)"]) }
            try writer.save()
        }
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let request = NSFetchRequest<NSManagedObject>(entityName: "Row")
            request.sortDescriptors = [FetchSortDescriptor(key: "n", ascending: false)]
            request.fetchBatchSize = 25
            let forwards = try context.fetchInBatches(request)
            var seen: [Int64] = []
            for object in forwards { seen.append(object.value(forKey: "n") as! Int64) }
            #expect(seen == (0..<1_234).reversed().map(Int64.init))
            let backwards = try context.fetchInBatches(request)
            for index in backwards.indices.reversed() {
                #expect(backwards[index].value(forKey: "label") as? String == "row \(1_233 - index)", "row \(index)")
            }
            let jumps = try context.fetchInBatches(request)
            for index in [700, 3, 1_233, 410] { #expect(jumps[index].value(forKey: "n") as? Int64 == Int64(1_233 - index)) }

            let store = try #require(container.persistentStoreCoordinator.persistentStores.first as? PostgreSQLStore)
            let ids = Array(forwards.objectIDs.prefix(600))  // more than one statement's 500 keys
            let byKey = try store.rowsByPrimaryKey(for: ids)
            let byID = try store.rows(for: ids)
            #expect(byKey.count == 600 && byID.count == 600)
            for (id, row) in byID {
                #expect(byKey[id.primaryKey]?.values == row.values && byKey[id.primaryKey]?.objectID === id)
            }
        }
    }
}
