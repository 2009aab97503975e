import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// The tables and columns a model maps to, in Core Data's style: one table per root entity (`ZPRODUCTS`) holding the
/// rows of its subentities too, with `Z_PK`, `Z_ENT`, `Z_OPT` and a `Z`-prefixed upper-case column per stored
/// property; to-one relationships as a foreign-key column plus its destination's entity number; many-to-many and
/// inverse-less to-many relationships in join tables.
package struct RelationalSchema: SQLSchemaMapping, @unchecked Sendable {
    /// One table per root entity.
    package struct Table {
        package let name: String
        package let rootEntity: NSEntityDescription
        /// Every stored column after `Z_PK`, `Z_ENT`, `Z_OPT`, in order, with its declared type.
        package internal(set) var columns: [(name: String, type: String)] = []
        /// Foreign-key columns (for indexes).
        package internal(set) var foreignKeys: [String] = []
    }

    /// A join table for a relationship.
    package struct JoinTable {
        package let name: String
        package let sourceColumn: String
        package let destinationColumn: String
        /// Order columns, for ordered relationships kept in the table.
        package var orderColumns: [String] = []
    }

    package let model: NSManagedObjectModel
    package internal(set) var tables: [Table] = []
    var tableIndexByRoot: [ObjectIdentifier: Int] = [:]
    var columnByProperty: [ObjectIdentifier: String] = [:]
    /// The element columns of each composite attribute stored flattened (Core Data's layout), by attribute.
    var compositeLeaves: [ObjectIdentifier: [CompositeLeaf]] = [:]
    /// The column holding a to-one's destination entity number, by relationship (absent when a store has none).
    var entityColumnByRelationship: [ObjectIdentifier: String] = [:]
    var joinTables: [ObjectIdentifier: SQLToManyLink] = [:]
    /// The column holding an ordered to-many's order (`Z_FOK_…`), by relationship.
    var orderColumnByRelationship: [ObjectIdentifier: String] = [:]
    package internal(set) var joinTableList: [JoinTable] = []
    /// Whether the tables are Apple's, read from a store Core Data wrote (read-only).
    package internal(set) var isAppleLayout = false

    /// An empty mapping, filled by another initializer.
    init(model: NSManagedObjectModel, tables: [Table]) {
        self.model = model
        self.tables = tables
    }

    /// The layout of the stores this project wrote before it wrote Core Data's (store formats 1–3: `_ENT` beside every
    /// foreign key, join tables `Z_<ENTITY>_<NAME>` with `Z_SOURCE` and `Z_DESTINATION`, key-value `Z_METADATA`); such
    /// stores are still read and written in it.
    package init(legacyLayoutFor model: NSManagedObjectModel) {
        self.model = model
        var usedTableNames: Set<String> = []
        func unique(_ base: String, in used: inout Set<String>) -> String {
            var name = base
            var n = 1
            while used.contains(name.uppercased()) {
                name = base + String(n)
                n += 1
            }
            used.insert(name.uppercased())
            return name
        }
        let roots = model.entities.filter { $0.superentity == nil }.sorted { $0.name < $1.name }
        for root in roots {
            var table = Table(name: unique("Z" + root.name.uppercased(), in: &usedTableNames), rootEntity: root)
            var usedColumns: Set<String> = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version]
            let tree = Self.treeOrder(root)
            for entity in tree {
                for property in entity.properties where !property.isTransient {
                    if let attribute = property as? NSAttributeDescription {
                        let column = unique("Z" + property.name.uppercased(), in: &usedColumns)
                        columnByProperty[ObjectIdentifier(property)] = column
                        table.columns.append((column, SQLStorage.columnType(for: attribute.attributeType)))
                    } else if let relationship = property as? NSRelationshipDescription, !relationship.isToMany {
                        let column = unique("Z" + property.name.uppercased(), in: &usedColumns)
                        columnByProperty[ObjectIdentifier(property)] = column
                        table.columns.append((column, "INTEGER"))
                        usedColumns.insert((column + "_ENT").uppercased())
                        table.columns.append((column + "_ENT", "INTEGER"))
                        entityColumnByRelationship[ObjectIdentifier(property)] = column + "_ENT"
                        table.foreignKeys.append(column)
                    }
                }
            }
            tableIndexByRoot[ObjectIdentifier(root)] = tables.count
            tables.append(table)
        }
        // Join tables: one per many-to-many pair (named after the side that sorts first) or inverse-less to-many.
        for entity in model.entities.sorted(by: { $0.name < $1.name }) {
            for case let relationship as NSRelationshipDescription in entity.properties
            where relationship.isToMany && !relationship.isTransient {
                let key = ObjectIdentifier(relationship)
                if joinTables[key] != nil { continue }
                if let inverse = relationship.inverseRelationship, !inverse.isToMany {
                    let column = columnByProperty[ObjectIdentifier(inverse)]!
                    joinTables[key] = .inverseForeignKey(column: column)
                    if relationship.isOrdered, let destination = relationship.destinationEntity {
                        // Core Data's name: Z_FOK_ and the foreign key's name (Z_FOK_PARENT beside ZPARENT).
                        let order = "Z_FOK_" + column.dropFirst()
                        orderColumnByRelationship[key] = order
                        let table = tableIndexByRoot[ObjectIdentifier(destination.rootEntity)]!
                        if !tables[table].columns.contains(where: { $0.name == order }) { tables[table].columns.append((order, "INTEGER")) }
                    }
                    continue
                }
                let name = unique("Z_" + entity.name.uppercased() + "_" + relationship.name.uppercased(), in: &usedTableNames)
                let source = "Z_SOURCE", destination = "Z_DESTINATION"
                var join = JoinTable(name: name, sourceColumn: source, destinationColumn: destination)
                joinTables[key] = .joinTable(name: name, sourceColumn: source, destinationColumn: destination)
                if relationship.isOrdered {
                    orderColumnByRelationship[key] = "Z_FOK_DESTINATION"
                    join.orderColumns.append("Z_FOK_DESTINATION")
                }
                if let inverse = relationship.inverseRelationship, inverse.isToMany {
                    joinTables[ObjectIdentifier(inverse)] = .joinTable(name: name, sourceColumn: destination, destinationColumn: source)
                    if inverse.isOrdered {
                        orderColumnByRelationship[ObjectIdentifier(inverse)] = "Z_FOK_SOURCE"
                        join.orderColumns.append("Z_FOK_SOURCE")
                    }
                }
                joinTableList.append(join)
            }
        }
    }

    /// A root entity and its descendants, parents before children, siblings by name.
    static func treeOrder(_ root: NSEntityDescription) -> [NSEntityDescription] {
        [root] + root.subentities.sorted { $0.name < $1.name }.flatMap { treeOrder($0) }
    }

    package func table(for entity: NSEntityDescription) -> Table {
        tables[tableIndexByRoot[ObjectIdentifier(entity.rootEntity)]!]
    }

    package func tableName(for entity: NSEntityDescription) -> String { table(for: entity).name }

    /// The column of a property; for a composite kept in element columns, its first element's (see `compositeLeaves(of:)`).
    package func columnName(for property: NSPropertyDescription) -> String {
        columnByProperty[ObjectIdentifier(property)] ?? "Z" + property.name.uppercased()
    }

    /// The column holding the destination's entity number for a to-one relationship, or nil when the store keeps
    /// none (Apple's stores have one only when the destination has subentities).
    package func entityColumnName(for relationship: NSRelationshipDescription) -> String? {
        entityColumnByRelationship[ObjectIdentifier(relationship)]
    }

    /// The columns a property's value is written to, in the order `bind` writes them: one for an attribute, two for
    /// a to-one (destination key and entity number), none for a to-many or a transient property.
    func columnNames(for property: NSPropertyDescription) -> [String] {
        if property.isTransient { return [] }
        if let leaves = compositeLeaves(of: property) { return leaves.map(\.column) }
        if property is NSAttributeDescription { return [columnName(for: property)] }
        guard let relationship = property as? NSRelationshipDescription, !relationship.isToMany else { return [] }
        return [columnName(for: relationship)] + (entityColumnName(for: relationship).map { [$0] } ?? [])
    }

    package func columnName(forElementAt path: [String], of composite: NSAttributeDescription) -> String? {
        compositeLeaves(of: composite)?.first { $0.path == path }?.column
    }

    package func elementColumnNames(of composite: NSAttributeDescription) -> [String]? {
        compositeLeaves(of: composite)?.map(\.column)
    }

    /// The element columns of a composite attribute that the store keeps flattened; nil for any other property.
    package func compositeLeaves(of property: NSPropertyDescription) -> [CompositeLeaf]? {
        compositeLeaves.isEmpty ? nil : compositeLeaves[ObjectIdentifier(property)]
    }

    /// Core Data's layout keeps a UUID as its 16 bytes; this project's former layout as text.
    package var storesUUIDsAsBytes: Bool { isAppleLayout }

    package func toManyLink(for relationship: NSRelationshipDescription) -> SQLToManyLink {
        joinTables[ObjectIdentifier(relationship)]!
    }

    /// The name of the unique index of a uniqueness constraint: `Z_<Entity>_UNIQUE_<a>_<b>`.
    static func uniqueIndexName(_ entity: NSEntityDescription, _ constraint: [String]) -> String {
        "Z_\(entity.name)_UNIQUE_" + constraint.joined(separator: "_")
    }

    /// Core Data's unique index for a uniqueness constraint: `Z_<Entity>_UNIQUE_<a>_<b>` on the constrained columns.
    func uniqueIndexStatement(_ entity: NSEntityDescription, _ constraint: [String], dialect: any SQLDialect = SQLiteDialect()) -> String {
        let columns = constraint.compactMap { name in entity.allProperties.first { $0.name == name }.map(columnName(for:)) }
        let name = Self.uniqueIndexName(entity, constraint)
        let collated = columns.map { "\(dialect.quote($0))\(dialect.binaryIndexCollation) ASC" }
        return
            "CREATE UNIQUE INDEX \(dialect.quote(name)) ON \(dialect.quote(tableName(for: entity))) (\(collated.joined(separator: ", ")))"
    }

    /// Core Data's index for a fetch index: `Z_<Entity>_<name>` on its stored properties' columns, in their
    /// directions (nil when none of them is stored, or the index is a spatial one).
    func fetchIndexStatement(_ entity: NSEntityDescription, _ index: NSFetchIndexDescription, dialect: any SQLDialect = SQLiteDialect())
        -> String?
    {
        var columns: [String] = []
        for element in index.elements {
            guard element.collationType == .binary else { return nil }
            let property = entity.allProperties.first { $0.name == element.propertyName }
            guard let property, !property.isTransient, !((property as? NSRelationshipDescription)?.isToMany ?? false),
                !(property is NSFetchedPropertyDescription)
            else { continue }
            columns.append(
                "\(dialect.quote(columnName(for: property)))\(dialect.binaryIndexCollation) \(element.isAscending ? "ASC" : "DESC")")
        }
        guard !columns.isEmpty else { return nil }
        let name = "Z_\(entity.name)_\(index.name)"
        return
            "CREATE INDEX IF NOT EXISTS \(dialect.quote(name)) ON \(dialect.quote(tableName(for: entity))) (\(columns.joined(separator: ", ")))"
    }

    /// The entity and constraint whose unique index covers exactly `columns` of `table`, if any.
    package func uniquenessConstraint(table: String, columns: [String]) -> (entity: NSEntityDescription, constraint: [String])? {
        for entity in model.entities where tableName(for: entity).uppercased() == table.uppercased() {
            for constraint in entity.uniquenessConstraints {
                let mine = constraint.compactMap { name in
                    entity.allProperties.first { $0.name == name }.map { columnName(for: $0).uppercased() }
                }
                if Set(mine) == Set(columns.map { $0.uppercased() }) { return (entity, constraint) }
            }
        }
        return nil
    }

    /// The column keeping an ordered to-many relationship's order, or nil (unordered, or a store that has none).
    package func orderColumn(for relationship: NSRelationshipDescription) -> String? {
        orderColumnByRelationship[ObjectIdentifier(relationship)]
    }

    /// The statements that create the schema.
    package var creationStatements: [String] {
        var statements: [String] = []
        for table in tables {
            var columns = [
                "\(SQLColumns.primaryKey) INTEGER PRIMARY KEY", "\(SQLColumns.entity) INTEGER NOT NULL",
                "\(SQLColumns.version) INTEGER NOT NULL",
            ]
            columns += table.columns.map { "\(sqlQuote($0.name)) \($0.type)" }
            statements.append("CREATE TABLE \(sqlQuote(table.name)) (\(columns.joined(separator: ", ")))")
            // Only a table that holds several entities' rows is filtered by entity number; in any other the index
            // would cost every insert a second B-tree write for nothing.
            if !table.rootEntity.subentities.isEmpty {
                statements.append(
                    "CREATE INDEX \(sqlQuote(table.name + "_Z_ENT_INDEX")) ON \(sqlQuote(table.name)) (\(SQLColumns.entity))")
            }
            for fk in table.foreignKeys {
                statements.append("CREATE INDEX \(sqlQuote(table.name + "_" + fk + "_INDEX")) ON \(sqlQuote(table.name)) (\(sqlQuote(fk)))")
            }
        }
        for entity in model.entities.sorted(by: { $0.entityID < $1.entityID }) {
            for constraint in entity.uniquenessConstraints {
                statements.append(uniqueIndexStatement(entity, constraint))
            }
            statements += entity.indexes.compactMap { fetchIndexStatement(entity, $0) }
        }
        for join in joinTableList {
            statements.append(
                "CREATE TABLE \(sqlQuote(join.name)) (\(sqlQuote(join.sourceColumn)) INTEGER NOT NULL, \(sqlQuote(join.destinationColumn)) INTEGER NOT NULL\(join.orderColumns.map { ", \(sqlQuote($0)) INTEGER" }.joined()), PRIMARY KEY (\(sqlQuote(join.sourceColumn)), \(sqlQuote(join.destinationColumn))))"
            )
            statements.append(
                "CREATE INDEX \(sqlQuote(join.name + "_DEST_INDEX")) ON \(sqlQuote(join.name)) (\(sqlQuote(join.destinationColumn)))")
        }
        return statements
    }
}
