import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Stores whose app migrates them with its own code migrate here with the same logic written as stages.
///
/// The app's code is mapping models and an `NSEntityMigrationPolicy` on Apple's platforms: Wibosco's CoreDataMigration-Example renames
/// `Post.color` to `hexColor` (its mapping model 1 → 2) and turns each post's hex string into a required `Color` object
/// (its `Post2ToPost3MigrationPolicy`). Reads `../shared/corpus/apple-stores/wibosco-migration`; skipped with a
/// notice when it is absent.
@Suite(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout")) struct AppleStagedMigrationTests {
    let dir = TemporaryDirectory()
    static let folder = AppleStoreTests.corpus.appendingPathComponent("wibosco-migration")
    static let bundle = folder.appendingPathComponent("CoreDataMigration_Example.xcdatamodeld")

    /// What one stage's will-migrate handler reads for its did-migrate handler: a value per object URI.
    final class Stash: @unchecked Sendable {
        var values: [URL: String] = [:]
    }

    func version(_ name: String) throws -> NSManagedObjectModel {
        try NSManagedObjectModel(contentsOf: Self.bundle.appendingPathComponent("\(name).xcdatamodel"))
    }

    /// Version 3 with `Post.color` optional: the step a staged migration takes before the relationship can be filled.
    func relaxedVersion3() throws -> NSManagedObjectModel {
        let contents = try String(
            contentsOf: Self.bundle.appendingPathComponent("CoreDataMigration_Example 3.xcdatamodel/contents"), encoding: .utf8)
        let relaxed = contents.replacingOccurrences(
            of: #"<relationship name="color" maxCount="1""#, with: #"<relationship name="color" optional="YES" maxCount="1""#)
        #expect(relaxed != contents, "version 3's Post.color is no longer as the test expects")
        let folder = dir.file("Relaxed 3.xcdatamodel")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(relaxed.utf8).write(to: folder.appendingPathComponent("contents"))
        return try NSManagedObjectModel(contentsOf: folder)
    }

    /// Reads `key` of every post into `stash`, through the container the stage opened.
    static func read(_ key: String, _ manager: NSStagedMigrationManager, into stash: Stash) throws {
        let context = try #require(manager.container).newBackgroundContext()
        try context.performAndWait {
            for post in try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Post")) {
                stash.values[post.objectID.uriRepresentation()] = post.value(forKey: key) as? String
            }
        }
    }

    /// The stages that do what the app's mapping models do, ending at version 4 (the bundle's current one).
    func stages(_ v1: NSManagedObjectModel, _ v2: NSManagedObjectModel, _ relaxed: NSManagedObjectModel) throws -> NSStagedMigrationManager
    {
        let v3 = try version("CoreDataMigration_Example 3")
        let v4 = try version("CoreDataMigration_Example 4")
        let reference = { (model: NSManagedObjectModel) in
            NSManagedObjectModelReference(model: model, versionChecksum: model.versionChecksum)
        }
        let colors = Stash()
        let rename = NSCustomMigrationStage(migratingFrom: reference(v1), to: reference(v2))
        rename.willMigrateHandler = { manager, _ in try Self.read("color", manager, into: colors) }
        rename.didMigrateHandler = { manager, _ in
            try Self.update(manager) { post, _ in post.setValue(colors.values[post.objectID.uriRepresentation()], forKey: "hexColor") }
        }
        let hexes = Stash()
        let objects = NSCustomMigrationStage(migratingFrom: reference(v2), to: reference(relaxed))
        objects.willMigrateHandler = { manager, _ in try Self.read("hexColor", manager, into: hexes) }
        objects.didMigrateHandler = { manager, _ in
            try Self.update(manager) { post, context in
                let color = NSEntityDescription.insertNewObject(forEntityName: "Color", into: context)
                color.setValue(UUID().uuidString, forKey: "colorID")
                color.setValue(hexes.values[post.objectID.uriRepresentation()], forKey: "hex")
                post.setValue(color, forKey: "color")
            }
        }
        // Version 3 (the relationship made required) and 4 (`Post.hide` added) are lightweight; the manager finds them
        // in the bundle by checksum.
        return NSStagedMigrationManager([
            rename, objects, NSLightweightMigrationStage([relaxed.versionChecksum, v3.versionChecksum, v4.versionChecksum]),
        ])
    }

    /// Runs `change` on every post through the container the stage opened, and saves.
    static func update(_ manager: NSStagedMigrationManager, _ change: @escaping (NSManagedObject, NSManagedObjectContext) throws -> Void)
        throws
    {
        let context = try #require(manager.container).newBackgroundContext()
        try context.performAndWait {
            for post in try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Post")) { try change(post, context) }
            try context.save()
        }
    }

    @Test func wiboscosStoresMigrateWithTheAppsStages() throws {
        try #require(FileManager.default.fileExists(atPath: Self.bundle.path), "the corpus is there")
        let v1 = try version("CoreDataMigration_Example")
        let v2 = try version("CoreDataMigration_Example 2")
        let relaxed = try relaxedVersion3()
        for (file, writer, key) in [
            ("CoreDataMigration_Example_1.sqlite", v1, "color"), ("CoreDataMigration_Example_2.sqlite", v2, "hexColor"),
        ] {
            let copy = try AppleStoreTests.copy(Self.folder.appendingPathComponent(file), into: dir)
            // Each post's colour before, by its position in key order (object IDs survive the migration).
            let before = try hexes(copy, writer, key)
            #expect(before.count > 1000 && before.allSatisfy { $0 != nil }, "\(file): \(before.count) posts")
            let description = NSPersistentStoreDescription(url: copy)
            description.setOption(try stages(v1, v2, relaxed), forKey: NSPersistentStoreStagedMigrationManagerOptionKey)
            let container = NSPersistentContainer(name: "App", managedObjectModel: try NSManagedObjectModel(contentsOf: Self.bundle))
            container.persistentStoreDescriptions = [description]
            try container.loadPersistentStores()
            let context = container.newBackgroundContext()
            try context.performAndWait {
                let posts = try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Post"))
                #expect(posts.count == before.count, "\(file)")
                let after = posts.sorted { $0.objectID.uriRepresentation().absoluteString < $1.objectID.uriRepresentation().absoluteString }
                    .map { ($0.value(forKey: "color") as? NSManagedObject)?.value(forKey: "hex") as? String }
                #expect(after == before, "\(file): every post keeps its colour, now a Color object")
                #expect(posts.allSatisfy { $0.value(forKey: "hide") as? Bool == false })
                #expect(try context.count(for: NSFetchRequest<NSManagedObject>(entityName: "Color")) == before.count)
            }
            try container.removeStores()
            print("AppleStagedMigrationTests: \(file): \(before.count) posts migrated to version 4 with the app's stages")
        }
    }

    /// Every post's colour (`key`), in object-URI order, read with the model version that wrote the store.
    func hexes(_ store: URL, _ model: NSManagedObjectModel, _ key: String) throws -> [String?] {
        let container = AppleStoreTests.readOnlyContainer(store, model)
        try container.loadPersistentStores()
        defer { try? container.removeStores() }
        let context = container.newBackgroundContext()
        return try context.performAndWait {
            try context.fetch(NSFetchRequest<NSManagedObject>(entityName: "Post"))
                .sorted { $0.objectID.uriRepresentation().absoluteString < $1.objectID.uriRepresentation().absoluteString }
                .map { $0.value(forKey: key) as? String }
        }
    }
}
