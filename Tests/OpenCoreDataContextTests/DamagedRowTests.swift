import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// A row whose column holds what its attribute cannot be (written by another program) makes the read throw an error
/// that names the row, the entity and the attribute — never a crash, never a wrong value.
@Suite struct DamagedRowTests {
    @Test func aColumnThatHoldsWhatItsAttributeCannotBeIsNamed() throws {
        let model = try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("score", .integer64, default: 0)
            }
        }
        let stack = try TestStack(model: model)
        let writer = stack.context()
        try writer.make("Item", ["name": "fine", "score": 3])
        try writer.save()
        let database = try DatabaseQueue(path: stack.storeURL.path)
        try database.write { db in try db.execute(sql: "UPDATE ZITEM SET ZSCORE = 'three'") }
        let context = stack.context()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Item")
        request.returnsObjectsAsFaults = false
        let error = try #require(throws: CoreDataError.self) { try context.performAndWait { try context.fetch(request) } }
        let message = "\(error)"
        #expect(
            message.contains("'Item'") && message.contains("'score'") && message.contains("three") && message.contains("damaged"),
            "\(message)")
    }
}
