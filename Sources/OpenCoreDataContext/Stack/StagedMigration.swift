import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

/// A model version, by the model itself and its version checksum (Core Data's `NSManagedObjectModelReference`).
///
/// For example:
/// ```swift
/// let v2 = NSManagedObjectModelReference(model: version2, versionChecksum: version2.versionChecksum)
/// ```
public final class NSManagedObjectModelReference: @unchecked Sendable {
    /// The model.
    public let resolvedModel: NSManagedObjectModel
    /// Its version checksum (`NSManagedObjectModel.versionChecksum`).
    public let versionChecksum: String

    /// A reference to `model`, whose checksum must be `versionChecksum`.
    public init(model: NSManagedObjectModel, versionChecksum: String) {
        resolvedModel = model
        self.versionChecksum = versionChecksum
    }

    /// A reference to the model at `fileURL` (a bundle, version folder or compiled model).
    ///
    /// - Throws: `CoreDataError` when the file does not load.
    public convenience init(fileURL: URL, versionChecksum: String) throws {
        self.init(model: try NSManagedObjectModel(contentsOf: fileURL), versionChecksum: versionChecksum)
    }
}

/// One step of a staged migration (Core Data's `NSMigrationStage`).
public class NSMigrationStage: @unchecked Sendable {
    /// A name for the stage, for messages.
    public var label: String = ""
}

/// A stage of lightweight migrations through the model versions named by their checksums, in order (Core Data's
/// `NSLightweightMigrationStage`): a store at one of them is migrated to the last.
///
/// For example:
/// ```swift
/// let stage = NSLightweightMigrationStage([v1.versionChecksum, v2.versionChecksum])
/// ```
public final class NSLightweightMigrationStage: NSMigrationStage, @unchecked Sendable {
    /// The checksums of the model versions the stage goes through.
    public let versionChecksums: [String]

    /// A stage through the model versions with these checksums.
    public init(_ versionChecksums: [String]) {
        self.versionChecksums = versionChecksums
    }
}

/// A stage from one model version to the next with code around it (Core Data's `NSCustomMigrationStage`): the
/// will-migrate handler runs on the store at the current version (`manager.container`), then the store is migrated
/// (lightweight), then the did-migrate handler runs on it at the next version.
///
/// For example:
/// ```swift
/// let stage = NSCustomMigrationStage(migratingFrom: v2Reference, to: v3Reference)
/// stage.willMigrateHandler = { manager, _ in
///     let context = manager.container!.newBackgroundContext()
///     try context.performAndWait { /* fill what version 3 requires */ try context.save() }
/// }
/// ```
public final class NSCustomMigrationStage: NSMigrationStage, @unchecked Sendable {
    /// The version the stage starts from.
    public let currentModel: NSManagedObjectModelReference
    /// The version it ends at.
    public let nextModel: NSManagedObjectModelReference
    /// Runs before the migration, with the store open at `currentModel`.
    public var willMigrateHandler: ((NSStagedMigrationManager, NSCustomMigrationStage) throws -> Void)?
    /// Runs after the migration, with the store open at `nextModel`.
    public var didMigrateHandler: ((NSStagedMigrationManager, NSCustomMigrationStage) throws -> Void)?

    /// A stage from `currentModel` to `nextModel`.
    public init(migratingFrom currentModel: NSManagedObjectModelReference, to nextModel: NSManagedObjectModelReference) {
        self.currentModel = currentModel
        self.nextModel = nextModel
    }
}

/// Migrates a store through stages (Core Data's `NSStagedMigrationManager`), set on a store description with
/// `NSPersistentStoreStagedMigrationManagerOptionKey`.
///
/// For example:
/// ```swift
/// description.setOption(NSStagedMigrationManager([stage1, stage2]), forKey: NSPersistentStoreStagedMigrationManagerOptionKey)
/// ```
public final class NSStagedMigrationManager: @unchecked Sendable {
    /// The stages, in order.
    public let stages: [NSMigrationStage]
    /// The container open on the store while a custom stage's handler runs; nil otherwise.
    public private(set) var container: NSPersistentContainer?

    /// A manager of `stages`.
    public init(_ stages: [NSMigrationStage]) {
        self.stages = stages
    }

    /// The models the stages may name, by checksum: the final model, the versions of the bundle it was loaded from (as
    /// Core Data resolves a lightweight stage's checksums among the app's models), and the custom stages' models.
    private func models(final: NSManagedObjectModel) -> [String: NSManagedObjectModel] {
        var models = [final.versionChecksum: final]
        if let bundle = final.versionBundleURL {
            for url in NSManagedObjectModel.versionURLs(ofModelAt: bundle) {
                guard let version = try? NSManagedObjectModel(contentsOf: url) else { continue }
                models[version.versionChecksum] = models[version.versionChecksum] ?? version
            }
        }
        for case let stage as NSCustomMigrationStage in stages {
            models[stage.currentModel.versionChecksum] = stage.currentModel.resolvedModel
            models[stage.nextModel.versionChecksum] = stage.nextModel.resolvedModel
        }
        return models
    }

    /// Migrates the store at `url` through the stages that apply, to `model`.
    ///
    /// - Throws: `CoreDataError(.migrationMissingSourceModel)` when a lightweight stage names a checksum no stage's
    ///   model has, or a handler's or a migration's error (the store is then at the last version it reached).
    func migrate(storeAt url: URL, to model: NSManagedObjectModel, kind: StoreKind) throws {
        guard let metadata = kind.metadata, let migrateStore = kind.migrate else {
            throw CoreDataError(.persistentStoreInvalidType, "A \(kind.type) store cannot be migrated in stages.")
        }
        let models = models(final: model)
        let hashes = try metadata(url)["NSStoreModelVersionHashes"] as? [String: Data] ?? [:]
        // The store's version by checksum, from the hashes it recorded (it may be one only a lightweight stage names).
        var current: String? = SHA256Digest.hash(Data(hashes.sorted { $0.key < $1.key }.flatMap(\.value))).base64EncodedString()
        for stage in stages {
            guard let checksum = current, checksum != model.versionChecksum else { break }
            if let custom = stage as? NSCustomMigrationStage, custom.currentModel.versionChecksum == checksum {
                try run(custom, url, migrateStore)
                current = custom.nextModel.versionChecksum
            } else if let lightweight = stage as? NSLightweightMigrationStage,
                let start = lightweight.versionChecksums.firstIndex(of: checksum)
            {
                for next in lightweight.versionChecksums[(start + 1)...] {
                    guard let target = models[next] else {
                        throw CoreDataError(
                            .migrationMissingSourceModel,
                            "The lightweight stage '\(stage.label)' names model version \(next), which neither a stage's model nor a version of the model's bundle has."
                        )
                    }
                    _ = try migrateStore(url, target, nil)
                    current = next
                }
            }
        }
    }

    private func run(
        _ stage: NSCustomMigrationStage, _ url: URL, _ migrateStore: (URL, NSManagedObjectModel, NSManagedObjectModel?) throws -> [String]
    ) throws {
        if let handler = stage.willMigrateHandler { try open(url, stage.currentModel.resolvedModel) { try handler(self, stage) } }
        _ = try migrateStore(url, stage.nextModel.resolvedModel, stage.currentModel.resolvedModel)
        if let handler = stage.didMigrateHandler { try open(url, stage.nextModel.resolvedModel) { try handler(self, stage) } }
    }

    /// Runs `body` with `container` open on the store at `model`'s version, closed after.
    private func open(_ url: URL, _ model: NSManagedObjectModel, _ body: () throws -> Void) throws {
        let description = NSPersistentStoreDescription(url: url)
        description.shouldMigrateStoreAutomatically = false
        let opened = NSPersistentContainer(name: "Stage", managedObjectModel: model)
        opened.persistentStoreDescriptions = [description]
        try opened.loadPersistentStores()
        container = opened
        defer {
            container = nil
            try? opened.persistentStoreCoordinator.persistentStores.forEach { try opened.persistentStoreCoordinator.remove($0) }
        }
        try body()
    }
}

/// The store option holding an `NSStagedMigrationManager` for the store's migration.
public let NSPersistentStoreStagedMigrationManagerOptionKey = "NSPersistentStoreStagedMigrationManagerOptionKey"
