import Foundation
import OpenCoreDataModel

/// Lightweight migration's plan, the same for every back end: which model wrote a store, and the inferred mapping from
/// it to the model it is opened with.
package enum LightweightMigration {
    /// The source model and inferred mapping that take the store at `url` (its `metadata`, its name in messages
    /// `place`) to `model`; nil when the store is already at `model`'s version.
    ///
    /// The source model is `source` when given, else the version of `model`'s bundle whose hashes the store recorded,
    /// else the one the store caches (`Z_MODELCACHE`, checked against the recorded entities).
    ///
    /// - Throws: `CoreDataError(.migrationMissingSourceModel)` when the store keeps no model that wrote it,
    ///   `.inferredMappingModel` for a change lightweight migration cannot infer, `.persistentStoreIncompatibleVersionHash`
    ///   for a model that is no version of the store's.
    package static func plan(
        at url: URL, place: String, metadata: [String: Any], to model: NSManagedObjectModel, from source: NSManagedObjectModel?
    ) throws -> (origin: NSManagedObjectModel, mapping: NSMappingModel)? {
        try model.validate()
        let recorded = metadata["NSStoreModelVersionHashes"] as? [String: Data] ?? [:]
        if recorded == model.entityVersionHashesByName { return nil }
        let origin: NSManagedObjectModel
        if let source {
            origin = source
        } else if let bundle = model.versionBundleURL,
            let version = NSManagedObjectModel.version(inBundleAt: bundle, forStoreMetadata: metadata)
        {
            // Core Data's first choice: the version of the app's model whose hashes are the store's.
            origin = version
        } else {
            do {
                origin = try NSManagedObjectModel.cachedModel(ofStoreAt: url)
            } catch let error as CoreDataError {
                throw CoreDataError(
                    .migrationMissingSourceModel,
                    "\(place) was written with another version of the model and keeps no model to migrate from (\(error.message)); give the model version that wrote it.",
                    underlyingError: error)
            }
        }
        // The cached model is the one that last wrote the store (Core Data rewrites it on every migration), so it is
        // trusted even where this project's hashes differ from Core Data's (ordered relationships); its entities must
        // be the store's.
        guard source != nil || recorded.isEmpty || Set(recorded.keys) == Set(origin.entitiesByName.keys) else {
            throw CoreDataError(
                .migrationMissingSourceModel,
                "\(place): the model it keeps does not have the entities the store records; give the model version that wrote it.")
        }
        // Written with this very version (a store Apple wrote whose ordered relationships Core Data hashes otherwise).
        if source == nil, origin.entityVersionHashesByName == model.entityVersionHashesByName { return nil }
        let mapping = try NSMappingModel.inferredMappingModel(forSourceModel: origin, destinationModel: model)
        // A model that shares no entity with the store's is not a version of it: never "migrate" another app's data away.
        guard mapping.entityMappings.contains(where: { $0.sourceEntityName != nil && $0.destinationEntityName != nil }) else {
            let stored = origin.entities.map(\.name).sorted().joined(separator: ", ")
            throw CoreDataError(
                .persistentStoreIncompatibleVersionHash,
                "The model used to open \(place) is not the one that created it, nor a version of it: it shares no entity with the store's (\(stored)). The store was not changed."
            )
        }
        return (origin, mapping)
    }
}
