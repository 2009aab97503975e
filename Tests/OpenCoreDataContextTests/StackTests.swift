import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

@Suite struct StackTests {
    @Test func saveAndReopenRoundTrip() throws {
        let dir = TemporaryDirectory()
        let url = dir.file("Company.sqlite")
        do {
            let container = NSPersistentContainer(name: "Company", managedObjectModel: try makeCompanyModel())
            container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
            try container.loadPersistentStores()
            let context = container.newBackgroundContext()
            try context.make("Department", ["name": "R&D"])
            try context.save()
        }
        let container = NSPersistentContainer(name: "Company", managedObjectModel: try makeCompanyModel())
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        try container.loadPersistentStores()
        let names = try container.newBackgroundContext().objects("Department").compactMap { $0.string("name") }
        #expect(names == ["R&D"])
    }

    @Test func aClosedStoreRefusesSavesAndReadsByName() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        try context.make("Department", ["name": "R&D"])
        for store in stack.container.persistentStoreCoordinator.persistentStores { try store.close() }
        let save = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(save?.message.contains("has been closed") == true, "\(String(describing: save))")
        let fetch = #expect(throws: CoreDataError.self) { _ = try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Department")) }
        #expect(fetch?.message.contains("has been closed") == true, "\(String(describing: fetch))")
    }

    @Test func inMemoryStoreWorksAndKeepsNothing() throws {
        let stack = try TestStack(model: try makeCompanyModel(), inMemory: true)
        let context = stack.context()
        try context.make("Department", ["name": "Ops"])
        try context.save()
        #expect(try context.objects("Department").count == 1)
        #expect(!FileManager.default.fileExists(atPath: stack.storeURL.path))
        #expect(stack.container.persistentStoreCoordinator.persistentStores.first?.type == NSInMemoryStoreType)
    }

    @Test func aFileThatIsNotAStoreIsAClearError() throws {
        let dir = TemporaryDirectory()
        let url = dir.file("notes.sqlite")
        try Data("These are my notes, not a database. ".utf8 + Data(repeating: 65, count: 4096)).write(to: url)
        let container = NSPersistentContainer(name: "X", managedObjectModel: try makeCompanyModel())
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        let error = #expect(throws: CoreDataError.self) { try container.loadPersistentStores() }
        #expect(error?.code == .persistentStoreNotAStore)
        #expect(error?.message.contains("is not a SQLite store") == true, "\(error?.message ?? "")")
        // The file is untouched.
        #expect(try Data(contentsOf: url).prefix(10) == Data("These are ".utf8))
    }

    @Test func aForeignSQLiteDatabaseIsRefused() throws {
        let dir = TemporaryDirectory()
        let url = dir.file("other.sqlite")
        let other = NSPersistentContainer(
            name: "O", managedObjectModel: try NSManagedObjectModel { Entity("Thing") { Attribute("x", .string) } })
        other.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        try other.loadPersistentStores()
        let ctx = other.newBackgroundContext()
        try ctx.make("Thing", ["x": "keep me"])
        try ctx.save()

        let container = NSPersistentContainer(name: "X", managedObjectModel: try makeCompanyModel())
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        let error = #expect(throws: CoreDataError.self) { try container.loadPersistentStores() }
        #expect(error?.code == .persistentStoreIncompatibleVersionHash)
        #expect(error?.message.contains("shares no entity") == true && error?.message.contains("Thing") == true, "\(error?.message ?? "")")
        // The other store still holds its data.
        #expect(try ctx.objects("Thing").first?.string("x") == "keep me")
    }

    @Test func aChangedModelMigratesTheStoreUnlessToldNot() throws {
        let dir = TemporaryDirectory()
        let url = dir.file("s.sqlite")
        let v1 = try NSManagedObjectModel { Entity("Note") { Attribute("text", .string) } }
        let c1 = NSPersistentContainer(name: "N", managedObjectModel: v1)
        c1.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        try c1.loadPersistentStores()
        let v2 = try NSManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string); Attribute("pinned", .boolean)
            }
        }
        // Told not to migrate, the container refuses the store, naming what changed; by default it migrates it.
        let description = NSPersistentStoreDescription(url: url)
        description.shouldMigrateStoreAutomatically = false
        let c2 = NSPersistentContainer(name: "N", managedObjectModel: v2)
        c2.persistentStoreDescriptions = [description]
        let error = #expect(throws: CoreDataError.self) { try c2.loadPersistentStores() }
        #expect(
            error?.message.contains("entity 'Note' changed") == true && error?.message.contains("migrat") == true, "\(error?.message ?? "")"
        )
        let c3 = NSPersistentContainer(name: "N", managedObjectModel: v2)
        c3.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        try c3.loadPersistentStores()
    }

    @Test func unknownStoreTypeAndMissingModelAreErrors() throws {
        let coordinator = NSPersistentStoreCoordinator(managedObjectModel: try makeCompanyModel())
        #expect(throws: CoreDataError.self) { try coordinator.addPersistentStore(ofType: "XML", at: nil) }
        let missing = NSPersistentContainer(name: "DefinitelyNotHere")
        var reported: (any Error)?
        missing.loadPersistentStores { _, error in reported = error }
        #expect((reported as? CoreDataError)?.message.contains("No model named DefinitelyNotHere.xcdatamodeld") == true)
    }

    @Test func containerLoadsAnXcodeModelByName() throws {
        // NSPersistentContainer(name:) looks for NAME.xcdatamodeld in the current directory and the main bundle.
        let dir = TemporaryDirectory()
        try FileManager.default.copyItem(at: Fixtures.url("Company.xcdatamodeld"), to: dir.file("Company.xcdatamodeld"))
        let previous = FileManager.default.currentDirectoryPath
        _ = FileManager.default.changeCurrentDirectoryPath(dir.url.path)
        defer { _ = FileManager.default.changeCurrentDirectoryPath(previous) }
        let container = NSPersistentContainer(name: "Company")
        #expect(container.managedObjectModel.entity(named: "Manager") != nil)
    }

    @Test func objectIDURIsRoundTrip() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let department = try context.make("Department", ["name": "Legal"])
        let temporary = department.objectID
        #expect(temporary.isTemporaryID)
        #expect(temporary.uriRepresentation().absoluteString.hasPrefix("x-coredata:///Department/t"))
        try context.save()
        let permanent = department.objectID
        #expect(!permanent.isTemporaryID)
        #expect(permanent != temporary)
        let uri = permanent.uriRepresentation()
        #expect(uri.absoluteString.hasPrefix("x-coredata://"))
        let coordinator = stack.container.persistentStoreCoordinator
        let back = try #require(coordinator.managedObjectID(forURIRepresentation: uri))
        #expect(back == permanent)
        #expect(back.hashValue == permanent.hashValue)
        let other = stack.context()
        #expect(try other.existingObject(with: back).string("name") == "Legal")
        #expect(coordinator.managedObjectID(forURIRepresentation: URL(string: "x-coredata://nope/Department/p1")!) == nil)
        #expect(coordinator.managedObjectID(forURIRepresentation: URL(string: "https://example.com")!) == nil)
    }

    @Test func existingObjectThrowsForMissingRows() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let department = try context.make("Department", ["name": "Temp"])
        try context.save()
        let id = department.objectID
        context.delete(department)
        try context.save()
        let error = #expect(throws: CoreDataError.self) { _ = try stack.context().existingObject(with: id) }
        #expect(error?.code == .objectNotFound)
    }

    @Test func defaultDirectoryIsPerUserAndPerProgram() {
        let url = NSPersistentContainer.defaultDirectoryURL()
        #expect(url.lastPathComponent == ProcessInfo.processInfo.processName)
    }

    @Test func performRunsOnThePrivateQueue() async throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let count = try await context.perform {
            try context.make("Department", ["name": "Async"])
            try context.save()
            return try context.count(for: NSFetchRequest<NSManagedObject>(entityName: "Department"))
        }
        #expect(count == 1)
        let name = context.performAndWait { (try? context.objects("Department"))?.first?.string("name") }
        #expect(name == "Async")
    }

    /// Core Data's `perform(schedule:_:)` rethrows: a block that cannot throw is awaited without `try`; one that
    /// throws hands its error over; `.enqueued` runs after what the queue holds; pending changes are processed after.
    @Test func asyncPerformNeedsTryOnlyForThrowingBlocksAndTakesASchedule() async throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let inserted = await context.perform {
            _ = try? context.make("Department", ["name": "Plain"])
            return context.insertedObjects.count
        }
        #expect(inserted == 1)
        // Queued work goes first with .enqueued.
        let order = OrderLog()
        // (From synchronous code: in an async function `perform { }` is the async one, as with Core Data.)
        func enqueue() { context.perform { order.append("queued") } }
        enqueue()
        await context.perform(schedule: .enqueued) { order.append("enqueued") }
        #expect(order.entries == ["queued", "enqueued"])
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await context.perform(schedule: .immediate) { () throws -> Int in throw Refused() }
        }
        // The objects-did-change processing ran after each block: the insert is no longer pending an event.
        #expect(context.performAndWait { context._hasUnprocessedChanges } == false)
        // The container's background tasks likewise.
        let departments = await stack.container.performBackgroundTask { background in
            (try? background.count(for: NSFetchRequest<NSManagedObject>(entityName: "Department"))) ?? -1
        }
        #expect(departments == 0)
    }

    /// What ran in which order, from several queues.
    final class OrderLog: @unchecked Sendable {
        private let lock = NSLock()
        private var log: [String] = []
        func append(_ entry: String) { lock.withLock { log.append(entry) } }
        var entries: [String] { lock.withLock { log } }
    }
}

@Suite struct MainQueueContextTests {
    @Test(.timeLimit(.minutes(1))) func viewContextPerformsOnTheMainThread() async throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let view = stack.container.viewContext
        #expect(view.concurrencyType == .mainQueueConcurrencyType)
        let (onMain, count) = try await view.perform {
            try view.make("Department", ["name": "Main"])
            try view.save()
            // performAndWait from inside the queue runs inline instead of deadlocking.
            let nested = view.performAndWait { view.isOnContextQueue }
            return (nested, try view.count(for: NSFetchRequest<NSManagedObject>(entityName: "Department")))
        }
        #expect(onMain)
        #expect(!view.isOnContextQueue, "the test itself is not on the main queue")
        #expect(count == 1)
        let name = view.performAndWait { (try? view.objects("Department"))?.first?.string("name") }
        #expect(name == "Main")
    }
}

@Suite struct LockedStoreTests {
    @Test func aStoreLockedByAnotherConnectionIsAClearErrorAndLosesNothing() throws {
        let dir = TemporaryDirectory()
        let url = dir.file("Locked.sqlite")
        let container = NSPersistentContainer(name: "L", managedObjectModel: try makeCompanyModel())
        let description = NSPersistentStoreDescription(url: url)
        description.timeout = 0.2
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        try context.make("Department", ["name": "Before"])
        try context.save()

        // Another connection (as another process would) takes the write lock and keeps it.
        var config = Configuration()
        config.allowsUnsafeTransactions = true  // this connection deliberately holds a transaction open
        let other = try DatabaseQueue(path: url.path, configuration: config)
        try other.writeWithoutTransaction { db in try db.execute(sql: "BEGIN EXCLUSIVE") }
        try context.make("Department", ["name": "Blocked"])
        let error = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(error?.message.contains("locked by another connection or process") == true, "\(error?.message ?? "")")
        #expect(context.hasChanges, "the unsaved change is kept")
        try other.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }

        // Once the lock is gone the same save goes through, and nothing was lost or half-written.
        try context.save()
        let names = try container.newBackgroundContext().objects("Department", sort: ["name"]).compactMap { $0.string("name") }
        #expect(names == ["Before", "Blocked"])
    }
}

@Suite struct FailedWriteTests {
    let dir = TemporaryDirectory()
    let container: NSPersistentContainer
    let context: NSManagedObjectContext

    init() throws {
        container = NSPersistentContainer(name: "R", managedObjectModel: try makeCompanyModel())
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: dir.file("Rejecting.sqlite"))]
        try container.loadPersistentStores()
        context = container.newBackgroundContext()
    }

    /// Makes SQLite reject every `operation` (INSERT or UPDATE) of a department named "Bad", as a constraint would.
    func rejectBadNames(on operation: String) throws {
        let other = try DatabaseQueue(path: dir.file("Rejecting.sqlite").path)
        try other.write { db in
            try db.execute(
                sql:
                    "CREATE TRIGGER reject BEFORE \(operation) ON ZDEPARTMENT WHEN NEW.ZNAME = 'Bad' BEGIN SELECT RAISE(ABORT, 'bad name rejected'); END"
            )
        }
        try other.close()
    }

    /// Saves, expecting the rejection; returns the names the store holds then.
    func saveRejected() throws -> [String] {
        let error = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(error?.message.contains("bad name rejected") == true, "\(error?.message ?? "")")
        #expect(context.hasChanges, "the unsaved changes are kept")
        return try storedNames()
    }

    func storedNames() throws -> [String] {
        try container.newBackgroundContext().objects("Department", sort: ["name"]).compactMap { $0.string("name") }
    }

    /// A row SQLite rejects in the middle of a save's inserts fails the whole save with the store's message, writes
    /// none of its rows, and leaves the context able to save once the bad value is fixed: the insert statement is
    /// never reused after its failed step.
    @Test func aRowRejectedMidSaveWritesNothingAndTheNextSaveWorks() throws {
        try context.make("Department", ["name": "Before"])
        try context.save()
        try rejectBadNames(on: "INSERT")
        let first = try context.make("Department", ["name": "First"])
        let bad = try context.make("Department", ["name": "Bad"])
        let last = try context.make("Department", ["name": "Last"])
        let made = [first, bad, last]
        let changedKeys = made.map { $0.changedValues().keys.sorted() }
        #expect(try saveRejected() == ["Before"], "no row of the failed save was written")
        // The save moved the new objects' values into its request; failing, it put every one back.
        #expect(made.map { $0.string("name") } == ["First", "Bad", "Last"])
        #expect(made.map { $0.value(forKey: "budget") as? Decimal } == [0, 0, 0])
        #expect(made.map { $0.changedValues().keys.sorted() } == changedKeys)
        bad.setValue("Fixed", forKey: "name")
        try context.save()
        #expect(try storedNames() == ["Before", "First", "Fixed", "Last"])
    }

    /// The same when the rejected row is written with others in one multi-row INSERT (a save writes runs of new
    /// objects of one entity 32 rows to a statement): nothing of the save is written, every value is put back, and the
    /// error names the store's reason and the statement without repeating its every row.
    @Test func aRowRejectedInAMultiRowInsertWritesNothingAndTheNextSaveWorks() throws {
        try rejectBadNames(on: "INSERT")
        let names = (0..<70).map { $0 == 40 ? "Bad" : String(format: "D%02d", $0) }
        let made = try names.map { try context.make("Department", ["name": $0]) }
        let error = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(error?.message.contains("bad name rejected") == true, "\(error?.message ?? "")")
        let rowsShown = (error?.message.components(separatedBy: "), (").count ?? 1) - 1
        #expect(rowsShown < 10, "the message shows \(rowsShown + 1) of the statement's rows: \(error?.message ?? "")")
        #expect(try storedNames() == [], "no row of the failed save was written")
        #expect(made.map { $0.string("name") } == names, "every value taken for the save was put back")
        made[40].setValue("D40", forKey: "name")
        try context.save()
        #expect(try storedNames() == (0..<70).map { String(format: "D%02d", $0) })
    }

    /// The same for updates: an UPDATE SQLite rejects fails the save, changes no row, and the save after the fix works.
    @Test func anUpdateRejectedMidSaveChangesNothingAndTheNextSaveWorks() throws {
        let departments = try ["A", "B", "C"].map { try context.make("Department", ["name": $0]) }
        try context.save()
        try rejectBadNames(on: "UPDATE")
        for (department, name) in zip(departments, ["A2", "Bad", "C2"]) { department.setValue(name, forKey: "name") }
        #expect(try saveRejected() == ["A", "B", "C"], "no row of the failed save was changed")
        departments[1].setValue("B2", forKey: "name")
        try context.save()
        #expect(try storedNames() == ["A2", "B2", "C2"])
    }
}
