import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

/// Where and how a container opens a store.
///
/// For example:
/// ```swift
/// let description = NSPersistentStoreDescription(url: URL(fileURLWithPath: "/var/lib/app/store.sqlite"))
/// description.isReadOnly = true
/// container.persistentStoreDescriptions = [description]
/// ```
public final class NSPersistentStoreDescription: @unchecked Sendable, CustomStringConvertible {
    /// `NSSQLiteStoreType` (default) or `NSInMemoryStoreType`.
    public var type: String = NSSQLiteStoreType
    /// The store file.
    public var url: URL?
    /// Whether to open read-only.
    public var isReadOnly = false
    /// Seconds to wait for a lock another connection or process holds (default 5).
    public var timeout: TimeInterval = 5
    /// Whether a store written with an older version of the model is migrated when it is opened (default true, as
    /// Core Data's descriptions).
    public var shouldMigrateStoreAutomatically = true
    /// Whether that migration may infer its mapping model (default true: lightweight migration).
    public var shouldInferMappingModelAutomatically = true
    /// Further store options by key, as `addPersistentStore` takes them (`NSPersistentStoreStagedMigrationManagerOptionKey`).
    public private(set) var options: [String: Any] = [:]
    /// Accepted for source compatibility: stores are always added synchronously.
    public var shouldAddStoreAsynchronously = false
    /// The model configuration the store is for (nil: the default, every entity).
    ///
    /// The store keeps the objects of the configuration's entities; describe one store per configuration to keep
    /// entities apart. A configuration the model does not have fails the store's loading.
    public var configuration: String?

    /// A description of a SQLite store at `url`.
    public init(url: URL) {
        self.url = url
        if StoreKind.isPostgreSQL(url) { type = NSPostgreSQLStoreType }
    }

    /// Sets a store option (nil removes it).
    public func setOption(_ option: Any?, forKey key: String) { options[key] = option }
    /// A description with no URL: an in-memory store unless a URL is set.
    public init() {}

    /// The store type and path.
    public var description: String { "<NSPersistentStoreDescription \(type) \(url?.path ?? "")>" }
}

/// The whole stack in one object: model, coordinator, store and a main-queue `viewContext`.
///
/// For example:
/// ```swift
/// let container = NSPersistentContainer(name: "Groceries", managedObjectModel: model)
/// container.loadPersistentStores { _, error in if let error { print(error) } }
/// let context = container.viewContext
/// ```
/// Or check for errors by throwing: `try container.loadPersistentStores()`.
///
/// Subclasses may override what Core Data's do, `defaultDirectoryURL()` most often (an app group's folder).
open class NSPersistentContainer: @unchecked Sendable {
    /// The container's name; the default store file is `NAME.sqlite` in `defaultDirectoryURL()`.
    public let name: String
    /// The model.
    public let managedObjectModel: NSManagedObjectModel
    /// The coordinator.
    public let persistentStoreCoordinator: NSPersistentStoreCoordinator
    /// Where the stores are opened; by default one SQLite store at `defaultDirectoryURL()/NAME.sqlite`.
    public var persistentStoreDescriptions: [NSPersistentStoreDescription]
    private let modelError: CoreDataError?
    private let lock = NSLock()
    private var _viewContext: NSManagedObjectContext?

    /// Creates a container with a model.
    public init(name: String, managedObjectModel model: NSManagedObjectModel) {
        self.name = name
        self.managedObjectModel = model
        self.persistentStoreCoordinator = NSPersistentStoreCoordinator(managedObjectModel: model)
        self.persistentStoreDescriptions = [
            NSPersistentStoreDescription(url: Self.defaultDirectoryURL().appendingPathComponent("\(name).sqlite"))
        ]
        self.modelError = nil
    }

    /// Creates a container whose model is `NAME.xcdatamodeld` (or `NAME.xcdatamodel`), looked for in the main
    /// bundle's resources and the current directory.
    ///
    /// A missing or invalid model is reported by
    /// `loadPersistentStores`.
    public convenience init(name: String) {
        var candidates: [URL] = []
        let cwd = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        for base in [Bundle.main.resourceURL, cwd].compactMap({ $0 }) {
            candidates.append(base.appendingPathComponent("\(name).xcdatamodeld"))
            candidates.append(base.appendingPathComponent("\(name).xcdatamodel"))
        }
        let found = candidates.first { FileManager.default.fileExists(atPath: $0.path) }
        do {
            guard let found else {
                throw CoreDataError(
                    .unsupportedModelFile,
                    "No model named \(name).xcdatamodeld was found (looked in: \(candidates.map { $0.deletingLastPathComponent().path }.uniqued().joined(separator: ", ")))."
                )
            }
            self.init(name: name, managedObjectModel: try NSManagedObjectModel(contentsOf: found))
        } catch {
            self.init(
                name: name, managedObjectModel: NSManagedObjectModel(),
                modelError: error as? CoreDataError
                    ?? CoreDataError(.unsupportedModelFile, "\(error)"))
        }
    }

    private init(name: String, managedObjectModel model: NSManagedObjectModel, modelError: CoreDataError) {
        self.name = name
        self.managedObjectModel = model
        self.persistentStoreCoordinator = NSPersistentStoreCoordinator(managedObjectModel: model)
        self.persistentStoreDescriptions = []
        self.modelError = modelError
    }

    /// The folder for stores when none is given: the user's application-support folder (`~/.local/share` on Linux,
    /// or `$XDG_DATA_HOME`) under the program's name.
    open class func defaultDirectoryURL() -> URL {
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty {
            base = URL(fileURLWithPath: xdg)
        } else if let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first {
            base = support
        } else {
            base = FileManager.default.temporaryDirectory
        }
        return base.appendingPathComponent(ProcessInfo.processInfo.processName)
    }

    /// Opens every described store, calling `block` once per description with the error, if any.
    open func loadPersistentStores(completionHandler block: (NSPersistentStoreDescription, (any Error)?) -> Void) {
        if let modelError {
            block(NSPersistentStoreDescription(), modelError)
            return
        }
        for description in persistentStoreDescriptions {
            do {
                try persistentStoreCoordinator.addPersistentStore(
                    ofType: description.type, configurationName: description.configuration, at: description.url,
                    options: description.options.merging([
                        NSReadOnlyPersistentStoreOption: description.isReadOnly, NSPersistentStoreTimeoutOption: description.timeout,
                        NSMigratePersistentStoresAutomaticallyOption: description.shouldMigrateStoreAutomatically,
                        NSInferMappingModelAutomaticallyOption: description.shouldInferMappingModelAutomatically,
                    ]) { _, fixed in fixed })
                block(description, nil)
            } catch {
                block(description, error)
            }
        }
    }

    /// Opens every described store, throwing the first error.
    public func loadPersistentStores() throws {
        var firstError: (any Error)?
        loadPersistentStores { _, error in
            if firstError == nil { firstError = error }
        }
        if let firstError { throw firstError }
    }

    /// The main-queue context.
    ///
    /// Set its `automaticallyMergesChangesFromParent` to merge background saves.
    open var viewContext: NSManagedObjectContext {
        lock.lock()
        defer { lock.unlock() }
        if let context = _viewContext { return context }
        let context = NSManagedObjectContext(concurrencyType: .mainQueueConcurrencyType)
        context.persistentStoreCoordinator = persistentStoreCoordinator
        context.name = "viewContext"
        _viewContext = context
        return context
    }

    /// A new private-queue context on the container's coordinator.
    open func newBackgroundContext() -> NSManagedObjectContext {
        let context = NSManagedObjectContext(concurrencyType: .privateQueueConcurrencyType)
        context.persistentStoreCoordinator = persistentStoreCoordinator
        return context
    }

    /// Runs `block` on a new background context's queue.
    open func performBackgroundTask(_ block: @escaping @Sendable (NSManagedObjectContext) -> Void) {
        let context = newBackgroundContext()
        context.perform { block(context) }
    }

    /// Runs `block` on a new background context and returns its result, or throws what it throws.
    public func performBackgroundTask<T: Sendable>(_ block: @escaping @Sendable (NSManagedObjectContext) throws -> T) async throws -> T {
        let context = newBackgroundContext()
        return try await context.perform { try block(context) }
    }

    /// Runs `block`, which cannot throw, on a new background context and returns its result (awaited without `try`,
    /// as Core Data's `rethrows` allows).
    public func performBackgroundTask<T: Sendable>(_ block: @escaping @Sendable (NSManagedObjectContext) -> T) async -> T {
        let context = newBackgroundContext()
        return await context.perform { block(context) }
    }
}

extension Array where Element: Hashable {
    func uniqued() -> [Element] {
        var seen: Set<Element> = []
        return filter { seen.insert($0).inserted }
    }
}
