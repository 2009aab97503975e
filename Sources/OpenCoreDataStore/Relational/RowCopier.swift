import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// What a migration did, a line per change, for people (`coredata migrate` prints it).
package struct MigrationReport: Sendable {
    package var changes: [String] = []
}

/// Copies a store's rows into the migrated store along a mapping model, with SQL only, on any SQL back end: the old
/// store's tables are named with `from` in front (SQLite: `src.`, the old file attached; PostgreSQL: the store's schema),
/// the new store's with `into` (SQLite: `main.`; PostgreSQL: the schema the new tables are built in).
struct RowCopier<Connection: RelationalConnection> {
    let source: RelationalSchema
    let destination: RelationalSchema
    let mapping: NSMappingModel
    let db: Connection
    /// The prefixes of the old and the new store's table names (`src.`, `main.`).
    let from: String
    let into: String
    let dialect: any SQLDialect
    /// Each destination entity's source entity and mapping (entities that have one).
    private var pairs: [(to: NSEntityDescription, from: NSEntityDescription, mapping: NSEntityMapping)] = []
    /// What is added to the keys of each source table's rows: nothing, unless the rows of several source tables end
    /// up in one destination table (an entity moved into another's inheritance tree), where their keys must not meet.
    private var offsets: [String: Int64] = [:]

    init(
        source: RelationalSchema, destination: RelationalSchema, mapping: NSMappingModel, db: Connection, from: String, into: String
    ) {
        self.source = source
        self.destination = destination
        self.mapping = mapping
        self.db = db
        self.from = from
        self.into = into
        dialect = db.dialect
        for entityMapping in mapping.entityMappings {
            guard let to = entityMapping.destinationEntityName.flatMap({ destination.model.entitiesByName[$0] }),
                let from = entityMapping.sourceEntityName.flatMap({ source.model.entitiesByName[$0] })
            else { continue }
            pairs.append((to, from, entityMapping))
        }
    }

    private func q(_ name: String) -> String { dialect.quote(name) }

    /// The old store's table `name`, quoted and prefixed.
    private func old(_ name: String) -> String { from + q(name) }

    /// The new store's table `name`, quoted and prefixed.
    private func new(_ name: String) -> String { into + q(name) }

    /// Copies every mapped entity's rows, then the links of to-many relationships, and says what changed.
    mutating func copy(report: inout MigrationReport) throws {
        var feeding: [String: Set<String>] = [:]
        for pair in pairs { feeding[destination.tableName(for: pair.to), default: []].insert(source.tableName(for: pair.from)) }
        // Source tables that share a destination table get key ranges that do not overlap (in name order).
        var next: Int64 = 0
        for table in Set(feeding.values.filter { $0.count > 1 }.joined()).sorted() {
            offsets[table] = next
            next += try db.integer("SELECT COALESCE(MAX(Z_PK), 0) FROM \(old(table))") ?? 0
        }
        for pair in pairs { try insertRows(of: pair.to, from: pair.from, mapping: pair.mapping) }
        for pair in pairs { try copyLinks(of: pair.to, from: pair.from, mapping: pair.mapping) }
        describe(into: &report)
    }

    private func insertRows(of entity: NSEntityDescription, from old: NSEntityDescription, mapping: NSEntityMapping) throws {
        var columns = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version]
        var values = [shifted("s.Z_PK", old), String(entity.entityID), "s.Z_OPT"]
        var arguments: [SQLArgument] = []
        for property in entity.allProperties where !property.isTransient {
            let sourceName = (mapping.attributeMappings + mapping.relationshipMappings).first { $0.name == property.name }?
                .sourcePropertyName
            let sourceProperty = sourceName.flatMap { old.propertiesByName[$0] }
            if let attribute = property as? NSAttributeDescription, let leaves = destination.compositeLeaves(of: attribute) {
                try copyComposite(
                    attribute, leaves: leaves, from: sourceProperty as? NSAttributeDescription, columns: &columns, values: &values)
            } else if let attribute = property as? NSAttributeDescription {
                var value = (sourceProperty as? NSAttributeDescription).map { converted($0, to: attribute) } ?? "NULL"
                if attribute.defaultValue != .null, value == "NULL" || !attribute.isOptional {
                    value = value == "NULL" ? "?" : "COALESCE(\(value), ?)"
                    arguments.append(SQLStorage.encode(attribute.defaultValue, as: attribute.attributeType, uuidBytes: true))
                }
                columns.append(destination.columnName(for: attribute))
                values.append(value)
            } else if let relationship = property as? NSRelationshipDescription, !relationship.isToMany {
                let oldRelationship = sourceProperty as? NSRelationshipDescription
                let key = try foreignKey(relationship, from: oldRelationship, in: old)
                columns.append(destination.columnName(for: relationship))
                values.append(key.map { shifted($0, oldRelationship?.destinationEntity) } ?? "NULL")
                if let entityColumn = destination.entityColumnName(for: relationship) {
                    columns.append(entityColumn)
                    values.append(key.map { entityNumber(of: $0, pointedToBy: sourceProperty as? NSRelationshipDescription) } ?? "NULL")
                }
            }
        }
        // A table of one entity is that entity's whole (as Core Data reads it, whatever a row's Z_ENT says).
        let filter = old.superentity == nil && old.subentities.isEmpty ? "" : " WHERE s.Z_ENT = \(old.entityID)"
        try db.execute(
            "INSERT INTO \(new(destination.tableName(for: entity))) (\(columns.map(q).joined(separator: ", "))) SELECT \(values.joined(separator: ", ")) FROM \(self.old(source.tableName(for: old))) s\(filter)",
            arguments)
    }

    /// A source key expression of a row of `entity`'s source table, with that table's offset added.
    private func shifted(_ key: String, _ entity: NSEntityDescription?) -> String {
        guard let entity, let offset = offsets[source.tableName(for: entity)], offset != 0 else { return key }
        return "(\(key) + \(offset))"
    }

    /// A composite's element columns, each taken from the source composite's element at the same key path (NULL for a
    /// new element).
    private func copyComposite(
        _ attribute: NSAttributeDescription, leaves: [CompositeLeaf], from old: NSAttributeDescription?, columns: inout [String],
        values: inout [String]
    ) throws {
        let oldLeaves = old.flatMap { source.compositeLeaves(of: $0) }
        if let old, old.attributeType == .compositeAttributeType, oldLeaves == nil {
            // A store of this project's from before composites were flattened keeps each composite archived in one
            // column, which SQL cannot take apart: refuse rather than lose the values.
            throw CoreDataError(
                .migration,
                "'\(attribute.entity?.name ?? "").\(attribute.name)' is kept in this store as one archived column (this project's layout before Core Data's per-element columns); migrating it to another model version is not supported. Open the store with its own model version and copy the values out (coredata fetch) first.",
                entityName: attribute.entity?.name, key: attribute.name)
        }
        for leaf in leaves {
            columns.append(leaf.column)
            guard let match = oldLeaves?.first(where: { $0.path == leaf.path }) else {
                values.append("NULL")
                continue
            }
            values.append(converted(match.element, to: leaf.element, column: match.column))
        }
    }

    /// A source attribute's column (or the given one), converted to the destination attribute's type.
    private func converted(_ old: NSAttributeDescription, to new: NSAttributeDescription, column name: String? = nil) -> String {
        let column = "s." + q(name ?? source.columnName(for: old))
        if old.attributeType == .UUIDAttributeType, new.attributeType == .UUIDAttributeType, !source.storesUUIDsAsBytes {
            return "ocd_uuid_bytes(\(column))"
        }
        guard old.attributeType != new.attributeType else { return column }
        switch new.attributeType {
        case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType:
            return "CAST(\(column) AS \(dialect.columnType("INTEGER")))"
        case .doubleAttributeType, .floatAttributeType: return dialect.castToReal(column)
        case .booleanAttributeType: return "CASE WHEN \(column) IS NULL THEN NULL WHEN \(column) != 0 THEN 1 ELSE 0 END"
        case .stringAttributeType: return "CAST(\(column) AS TEXT)"
        default: return column
        }
    }

    /// The source value a destination to-one takes its key from, or nil for a new relationship: the source to-one's
    /// column, or, for a to-many made to-one, its first destination (in its order).
    private func foreignKey(_ relationship: NSRelationshipDescription, from old: NSRelationshipDescription?, in entity: NSEntityDescription)
        throws -> String?
    {
        guard let old else { return nil }
        guard old.isToMany else {
            let column = "s." + q(source.columnName(for: old))
            switch kept(relationship, from: old) {
            case .all: return column
            case .none: return nil
            case .some(let table, let ids):
                return "(CASE WHEN \(column) IN (SELECT Z_PK FROM \(from)\(table) WHERE Z_ENT IN (\(ids))) THEN \(column) END)"
            }
        }
        guard let condition = keptCondition("l.b", relationship, from: old) else { return nil }
        return
            "(SELECT l.b FROM (\(links(of: old, in: entity))) l WHERE l.a = s.Z_PK\(condition) ORDER BY \(dialect.orderTerm("l.o", ascending: true)), l.b LIMIT 1)"
    }

    /// Which objects a relationship's links may still point at after the migration.
    enum KeptTargets {
        /// Every object the source relationship pointed at.
        case all
        /// None: the destination became an entity the old objects are not (they are of another kind now).
        case none
        /// Those whose source row, in `table`, has one of the entity numbers `ids` (a comma-separated list).
        case some(table: String, ids: String)
    }

    /// The objects of `old`'s destination that stay linked by `relationship`: those whose entity maps to the new
    /// destination entity or one of its subentities.
    func kept(_ relationship: NSRelationshipDescription, from old: NSRelationshipDescription) -> KeptTargets {
        guard let oldTarget = old.destinationEntity, let newTarget = relationship.destinationEntity else { return .all }
        let candidates = oldTarget.selfAndDescendants
        let kept = candidates.filter { candidate in pairs.first { $0.from === candidate }?.to.isKindOf(entity: newTarget) ?? false }
        if kept.count == candidates.count { return .all }
        if kept.isEmpty { return .none }
        return .some(table: q(source.tableName(for: oldTarget)), ids: kept.map { String($0.entityID) }.joined(separator: ", "))
    }

    /// The SQL condition (" AND …", or "" for every link) a link's source destination key `key` must meet to be kept,
    /// or nil when no link is.
    private func keptCondition(_ key: String, _ relationship: NSRelationshipDescription, from old: NSRelationshipDescription) -> String? {
        switch kept(relationship, from: old) {
        case .all: return ""
        case .none: return nil
        case .some(let table, let ids): return " AND \(key) IN (SELECT Z_PK FROM \(from)\(table) WHERE Z_ENT IN (\(ids)))"
        }
    }

    /// The links of a source relationship as rows `(a, b, o)`: owner's key, destination's key, order (or NULL), from
    /// however the source keeps them (a to-one's column, an inverse or hidden foreign key, a join table).
    private func links(of relationship: NSRelationshipDescription, in entity: NSEntityDescription) -> String {
        // A typed NULL: an untyped one would be text to PostgreSQL, which an order column does not take.
        let noOrder = "CAST(NULL AS \(dialect.columnType("INTEGER")))"
        guard relationship.isToMany else {
            let column = q(source.columnName(for: relationship))
            let ids = entity.selfAndDescendants.map { String($0.entityID) }.joined(separator: ", ")
            return
                "SELECT x.Z_PK AS a, x.\(column) AS b, \(noOrder) AS o FROM \(old(source.tableName(for: entity))) x WHERE x.\(column) IS NOT NULL AND x.Z_ENT IN (\(ids))"
        }
        let order = source.orderColumn(for: relationship).map { "x." + q($0) } ?? noOrder
        switch source.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            let table = old(source.tableName(for: relationship.destinationEntity ?? entity))
            return "SELECT x.\(q(column)) AS a, x.Z_PK AS b, \(order) AS o FROM \(table) x WHERE x.\(q(column)) IS NOT NULL"
        case .joinTable(let table, let from, let to):
            return "SELECT x.\(q(from)) AS a, x.\(q(to)) AS b, \(order) AS o FROM \(old(table)) x"
        }
    }

    /// The destination entity number of the row `key` points at: its source `Z_ENT`, mapped.
    private func entityNumber(of key: String, pointedToBy old: NSRelationshipDescription?) -> String {
        guard let target = old?.destinationEntity else { return "NULL" }
        let cases = pairs.map { "WHEN \($0.from.entityID) THEN \($0.to.entityID)" }.joined(separator: " ")
        return
            "CASE (SELECT t.Z_ENT FROM \(self.old(source.tableName(for: target))) t WHERE t.Z_PK = \(key)) \(cases) ELSE NULL END"
    }

    /// The links of `entity`'s own to-many relationships, from however the source kept them (join table, inverse
    /// foreign key, hidden foreign key) to however the destination keeps them, with their order.
    private func copyLinks(of entity: NSEntityDescription, from old: NSEntityDescription, mapping: NSEntityMapping) throws {
        for relationship in entity.properties.compactMap({ $0 as? NSRelationshipDescription })
        where relationship.isToMany && !relationship.isTransient {
            guard let name = mapping.relationshipMappings.first(where: { $0.name == relationship.name })?.sourcePropertyName,
                let oldRelationship = old.propertiesByName[name] as? NSRelationshipDescription, let target = relationship.destinationEntity
            else { continue }
            guard let condition = keptCondition("k.b", relationship, from: oldRelationship) else { continue }
            let shiftedLinks =
                "SELECT \(shifted("k.a", old)) AS a, \(shifted("k.b", oldRelationship.destinationEntity)) AS b, k.o AS o FROM (\(links(of: oldRelationship, in: old))) k WHERE \(dialect.true)\(condition)"
            try writeLinks(shiftedLinks, relationship, owner: entity, target: target)
        }
    }

    private func writeLinks(
        _ links: String, _ relationship: NSRelationshipDescription, owner: NSEntityDescription, target: NSEntityDescription
    )
        throws
    {
        let targetTable = new(destination.tableName(for: target))
        let order = destination.orderColumn(for: relationship)
        switch destination.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            // The inverse's key was copied with its rows; a hidden key (no inverse) is set here.
            if relationship.inverseRelationship == nil {
                try db.execute("UPDATE \(targetTable) SET \(q(column)) = (SELECT l.a FROM (\(links)) l WHERE l.b = \(targetTable).Z_PK)")
            }
            if let order {
                try db.execute("UPDATE \(targetTable) SET \(q(order)) = (SELECT l.o FROM (\(links)) l WHERE l.b = \(targetTable).Z_PK)")
            }
        case .joinTable(let table, let from, let to):
            let ownerTable = new(destination.tableName(for: owner))
            // (The WHERE clause also keeps SQLite from reading ON CONFLICT as a join's ON.)
            try db.execute(
                "INSERT INTO \(new(table)) (\(q(from)), \(q(to))) SELECT l.a, l.b FROM (\(links)) l WHERE l.a IN (SELECT Z_PK FROM \(ownerTable)) AND l.b IN (SELECT Z_PK FROM \(targetTable)) ON CONFLICT DO NOTHING"
            )
            if let order {
                try db.execute(
                    "UPDATE \(new(table)) SET \(q(order)) = (SELECT l.o FROM (\(links)) l WHERE l.a = \(q(from)) AND l.b = \(q(to)))")
            }
        }
    }

    /// The statement mapping the entity numbers the changes of persistent history name (`ZENTITY` of `ACHANGE`, the
    /// table prefixed with `prefix`) to the new ones; nil when no entity is mapped.
    func historyEntityRemap(prefix: String) -> String? {
        let cases = pairs.map { "WHEN \($0.from.entityID) THEN \($0.to.entityID)" }.joined(separator: " ")
        guard !cases.isEmpty else { return nil }
        return "UPDATE \(prefix)ACHANGE SET ZENTITY = CASE ZENTITY \(cases) ELSE ZENTITY END"
    }

    /// Sets each new table's `Z_PRIMARYKEY` maximum to its largest key.
    func updateKeyMaxima() throws {
        for table in destination.tables {
            try db.execute(
                "UPDATE \(new("Z_PRIMARYKEY")) SET Z_MAX = (SELECT COALESCE(MAX(Z_PK), 0) FROM \(new(table.name))) WHERE Z_ENT = ?",
                [.integer(Int64(table.rootEntity.entityID))])
        }
    }

    /// Throws when a migrated row lacks a value the destination model requires (a new required attribute without a
    /// default, an optional one made required while some rows hold none).
    func validate() throws {
        for entity in destination.model.entities {
            for property in entity.properties where !property.isTransient && !property.isOptional {
                guard property is NSAttributeDescription || !((property as? NSRelationshipDescription)?.isToMany ?? true) else { continue }
                let table = new(destination.tableName(for: entity))
                let ids = entity.selfAndDescendants.map { String($0.entityID) }.joined(separator: ", ")
                let missing =
                    try db.integer(
                        "SELECT COUNT(*) FROM \(table) WHERE Z_ENT IN (\(ids)) AND \(q(destination.columnName(for: property))) IS NULL")
                    ?? 0
                guard missing == 0 else {
                    throw CoreDataError(
                        .migration,
                        "\(missing) \(entity.name) object(s) would have no value for '\(property.name)', which this model version requires\(property is NSAttributeDescription ? " and gives no default" : ""); the store was not changed.",
                        entityName: entity.name, key: property.name)
                }
            }
        }
    }

    /// The report's lines: entities added and removed, and each mapped entity's new, removed, renamed and retyped
    /// properties.
    private func describe(into report: inout MigrationReport) {
        for entityMapping in mapping.entityMappings {
            switch (entityMapping.sourceEntityName, entityMapping.destinationEntityName) {
            case (nil, let added?): report.changes.append("added entity \(added)")
            case (let removed?, nil): report.changes.append("removed entity \(removed) and its objects")
            case (let from?, let to?):
                if from != to { report.changes.append("renamed entity \(from) to \(to)") }
                guard let entity = destination.model.entitiesByName[to], let old = source.model.entitiesByName[from] else { continue }
                let mapped = entityMapping.attributeMappings + entityMapping.relationshipMappings
                for property in mapped {
                    guard let name = property.sourcePropertyName else {
                        report.changes.append("added \(to).\(property.name)")
                        continue
                    }
                    if name != property.name { report.changes.append("renamed \(to).\(name) to \(property.name)") }
                    if let a = old.propertiesByName[name] as? NSRelationshipDescription,
                        let b = entity.propertiesByName[property.name] as? NSRelationshipDescription
                    {
                        switch kept(b, from: a) {
                        case .all: break
                        case .none:
                            report.changes.append(
                                "\(to).\(property.name) now points to \(b.destinationEntityName), not \(a.destinationEntityName): its links were dropped"
                            )
                        case .some:
                            report.changes.append(
                                "\(to).\(property.name) now points to \(b.destinationEntityName), not \(a.destinationEntityName): links to other kinds of object were dropped"
                            )
                        }
                    }
                    if let a = old.propertiesByName[name] as? NSAttributeDescription,
                        let b = entity.propertiesByName[property.name] as? NSAttributeDescription, a.attributeType != b.attributeType
                    {
                        report.changes.append("changed \(to).\(property.name) from \(a.attributeType) to \(b.attributeType)")
                    }
                }
                let kept = Set(mapped.compactMap(\.sourcePropertyName))
                for property in old.allProperties where !property.isTransient && !kept.contains(property.name) {
                    report.changes.append("removed \(from).\(property.name)")
                }
            default: continue
            }
        }
    }
}
