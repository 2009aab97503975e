import Foundation
import OpenCoreData
// Every test target that imports the support module gets ChildProcess and WebDriver too.
@_exported import OpenCoreDataBrowserTesting

/// Files shipped with the tests (model files, broken model files).
public enum Fixtures {
    /// The URL of a fixture by relative path, e.g.
    ///
    /// `"Company.xcdatamodeld"` or `"Broken/BadType.xcdatamodel"`.
    public static func url(_ path: String) -> URL {
        Bundle.module.resourceURL!.appendingPathComponent("Fixtures").appendingPathComponent(path)
    }
}

/// A fresh folder under the system's temporary directory, made on first use and removed when released — or when the
/// process exits, for folders a shared fixture keeps alive until then.
public final class TemporaryDirectory: @unchecked Sendable {
    private let location: URL

    /// A new empty folder under the temporary directory, removed when this value goes.
    public init() {
        location = FileManager.default.temporaryDirectory.appendingPathComponent("OpenCoreDataTests-\(UUID().uuidString)")
    }

    /// The folder, created if it does not exist yet.
    public var url: URL {
        if !FileManager.default.fileExists(atPath: location.path) {
            try? FileManager.default.createDirectory(at: location, withIntermediateDirectories: true)
            LiveDirectories.add(location.path)
        }
        return location
    }

    /// A file in the folder (the folder is created).
    public func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    /// Where a file in the folder would be, without creating the folder (for stores that never touch the disk).
    public func location(of name: String) -> URL { location.appendingPathComponent(name) }

    /// A copy here of the store at `store`, with its -wal and -shm when it has them (SQLite may create files beside a
    /// WAL store it reads, and a corpus store must stay as Apple wrote it).
    public func copy(ofStore store: URL) throws -> URL {
        let target = file(store.lastPathComponent)
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: store.path + suffix) {
            try FileManager.default.copyItem(atPath: store.path + suffix, toPath: target.path + suffix)
        }
        return target
    }

    deinit {
        try? FileManager.default.removeItem(at: location)
        LiveDirectories.remove(location.path)
    }
}

/// Folders still alive, removed at process exit.
///
/// Guarded by an `NSLock` rather than `Synchronization.Mutex`: on Linux the mutex waits on a futex ThreadSanitizer
/// does not see, so tests run under it reported this table as raced.
private enum LiveDirectories {
    private final class Paths: @unchecked Sendable {
        let lock = NSLock()
        var set: Set<String> = []
    }

    private static let paths = Paths()
    private static let removalAtExit: Void = {
        atexit {
            for path in LiveDirectories.paths.lock.withLock({ LiveDirectories.paths.set }) {
                try? FileManager.default.removeItem(atPath: path)
            }
        }
    }()

    static func add(_ path: String) {
        _ = removalAtExit
        paths.lock.withLock { _ = paths.set.insert(path) }
    }

    static func remove(_ path: String) { paths.lock.withLock { _ = paths.set.remove(path) } }
}

/// The company model used across tests, written with the builder: every attribute type, inheritance (an abstract
/// Person; Employee; Manager), to-one/to-many/many-to-many relationships and every delete rule.
public func makeCompanyModel() throws -> NSManagedObjectModel {
    try NSManagedObjectModel {
        Entity("Department") {
            Attribute("name", .string, optional: false)
            Attribute("budget", .decimal, default: Decimal(0))
            Relationship("employees", to: "Employee", toMany: true, inverse: "department", deleteRule: .cascadeDeleteRule)
            Relationship("head", to: "Manager", inverse: "headOf")
            Relationship("offices", to: "Office", toMany: true, inverse: "department", deleteRule: .denyDeleteRule)
        }
        Entity("Person", abstract: true) {
            Attribute("name", .string, optional: false)
            Attribute("badge", .uuid)
            Attribute("born", .date)
        }
        Entity("Employee", parent: "Person") {
            Attribute("active", .boolean, default: true)
            Attribute("age", .integer16, default: 0)
            Attribute("level", .integer32, default: 1)
            Attribute("serial", .integer64, default: 0)
            Attribute("salary", .double, default: 0.0)
            Attribute("rating", .float, default: 0.0)
            Attribute("homepage", .uri)
            Attribute("photo", .binaryData)
            Attribute("nickname", .string, transient: true)
            Relationship("department", to: "Department", inverse: "employees")
            Relationship("projects", to: "Project", toMany: true, inverse: "members")
            Relationship("mentor", to: "Employee", inverse: "mentees", deleteRule: .noActionDeleteRule)
            Relationship("mentees", to: "Employee", toMany: true, inverse: "mentor")
        }
        Entity("Manager", parent: "Employee") {
            Relationship("headOf", to: "Department", inverse: "head", deleteRule: .denyDeleteRule)
        }
        Entity("Project") {
            Attribute("title", .string, optional: false)
            Relationship("members", to: "Employee", toMany: true, inverse: "projects", maxCount: 5)
        }
        Entity("Office") {
            Attribute("city", .string)
            Relationship("department", to: "Department", inverse: "offices")
        }
    }
}

/// A coordinator, store and context on a model, in a temporary folder (or in memory).
public final class TestStack: @unchecked Sendable {
    /// The folder holding the store.
    public let directory = TemporaryDirectory()
    /// The container of the store.
    public let container: NSPersistentContainer
    /// The store file.
    public let storeURL: URL

    /// A container on `model`, with a SQLite store in a new folder (or in memory); `formerLayout` makes the store in
    /// the layout this project wrote before Core Data's (store format 3); `history` turns persistent history on, and
    /// `remoteChanges` the notification of other coordinators' commits; `configurations` one store per configuration
    /// named (the first at `storeURL`, the others beside it).
    public init(
        model: NSManagedObjectModel, inMemory: Bool = false, formerLayout: Bool = false, history: Bool = false, remoteChanges: Bool = false,
        configurations: [String]? = nil
    ) throws {
        container = NSPersistentContainer(name: "Test", managedObjectModel: model)
        storeURL = inMemory ? directory.location(of: "Test.sqlite") : directory.file("Test.sqlite")
        if formerLayout { try SQLiteStore.createFormerLayoutStore(at: storeURL, model: model) }
        let names: [String?] = configurations ?? [nil]
        container.persistentStoreDescriptions = names.enumerated().map { index, configuration in
            let url =
                index == 0 ? storeURL : storeURL.deletingLastPathComponent().appendingPathComponent("Test-\(configuration ?? "").sqlite")
            let description = NSPersistentStoreDescription(url: url)
            description.configuration = configuration
            if inMemory { description.type = NSInMemoryStoreType }
            if history { description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey) }
            if remoteChanges { description.setOption(true as NSNumber, forKey: NSPersistentStoreRemoteChangeNotificationPostOptionKey) }
            return description
        }
        try container.loadPersistentStores()
    }

    /// A container on `model` with the store at `url`: a database of the test PostgreSQL server, say; `history` turns
    /// persistent history on.
    public init(model: NSManagedObjectModel, storeAt url: URL, history: Bool = false) throws {
        container = NSPersistentContainer(name: "Test", managedObjectModel: model)
        storeURL = url
        let description = NSPersistentStoreDescription(url: url)
        if history { description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey) }
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
    }

    /// A new private-queue context (tests call it directly from their own thread).
    public func context() -> NSManagedObjectContext {
        container.newBackgroundContext()
    }
}

extension NSManagedObjectContext {
    /// Inserts an object of the named entity with the given values.
    @discardableResult
    public func make(_ entityName: String, _ values: [String: Any?] = [:]) throws -> NSManagedObject {
        let object = NSManagedObject(entity: try entity(named: entityName), insertInto: self)
        for (key, value) in values.sorted(by: { $0.key < $1.key }) { try object.setCheckedValue(value, forKey: key) }
        return object
    }

    /// Fetches objects of an entity with an optional predicate format and sort keys ("key" or "-key" for
    /// descending).
    public func objects(_ entityName: String, _ format: String? = nil, _ args: Any?..., sort: [String] = []) throws -> [NSManagedObject] {
        let request = NSFetchRequest<NSManagedObject>(entityName: entityName)
        if let format { request.predicate = try FetchPredicate(format: format, argumentArray: args) }
        request.sortDescriptors = sort.map {
            $0.hasPrefix("-") ? FetchSortDescriptor(key: String($0.dropFirst()), ascending: false) : FetchSortDescriptor(key: $0)
        }
        return try fetch(request)
    }
}

extension NSManagedObject {
    /// `value(forKey:)` as a string, for assertions.
    public func string(_ key: String) -> String? { value(forKey: key) as? String }
}

/// A deterministic random generator (SplitMix64) for seeded property tests.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    /// The generator's state: a seed, advanced by every draw.
    public private(set) var state: UInt64
    /// A generator that draws the same numbers for the same seed.
    public init(seed: UInt64) { state = seed }
    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// An executable of this package that `swift build` put beside the test bundle (`coredata`, `oil-changes`, …), or nil
/// when it is not built.
public func builtExecutable(_ name: String) -> URL? {
    let folder = Bundle.main.bundleURL.deletingLastPathComponent()
    return [folder.appendingPathComponent(name), folder.appendingPathComponent("debug/\(name)")]
        .first { FileManager.default.isExecutableFile(atPath: $0.path) }
}

extension TemporaryDirectory {
    /// Writes an Xcode model folder `name`.xcdatamodel whose `contents` is `body` (entities and fetch requests) inside
    /// Xcode's `<model>` element, and returns its URL.
    public func writeModel(_ name: String, _ body: String) throws -> URL {
        let folder = file("\(name).xcdatamodel")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let contents = """
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
            \(body)
            </model>
            """
        try Data(contents.utf8).write(to: folder.appendingPathComponent("contents"))
        return folder
    }
}

extension TemporaryDirectory {
    /// Writes a model folder (see `writeModel(_:_:)`) under a fresh name and loads it.
    public func loadModel(_ name: String, _ body: String) throws -> NSManagedObjectModel {
        try NSManagedObjectModel(contentsOf: try writeModel("\(name)-\(UUID().uuidString)", body))
    }

    /// Loads a new one-entity model: `Note`, with an optional `title` string and the attribute elements given (as
    /// Xcode writes them).
    public func noteModel(_ attributes: String) throws -> NSManagedObjectModel {
        let folder = try writeModel(
            "Notes-\(UUID().uuidString)",
            """
                <entity name="Note" representedClassName="Note" syncable="YES">
                    <attribute name="title" optional="YES" attributeType="String" syncable="YES"/>
                    \(attributes)
                </entity>
            """)
        return try NSManagedObjectModel(contentsOf: folder)
    }
}

extension NSPersistentContainer {
    /// Closes and removes every store of the container's coordinator (what a test does before reopening the file).
    public func removeStores() throws {
        try persistentStoreCoordinator.persistentStores.forEach { try persistentStoreCoordinator.remove($0) }
    }
}

/// Polls `condition` until it holds or `seconds` pass; returns whether it held.
public func eventually(within seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return false }
        Thread.sleep(forTimeInterval: 0.005)
    }
    return true
}

/// What some tests need from the machine, for their `.enabled(if:)` traits.
///
/// A run without it shows them as skipped, with the reason, instead of counting them as passed. CI provides all of
/// it, so CI skips none (`.ci/run` fails if any test is skipped).
public enum Requirement {
    /// The public material in `../shared/corpus` beside the checkout (real models and stores Apple's Core Data wrote).
    public static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../../shared/corpus").standardizedFileURL

    /// The entity version hashes the SQLite store at `url` records (`NSStoreModelVersionHashes`), by entity name.
    public static func recordedVersionHashes(_ url: URL) throws -> [String: Data] {
        let metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
        return metadata["NSStoreModelVersionHashes"] as? [String: Data] ?? [:]
    }

    /// Whether the corpus is there.
    public static var corpusIsPresent: Bool { FileManager.default.fileExists(atPath: corpus.appendingPathComponent("apple-stores").path) }

    /// Whether headless Chromium and chromedriver are installed (Debian's `chromium`, `chromium-driver`).
    public static var browserIsPresent: Bool { WebDriver.available }

    /// Whether `swift build` has built the executable `name` beside the tests.
    public static func executableIsBuilt(_ name: String) -> Bool { builtExecutable(name) != nil }

    /// Whether tmux is installed.
    public static var tmuxIsPresent: Bool {
        ["/usr/bin/tmux", "/usr/local/bin/tmux"].contains { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Whether this process may mount file systems (root, and a `mount` to call).
    public static var canMount: Bool { getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/bin/mount") }
}

/// A difference delegate that applies each difference to its list of object IDs (the list a diffable data source
/// would show), counting the differences and the fine-grained calls it also got.
public final class DifferenceRecorder: NSFetchedResultsControllerDifferenceDelegate {
    /// The list, as the differences so far made it.
    public var items: [NSManagedObjectID] = []
    /// How many fine-grained calls (`controllerDidChangeContent`) it got.
    public var fineGrainedCalls = 0
    /// How many differences it got.
    public var differences = 0

    /// A recorder with an empty list.
    public init() {}

    /// Applies the difference to `items`.
    public func controller(
        _ controller: NSFetchedResultsController<any NSFetchRequestResult>,
        didChangeContentWith diff: CollectionDifference<NSManagedObjectID>
    ) {
        differences += 1
        items = items.applying(diff) ?? []
    }

    /// Counts the call.
    public func controllerDidChangeContent(_ controller: NSFetchedResultsController<any NSFetchRequestResult>) { fineGrainedCalls += 1 }
}
