import Foundation
import OpenCoreDataModel
@_spi(Engine) import OpenCoreDataStore

// A store's metadata dictionary, as Core Data's coordinator hands it out and takes an app's keys.
extension NSPersistentStoreCoordinator {
    /// The metadata of `store`: Core Data's keys (`NSStoreUUID`, `NSStoreType`, `NSStoreModelVersionHashes`…) and
    /// the app's own, including what `setMetadata(_:for:)` set and no save has written yet; empty for a store that
    /// keeps none, or whose metadata cannot be read.
    ///
    /// For example:
    /// ```swift
    /// let seeded = coordinator.metadata(for: store)["SeedVersion"] as? Int
    /// ```
    public func metadata(for store: any PersistentStore) -> [String: Any] {
        guard let keeping = store as? any MetadataStore, var metadata = try? keeping.metadataValues() else { return [:] }
        if let staged = stagedMetadata[ObjectIdentifier(store)] {
            metadata = metadata.filter { Self.keepsKey($0.key) }.merging(staged.values.filter { !Self.keepsKey($0.key) }) { _, new in new }
        }
        return metadata
    }

    /// Sets the app's keys of `store`'s metadata to those of `metadata` (nil: none).
    ///
    /// Core Data's own keys cannot be changed. As in Core Data, the metadata is written when a context on this
    /// coordinator next saves (a value a property list cannot hold makes that save throw, naming the key).
    ///
    /// For example:
    /// ```swift
    /// var metadata = coordinator.metadata(for: store)
    /// metadata["SeedVersion"] = 2
    /// coordinator.setMetadata(metadata, for: store)
    /// try context.save()
    /// ```
    public func setMetadata(_ metadata: [String: Any]?, for store: any PersistentStore) {
        guard let keeping = store as? any MetadataStore else { return }
        stagedMetadata[ObjectIdentifier(store)] = (keeping, metadata ?? [:])
    }

    /// Writes the metadata `setMetadata(_:for:)` staged, each store's in a transaction of its own.
    ///
    /// - Throws: what writing throws (a value a property list cannot hold, a read-only store); the metadata stays
    ///   staged then.
    func writeStagedMetadata() throws {
        for (key, staged) in stagedMetadata where persistentStores.contains(where: { $0 === staged.store }) {
            try staged.store.setMetadataValues(staged.values)
            stagedMetadata[key] = nil
        }
    }

    /// Whether `key` is one of Core Data's own metadata keys, which apps cannot set.
    private static func keepsKey(_ key: String) -> Bool { AppleStoreMetadata.managedKeys.contains(key) }
}
