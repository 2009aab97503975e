import Foundation
import OpenCoreData
import OpenCoreDataModel
import Testing
import _TestSupport

/// Six versions of one model, each step making the changes lightweight migration covers (entities and attributes
/// added, removed and renamed, types widened, optional made required, relationships added, renamed, made to-one from
/// to-many and unordered from ordered, an entity moving into an inheritance tree, indexes and uniqueness constraints
/// added and removed, a transformable attribute): a store of every version migrates to every later version, and
/// holds the same objects, values and links as the version-1 store migrated there directly.
@Suite struct MigrationPairsTests {
    let dir = TemporaryDirectory()

    static func entity(_ name: String, parent: String? = nil, abstract: Bool = false, renamedFrom: String? = nil, _ body: String) -> String
    {
        """
        <entity name="\(name)" representedClassName="\(name)"\(parent.map { #" parentEntity="\#($0)""# } ?? "")\(abstract ? #" isAbstract="YES""# : "")\(renamedFrom.map { #" elementID="\#($0)""# } ?? "") syncable="YES">\(body)</entity>
        """
    }

    static func attribute(_ name: String, _ type: String, optional: Bool = true, default value: String? = nil, renamedFrom: String? = nil)
        -> String
    {
        #"<attribute name="\#(name)"\#(optional ? #" optional="YES""# : "") attributeType="\#(type)"\#(value.map { #" defaultValueString="\#($0)""# } ?? "")\#(renamedFrom.map { #" elementID="\#($0)""# } ?? "")/>"#
    }

    static func relationship(
        _ name: String, to destination: String, inverse: String, toMany: Bool = false, ordered: Bool = false, renamedFrom: String? = nil
    ) -> String {
        #"<relationship name="\#(name)" optional="YES"\#(toMany ? #" toMany="YES""# : #" maxCount="1""#) deletionRule="Nullify"\#(ordered ? #" ordered="YES""# : "") destinationEntity="\#(destination)" inverseName="\#(inverse)"\#(renamedFrom.map { #" elementID="\#($0)""# } ?? "")/>"#
    }

    /// The six versions' entity sections.
    static let versions: [String] = {
        typealias S = MigrationPairsTests
        let v1 = [
            S.entity(
                "Folder",
                S.attribute("name", "String") + S.relationship("items", to: "Item", inverse: "folder", toMany: true, ordered: true)),
            S.entity(
                "Item",
                S.attribute("name", "String") + S.attribute("count", "Integer 16", default: "0")
                    + S.attribute("price", "Double", default: "0")
                    + S.attribute("badge", "UUID") + S.attribute("labels", "Transformable")
                    + S.relationship("folder", to: "Folder", inverse: "items")
                    + S.relationship("tags", to: "Tag", inverse: "items", toMany: true)),
            S.entity("Tag", S.attribute("name", "String") + S.relationship("items", to: "Item", inverse: "tags", toMany: true)),
            S.entity("Archive", S.attribute("name", "String") + S.attribute("stamp", "Date")),
        ]
        // 2: Item.note added, count widened, entity Note and relationship Item.notes added, an index and a constraint.
        var v2 = v1
        v2[1] = v2[1].replacingOccurrences(
            of: S.attribute("count", "Integer 16", default: "0"),
            with: S.attribute("count", "Integer 64", default: "0") + S.attribute("note", "String")
        )
        .replacingOccurrences(
            of: "</entity>",
            with: S.relationship("notes", to: "Note", inverse: "item", toMany: true)
                + #"<fetchIndex name="byName"><fetchIndexElement property="name" type="Binary" order="ascending"/></fetchIndex></entity>"#)
        v2[2] = v2[2].replacingOccurrences(
            of: "</entity>",
            with:
                #"<uniquenessConstraints><uniquenessConstraint><constraint value="name"/></uniquenessConstraint></uniquenessConstraints></entity>"#
        )
        v2.append(S.entity("Note", S.attribute("name", "String") + S.relationship("item", to: "Item", inverse: "notes")))
        // 3: Item.price renamed cost, Folder renamed Group, Item.folder renamed group, the constraint dropped, Tag.name
        // made required with a default.
        var v3 = v2
        v3[0] = S.entity(
            "Group", renamedFrom: "Folder",
            S.attribute("name", "String") + S.relationship("items", to: "Item", inverse: "group", toMany: true, ordered: true))
        v3[1] = v3[1].replacingOccurrences(
            of: S.attribute("price", "Double", default: "0"), with: S.attribute("cost", "Double", default: "0", renamedFrom: "price")
        )
        .replacingOccurrences(
            of: S.relationship("folder", to: "Folder", inverse: "items"),
            with: S.relationship("group", to: "Group", inverse: "items", renamedFrom: "folder"))
        v3[2] = S.entity(
            "Tag",
            S.attribute("name", "String", optional: false, default: "tag")
                + S.relationship("items", to: "Item", inverse: "tags", toMany: true))
        // 4: Tag.items made the to-one Tag.item, Group.items made unordered.
        var v4 = v3
        v4[0] = v4[0].replacingOccurrences(of: #" ordered="YES""#, with: "")
        v4[1] = v4[1].replacingOccurrences(
            of: S.relationship("tags", to: "Tag", inverse: "items", toMany: true),
            with: S.relationship("tags", to: "Tag", inverse: "item", toMany: true))
        v4[2] = S.entity(
            "Tag",
            S.attribute("name", "String", optional: false, default: "tag")
                + S.relationship("item", to: "Item", inverse: "tags", renamedFrom: "items"))
        // 5: Archive moves into Item's inheritance tree (its name now Item's).
        var v5 = v4
        v5[3] = S.entity("Archive", parent: "Item", S.attribute("stamp", "Date"))
        // 6: Note and Item.notes removed, Item.badge removed, Item.rank added (required, default 5), entity Label added.
        var v6 = v5
        v6.removeLast()
        v6[1] = v6[1].replacingOccurrences(of: S.relationship("notes", to: "Note", inverse: "item", toMany: true), with: "")
            .replacingOccurrences(of: S.attribute("badge", "UUID"), with: S.attribute("rank", "Integer 32", optional: false, default: "5"))
        v6.append(S.entity("Label", S.attribute("name", "String")))
        return [v1, v2, v3, v4, v5, v6].map { $0.joined(separator: "\n") }
    }()

    func model(_ version: Int) throws -> NSManagedObjectModel { try dir.loadModel("V\(version + 1)", Self.versions[version]) }

    /// Every object of the store as text: entity, attribute values and the names of linked objects, sorted (keys and
    /// object IDs left out: an entity moving between tables may get new keys).
    func contents(_ url: URL, _ model: NSManagedObjectModel) throws -> [String] {
        let description = NSPersistentStoreDescription(url: url)
        description.isReadOnly = true
        let container = NSPersistentContainer(name: "Pairs", managedObjectModel: model)
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        defer { try? container.removeStores() }
        let context = container.newBackgroundContext()
        return try context.performAndWait {
            var lines: [String] = []
            for entity in model.entities {
                let request = NSFetchRequest<NSManagedObject>(entityName: entity.name)
                request.includesSubentities = false
                for object in try context.fetch(request) {
                    var fields: [String] = []
                    for property in entity.allProperties.sorted(by: { $0.name < $1.name }) {
                        let value = object.value(forKey: property.name)
                        switch value {
                        case let one as NSManagedObject: fields.append("\(property.name)→\(one.string("name") ?? "-")")
                        case let set as Set<NSManagedObject>:
                            fields.append("\(property.name)→\(set.map { $0.string("name") ?? "-" }.sorted())")
                        case let ordered as NSOrderedSet:
                            fields.append("\(property.name)→\(ordered.array.map { ($0 as? NSManagedObject)?.string("name") ?? "-" })")
                        default: fields.append("\(property.name)=\(value.map { "\($0)" } ?? "nil")")
                        }
                    }
                    lines.append("\(entity.name): " + fields.joined(separator: " "))
                }
            }
            return lines.sorted()
        }
    }

    /// Version 1's objects: two folders, five items (tagged, labelled), three tags (one without a name), two archives.
    func seed(_ url: URL) throws {
        let container = NSPersistentContainer(name: "Pairs", managedObjectModel: try model(0))
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: url)]
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        try context.performAndWait {
            let folders = try ["inbox", "done"].map { try context.make("Folder", ["name": $0]) }
            let tags = try [Optional("red"), "blue", nil].map { try context.make("Tag", ["name": $0 as Any?]) }
            for n in 0..<5 {
                let item = try context.make(
                    "Item",
                    ["name": "item \(n)", "count": Int16(n * 100), "price": Double(n) + 0.5, "badge": UUID(), "folder": folders[n % 2]])
                item.setValue(["label \(n)"], forKey: "labels")
                item.setValue(Set(tags.enumerated().filter { (n + $0.offset) % 2 == 0 }.map(\.element)), forKey: "tags")
            }
            for n in 0..<2 {
                try context.make("Archive", ["name": "archive \(n)", "stamp": Date(timeIntervalSinceReferenceDate: Double(n))])
            }
            try context.save()
        }
        try container.removeStores()
    }

    @Test func everyVersionMigratesToEveryLaterOne() throws {
        let models = try (0..<Self.versions.count).map(model)
        // Version 1's store, migrated step by step: the store of each version.
        var stores: [URL] = [dir.file("v1.sqlite")]
        try seed(stores[0])
        for version in 1..<models.count {
            let next = dir.file("v\(version + 1).sqlite")
            try FileManager.default.copyItem(at: stores[version - 1], to: next)
            try SQLiteStore.migrateStore(at: next, to: models[version])
            stores.append(next)
        }
        var pairs = 0
        for target in 1..<models.count {
            // Version 1's store migrated straight to the target is the reference.
            let direct = dir.file("direct-\(target).sqlite")
            try FileManager.default.copyItem(at: stores[0], to: direct)
            try SQLiteStore.migrateStore(at: direct, to: models[target])
            let expected = try contents(direct, models[target])
            #expect(expected.count == 2 + 5 + 3 + 2, "v\(target + 1): every folder, item, tag and archive is kept")
            for source in 1..<target {
                let copy = dir.file("pair-\(source)-\(target).sqlite")
                try FileManager.default.copyItem(at: stores[source], to: copy)
                try SQLiteStore.migrateStore(at: copy, to: models[target])
                #expect(try contents(copy, models[target]) == expected, "v\(source + 1) → v\(target + 1)")
                pairs += 1
            }
        }
        // What the last version holds, spelled out.
        let last = try contents(stores.last!, models.last!)
        #expect(last.filter { $0.hasPrefix("Item: ") }.allSatisfy { $0.contains("rank=5") && !$0.contains("badge") }, "\(last)")
        #expect(last.contains { $0.hasPrefix("Tag: ") && $0.contains("name=tag") }, "a nameless tag took the default")
        #expect(last.filter { $0.hasPrefix("Archive: ") }.count == 2 && last.contains { $0.contains("name=archive 1") })
        #expect(last.contains { $0.hasPrefix("Group: ") && $0.contains("name=inbox") && $0.contains("item 4") })
        #expect(
            last.contains { $0.hasPrefix("Item: ") && $0.contains("cost=4.5") && $0.contains("count=400") && $0.contains("group→inbox") })
        print("MigrationPairsTests: \(pairs) version pairs beyond the direct ones, all equal to version 1 migrated directly")
    }
}
