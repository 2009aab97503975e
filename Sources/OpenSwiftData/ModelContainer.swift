internal import Logging
internal import OpenCoreData

/// Where and how a container keeps its models: SwiftData's `ModelConfiguration`.
///
/// For example:
/// ```swift
/// let onDisk = ModelConfiguration(url: URL(fileURLWithPath: "/var/lib/trips/trips.store"))
/// let scratch = ModelConfiguration(isStoredInMemoryOnly: true)
/// ```
/// Without a URL the store is `default.store` in the user's application support folder (`~/.local/share` on Linux),
/// as SwiftData keeps it in the app's Application Support. `groupContainer` and `cloudKitDatabase` have no meaning
/// on Linux: they are accepted and ignored.
public struct ModelConfiguration: Hashable, Sendable {
    /// The configuration's name.
    public let name: String
    /// The schema, when the configuration names one (else the container's).
    public let schema: Schema?
    /// The store file.
    public let url: URL
    /// Whether the store lives in memory only (nothing is written to `url`).
    public let isStoredInMemoryOnly: Bool
    /// Whether contexts may save.
    public let allowsSave: Bool

    /// A configuration kept in the default store file, or in memory.
    ///
    /// `groupContainer` and `cloudKitDatabase` are accepted so that Apple-platform code compiles; they have no meaning
    /// on Linux and are ignored (the store is the default file, and nothing is synchronized).
    public init(
        _ name: String? = nil, schema: Schema? = nil, isStoredInMemoryOnly: Bool = false, allowsSave: Bool = true,
        groupContainer: GroupContainer = .automatic, cloudKitDatabase: CloudKitDatabase = .automatic
    ) {
        self.init(name, schema: schema, url: Self.defaultURL, allowsSave: allowsSave, inMemory: isStoredInMemoryOnly)
    }

    /// A configuration whose store is the file at `url` (`cloudKitDatabase` is ignored, as above).
    public init(
        _ name: String? = nil, schema: Schema? = nil, url: URL, allowsSave: Bool = true, cloudKitDatabase: CloudKitDatabase = .automatic
    ) {
        self.init(name, schema: schema, url: url, allowsSave: allowsSave, inMemory: false)
    }

    /// A configuration for the given classes (its schema), kept in the default store file or in memory.
    @_disfavoredOverload
    public init(
        for forTypes: any PersistentModel.Type..., isStoredInMemoryOnly: Bool = false, allowsSave: Bool = true,
        groupContainer: GroupContainer = .automatic, cloudKitDatabase: CloudKitDatabase = .automatic
    ) {
        self.init(nil, schema: Schema(forTypes), url: Self.defaultURL, allowsSave: allowsSave, inMemory: isStoredInMemoryOnly)
    }

    /// An app group's shared folder for the store (Apple's systems only; ignored here).
    public struct GroupContainer: Hashable, Sendable {
        let identifier: String?
        /// The app's first app group, on Apple's systems.
        public static let automatic = GroupContainer(identifier: nil)
        /// No app group.
        public static let none = GroupContainer(identifier: nil)
        /// The app group with this identifier.
        public static func identifier(_ groupName: String) -> GroupContainer { GroupContainer(identifier: groupName) }
    }

    /// The CloudKit database a store is synchronized with (Apple's systems only; ignored here).
    public struct CloudKitDatabase: Hashable, Sendable {
        let identifier: String?
        /// The app's first CloudKit container, on Apple's systems.
        public static let automatic = CloudKitDatabase(identifier: nil)
        /// No synchronization.
        public static let none = CloudKitDatabase(identifier: nil)
        /// The private database of the CloudKit container with this identifier.
        public static func `private`(_ containerIdentifier: String) -> CloudKitDatabase {
            CloudKitDatabase(identifier: containerIdentifier)
        }
    }

    private init(_ name: String?, schema: Schema?, url: URL, allowsSave: Bool, inMemory: Bool) {
        self.name = name ?? "default"
        self.schema = schema
        self.url = url
        self.allowsSave = allowsSave
        self.isStoredInMemoryOnly = inMemory
    }

    /// `default.store` in the user's application support folder.
    static var defaultURL: URL {
        let base =
            FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
        return base.appendingPathComponent("default.store")
    }

    /// Configurations are equal when they name the same store the same way (and the same schema object).
    public static func == (a: ModelConfiguration, b: ModelConfiguration) -> Bool {
        a.name == b.name && a.url == b.url && a.isStoredInMemoryOnly == b.isStoredInMemoryOnly && a.allowsSave == b.allowsSave
            && a.schema === b.schema
    }

    /// Hashes the name, store URL and memory-only flag.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(url)
        hasher.combine(isStoredInMemoryOnly)
    }
}

/// The models of a schema and the store that keeps them: SwiftData's `ModelContainer`.
///
/// For example:
/// ```swift
/// let container = try ModelContainer(for: Trip.self, Stop.self)
/// let context = ModelContext(container)
/// ```
/// It stands on OpenCoreData's stack: the schema becomes a managed object model, the store is Core Data's SQLite
/// layout (what SwiftData writes), and each `ModelContext` a managed object context.
public final class ModelContainer: @unchecked Sendable {
    /// The container's schema.
    public let schema: Schema
    /// Its configurations (one store each).
    public let configurations: [ModelConfiguration]
    let persistentContainer: NSPersistentContainer
    private let lock = NSLock()
    private var _mainContext: ModelContext?

    /// A container for the given model classes.
    ///
    /// - Throws: the schema's errors (a property type it cannot store), or the store's (a file it cannot open or
    ///   migrate), with messages naming them.
    public convenience init(
        for forTypes: any PersistentModel.Type..., migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
        configurations: ModelConfiguration...
    ) throws {
        try self.init(for: Schema(forTypes), migrationPlan: migrationPlan, configurations: configurations)
    }

    /// A container for `schema`.
    public convenience init(
        for schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil, configurations: ModelConfiguration...
    ) throws {
        try self.init(for: schema, migrationPlan: migrationPlan, configurations: configurations)
    }

    /// A container for `schema` with the given configurations: one store each (the default configuration when none is
    /// given).
    ///
    /// A configuration with a schema keeps the models of its schema's classes (which join the container's); one
    /// without keeps every class's. Models of a class that two stores keep are inserted into the first; a save that
    /// changes models only stores with `allowsSave` false keep throws.
    ///
    /// With a migration plan, a store at one of the plan's earlier versions is migrated through the plan's stages
    /// before it opens; a store at no version the plan lists is migrated to the schema's model directly when
    /// OpenCoreData can infer how (lightweight), else the error says why.
    ///
    /// - Throws: `SwiftDataError` for two configurations with one name or one store file; the schema's and the stores'
    ///   errors.
    public init(for schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil, configurations: [ModelConfiguration]) throws {
        let configurations = configurations.isEmpty ? [ModelConfiguration()] : configurations
        for (i, configuration) in configurations.enumerated() {
            for other in configurations[..<i] {
                if other.name == configuration.name {
                    throw SwiftDataError(
                        "Two of the container's configurations are named '\(configuration.name)': give each its own name.",
                        kind: .duplicateConfiguration)
                }
                if !other.isStoredInMemoryOnly, !configuration.isStoredInMemoryOnly, other.url == configuration.url {
                    throw SwiftDataError("Two of the container's configurations keep their store at \(configuration.url.path).")
                }
            }
        }
        // The container's classes: its schema's and those its configurations' schemas add.
        let types = schema.types + configurations.flatMap { $0.schema?.types ?? [] }
        let whole = types.count == schema.types.count ? schema : Schema(types, version: schema.version)
        self.schema = whole
        self.configurations = configurations
        let model = try whole.makeManagedObjectModel(
            configurations: configurations.count < 2
                ? []
                : configurations.map { ($0.name, Set(($0.schema?.types ?? whole.types).map(Schema.entityName(of:)))) })
        let container = NSPersistentContainer(name: configurations[0].name, managedObjectModel: model)
        container.persistentStoreDescriptions = try configurations.map { configuration in
            let description: NSPersistentStoreDescription
            if configuration.isStoredInMemoryOnly {
                description = NSPersistentStoreDescription()
                description.type = NSInMemoryStoreType
            } else {
                try FileManager.default.createDirectory(
                    at: configuration.url.deletingLastPathComponent(), withIntermediateDirectories: true)
                description = NSPersistentStoreDescription(url: configuration.url)
            }
            // SwiftData's stores keep persistent history (`fetchHistory`), as iOS writes them; in memory too (SwiftData's
            // is a SQLite store that writes nowhere).
            description.setOption(true, forKey: NSPersistentHistoryTrackingKey)
            if !configuration.isStoredInMemoryOnly, let migrationPlan {
                description.setOption(try Self.stagedMigration(migrationPlan), forKey: NSPersistentStoreStagedMigrationManagerOptionKey)
            }
            if configurations.count > 1 { description.configuration = configuration.name }
            return description
        }
        try container.loadPersistentStores()
        persistentContainer = container
        // The classes only read-only stores keep.
        let writable = Set(configurations.filter(\.allowsSave).flatMap { ($0.schema?.types ?? whole.types).map(Schema.entityName(of:)) })
        readOnlyEntities = Set(whole.types.map(Schema.entityName(of:))).subtracting(writable)
    }

    /// The entities only stores with `allowsSave` false keep: a save that changes their models throws.
    let readOnlyEntities: Set<String>

    /// Deletes every model of every store the container keeps, saved at once (SwiftData's `erase()`).
    ///
    /// - Throws: the stores' errors; nothing is deleted then.
    public func erase() throws {
        let context = ModelContext(self)
        func deleteAll<T: PersistentModel>(_ type: T.Type) throws { try context.delete(model: type) }
        try context.transaction {
            for type in schema.types { try deleteAll(type) }
        }
    }

    /// Deletes every model of every store the container keeps, as `erase()` does.
    ///
    /// SwiftData's `deleteAllData()` does not throw, so a failure is logged (under the label `OpenSwiftData`) and leaves
    /// every model in place. Prefer `erase()`, which reports it.
    public func deleteAllData() {
        do {
            try erase()
        } catch {
            Logger(label: "OpenSwiftData").error("deleteAllData() deleted nothing: \(error)")
        }
    }

    /// A container over a store that is open already (a migration stage's), with the schema of its version.
    init(wrapping container: NSPersistentContainer, schema: Schema) {
        self.schema = schema
        configurations = [ModelConfiguration(url: container.persistentStoreDescriptions.first?.url ?? ModelConfiguration.defaultURL)]
        persistentContainer = container
        readOnlyEntities = []
    }

    /// The context of the main actor (SwiftUI's environment gives it on Apple platforms).
    @MainActor public var mainContext: ModelContext {
        lock.lock()
        defer { lock.unlock() }
        if let context = _mainContext { return context }
        let context = ModelContext(container: self, context: persistentContainer.viewContext)
        context.autosaveEnabled = true
        _mainContext = context
        return context
    }

    private var insertPlans: [ObjectIdentifier: InsertPlan] = [:]

    /// How a model class's values go into a new managed object, worked out on first use.
    func insertPlan(for type: any PersistentModel.Type) throws -> InsertPlan {
        if let plan = lock.withLock({ insertPlans[ObjectIdentifier(type)] }) { return plan }
        let entity = try self.entity(for: type)
        let properties = type.schemaMetadata.enumerated().compactMap { index, metadata -> InsertPlan.Property? in
            guard let accessor = metadata.keyPath as? any ModelKeyPath else { return nil }
            let (base, _) = Schema.unwrapped(Swift.type(of: metadata.keyPath).valueType)
            let attribute = entity.propertiesByName[metadata.name] as? NSAttributeDescription
            let isTransformed = attribute?.attributeType == .transformableAttributeType
            let isRelationship = Schema.modelDestination(base) != nil
            // Only attributes whose stored type is the Swift type's own (not a transformed or composite value).
            let direct = attribute != nil && !isTransformed && attribute?.attributeType != .compositeAttributeType && !isRelationship
            return InsertPlan.Property(
                name: metadata.name, schemaIndex: index, entityIndex: entity.propertyIndex(named: metadata.name), accessor: accessor,
                isDirect: direct, isRelationship: isRelationship, isTransformed: isTransformed)
        }
        let plan = InsertPlan(entity: entity, properties: properties, propertyCount: type.schemaMetadata.count)
        lock.withLock { insertPlans[ObjectIdentifier(type)] = plan }
        return plan
    }

    private var layouts: [ObjectIdentifier: ModelLayout] = [:]

    /// The layout of the models whose rows are of `entity` (nil for an entity of no class of the schema), worked out
    /// on first use.
    func layout(for entity: NSEntityDescription) -> ModelLayout? {
        if let layout = lock.withLock({ layouts[ObjectIdentifier(entity)] }) { return layout }
        guard let type = schema.types.first(where: { Schema.entityName(of: $0) == entity.name }),
            let plan = try? insertPlan(for: type), plan.entity === entity
        else { return nil }
        lock.withLock { layouts[ObjectIdentifier(entity)] = plan.layout }
        return plan.layout
    }

    /// The entity of a model class.
    func entity(for type: any PersistentModel.Type) throws -> NSEntityDescription {
        guard let entity = persistentContainer.managedObjectModel.entity(named: Schema.entityName(of: type)) else {
            throw SwiftDataError("\(type) is not in the container's schema.")
        }
        return entity
    }
}
