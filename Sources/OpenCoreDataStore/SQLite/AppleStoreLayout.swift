import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

/// What a store written by Apple's Core Data says about itself: its metadata (`Z_METADATA.Z_PLIST`, a binary
/// property list), its entities and their numbers (`Z_PRIMARYKEY`), and the columns of its tables.
package struct AppleStoreCatalog: Sendable {
    /// The store's UUID (`Z_UUID`, or `NSStoreUUID` in the metadata).
    package let uuid: String
    /// The metadata dictionary.
    package let metadata: [String: PropertyListValue]
    /// Entity numbers (`Z_ENT`) by entity name, as `Z_PRIMARYKEY` lists them (history entities excluded).
    package let entityNumbers: [String: Int]
    /// Each table's columns, upper-cased, in the table's order.
    package let columns: [String: [String]]
    /// Whether the store caches its model (`Z_MODELCACHE`).
    package let hasModelCache: Bool

    /// The entity version hashes the store recorded (`NSStoreModelVersionHashes`), by entity name.
    package var versionHashes: [String: Data] {
        guard case .dictionary(let hashes)? = metadata["NSStoreModelVersionHashes"] else { return [:] }
        return hashes.compactMapValues { value in
            if case .data(let hash) = value { return hash }
            return nil
        }
    }

    /// The entity numbers Core Data gives its persistent-history entities (`ACHANGE`, `ATRANSACTION`, …).
    static let historyEntityNumbers = 16000..<17000

    /// Reads the catalog, or returns nil when the database is not in Apple's layout (no `Z_METADATA` with a
    /// `Z_PLIST` column).
    ///
    /// - Throws: `CoreDataError(.persistentStoreIncompatibleSchema)` naming what is damaged: a `Z_PLIST` that is NULL
    ///   or not a property list, a missing `Z_PRIMARYKEY`.
    static func read(_ db: Database, place: String) throws -> AppleStoreCatalog? {
        guard try db.tableExists("Z_METADATA") else { return nil }
        let metadataColumns = try db.columns(in: "Z_METADATA").map { $0.name.uppercased() }
        guard metadataColumns.contains("Z_PLIST") else { return nil }
        func damaged(_ what: String) -> CoreDataError {
            CoreDataError(.persistentStoreIncompatibleSchema, "\(place) is a Core Data store whose \(what); it was not changed.")
        }
        guard let row = try Row.fetchOne(db, sql: "SELECT Z_UUID, Z_PLIST FROM Z_METADATA ORDER BY Z_VERSION LIMIT 1") else {
            throw damaged("Z_METADATA table is empty")
        }
        guard let plist: Data = row["Z_PLIST"] else { throw damaged("metadata (Z_METADATA.Z_PLIST) is NULL") }
        let metadata: [String: PropertyListValue]
        do {
            guard let dictionary = try BinaryPropertyList.readAnyFormat(plist).dictionary else {
                throw PropertyListError("not a dictionary")
            }
            metadata = dictionary
        } catch let error as PropertyListError {
            throw damaged("metadata (Z_METADATA.Z_PLIST) cannot be read: \(error)")
        }
        let uuid = (row["Z_UUID"] as String?) ?? metadata["NSStoreUUID"]?.string ?? ""
        guard !uuid.isEmpty else { throw damaged("metadata names no store UUID") }
        guard try db.tableExists("Z_PRIMARYKEY") else { throw damaged("Z_PRIMARYKEY table is missing") }
        var numbers: [String: Int] = [:]
        for entry in try Row.fetchAll(db, sql: "SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY") {
            guard let number: Int = entry["Z_ENT"], let name: String = entry["Z_NAME"] else {
                throw damaged("Z_PRIMARYKEY has a row without entity number or name")
            }
            if !historyEntityNumbers.contains(number) { numbers[name] = number }
        }
        var columns: [String: [String]] = [:]
        for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") {
            columns[table.uppercased()] = try db.columns(in: table).map { $0.name.uppercased() }
        }
        return AppleStoreCatalog(
            uuid: uuid, metadata: metadata, entityNumbers: numbers, columns: columns, hasModelCache: columns["Z_MODELCACHE"] != nil)
    }
}

extension RelationalSchema {
    /// The tables and columns of a store Core Data wrote, for `model`: names derived as Core Data derives them and
    /// checked against the store's own tables.
    ///
    /// Core Data names a root entity's table `Z` + its upper-cased name; a stored property's column `Z` + its
    /// upper-cased name (a second property of the same name in one table gets `1`, then `2`, …, in entity-number
    /// order); a to-one whose destination has subentities also `Z<destination number>_<NAME>` for the destination's
    /// entity number; a many-to-many relationship a join table `Z_<entity number><NAME>` with one column per side; a
    /// to-many without inverse a hidden foreign key `Z<entity number><NAME>` in the destination's table.
    ///
    /// - Throws: `CoreDataError(.persistentStoreIncompatibleVersionHash)` naming the entity and property whose table
    ///   or column the store lacks, or an entity whose number differs: the store was written by another version of
    ///   the model.
    init(model: NSManagedObjectModel, appleStore catalog: AppleStoreCatalog, place: String) throws {
        self.init(model: model, tables: [])
        isAppleLayout = true
        func mismatch(_ what: String, entity: String, key: String? = nil) -> CoreDataError {
            CoreDataError(
                .persistentStoreIncompatibleVersionHash,
                "\(place) was written by another version of the model: \(what). Open it with the model version that wrote it.",
                entityName: entity, key: key)
        }
        // An entity renamed by a lightweight migration keeps its former name in Z_PRIMARYKEY: its renaming identifier.
        var matched: Set<String> = []
        for entity in model.entities {
            let stored = [entity.name, entity.renamingIdentifier].compactMap { $0 }.first { catalog.entityNumbers[$0] != nil }
            guard let stored, let number = catalog.entityNumbers[stored] else {
                throw mismatch("it has no entity '\(entity.name)'", entity: entity.name)
            }
            matched.insert(stored)
            guard number == entity.entityID else {
                throw mismatch(
                    "entity '\(entity.name)' is number \(number) in the store, \(entity.entityID) in the model", entity: entity.name)
            }
        }
        if let extra = catalog.entityNumbers.keys.sorted().first(where: { !matched.contains($0) }) {
            throw mismatch("it has entity '\(extra)', which the model lacks", entity: extra)
        }
        for root in model.entities.filter({ $0.superentity == nil }).sorted(by: { $0.entityID < $1.entityID }) {
            try addAppleTable(root, catalog: catalog, mismatch: mismatch)
        }
        for entity in model.entities.sorted(by: { $0.entityID < $1.entityID }) {
            for case let relationship as NSRelationshipDescription in entity.properties
            where relationship.isToMany && !relationship.isTransient {
                try addAppleToMany(relationship, of: entity, catalog: catalog, mismatch: mismatch)
            }
        }
    }

    private mutating func addAppleTable(
        _ root: NSEntityDescription, catalog: AppleStoreCatalog, mismatch: (String, String, String?) -> CoreDataError
    ) throws {
        let name = "Z" + root.name.uppercased()
        guard let existing = catalog.columns[name] else { throw mismatch("it has no table \(name)", root.name, nil) }
        let present = Set(existing)
        var table = Table(name: name, rootEntity: root)
        var used: Set<String> = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version]
        for entity in Self.entityNumberOrder(root) {
            for property in entity.properties.sorted(by: { $0.name < $1.name }) where !property.isTransient {
                if let relationship = property as? NSRelationshipDescription, relationship.isToMany { continue }
                if let attribute = property as? NSAttributeDescription, attribute.attributeType == .compositeAttributeType,
                    try addCompositeColumns(attribute, present: present, used: &used, to: &table, mismatch: mismatch)
                {
                    continue
                }
                let column = Self.claim("Z" + property.name.uppercased(), in: &used)
                guard present.contains(column) else {
                    throw mismatch(
                        "table \(name) has no column \(column) for '\(entity.name).\(property.name)'", entity.name, property.name)
                }
                columnByProperty[ObjectIdentifier(property)] = column
                if let attribute = property as? NSAttributeDescription {
                    table.columns.append((column, SQLStorage.columnType(for: attribute.attributeType)))
                    continue
                }
                let relationship = property as! NSRelationshipDescription
                table.columns.append((column, "INTEGER"))
                table.foreignKeys.append(column)
                if let destination = relationship.destinationEntity, !destination.subentities.isEmpty {
                    let entityColumn = Self.claim("Z\(destination.entityID)_" + relationship.name.uppercased(), in: &used)
                    if present.contains(entityColumn) {
                        table.columns.append((entityColumn, "INTEGER"))
                        entityColumnByRelationship[ObjectIdentifier(relationship)] = entityColumn
                    }
                }
            }
        }
        tableIndexByRoot[ObjectIdentifier(root)] = tables.count
        tables.append(table)
    }

    /// Maps a composite to its element columns (Core Data's layout) and returns true; false for a store this project
    /// wrote before it flattened composites, which keeps the whole composite archived in one column of its name.
    private mutating func addCompositeColumns(
        _ attribute: NSAttributeDescription, present: Set<String>, used: inout Set<String>, to table: inout Table,
        mismatch: (String, String, String?) -> CoreDataError
    ) throws -> Bool {
        var claimed = used
        let leaves = attribute.flattenedCompositeElements.map { path, element in
            CompositeLeaf(path: path, element: element, column: Self.claim("Z" + element.name.uppercased(), in: &claimed))
        }
        let single = Self.claim("Z" + attribute.name.uppercased(), in: &used)
        used.remove(single)
        if leaves.isEmpty || !leaves.allSatisfy({ present.contains($0.column) }), present.contains(single) { return false }
        if let missing = leaves.first(where: { !present.contains($0.column) }) {
            let entity = attribute.entity?.name ?? ""
            throw mismatch(
                "table \(table.name) has no column \(missing.column) for the element '\(missing.path.joined(separator: "."))' of '\(entity).\(attribute.name)'",
                entity, attribute.name)
        }
        used = claimed
        addComposite(attribute, leaves: leaves, to: &table)
        return true
    }

    /// An entity and its descendants in entity-number order.
    static func entityNumberOrder(_ root: NSEntityDescription) -> [NSEntityDescription] {
        [root] + root.subentities.sorted { $0.entityID < $1.entityID }.flatMap { entityNumberOrder($0) }
    }

    private mutating func addAppleToMany(
        _ relationship: NSRelationshipDescription, of entity: NSEntityDescription, catalog: AppleStoreCatalog,
        mismatch: (String, String, String?) -> CoreDataError
    ) throws {
        let key = ObjectIdentifier(relationship)
        guard joinTables[key] == nil, let destination = relationship.destinationEntity else { return }
        let inverse = relationship.inverseRelationship
        let destinationColumns = catalog.columns[tableName(for: destination)] ?? []
        // An ordered relationship's order: Z_FOK_ and the foreign key's name, in the destination's table.
        func foreignKey(_ column: String) {
            joinTables[key] = .inverseForeignKey(column: column)
            let order = "Z_FOK_" + column.dropFirst()
            if relationship.isOrdered, destinationColumns.contains(order) { orderColumnByRelationship[key] = order }
        }
        if let inverse, !inverse.isToMany { return foreignKey(columnName(for: inverse)) }
        // A hidden foreign key in the destination's table (a to-many without inverse), or a join table.
        let hidden = "Z\(entity.entityID)" + relationship.name.uppercased()
        if inverse == nil, destinationColumns.contains(hidden) { return foreignKey(hidden) }
        var candidates = ["Z_\(entity.entityID)" + relationship.name.uppercased()]
        if let inverse, let inverseOwner = inverse.entity { candidates.append("Z_\(inverseOwner.entityID)" + inverse.name.uppercased()) }
        guard let table = candidates.first(where: { catalog.columns[$0] != nil }), let columns = catalog.columns[table] else {
            throw mismatch(
                "it has no table for the relationship '\(entity.name).\(relationship.name)' (\(candidates.joined(separator: " or ")))",
                entity.name, relationship.name)
        }
        func column(_ base: String) -> String? {
            columns.first { $0 == base || ($0.hasPrefix(base) && $0.dropFirst(base.count).allSatisfy(\.isNumber)) }
        }
        let sourceBase = "Z_\(entity.entityID)" + (inverse?.name.uppercased() ?? "")
        let destinationBase = "Z_\(destination.entityID)" + relationship.name.uppercased()
        let plain = columns.filter { !$0.hasPrefix("Z_FOK_") }
        let destinationColumn = column(destinationBase) ?? plain.last
        let sourceColumn = (inverse == nil ? nil : column(sourceBase)) ?? plain.first { $0 != destinationColumn }
        guard let sourceColumn, let destinationColumn, sourceColumn != destinationColumn else {
            throw mismatch(
                "the join table \(table) of '\(entity.name).\(relationship.name)' has columns \(columns.joined(separator: ", "))",
                entity.name, relationship.name)
        }
        joinTables[key] = .joinTable(name: table, sourceColumn: sourceColumn, destinationColumn: destinationColumn)
        // Each ordered side's order: Z_FOK_ and the name of the column of its destinations (Z_FOK_1FAVORITES).
        if relationship.isOrdered, columns.contains("Z_FOK_" + destinationColumn.dropFirst(2)) {
            orderColumnByRelationship[key] = "Z_FOK_" + destinationColumn.dropFirst(2)
        }
        if let inverse {
            joinTables[ObjectIdentifier(inverse)] = .joinTable(
                name: table, sourceColumn: destinationColumn, destinationColumn: sourceColumn)
            if inverse.isOrdered, columns.contains("Z_FOK_" + sourceColumn.dropFirst(2)) {
                orderColumnByRelationship[ObjectIdentifier(inverse)] = "Z_FOK_" + sourceColumn.dropFirst(2)
            }
        }
    }
}

extension NSManagedObjectModel {
    /// The model a store written by Apple's Core Data keeps inside itself (`Z_MODELCACHE`, from iOS 12 / macOS 10.14
    /// on), to open the store without the app's model file.
    ///
    /// For example:
    /// ```swift
    /// let model = try NSManagedObjectModel.cachedModel(ofStoreAt: URL(fileURLWithPath: "NoteStore.sqlite"))
    /// ```
    /// The file is opened read-only and never changed.
    ///
    /// - Throws: `CoreDataError(.persistentStoreIncompatibleSchema)` when the store has no model cache (give the model
    ///   instead), `.unsupportedModelFile` when the cache does not decode; `.persistentStoreOpen` or
    ///   `.persistentStoreNotAStore` for a file that cannot be read as a store.
    public static func cachedModel(ofStoreAt url: URL) throws -> NSManagedObjectModel {
        if StoreKind.isPostgreSQL(url) {
            let (compressed, place) = try PostgreSQLStore.modelCache(at: url)
            return try decodeModelCache(compressed, place: place)
        }
        let path = url.path
        let compressed = try StoreFile.read(url) { db, path -> Data in
            guard try db.tableExists("Z_MODELCACHE") else {
                throw CoreDataError(
                    .persistentStoreIncompatibleSchema,
                    "\(path) has no model cache (Z_MODELCACHE: stores written before iOS 12 / macOS 10.14 have none); give the model that wrote it."
                )
            }
            guard let content = try Data.fetchOne(db, sql: "SELECT Z_CONTENT FROM Z_MODELCACHE LIMIT 1") else {
                throw CoreDataError(
                    .persistentStoreIncompatibleSchema, "\(path) has an empty model cache (Z_MODELCACHE); give the model that wrote it.")
            }
            return content
        }
        return try decodeModelCache(compressed, place: path)
    }

    /// The model a store's `Z_MODELCACHE` holds (a compiled model, DEFLATE-compressed).
    static func decodeModelCache(_ compressed: Data, place: String) throws -> NSManagedObjectModel {
        let archive: Data
        do {
            archive = try Inflate.rawDeflate(compressed)
        } catch let error as PropertyListError {
            throw CoreDataError(.unsupportedModelFile, "The model cache of \(place) (Z_MODELCACHE) does not decode: \(error).")
        }
        return try NSManagedObjectModel(compiledModel: archive, source: "The model cache of \(place) (Z_MODELCACHE)")
    }
}

extension PropertyListValue {
    /// A Foundation or Swift value as a property-list value, or nil when a property list cannot hold it: strings,
    /// booleans, integers, reals (`NSNumber`s by their type), dates, data, arrays and string-keyed dictionaries of them.
    package init?(foundationObject value: Any) {
        switch value {
        case let string as String: self = .string(string)
        case let date as Date: self = .date(date)
        case let data as Data: self = .data(data)
        case let number as NSNumber:
            switch String(cString: number.objCType) {
            case "c", "B": self = .bool(number.boolValue)
            case "f", "d": self = .real(number.doubleValue)
            default: self = .integer(number.int64Value)
            }
        case let bool as Bool: self = .bool(bool)
        case let integer as Int: self = .integer(Int64(integer))
        case let integer as Int64: self = .integer(integer)
        case let real as Double: self = .real(real)
        case let array as [Any]:
            var items: [PropertyListValue] = []
            for item in array {
                guard let converted = PropertyListValue(foundationObject: item) else { return nil }
                items.append(converted)
            }
            self = .array(items)
        case let dictionary as [String: Any]:
            var entries: [String: PropertyListValue] = [:]
            for (key, item) in dictionary {
                guard let converted = PropertyListValue(foundationObject: item) else { return nil }
                entries[key] = converted
            }
            self = .dictionary(entries)
        default: return nil
        }
    }

    /// The value as Foundation values: dictionaries `[String: Any]`, arrays `[Any]`, `Data`, `Date`, `String`,
    /// `NSNumber`, and a keyed archive's references as their numbers.
    package var foundationObject: Any {
        switch self {
        case .null: return NSNull()
        case .bool(let b): return NSNumber(value: b)
        case .integer(let i): return NSNumber(value: i)
        case .real(let d): return NSNumber(value: d)
        case .date(let d): return d
        case .data(let d): return d
        case .string(let s): return s
        case .uid(let u): return NSNumber(value: u)
        case .array(let a), .set(let a): return a.map(\.foundationObject)
        case .dictionary(let d): return d.mapValues(\.foundationObject)
        }
    }
}

extension SQLiteStore {
    /// A store file's metadata, read without opening it as a store (Core Data's
    /// `metadataForPersistentStore(ofType:at:options:)`): for a store Apple's Core Data wrote, its `Z_METADATA.Z_PLIST`
    /// dictionary; for this project's, `NSStoreUUID`, `NSStoreType` and `NSStoreModelVersionHashes` (this project's
    /// hashes).
    ///
    /// - Throws: `CoreDataError` for a file that is not a store, or damaged metadata.
    public static func metadata(at url: URL) throws -> [String: Any] {
        try StoreFile.read(url) { db, path -> [String: Any] in
            if let apple = try AppleStoreCatalog.read(db, place: path) {
                var metadata = apple.metadata.mapValues(\.foundationObject)
                metadata["NSStoreUUID"] = metadata["NSStoreUUID"] ?? apple.uuid
                return metadata
            }
            guard try db.tableExists("Z_METADATA") else {
                throw CoreDataError(.persistentStoreIncompatibleSchema, "\(path) is not a Core Data store (it has no Z_METADATA).")
            }
            var values: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT Z_KEY, Z_VALUE FROM Z_METADATA") { values[row[0]] = row[1] }
            var hashes: [String: Data] = [:]
            for (key, value) in values where key.hasPrefix("entityHash.") {
                hashes[String(key.dropFirst(11))] = Data(hex: value)
            }
            return [
                "NSStoreUUID": values["identifier"] ?? "", "NSStoreType": "SQLite", "NSStoreModelVersionHashes": hashes,
                "OpenCoreDataStoreFormat": values["formatVersion"] ?? "1",
            ]
        }
    }
}

extension Data {
    /// Bytes from hexadecimal text (empty for text that is not hexadecimal).
    init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
            guard let byte = UInt8(hex[index..<next], radix: 16) else {
                bytes = []
                break
            }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}

/// Binary values Apple's Core Data may keep outside the row (`allowsExternalBinaryDataStorage`): the column holds a
/// marker byte, 1 followed by the bytes themselves, or 2 followed by the name (a UUID, NUL-terminated) of a file in
/// the store's `.<name>_SUPPORT/_EXTERNAL_DATA` folder.
package enum AppleExternalData {
    /// The folder beside `store` that holds external values.
    package static func folder(_ store: URL) -> URL {
        store.deletingLastPathComponent()
            .appendingPathComponent(".\(store.deletingPathExtension().lastPathComponent)_SUPPORT/_EXTERNAL_DATA")
    }

    /// The value a column holds: the bytes after the marker, or the external file's contents.
    ///
    /// - Throws: `PropertyListError` saying what is wrong: an unknown marker, a file name that is not one, a missing file.
    package static func read(_ bytes: Data, folder: URL?) throws -> Data {
        guard let marker = bytes.first else { return bytes }
        switch marker {
        case 1: return bytes.dropFirst()
        case 2:
            let name = String(decoding: bytes.dropFirst().prefix { $0 != 0 }, as: UTF8.self)
            guard !name.isEmpty, !name.contains("/"), !name.contains("..") else {
                throw PropertyListError("names an external file '\(name)' that is not a file name")
            }
            guard let folder else { throw PropertyListError("is kept in the external file \(name), and an in-memory store has none") }
            let file = folder.appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: file.path) else {
                throw PropertyListError("is kept in the external file \(file.path), which is missing")
            }
            return data
        default: throw PropertyListError("holds external-storage data with an unknown marker byte \(marker)")
        }
    }
}
