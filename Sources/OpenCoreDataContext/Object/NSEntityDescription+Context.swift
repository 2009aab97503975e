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
    /// For example:
    /// ```swift
    /// let event = NSEntityDescription.insertNewObject(forEntityName: "Event", into: context)
    /// ```
    /// A name the model does not have is a programming error: it stops the program with a precondition failure
    /// naming it, as Core Data raises. Use `checkedInsertNewObject(forEntityName:into:)` for names from input.
    public static func insertNewObject(forEntityName name: String, into context: NSManagedObjectContext) -> NSManagedObject {
        do {
            return try checkedInsertNewObject(forEntityName: name, into: context)
        } catch {
            preconditionFailure("\(error) (checkedInsertNewObject(forEntityName:into:) throws this instead)")
        }
    }

    /// Creates an object of the named entity, inserted into `context`, or throws for a name the model lacks.
    ///
    /// For example:
    /// ```swift
    /// let object = try NSEntityDescription.checkedInsertNewObject(forEntityName: nameFromJSON, into: context)
    /// ```
    /// - Throws: `CoreDataError(.unknownEntity)` when the model has no such entity.
    public static func checkedInsertNewObject(forEntityName name: String, into context: NSManagedObjectContext) throws
        -> NSManagedObject
    {
        let entity = try context.entity(named: name)
        let cls = (entity.managedObjectClass as? NSManagedObject.Type) ?? NSManagedObject.self
        return cls.init(entity: entity, insertInto: context)
    }
}
