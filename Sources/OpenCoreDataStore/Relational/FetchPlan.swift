import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// A fetch request as SQL, piece by piece — the table and joins, the filter with its arguments, the order and the
/// window — and the statements each kind of result runs, in one dialect.
///
/// A plan is pure: building one reads the model and the schema, never a database, so the SQL a request becomes can be
/// compared word for word per dialect.
package struct FetchPlan {
    var compiler: SQLPredicateCompiler
    let dialect: any SQLDialect
    let table: RelationalSchema.Table
    /// ` WHERE …`, or empty.
    let whereClause: String
    let arguments: [SQLArgument]
    /// The `ORDER BY` terms (without the keyword): the request's sorts, then the primary key.
    let order: String
    let window: String
    /// The only entity whose rows the query can return, when the table holds no other (its rows' `Z_ENT` need not be
    /// read, so an index on the sort columns covers the query).
    let onlyEntity: NSEntityDescription?

    /// Plans `request` on `schema`'s tables.
    ///
    /// - Throws: `CoreDataError(.invalidFetchRequest)` for a predicate or sort the compiler refuses.
    package init(_ request: StoreFetchRequest, schema: RelationalSchema, dialect: any SQLDialect) throws {
        let entity = request.entity
        var compiler = SQLPredicateCompiler(entity: entity, mapping: schema, dialect: dialect)
        var whereParts: [String] = []
        var arguments: [SQLArgument] = []
        let table = schema.table(for: entity)
        let entities = request.includesSubentities ? entity.selfAndDescendants : [entity]
        let tableEntityCount = RelationalSchema.treeOrder(table.rootEntity).count
        if entities.count != tableEntityCount {
            whereParts.append("t0.\(SQLColumns.entity) IN (\(entities.map { String($0.entityID) }.joined(separator: ", ")))")
        }
        if let predicate = request.predicate {
            let fragment = try compiler.compile(predicate)
            whereParts.append(fragment.sql)
            arguments += fragment.arguments
        }
        // (Grouped dictionaries sort by their columns, which `groupedSQL` compiles.)
        let grouped: Bool
        if case .grouped = request.resultKind { grouped = true } else { grouped = false }
        let order =
            try compiler.orderTerms(grouped ? [] : request.sortDescriptors) + [
                dialect.orderTerm("t0.\(SQLColumns.primaryKey)", ascending: true)
            ]
        self.compiler = compiler
        self.dialect = dialect
        self.table = table
        whereClause = whereParts.isEmpty ? "" : " WHERE " + whereParts.joined(separator: " AND ")
        self.arguments = arguments
        self.order = order.joined(separator: ", ")
        window = dialect.window(limit: request.fetchLimit, offset: request.fetchOffset)
        onlyEntity = tableEntityCount == 1 ? table.rootEntity : nil
    }

    /// The table and its joins.
    var from: String { ([dialect.quote(table.name) + " t0"] + compiler.joins).joined(separator: " ") }
    /// The columns that make a row's object ID.
    var idColumns: String { onlyEntity == nil ? "t0.\(SQLColumns.primaryKey), t0.\(SQLColumns.entity)" : "t0.\(SQLColumns.primaryKey)" }

    /// How many rows the request matches (within its window).
    var countSQL: String {
        dialect.finalize(
            "SELECT COUNT(*) FROM (SELECT t0.\(SQLColumns.primaryKey) FROM \(from)\(whereClause)\(window)) AS matched")
    }

    /// The matching rows' object IDs, in order.
    var objectIDsSQL: String { dialect.finalize("SELECT \(idColumns) FROM \(from)\(whereClause) ORDER BY \(order)\(window)") }

    /// The matching rows' primary keys, as a subquery of a larger statement (not finalized: it goes inside one).
    var matchingKeysSubquery: String { "SELECT t0.\(SQLColumns.primaryKey) FROM \(from)\(whereClause)" }

    /// The matching rows' IDs without order or window (what batch requests change).
    var matchingIDsSQL: String { dialect.finalize("SELECT \(idColumns) FROM \(from)\(whereClause)") }

    /// The matching rows whole (`selectColumns`: the table's columns, as `RelationalCore.selectColumns` lists them).
    func rowsSQL(selectColumns: String) -> String {
        dialect.finalize("SELECT \(selectColumns) FROM \(from)\(whereClause) ORDER BY \(order)\(window)")
    }

    /// One column per key path, and each column's attribute type (nil: a to-one's destination key).
    mutating func valueColumns(_ keyPaths: [String]) throws -> [(sql: String, type: NSAttributeType?)] {
        var columns: [(sql: String, type: NSAttributeType?)] = []
        for keyPath in keyPaths { columns.append(try compiler.valueExpression(forKeyPath: keyPath)) }
        return columns
    }

    /// The values of `keyPaths` per matching row (distinct rows unordered when `distinct`; the request's offset and
    /// limit only when `windowed`).
    mutating func dictionariesSQL(_ keyPaths: [String], distinct: Bool, windowed: Bool = true) throws -> (
        sql: String, types: [NSAttributeType?]
    ) {
        let columns = try valueColumns(keyPaths)
        let select = columns.map(\.sql).joined(separator: ", ")
        let orderClause = distinct ? "" : " ORDER BY \(order)"
        let sql = "SELECT \(distinct ? "DISTINCT " : "")\(select) FROM \(from)\(whereClause)\(orderClause)\(windowed ? window : "")"
        return (dialect.finalize(sql), columns.map(\.type))
    }

    /// A dictionary fetch of computed columns (see `StoreFetchRequest.GroupedQuery`): the statement, its arguments
    /// in text order, and the columns as compiled.
    ///
    /// With an aggregate or a grouping, each column must aggregate or be one of the values grouped by (as Core Data
    /// requires), and the sorts must name columns or grouped values; groups come in the sorts' order, then in the
    /// order of the values grouped by.
    ///
    /// - Throws: `CoreDataError(.invalidFetchRequest)` for a column that neither aggregates nor is grouped by, a
    ///   sort on something else, a `HAVING` predicate without grouping, what compiling a column or a predicate throws.
    mutating func groupedSQL(_ query: StoreFetchRequest.GroupedQuery, sorts: [FetchSortDescriptor], distinct: Bool) throws
        -> (sql: String, arguments: [SQLArgument], columns: [SQLPredicateCompiler.Column])
    {
        let columns = try query.columns.map { try compiler.column($0.expression) }
        let groups = try query.groupBy.map { group -> SQLPredicateCompiler.Column in
            let column = try compiler.column(group.expression)
            guard !column.isAggregate else {
                throw CoreDataError(
                    .invalidFetchRequest, "propertiesToGroupBy holds '\(group.name)', an aggregate; group by values of each row.",
                    entityName: table.rootEntity.name)
            }
            return column
        }
        let aggregates = columns.contains(where: \.isAggregate)
        let grouped = aggregates || !groups.isEmpty
        if grouped {
            for (column, compiled) in zip(query.columns, columns) where !compiled.isAggregate {
                guard query.groupBy.contains(where: { $0.name == column.name || $0.expression == column.expression }) else {
                    throw CoreDataError(
                        .invalidFetchRequest,
                        "propertiesToFetch holds '\(column.name)', which is neither an aggregate nor in propertiesToGroupBy: "
                            + "with grouping or an aggregate, every fetched property must be one or the other.",
                        entityName: table.rootEntity.name, key: column.name)
                }
            }
        }
        // An object column whose entity has subentities also reads the object's `Z_ENT`, after the columns (one for
        // each such column, in order: `RelationalCore` reads them so): its row's own for `SELF`, the destination row's
        // for a to-one relationship's key.
        var selected = columns.map(\.sql)
        for column in columns where column.type == nil && !column.isAggregate {
            guard let entity = column.entity, !entity.subentities.isEmpty else { continue }
            let key = ".\(SQLColumns.primaryKey)"
            if column.sql.hasSuffix(key) {
                selected.append(String(column.sql.dropLast(key.count)) + ".\(SQLColumns.entity)")
            } else {
                let table = dialect.quote(compiler.mapping.tableName(for: entity))
                selected.append(
                    "(SELECT d.\(SQLColumns.entity) FROM \(table) d WHERE d.\(SQLColumns.primaryKey) = \(column.sql))")
            }
        }
        // The columns by name, for HAVING and the sorts (a fetched column first, then a grouped one).
        let named = Dictionary(zip(query.columns + query.groupBy, columns + groups).map { ($0.0.name, $0.1) }) { first, _ in first }
        var having: SQLPredicateCompiler.Fragment?
        if let predicate = query.having {
            guard grouped else {
                throw CoreDataError(
                    .invalidFetchRequest, "havingPredicate needs propertiesToGroupBy or an aggregate to filter groups.",
                    entityName: table.rootEntity.name)
            }
            having = try compiler.compileHaving(predicate, columns: named)
        }
        // The sorts: by a fetched or grouped column named by the sort's key; without grouping, else by the entity's
        // key paths (then the primary key, as every fetch); grouped, then by the values grouped by.
        var terms: [String] = []
        var orderArguments: [SQLArgument] = []
        for sort in sorts {
            guard let column = named[sort.key] else {
                guard !grouped else {
                    throw CoreDataError(
                        .invalidFetchRequest,
                        "The sort descriptor '\(sort.key)' names no fetched or grouped property; grouped results sort by those only.",
                        entityName: table.rootEntity.name, key: sort.key)
                }
                terms += try compiler.orderTerms([sort])
                continue
            }
            var term = column.sql
            if column.type == .decimalAttributeType { term = dialect.castToReal(term) }
            if column.type == .stringAttributeType { term = dialect.sortExpression(term, comparison: sort.comparison) }
            terms.append(dialect.orderTerm(term, ascending: sort.ascending))
            orderArguments += column.arguments
        }
        if grouped {
            for group in groups {
                terms.append(dialect.orderTerm(group.sql, ascending: true))
                orderArguments += group.arguments
            }
        } else {
            terms.append(dialect.orderTerm("t0.\(SQLColumns.primaryKey)", ascending: true))
        }
        // Put together once every part has added its joins, the arguments in text order.
        var sql = "SELECT \(distinct ? "DISTINCT " : "")\(selected.joined(separator: ", ")) FROM \(from)\(whereClause)"
        var arguments = columns.flatMap(\.arguments) + self.arguments
        if !groups.isEmpty {
            // (Each `Z_ENT` read is grouped by too.)
            sql += " GROUP BY " + (groups.map(\.sql) + selected[columns.count...]).joined(separator: ", ")
            arguments += groups.flatMap(\.arguments)
        }
        if let having {
            sql += " HAVING " + having.sql
            arguments += having.arguments
        }
        // (SELECT DISTINCT cannot sort by what it does not select: its rows come in the engine's order.)
        if !terms.isEmpty && !(distinct && !grouped) {
            sql += " ORDER BY " + terms.joined(separator: ", ")
            arguments += orderArguments
        }
        return (dialect.finalize(sql + window), arguments, columns)
    }

    /// The ID columns (`Z_PK`, and `Z_ENT` unless the table holds one entity), then one column per key path, in order.
    mutating func idsAndValuesSQL(_ keyPaths: [String]) throws -> (sql: String, types: [NSAttributeType?]) {
        let columns = try valueColumns(keyPaths)
        let select = ([idColumns] + columns.map(\.sql)).joined(separator: ", ")
        return (dialect.finalize("SELECT \(select) FROM \(from)\(whereClause) ORDER BY \(order)\(window)"), columns.map(\.type))
    }
}

/// The statements that read rows by key rather than by request: rows by primary key, and a to-many relationship's
/// destinations.
package enum KeyedReadSQL {
    /// The rows of `table` whose primary keys are bound to `parameters` placeholders (`selectColumns` as
    /// `RelationalCore.selectColumns` lists them), finalized.
    static func rows(table: String, selectColumns: String, parameters: Int, dialect: any SQLDialect) -> String {
        let list = repeatElement("?", count: parameters).joined(separator: ",")
        return dialect.finalize("SELECT \(selectColumns) FROM \(dialect.quote(table)) t0 WHERE t0.\(SQLColumns.primaryKey) IN (\(list))")
    }

    /// How many placeholders a read of `count` keys binds (the keys past `count` repeat the last one).
    ///
    /// The count itself up to 32 (batch faulting's sizes, a fault's one), else the next power of two, at most
    /// `maximum`: a connection that keeps prepared statements keeps a few per table, not one per count.
    static func parameterCount(for count: Int, maximum: Int) -> Int {
        guard count > 32 else { return count }
        var size = 64
        while size < count { size *= 2 }
        return min(size, maximum)
    }

    /// The `Z_PK` and `Z_ENT` of a to-many relationship's destinations of the source row bound to the one parameter,
    /// in the relationship's order (destinations without a position last), else by primary key.
    static func destinations(of relationship: NSRelationshipDescription, schema: RelationalSchema, dialect: any SQLDialect) -> String? {
        guard let destination = relationship.destinationEntity else { return nil }
        let table = dialect.quote(schema.tableName(for: destination))
        let order = schema.orderColumn(for: relationship)
        let (pk, ent) = (SQLColumns.primaryKey, SQLColumns.entity)
        let sql: String
        switch schema.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            let by = order.map { "\(dialect.quote($0)) IS NULL, \(dialect.quote($0)), " } ?? ""
            sql = "SELECT \(pk), \(ent) FROM \(table) WHERE \(dialect.quote(column)) = ? ORDER BY \(by)\(pk)"
        case .joinTable(let name, let source, let dest):
            let by = order.map { "j.\(dialect.quote($0)) IS NULL, j.\(dialect.quote($0)), " } ?? ""
            sql =
                "SELECT d.\(pk), d.\(ent) FROM \(dialect.quote(name)) j JOIN \(table) d ON d.\(pk) = j.\(dialect.quote(dest)) WHERE j.\(dialect.quote(source)) = ? ORDER BY \(by)d.\(pk)"
        }
        return dialect.finalize(sql)
    }

    /// The source key, `Z_PK` and `Z_ENT` of a to-many relationship's destinations of the source rows bound to
    /// `parameters` placeholders: by source, then as `destinations` orders them.
    static func destinations(
        ofEach relationship: NSRelationshipDescription, parameters: Int, schema: RelationalSchema, dialect: any SQLDialect
    ) -> String? {
        guard let destination = relationship.destinationEntity else { return nil }
        let table = dialect.quote(schema.tableName(for: destination))
        let order = schema.orderColumn(for: relationship)
        let (pk, ent) = (SQLColumns.primaryKey, SQLColumns.entity)
        let list = repeatElement("?", count: parameters).joined(separator: ",")
        let sql: String
        switch schema.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            let source = dialect.quote(column)
            let by = order.map { "\(dialect.quote($0)) IS NULL, \(dialect.quote($0)), " } ?? ""
            sql = "SELECT \(source), \(pk), \(ent) FROM \(table) WHERE \(source) IN (\(list)) ORDER BY \(source), \(by)\(pk)"
        case .joinTable(let name, let source, let dest):
            let by = order.map { "j.\(dialect.quote($0)) IS NULL, j.\(dialect.quote($0)), " } ?? ""
            let from = "j.\(dialect.quote(source))"
            sql =
                "SELECT \(from), d.\(pk), d.\(ent) FROM \(dialect.quote(name)) j JOIN \(table) d ON d.\(pk) = j.\(dialect.quote(dest)) WHERE \(from) IN (\(list)) ORDER BY \(from), \(by)d.\(pk)"
        }
        return dialect.finalize(sql)
    }
}
