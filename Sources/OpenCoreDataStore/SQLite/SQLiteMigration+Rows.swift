import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Copies a store's rows into the migrated store along a mapping model, with SQL only (`src` is the old store,
/// attached; `main` the new one).
struct RowCopier {
    let source: RelationalSchema
    let destination: RelationalSchema
    let mapping: NSMappingModel
    let db: Database
    /// Each destination entity's source entity and mapping (entities that have one).
    private var pairs: [(to: NSEntityDescription, from: NSEntityDescription, mapping: NSEntityMapping)] = []
    /// What is added to the keys of each source table's rows: nothing, unless the rows of several source tables end
    /// up in one destination table (an entity moved into another's inheritance tree), where their keys must not meet.
    private var offsets: [String: Int64] = [:]

    init(source: RelationalSchema, destination: RelationalSchema, mapping: NSMappingModel, db: Database) {
        self.source = source
        self.destination = destination
        self.mapping = mapping
        self.db = db
        for entityMapping in mapping.entityMappings {
            guard let to = entityMapping.destinationEntityName.flatMap({ destination.model.entitiesByName[$0] }),
                let from = entityMapping.sourceEntityName.flatMap({ source.model.entitiesByName[$0] })
            else { continue }
            pairs.append((to, from, entityMapping))
        }
    }

    /// Copies every mapped entity's rows, then the links of to-many relationships, and says what changed.
    mutating func copy(report: inout SQLiteMigration.Report) throws {
        db.add(function: Self.uuidBytes)
        var feeding: [String: Set<String>] = [:]
        for pair in pairs { feeding[destination.tableName(for: pair.to), default: []].insert(source.tableName(for: pair.from)) }
        // Source tables that share a destination table get key ranges that do not overlap (in name order).
        var next: Int64 = 0
        for table in Set(feeding.values.filter { $0.count > 1 }.joined()).sorted() {
            offsets[table] = next
            next += try Int64.fetchOne(db, sql: "SELECT IFNULL(MAX(Z_PK), 0) FROM src.\(sqlQuote(table))") ?? 0
        }
        for pair in pairs { try insertRows(of: pair.to, from: pair.from, mapping: pair.mapping) }
        for pair in pairs { try copyLinks(of: pair.to, from: pair.from, mapping: pair.mapping) }
        describe(into: &report)
    }

    /// `ocd_uuid_bytes(text)`: a UUID written as text (this project's former layout) as its 16 bytes.
    private static let uuidBytes = DatabaseFunction("ocd_uuid_bytes", argumentCount: 1, pure: true) { values in
        guard let text = String.fromDatabaseValue(values[0]), let uuid = UUID(uuidString: text) else { return values[0] }
        return withUnsafeBytes(of: uuid.uuid) { Data($0) }
    }

    private func insertRows(of entity: NSEntityDescription, from old: NSEntityDescription, mapping: NSEntityMapping) throws {
        var columns = [SQLColumns.primaryKey, SQLColumns.entity, SQLColumns.version]
        var values = [shifted("s.Z_PK", old), String(entity.entityID), "s.Z_OPT"]
        var arguments: [(any DatabaseValueConvertible)?] = []
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
                    arguments.append(SQLStorage.encode(attribute.defaultValue, as: attribute.attributeType, uuidBytes: true).databaseValue)
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
            sql:
                "INSERT INTO main.\(sqlQuote(destination.tableName(for: entity))) (\(columns.map(sqlQuote).joined(separator: ", "))) SELECT \(values.joined(separator: ", ")) FROM src.\(sqlQuote(source.tableName(for: old))) s\(filter)",
            arguments: StatementArguments(arguments))
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
        let column = "s." + sqlQuote(name ?? source.columnName(for: old))
        if old.attributeType == .UUIDAttributeType, new.attributeType == .UUIDAttributeType, !source.storesUUIDsAsBytes {
            return "ocd_uuid_bytes(\(column))"
        }
        guard old.attributeType != new.attributeType else { return column }
        switch new.attributeType {
        case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType: return "CAST(\(column) AS INTEGER)"
        case .doubleAttributeType, .floatAttributeType: return "CAST(\(column) AS REAL)"
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
            let column = "s." + sqlQuote(source.columnName(for: old))
            switch kept(relationship, from: old) {
            case .all: return column
            case .none: return nil
            case .some(let table, let ids):
                return "(CASE WHEN \(column) IN (SELECT Z_PK FROM src.\(table) WHERE Z_ENT IN (\(ids))) THEN \(column) END)"
            }
        }
        guard let condition = keptCondition("l.b", relationship, from: old) else { return nil }
        return "(SELECT l.b FROM (\(links(of: old, in: entity))) l WHERE l.a = s.Z_PK\(condition) ORDER BY l.o, l.b LIMIT 1)"
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
        return .some(table: sqlQuote(source.tableName(for: oldTarget)), ids: kept.map { String($0.entityID) }.joined(separator: ", "))
    }

    /// The SQL condition (" AND …", or "" for every link) a link's source destination key `key` must meet to be kept,
    /// or nil when no link is.
    private func keptCondition(_ key: String, _ relationship: NSRelationshipDescription, from old: NSRelationshipDescription) -> String? {
        switch kept(relationship, from: old) {
        case .all: return ""
        case .none: return nil
        case .some(let table, let ids): return " AND \(key) IN (SELECT Z_PK FROM src.\(table) WHERE Z_ENT IN (\(ids)))"
        }
    }

    /// The links of a source relationship as rows `(a, b, o)`: owner's key, destination's key, order (or NULL), from
    /// however the source keeps them (a to-one's column, an inverse or hidden foreign key, a join table).
    private func links(of relationship: NSRelationshipDescription, in entity: NSEntityDescription) -> String {
        guard relationship.isToMany else {
            let column = sqlQuote(source.columnName(for: relationship))
            let ids = entity.selfAndDescendants.map { String($0.entityID) }.joined(separator: ", ")
            return
                "SELECT x.Z_PK AS a, x.\(column) AS b, NULL AS o FROM src.\(sqlQuote(source.tableName(for: entity))) x WHERE x.\(column) IS NOT NULL AND x.Z_ENT IN (\(ids))"
        }
        let order = source.orderColumn(for: relationship).map { "x." + sqlQuote($0) } ?? "NULL"
        switch source.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            let table = sqlQuote(source.tableName(for: relationship.destinationEntity ?? entity))
            return
                "SELECT x.\(sqlQuote(column)) AS a, x.Z_PK AS b, \(order) AS o FROM src.\(table) x WHERE x.\(sqlQuote(column)) IS NOT NULL"
        case .joinTable(let table, let from, let to):
            return "SELECT x.\(sqlQuote(from)) AS a, x.\(sqlQuote(to)) AS b, \(order) AS o FROM src.\(sqlQuote(table)) x"
        }
    }

    /// The destination entity number of the row `key` points at: its source `Z_ENT`, mapped.
    private func entityNumber(of key: String, pointedToBy old: NSRelationshipDescription?) -> String {
        guard let target = old?.destinationEntity else { return "NULL" }
        let cases = pairs.map { "WHEN \($0.from.entityID) THEN \($0.to.entityID)" }.joined(separator: " ")
        return
            "CASE (SELECT t.Z_ENT FROM src.\(sqlQuote(source.tableName(for: target))) t WHERE t.Z_PK = \(key)) \(cases) ELSE NULL END"
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
                "SELECT \(shifted("k.a", old)) AS a, \(shifted("k.b", oldRelationship.destinationEntity)) AS b, k.o AS o FROM (\(links(of: oldRelationship, in: old))) k WHERE 1\(condition)"
            try writeLinks(shiftedLinks, relationship, owner: entity, target: target)
        }
    }

    private func writeLinks(
        _ links: String, _ relationship: NSRelationshipDescription, owner: NSEntityDescription, target: NSEntityDescription
    )
        throws
    {
        let targetTable = sqlQuote(destination.tableName(for: target))
        let order = destination.orderColumn(for: relationship)
        switch destination.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            // The inverse's key was copied with its rows; a hidden key (no inverse) is set here.
            if relationship.inverseRelationship == nil {
                try db.execute(
                    sql:
                        "UPDATE main.\(targetTable) SET \(sqlQuote(column)) = (SELECT l.a FROM (\(links)) l WHERE l.b = main.\(targetTable).Z_PK)"
                )
            }
            if let order {
                try db.execute(
                    sql:
                        "UPDATE main.\(targetTable) SET \(sqlQuote(order)) = (SELECT l.o FROM (\(links)) l WHERE l.b = main.\(targetTable).Z_PK)"
                )
            }
        case .joinTable(let table, let from, let to):
            let ownerTable = sqlQuote(destination.tableName(for: owner))
            try db.execute(
                sql:
                    "INSERT OR IGNORE INTO main.\(sqlQuote(table)) (\(sqlQuote(from)), \(sqlQuote(to))) SELECT l.a, l.b FROM (\(links)) l WHERE l.a IN (SELECT Z_PK FROM main.\(ownerTable)) AND l.b IN (SELECT Z_PK FROM main.\(targetTable))"
            )
            if let order {
                try db.execute(
                    sql:
                        "UPDATE main.\(sqlQuote(table)) SET \(sqlQuote(order)) = (SELECT l.o FROM (\(links)) l WHERE l.a = \(sqlQuote(from)) AND l.b = \(sqlQuote(to)))"
                )
            }
        }
    }

    /// Core Data's persistent-history tables (`ATRANSACTION`, `ACHANGE`, `ATRANSACTIONSTRING`) come along as they are
    /// (their own tables, indexes and `Z_PRIMARYKEY` rows), the entity numbers a change names mapped to the new ones.
    func copyHistory() throws {
        let tables = try String.fetchAll(
            db, sql: "SELECT name FROM src.sqlite_master WHERE type = 'table' AND name IN ('ATRANSACTION', 'ACHANGE', 'ATRANSACTIONSTRING')"
        )
        guard !tables.isEmpty else { return }
        for table in tables {
            guard
                let create = try String.fetchOne(
                    db, sql: "SELECT sql FROM src.sqlite_master WHERE type = 'table' AND name = ?", arguments: [table])
            else { continue }
            try db.execute(sql: create)
            try db.execute(sql: "INSERT INTO main.\(sqlQuote(table)) SELECT * FROM src.\(sqlQuote(table))")
            for index in try String.fetchAll(
                db, sql: "SELECT sql FROM src.sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", arguments: [table])
            {
                try db.execute(sql: index)
            }
        }
        if tables.contains("ACHANGE"), try db.columns(in: "ACHANGE").contains(where: { $0.name.uppercased() == "ZENTITY" }) {
            let cases = pairs.map { "WHEN \($0.from.entityID) THEN \($0.to.entityID)" }.joined(separator: " ")
            if !cases.isEmpty { try db.execute(sql: "UPDATE main.ACHANGE SET ZENTITY = CASE ZENTITY \(cases) ELSE ZENTITY END") }
        }
        try db.execute(
            sql: "INSERT OR REPLACE INTO main.Z_PRIMARYKEY SELECT * FROM src.Z_PRIMARYKEY WHERE Z_ENT >= 16000 AND Z_ENT < 17000")
    }

    /// Throws when a migrated row lacks a value the destination model requires (a new required attribute without a
    /// default, an optional one made required while some rows hold none).
    func validate() throws {
        for entity in destination.model.entities {
            for property in entity.properties where !property.isTransient && !property.isOptional {
                guard property is NSAttributeDescription || !((property as? NSRelationshipDescription)?.isToMany ?? true) else { continue }
                let table = sqlQuote(destination.tableName(for: entity))
                let ids = entity.selfAndDescendants.map { String($0.entityID) }.joined(separator: ", ")
                let missing =
                    try Int.fetchOne(
                        db,
                        sql:
                            "SELECT COUNT(*) FROM main.\(table) WHERE Z_ENT IN (\(ids)) AND \(sqlQuote(destination.columnName(for: property))) IS NULL"
                    ) ?? 0
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
    private func describe(into report: inout SQLiteMigration.Report) {
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
