import Foundation
import GRDB
import OpenCoreData
import OpenCoreDataModel
import Testing
import _TestSupport

/// A store in the layout Apple's Core Data writes (built here with plain SQL, as Core Data lays it out) opens read-only.
///
/// Covered: inheritance in one table with the destination-entity column, a many-to-many join table, a to-many
/// without inverse as a hidden foreign key, UUIDs as 16 bytes. Damaged metadata and stray entity numbers are named
/// errors, and the file is never changed.
@Suite struct AppleLayoutTests {
    let dir = TemporaryDirectory()

    /// Person (1) ← Employee (2, subentity); Project (3); tag (4).
    ///
    /// Employee.projects ↔ Project.members is
    /// many-to-many; Person.boss is a to-one to Person (which has a subentity: a `Z1_BOSS` column); Project.tags has
    /// no inverse (a hidden `Z3TAGS` column in ZTAG).
    func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string)
                Attribute("id", .uuid)
                Relationship("boss", to: "Person")
            }
            Entity("Employee", parent: "Person") {
                Attribute("salary", .double)
                Relationship("projects", to: "Project", toMany: true, inverse: "members")
            }
            Entity("Project") {
                Attribute("title", .string)
                Attribute("started", .date)
                Relationship("members", to: "Employee", toMany: true, inverse: "projects")
                Relationship("tags", to: "tag", toMany: true)
            }
            Entity("tag") { Attribute("label", .string) }
        }
    }

    static let uuid = UUID(uuidString: "0A03AA22-08D2-4E0C-9B2C-091217655971")!

    /// Writes the store as Core Data would, with `plist` as its metadata bytes.
    func writeStore(plist: Data?? = nil, extraSQL: [String] = []) throws -> URL {
        let url = dir.file("Apple-\(UUID().uuidString).sqlite")
        let metadata = BinaryPropertyList.write(
            .dictionary([
                "NSStoreType": .string("SQLite"), "NSStoreUUID": .string("5B7D1E2A-1111-2222-3333-444455556666"),
                "NSPersistenceFrameworkVersion": .integer(1344),
            ]))
        let bytes = withUnsafeBytes(of: Self.uuid.uuid) { Data($0) }
        try DatabaseQueue(path: url.path).write { db in
            for sql in [
                "CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER)",
                "INSERT INTO Z_PRIMARYKEY VALUES (1, 'Person', 0, 2), (2, 'Employee', 1, 0), (3, 'Project', 0, 1), (4, 'tag', 0, 2)",
                "CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB)",
                "CREATE TABLE ZPERSON (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZBOSS INTEGER, Z1_BOSS INTEGER, ZSALARY FLOAT, ZNAME VARCHAR, ZID BLOB)",
                "CREATE TABLE ZPROJECT (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZSTARTED TIMESTAMP, ZTITLE VARCHAR)",
                "CREATE TABLE ZTAG (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, Z3TAGS INTEGER, ZLABEL VARCHAR)",
                "CREATE TABLE Z_2PROJECTS (Z_2MEMBERS INTEGER, Z_3PROJECTS INTEGER, PRIMARY KEY (Z_2MEMBERS, Z_3PROJECTS))",
                "CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB)",
                "INSERT INTO ZPERSON VALUES (1, 1, 1, NULL, NULL, NULL, 'Ada', NULL)",
                "INSERT INTO ZPROJECT VALUES (1, 3, 1, 100.5, 'Engine')",
                "INSERT INTO ZTAG VALUES (1, 4, 1, 1, 'math'), (2, 4, 1, NULL, 'loose')",
                "INSERT INTO Z_2PROJECTS VALUES (2, 1)",
            ] + extraSQL {
                try db.execute(sql: sql)
            }
            try db.execute(sql: "INSERT INTO ZPERSON VALUES (2, 2, 1, 1, 1, 1.5, 'Grace', ?)", arguments: [bytes])
            let stored: Data? = plist ?? metadata
            try db.execute(sql: "INSERT INTO Z_METADATA VALUES (1, '5B7D1E2A-1111-2222-3333-444455556666', ?)", arguments: [stored])
        }
        return url
    }

    func open(_ url: URL, readOnly: Bool = true) throws -> NSPersistentContainer {
        let description = NSPersistentStoreDescription(url: url)
        description.isReadOnly = readOnly
        let container = NSPersistentContainer(name: "Apple", managedObjectModel: try model())
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        return container
    }

    @Test func aStoreInApplesLayoutReadsWithItsRelationships() throws {
        let url = try writeStore()
        let before = try Data(contentsOf: url)
        let container = try open(url)
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let people = try context.objects("Person", sort: ["name"])
            #expect(people.map { $0.string("name") } == ["Ada", "Grace"])
            let grace = people[1]
            #expect(grace.entity.name == "Employee" && grace.value(forKey: "salary") as? Double == 1.5)
            #expect(grace.value(forKey: "id") as? UUID == Self.uuid, "a UUID stored as its 16 bytes")
            #expect((grace.value(forKey: "boss") as? NSManagedObject)?.string("name") == "Ada")
            let projects = try #require(grace.value(forKey: "projects") as? Set<NSManagedObject>)
            #expect(projects.map { $0.string("title") } == ["Engine"])
            let project = try #require(projects.first)
            #expect((project.value(forKey: "members") as? Set<NSManagedObject>)?.map { $0.string("name") } == ["Grace"])
            #expect((project.value(forKey: "tags") as? Set<NSManagedObject>)?.map { $0.string("label") } == ["math"])
            #expect(project.value(forKey: "started") as? Date == Date(timeIntervalSinceReferenceDate: 100.5))
            #expect(project.objectID.uriRepresentation().absoluteString == "x-coredata://5B7D1E2A-1111-2222-3333-444455556666/Project/p1")
            #expect(try context.objects("Employee", "ANY projects.title == 'Engine'").count == 1)
            #expect(try context.objects("Person", "boss.name == 'Ada'").map { $0.string("name") } == ["Grace"])
        }
        #expect(try Data(contentsOf: url) == before, "reading changed the file")
    }

    @Test func readWriteOpensAreRefusedAndTheFileIsLeftAsItWas() throws {
        let url = try writeStore()
        let before = try Data(contentsOf: url)
        let error = #expect(throws: CoreDataError.self) { _ = try open(url, readOnly: false) }
        #expect(error?.message.contains("written by Apple's Core Data") == true && error?.message.contains("read-only") == true)
        #expect(try Data(contentsOf: url) == before)
        #expect(!FileManager.default.fileExists(atPath: url.path + "-wal"))
    }

    @Test(arguments: [("NULL", "is NULL"), ("garbage", "cannot be read")])
    func damagedMetadataIsANamedError(_ kind: String, _ expected: String) throws {
        let url = try writeStore(plist: .some(kind == "NULL" ? nil : Data("bplist00 but not really".utf8)))
        let before = try Data(contentsOf: url)
        let error = #expect(throws: CoreDataError.self) { _ = try open(url) }
        #expect(error?.message.contains("Z_PLIST") == true && error?.message.contains(expected) == true, "\(error?.message ?? "")")
        #expect(try Data(contentsOf: url) == before)
    }

    @Test func aRowWhoseEntityNumberNamesNoEntityIsANamedError() throws {
        let url = try writeStore(extraSQL: ["INSERT INTO ZPERSON VALUES (3, 9, 1, NULL, NULL, NULL, 'Stray', NULL)"])
        let container = try open(url)
        let context = container.newBackgroundContext()
        context.performAndWait {
            let error = #expect(throws: CoreDataError.self) { _ = try context.objects("Person") }
            #expect(error?.message.contains("entity number 9") == true, "\(error?.message ?? "")")
        }
    }

    @Test func aModelThatDoesNotMatchTheStoreIsRefusedByName() throws {
        let url = try writeStore(extraSQL: ["ALTER TABLE ZPROJECT RENAME COLUMN ZTITLE TO ZNAME"])
        let error = #expect(throws: CoreDataError.self) { _ = try open(url) }
        #expect(error?.code == .persistentStoreIncompatibleVersionHash)
        #expect(error?.message.contains("ZTITLE") == true && error?.message.contains("Project.title") == true, "\(error?.message ?? "")")
    }

    /// Binary values Core Data kept outside the row (`allowsExternalBinaryDataStorage`): inline after a marker byte,
    /// or in a file of the store's `_EXTERNAL_DATA` folder; a missing file is a named error.
    @Test func externallyStoredBinaryDataReads() throws {
        let model = try dir.loadModel(
            "Docs",
            """
                <entity name="Doc" representedClassName="Doc" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <attribute name="data" optional="YES" attributeType="Binary" allowsExternalBinaryDataStorage="YES"/>
                </entity>
            """)
        let url = dir.file("Docs.sqlite")
        let folder = dir.file(".Docs_SUPPORT/_EXTERNAL_DATA")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let fileName = "8F0C2D52-5E3A-4C1B-9D2B-2A0C7E4E9F11"
        try Data(repeating: 7, count: 4096).write(to: folder.appendingPathComponent(fileName))
        let plist = BinaryPropertyList.write(.dictionary(["NSStoreType": .string("SQLite"), "NSStoreUUID": .string("D0C5")]))
        try DatabaseQueue(path: url.path).write { db in
            try db.execute(sql: "CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER)")
            try db.execute(sql: "INSERT INTO Z_PRIMARYKEY VALUES (1, 'Doc', 0, 4)")
            try db.execute(sql: "CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB)")
            try db.execute(sql: "INSERT INTO Z_METADATA VALUES (1, 'D0C5', ?)", arguments: [plist])
            try db.execute(sql: "CREATE TABLE ZDOC (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZDATA BLOB, ZNAME VARCHAR)")
            try db.execute(sql: "INSERT INTO ZDOC VALUES (1, 1, 1, ?, 'inline')", arguments: [Data([1, 10, 20, 30])])
            try db.execute(sql: "INSERT INTO ZDOC VALUES (2, 1, 1, ?, 'file')", arguments: [Data([2]) + Data(fileName.utf8) + Data([0])])
            try db.execute(sql: "INSERT INTO ZDOC VALUES (3, 1, 1, NULL, 'none')")
            try db.execute(sql: "INSERT INTO ZDOC VALUES (4, 1, 1, ?, 'gone')", arguments: [Data([2]) + Data("0000-GONE".utf8) + Data([0])])
        }
        let description = NSPersistentStoreDescription(url: url)
        description.isReadOnly = true
        let container = NSPersistentContainer(name: "Docs", managedObjectModel: model)
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let docs = try context.objects("Doc", "name != 'gone'", sort: ["name"])
            #expect(docs.map { $0.value(forKey: "data") as? Data } == [Data(repeating: 7, count: 4096), Data([10, 20, 30]), nil])
            let error = #expect(throws: CoreDataError.self) { _ = try context.objects("Doc", "name == 'gone'") }
            #expect(error?.message.contains("missing") == true && error?.message.contains("'data'") == true, "\(error?.message ?? "")")
        }
    }
}
