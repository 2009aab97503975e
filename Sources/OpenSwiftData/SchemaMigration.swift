internal import OpenCoreData

extension Schema {
    /// A schema's version number: major, minor and patch, compared in that order.
    public struct Version: Codable, Hashable, Comparable, CustomStringConvertible, Sendable {
        /// The major version.
        public let major: Int
        /// The minor version.
        public let minor: Int
        /// The patch version.
        public let patch: Int

        /// Version `major.minor.patch`.
        public init(_ major: Int, _ minor: Int, _ patch: Int) {
            self.major = major
            self.minor = minor
            self.patch = patch
        }

        /// `major.minor.patch`.
        public var description: String { "\(major).\(minor).\(patch)" }

        /// Whether `a` comes before `b`.
        public static func < (a: Version, b: Version) -> Bool { (a.major, a.minor, a.patch) < (b.major, b.minor, b.patch) }
    }

    /// The schema of one version of an app's models.
    ///
    /// For example:
    /// ```swift
    /// let container = try ModelContainer(for: Schema(versionedSchema: TripsV2.self), migrationPlan: TripsPlan.self)
    /// ```
    public convenience init(versionedSchema: any VersionedSchema.Type) {
        self.init(versionedSchema.models, version: versionedSchema.versionIdentifier)
    }
}

/// One version of an app's models: the model classes of that version (usually nested in the enum that conforms) and
/// its version number.
///
/// For example:
/// ```swift
/// enum TripsV1: VersionedSchema {
///     static let versionIdentifier = Schema.Version(1, 0, 0)
///     static var models: [any PersistentModel.Type] { [Trip.self] }
///
///     @Model final class Trip {
///         var name: String
///         init(name: String) { self.name = name }
///     }
/// }
/// ```
/// A model class is an entity named after the class itself (`Trip`, not `TripsV1.Trip`), so the versions of a class
/// are versions of one entity.
public protocol VersionedSchema {
    /// The version's number.
    static var versionIdentifier: Schema.Version { get }
    /// The version's model classes.
    static var models: [any PersistentModel.Type] { get }
}

/// How a store moves from one schema version to the next: the versions, oldest first, and a stage between each
/// pair.
///
/// For example:
/// ```swift
/// enum TripsPlan: SchemaMigrationPlan {
///     static var schemas: [any VersionedSchema.Type] { [TripsV1.self, TripsV2.self] }
///     static var stages: [MigrationStage] { [.lightweight(fromVersion: TripsV1.self, toVersion: TripsV2.self)] }
/// }
/// let container = try ModelContainer(for: TripsV2.Trip.self, migrationPlan: TripsPlan.self)
/// ```
public protocol SchemaMigrationPlan {
    /// The schema versions, oldest first.
    static var schemas: [any VersionedSchema.Type] { get }
    /// The stages between them, in order.
    static var stages: [MigrationStage] { get }
}

/// One step of a migration plan.
///
/// A lightweight stage changes the store's tables to the next version's (added, removed and renamed properties and
/// models, as OpenCoreData's lightweight migration infers them). A custom stage runs `willMigrate` on a context of the
/// store at the earlier version, migrates the same way, then runs `didMigrate` on a context at the later version;
/// each context's changes are saved after its closure returns.
public enum MigrationStage: @unchecked Sendable {
    /// The store's tables change from one version's to the next's.
    case lightweight(fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type)
    /// Code runs before and after the tables change.
    case custom(
        fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type, willMigrate: ((ModelContext) throws -> Void)?,
        didMigrate: ((ModelContext) throws -> Void)?)

    var versions: (from: any VersionedSchema.Type, to: any VersionedSchema.Type) {
        switch self {
        case .lightweight(let from, let to), .custom(let from, let to, _, _): (from, to)
        }
    }
}

extension ModelContainer {
    /// The staged migration a plan stands for: each stage from one version's managed object model to the next's.
    ///
    /// - Throws: `SwiftDataError` when a version's schema cannot be mapped, or a stage names a version the plan does
    ///   not list.
    static func stagedMigration(_ plan: any SchemaMigrationPlan.Type) throws -> NSStagedMigrationManager {
        var references: [ObjectIdentifier: (schema: Schema, reference: NSManagedObjectModelReference)] = [:]
        for version in plan.schemas {
            let schema = Schema(versionedSchema: version)
            let model = try schema.makeManagedObjectModel()
            references[ObjectIdentifier(version)] = (
                schema, NSManagedObjectModelReference(model: model, versionChecksum: model.versionChecksum)
            )
        }
        let stages = try plan.stages.map { stage -> NSMigrationStage in
            let (from, to) = stage.versions
            guard let start = references[ObjectIdentifier(from)], let end = references[ObjectIdentifier(to)] else {
                throw SwiftDataError(
                    "A stage of \(plan) migrates from \(from) to \(to); the plan's schemas (\(plan.schemas.map { "\($0)" }.joined(separator: ", "))) do not list both."
                )
            }
            // A lightweight stage is a custom stage without code: the manager then resolves every version's model from
            // its stages, and none of them need be in a model bundle.
            let custom = NSCustomMigrationStage(migratingFrom: start.reference, to: end.reference)
            custom.label = "\(from) → \(to)"
            if case .custom(_, _, let willMigrate, let didMigrate) = stage {
                if let willMigrate { custom.willMigrateHandler = handler(willMigrate, schema: start.schema) }
                if let didMigrate { custom.didMigrateHandler = handler(didMigrate, schema: end.schema) }
            }
            return custom
        }
        return NSStagedMigrationManager(stages)
    }

    /// A stage handler that runs `body` on a model context of the store the migration has open, then saves it.
    private static func handler(_ body: @escaping (ModelContext) throws -> Void, schema: Schema)
        -> (NSStagedMigrationManager, NSCustomMigrationStage) throws -> Void
    {
        { manager, stage in
            guard let opened = manager.container else { throw SwiftDataError("The migration stage \(stage.label) has no open store.") }
            let context = ModelContext(ModelContainer(wrapping: opened, schema: schema))
            context.autosaveEnabled = false
            try body(context)
            if context.hasChanges { try context.save() }
        }
    }
}
