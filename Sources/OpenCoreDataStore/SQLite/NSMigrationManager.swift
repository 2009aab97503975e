import Foundation
import OpenCoreDataModel

/// Migrates a store from one model version to another along a mapping model (Core Data's `NSMigrationManager`):
/// the mapping may be inferred (`NSMappingModel.inferredMappingModel(forSourceModel:destinationModel:)`) or built in
/// code.
///
/// For example:
/// ```swift
/// let manager = NSMigrationManager(sourceModel: version1, destinationModel: version2)
/// let mapping = try NSMappingModel.inferredMappingModel(forSourceModel: version1, destinationModel: version2)
/// try manager.migrateStore(
///     from: oldURL, sourceType: NSSQLiteStoreType, options: nil, with: mapping,
///     toDestinationURL: newURL, destinationType: NSSQLiteStoreType, destinationOptions: nil)
/// ```
public final class NSMigrationManager: @unchecked Sendable {
    /// The model version the stores it migrates were written with.
    public let sourceModel: NSManagedObjectModel
    /// The model version it migrates them to.
    public let destinationModel: NSManagedObjectModel
    /// What the last migration changed, a line per change.
    public private(set) var changes: [String] = []

    /// A manager from `sourceModel` to `destinationModel`.
    public init(sourceModel: NSManagedObjectModel, destinationModel: NSManagedObjectModel) {
        self.sourceModel = sourceModel
        self.destinationModel = destinationModel
    }

    /// Writes the store at `sourceURL`, migrated along `mapping` (inferred when nil), to `dURL`: a new SQLite store,
    /// or the same URL to migrate in place.
    ///
    /// The source is read, never changed (unless migrated in place, when a failure leaves it as it was).
    /// - Complexity: O(rows of the store), streamed by SQLite.
    /// - Throws: `CoreDataError` for a store type other than SQLite, a file already at `dURL`, a change the mapping
    ///   cannot make, or a result the destination model refuses (naming entity and property).
    public func migrateStore(
        from sourceURL: URL, sourceType: String, options: [AnyHashable: Any]? = nil, with mapping: NSMappingModel?,
        toDestinationURL dURL: URL, destinationType: String, destinationOptions: [AnyHashable: Any]? = nil
    ) throws {
        guard sourceType == NSSQLiteStoreType, destinationType == NSSQLiteStoreType else {
            throw CoreDataError(.persistentStoreInvalidType, "Only SQLite stores migrate (got \(sourceType) to \(destinationType)).")
        }
        let mapping = try mapping ?? NSMappingModel.inferredMappingModel(forSourceModel: sourceModel, destinationModel: destinationModel)
        changes =
            try SQLiteMigration.migrateStore(at: sourceURL, from: sourceModel, to: destinationModel, mapping: mapping, into: dURL).changes
    }
}
