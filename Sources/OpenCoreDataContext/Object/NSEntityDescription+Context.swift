import Foundation
import OpenCoreDataModel

extension NSEntityDescription {
    /// The entity of the given name in the context's model, or nil (Core Data's `entityForName:inManagedObjectContext:`).
    public static func entity(forEntityName name: String, in context: NSManagedObjectContext) -> NSEntityDescription? {
        try? context.entity(named: name)
    }

    /// Creates an object of the named entity, inserted into `context` (Core Data's
    /// `insertNewObjectForEntityForName:inManagedObjectContext:`), as the entity's class.
    ///
    /// - Throws: `CoreDataError(.unknownEntity)` when the model has no such entity.
    public static func insertNewObject(forEntityName name: String, into context: NSManagedObjectContext) throws -> NSManagedObject {
        let entity = try context.entity(named: name)
        let cls = (entity.managedObjectClass as? NSManagedObject.Type) ?? NSManagedObject.self
        return cls.init(entity: entity, insertInto: context)
    }
}
