import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

// New stores are written in Core Data's own layout, so that Apple's framework could open them: the names below follow
// the rules `RelationalSchema(model:appleStore:place:)` reads Apple's stores by (the corpus's stores are their proof),
// and a new store is opened through that reader, like any store Apple wrote.

extension RelationalSchema {
    /// The tables and columns Core Data would give `model` in a new store.
    ///
    /// A root entity's table is `Z` + its upper-cased name; within it the stored properties of the root and its
    /// subentities, in entity-number order and each entity's properties in name order, get `Z` + the upper-cased name
    /// (`1`, `2`, … added on a clash); a to-one whose destination has subentities also `Z<destination number>_<NAME>`;
    /// a to-many whose inverse is to-one is that inverse's foreign key (its order, when ordered, `Z_FOK_<KEY>` beside
    /// it); a to-many without inverse a hidden foreign key `Z<entity number><NAME>` in the destination's table; a
    /// many-to-many a join table named after the side of the lower entity number, `Z_<number><NAME>`, with a column
    /// per side named after the entity it holds and the relationship pointing there (`1`, `2`, … on a clash with any
    /// other join table's column, in the order the tables are made).
    package init(appleLayoutFor model: NSManagedObjectModel) {
        self.init(model: model, tables: [])
        isAppleLayout = true
        for root in model.entities.filter({ $0.superentity == nil }).sorted(by: { $0.entityID < $1.entityID }) {
            var table = Table(name: "Z" + root.name.uppercased(), rootEntity: root)
            var used: Set<String> = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version]
            for entity in Self.entityNumberOrder(root) {
                for property in entity.properties.sorted(by: { $0.name < $1.name }) where !property.isTransient {
                    if let attribute = property as? NSAttributeDescription, attribute.attributeType == .compositeAttributeType {
                        // A column per element, the composite itself none (see `CompositeLeaf`).
                        let leaves = attribute.flattenedCompositeElements.map { path, element in
                            CompositeLeaf(path: path, element: element, column: Self.claim("Z" + element.name.uppercased(), in: &used))
                        }
                        addComposite(attribute, leaves: leaves, to: &table)
                    } else if let attribute = property as? NSAttributeDescription {
                        let column = Self.claim("Z" + property.name.uppercased(), in: &used)
                        columnByProperty[ObjectIdentifier(property)] = column
                        table.columns.append((column, Self.appleColumnType(attribute.attributeType)))
                    } else if let relationship = property as? NSRelationshipDescription, !relationship.isToMany {
                        let column = Self.claim("Z" + property.name.uppercased(), in: &used)
                        columnByProperty[ObjectIdentifier(property)] = column
                        table.columns.append((column, "INTEGER"))
                        table.foreignKeys.append(column)
                        if let destination = relationship.destinationEntity, !destination.subentities.isEmpty {
                            let entityColumn = Self.claim("Z\(destination.entityID)_" + property.name.uppercased(), in: &used)
                            table.columns.append((entityColumn, "INTEGER"))
                            entityColumnByRelationship[ObjectIdentifier(relationship)] = entityColumn
                        }
                    }
                }
            }
            tableIndexByRoot[ObjectIdentifier(root)] = tables.count
            tables.append(table)
        }
        var joinColumns: Set<String> = []
        for entity in model.entities.sorted(by: { $0.entityID < $1.entityID }) {
            for case let relationship as NSRelationshipDescription in entity.properties.sorted(by: { $0.name < $1.name })
            where relationship.isToMany && !relationship.isTransient {
                addToManyForWriting(relationship, of: entity, joinColumns: &joinColumns)
            }
        }
    }

    /// Records a composite's element columns, added to `table`.
    mutating func addComposite(_ attribute: NSAttributeDescription, leaves: [CompositeLeaf], to table: inout Table) {
        compositeLeaves[ObjectIdentifier(attribute)] = leaves
        if let first = leaves.first { columnByProperty[ObjectIdentifier(attribute)] = first.column }
        for leaf in leaves { table.columns.append((leaf.column, Self.appleColumnType(leaf.element.attributeType))) }
    }

    /// `base`, or `base` with the first number that makes it unused; marked used.
    static func claim(_ base: String, in used: inout Set<String>) -> String {
        var name = base
        var n = 1
        while used.contains(name) {
            name = base + String(n)
            n += 1
        }
        used.insert(name)
        return name
    }

    /// The SQL type Core Data declares for a column of an attribute type.
    static func appleColumnType(_ type: NSAttributeType) -> String {
        switch type {
        case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType, .booleanAttributeType: return "INTEGER"
        case .doubleAttributeType, .floatAttributeType: return "FLOAT"
        case .decimalAttributeType: return "DECIMAL"
        case .dateAttributeType: return "TIMESTAMP"
        case .stringAttributeType, .URIAttributeType: return "VARCHAR"
        default: return "BLOB"  // binary data, transformable, UUID (16 bytes), composite
        }
    }

    private mutating func addToManyForWriting(
        _ relationship: NSRelationshipDescription, of entity: NSEntityDescription, joinColumns: inout Set<String>
    ) {
        let key = ObjectIdentifier(relationship)
        guard joinTables[key] == nil, let destination = relationship.destinationEntity else { return }
        let destinationTable = tableIndexByRoot[ObjectIdentifier(destination.rootEntity)]!
        /// The relationship is stored in a foreign key of the destination's table (with its order beside it).
        func foreignKey(_ column: String, add: Bool) {
            joinTables[key] = .inverseForeignKey(column: column)
            if add {
                tables[destinationTable].columns.append((column, "INTEGER"))
                tables[destinationTable].foreignKeys.append(column)
            }
            guard relationship.isOrdered else { return }
            let order = "Z_FOK_" + column.dropFirst()
            orderColumnByRelationship[key] = order
            tables[destinationTable].columns.append((order, "INTEGER"))
        }
        guard let inverse = relationship.inverseRelationship, let inverseOwner = inverse.entity else {
            return foreignKey("Z\(entity.entityID)" + relationship.name.uppercased(), add: true)
        }
        if !inverse.isToMany { return foreignKey(columnName(for: inverse), add: false) }
        // Core Data makes a many-to-many's join table when it reaches the side of the higher entity number (of two
        // sides of one entity, the first in name order), and names it after the other side.
        // Of two sides of one entity the table is named after the ordered one, or else the first in name order (as
        // DuckDuckGo's and Wire's stores show).
        guard entity.entityID >= inverseOwner.entityID else { return }
        guard entity === inverseOwner else { return addJoinTable(owner: inverse, of: inverseOwner, joinColumns: &joinColumns) }
        let owner =
            relationship.isOrdered != inverse.isOrdered
            ? (relationship.isOrdered ? relationship : inverse) : (relationship.name < inverse.name ? relationship : inverse)
        addJoinTable(owner: owner, of: entity, joinColumns: &joinColumns)
    }

    /// The join table of a many-to-many relationship and its inverse, named after `relationship` (the owner).
    private mutating func addJoinTable(
        owner relationship: NSRelationshipDescription, of entity: NSEntityDescription, joinColumns: inout Set<String>
    ) {
        guard let inverse = relationship.inverseRelationship, let destination = relationship.destinationEntity else { return }
        let key = ObjectIdentifier(relationship)
        let name = "Z_\(entity.entityID)" + relationship.name.uppercased()
        let source = Self.claim("Z_\(entity.entityID)" + inverse.name.uppercased(), in: &joinColumns)
        let target = Self.claim("Z_\(destination.entityID)" + relationship.name.uppercased(), in: &joinColumns)
        var join = JoinTable(name: name, sourceColumn: source, destinationColumn: target)
        joinTables[key] = .joinTable(name: name, sourceColumn: source, destinationColumn: target)
        joinTables[ObjectIdentifier(inverse)] = .joinTable(name: name, sourceColumn: target, destinationColumn: source)
        if relationship.isOrdered {
            orderColumnByRelationship[key] = "Z_FOK_" + target.dropFirst(2)
            join.orderColumns.append("Z_FOK_" + target.dropFirst(2))
        }
        if inverse.isOrdered {
            orderColumnByRelationship[ObjectIdentifier(inverse)] = "Z_FOK_" + source.dropFirst(2)
            join.orderColumns.append("Z_FOK_" + source.dropFirst(2))
        }
        joinTableList.append(join)
    }

    /// The statements that create a new store in Core Data's layout: its tables and indexes as Core Data declares
    /// them, `Z_PRIMARYKEY` with a row per entity, `Z_METADATA` with the store's metadata and `Z_MODELCACHE`.
    ///
    /// In SQLite the statements are Core Data's own, word for word (bare names, its declared types); another dialect
    /// quotes the names and declares its own types for them (`SQLDialect.columnType(_:)`).
    func appleCreationStatements(dialect: any SQLDialect = SQLiteDialect()) -> [String] {
        let name = dialect.ddlName
        func column(_ column: String, _ type: String) -> String { "\(name(column)) \(dialect.columnType(type))" }
        var statements: [String] = []
        for table in tables {
            let columns =
                ["\(name("Z_PK")) \(dialect.columnType("INTEGER")) PRIMARY KEY", column("Z_ENT", "INTEGER"), column("Z_OPT", "INTEGER")]
                + table.columns.map { column($0.name, $0.type) }
            statements.append("CREATE TABLE \(name(table.name)) ( \(columns.joined(separator: ", ")) )")
            for fk in table.foreignKeys {
                statements.append("CREATE INDEX \(name(table.name + "_" + fk + "_INDEX")) ON \(name(table.name)) (\(name(fk)))")
            }
            if !table.rootEntity.subentities.isEmpty {
                statements.append("CREATE INDEX \(name(table.name + "_Z_ENT_INDEX")) ON \(name(table.name)) (\(name("Z_ENT")))")
            }
        }
        for join in joinTableList {
            let columns = [join.sourceColumn, join.destinationColumn] + join.orderColumns
            statements.append(
                "CREATE TABLE \(name(join.name)) ( \(columns.map { column($0, "INTEGER") }.joined(separator: ", ")), PRIMARY KEY (\(name(join.sourceColumn)), \(name(join.destinationColumn))) )"
            )
            statements.append(
                "CREATE INDEX \(name(join.name + "_" + join.destinationColumn + "_INDEX")) ON \(name(join.name)) (\(name(join.destinationColumn)), \(name(join.sourceColumn)))"
            )
        }
        for entity in model.entities.sorted(by: { $0.entityID < $1.entityID }) {
            statements += entity.uniquenessConstraints.map { uniqueIndexStatement(entity, $0, dialect: dialect) }
            statements += entity.indexes.compactMap { fetchIndexStatement(entity, $0, dialect: dialect) }
        }
        statements.append(
            "CREATE TABLE \(name("Z_PRIMARYKEY")) (\(name("Z_ENT")) \(dialect.columnType("INTEGER")) PRIMARY KEY, \(column("Z_NAME", "VARCHAR")), \(column("Z_SUPER", "INTEGER")), \(column("Z_MAX", "INTEGER")))"
        )
        for entity in model.entities.sorted(by: { $0.entityID < $1.entityID }) {
            statements.append(
                "INSERT INTO \(name("Z_PRIMARYKEY")) (\(["Z_ENT", "Z_NAME", "Z_SUPER", "Z_MAX"].map(name).joined(separator: ", "))) VALUES (\(entity.entityID), '\(entity.name.replacingOccurrences(of: "'", with: "''"))', \(entity.superentity?.entityID ?? 0), 0)"
            )
        }
        statements.append(
            "CREATE TABLE \(name("Z_METADATA")) (\(name("Z_VERSION")) \(dialect.columnType("INTEGER")) PRIMARY KEY, \(column("Z_UUID", "VARCHAR(255)")), \(column("Z_PLIST", "BLOB")))"
        )
        statements.append("CREATE TABLE \(name("Z_MODELCACHE")) (\(column("Z_CONTENT", "BLOB")))")
        return statements
    }
}

/// The metadata of a store in Core Data's layout (`Z_METADATA.Z_PLIST`, a binary property list): Core Data's keys,
/// and this project's own (apps add their own keys too; Core Data keeps them).
package enum AppleStoreMetadata {
    /// This project's key for the layout version of the stores it writes in Core Data's layout.
    static let formatKey = "OpenCoreDataStoreFormat"
    /// The layout version written under `formatKey`: 5 records Core Data's hashes for ordered relationships and derived
    /// and composite attributes too (4 recorded hashes of our own for them, recognised and rewritten on open).
    static let format = "5"
    /// This project's key for the number that grows with every save (`SQLiteStore.changeToken`).
    static let changeTokenKey = "OpenCoreDataChangeToken"
    /// The framework version a new store records (Core Data's of 2024, the newest in the corpus).
    static let frameworkVersion: Int64 = 1344

    /// The metadata of a new store for `model`.
    static func initial(for model: NSManagedObjectModel, type: String = NSSQLiteStoreType) -> [String: PropertyListValue] {
        [
            "NSStoreType": .string(type),
            "NSStoreModelVersionHashes": .dictionary(model.entityVersionHashesByName.mapValues { .data($0) }),
            "NSStoreModelVersionHashesVersion": .integer(3),
            "NSStoreModelVersionHashesDigest": .string(model.versionHashesDigest),
            "NSStoreModelVersionChecksumKey": .string(model.versionHashesChecksum),
            "NSStoreModelVersionIdentifiers": .array(model.versionIdentifiers.sorted().map { .string($0) }),
            "NSPersistenceFrameworkVersion": .integer(frameworkVersion),
            "_NSAutoVacuumLevel": .string("2"),
            formatKey: .string(format), changeTokenKey: .integer(0),
        ]
    }

    /// Creates a new store in `db` (empty) in Core Data's layout for `model`; returns its UUID.
    ///
    /// A migration passes the store's `uuid` (object IDs keep it) and the metadata keys it keeps (`extra`).
    static func create(
        _ db: some RelationalConnection, schema: RelationalSchema, model: NSManagedObjectModel, uuid: String = UUID().uuidString,
        extra: [String: PropertyListValue] = [:], type: String = NSSQLiteStoreType
    ) throws -> String {
        let dialect = db.dialect
        for statement in schema.appleCreationStatements(dialect: dialect) { try db.run(sql: statement) }
        try db.run(
            sql: dialect.finalize("INSERT INTO Z_METADATA (Z_VERSION, Z_UUID, Z_PLIST) VALUES (1, ?, ?)"),
            arguments: [
                .text(uuid), .blob(BinaryPropertyList.write(.dictionary(extra.merging(initial(for: model, type: type)) { _, new in new }))),
            ])
        try db.run(
            sql: dialect.finalize("INSERT INTO Z_MODELCACHE (Z_CONTENT) VALUES (?)"),
            arguments: [.blob(Inflate.storedDeflate(model.compiledArchive(predicates: PredicateFormatArchiver())))])
        return uuid
    }

    /// The metadata dictionary in `db`.
    ///
    /// `locking`: keep the row locked until the transaction ends where the dialect locks rows (a read before a write
    /// of the metadata: two writers on a server never both advance the change token from the same value).
    static func read(_ db: some RelationalConnection, locking: Bool = false) throws -> [String: PropertyListValue] {
        var plist: Data?
        let lock = locking ? db.dialect.lockingRead : ""
        try db.forEachRow(
            sql: "SELECT Z_PLIST FROM Z_METADATA WHERE Z_VERSION = (SELECT MIN(Z_VERSION) FROM Z_METADATA)\(lock)", arguments: []
        ) { row in
            if case .blob(let data) = row.value(0) { plist = data }
        }
        guard let plist else { return [:] }
        if let known = decoded.metadata(for: plist) { return known }
        let metadata = try BinaryPropertyList.readAnyFormat(plist).dictionary ?? [:]
        decoded.remember(metadata, as: plist)
        return metadata
    }

    /// Metadata dictionaries by the bytes they were read from or written as.
    ///
    /// Every save reads the metadata and writes it back with the change token advanced, and decoding the property
    /// list (its version hashes) was three quarters of that (0.7M instructions a save). The bytes are compared, so a
    /// dictionary another writer changed is decoded again.
    private static let decoded = DecodedMetadata()

    /// The change token in `db`'s metadata (0 when none was recorded: a store Apple's Core Data wrote).
    static func changeToken(_ db: some RelationalConnection) throws -> Int64 {
        if case .integer(let token)? = try read(db)[changeTokenKey] { return token }
        return 0
    }

    /// Records `model`'s version hashes (and their digest and checksum) and the current format, in the caller's
    /// transaction.
    static func recordVersionHashes(_ db: some RelationalConnection, model: NSManagedObjectModel) throws {
        var metadata = try read(db, locking: true)
        metadata["NSStoreModelVersionHashes"] = .dictionary(model.entityVersionHashesByName.mapValues { .data($0) })
        metadata["NSStoreModelVersionHashesDigest"] = .string(model.versionHashesDigest)
        metadata["NSStoreModelVersionChecksumKey"] = .string(model.versionHashesChecksum)
        metadata[formatKey] = .string(format)
        try write(metadata, db)
    }

    /// The keys Core Data and this project keep in a store's metadata: an app's metadata can neither change nor
    /// remove them.
    package static let managedKeys: Set<String> = [
        "NSStoreType", "NSStoreUUID", "NSStoreModelVersionHashes", "NSStoreModelVersionHashesVersion", "NSStoreModelVersionHashesDigest",
        "NSStoreModelVersionChecksumKey", "NSStoreModelVersionIdentifiers", "NSPersistenceFrameworkVersion", "_NSAutoVacuumLevel",
        formatKey, changeTokenKey,
    ]

    /// The metadata an app sets (`NSPersistentStoreCoordinator.setMetadata(_:for:)`): its keys replace the app keys
    /// of `current`, whose managed keys stay as they are.
    ///
    /// - Throws: `CoreDataError(.wrongValueType)` naming a key whose value a property list cannot hold.
    static func merging(app values: [String: Any], into current: [String: PropertyListValue]) throws -> [String: PropertyListValue] {
        var result = current.filter { managedKeys.contains($0.key) }
        for (key, value) in values where !managedKeys.contains(key) {
            guard let converted = PropertyListValue(foundationObject: value) else {
                throw CoreDataError(
                    .wrongValueType,
                    "The store metadata's value for '\(key)' is \(type(of: value)), which a property list cannot hold "
                        + "(strings, numbers, booleans, dates, data, and arrays and dictionaries of them can).")
            }
            result[key] = converted
        }
        return result
    }

    /// Replaces the metadata dictionary, in the caller's transaction.
    static func write(_ metadata: [String: PropertyListValue], _ db: some RelationalConnection) throws {
        let plist = BinaryPropertyList.write(.dictionary(metadata))
        try db.run(
            sql: db.dialect.finalize("UPDATE Z_METADATA SET Z_PLIST = ? WHERE Z_VERSION = (SELECT MIN(Z_VERSION) FROM Z_METADATA)"),
            arguments: [.blob(plist)])
        decoded.remember(metadata, as: plist)
    }

    /// Adds one to the change token, in the caller's transaction.
    static func advanceChangeToken(_ db: some RelationalConnection) throws {
        var metadata = try read(db, locking: true)
        var token: Int64 = 0
        if case .integer(let t)? = metadata[changeTokenKey] { token = t }
        metadata[changeTokenKey] = .integer(token &+ 1)
        try write(metadata, db)
    }
}

/// A few metadata dictionaries by the property-list bytes they came from (see `AppleStoreMetadata.read`).
private final class DecodedMetadata: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [Data: [String: PropertyListValue]] = [:]

    func metadata(for plist: Data) -> [String: PropertyListValue]? {
        lock.withLock { entries[plist] }
    }

    func remember(_ metadata: [String: PropertyListValue], as plist: Data) {
        lock.withLock {
            // A handful of stores at a time; past that, start again rather than grow.
            if entries.count >= 16 { entries.removeAll() }
            entries[plist] = metadata
        }
    }
}
