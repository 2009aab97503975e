import Foundation
import OpenCoreDataModel

/// Translates predicates and sort descriptors on one entity into SQL over a `SQLSchemaMapping`, in a `SQLDialect`.
///
/// The compiler also type-checks: an unknown key, a to-many key used without `ANY`/`ALL`/`NONE`, or a constant of the
/// wrong kind for its attribute is a thrown `CoreDataError` naming the key — the same check guards in-memory
/// evaluation, so both back ends accept exactly the same predicates.
///
/// The root table's alias is `t0`. Joins through to-one relationships are `LEFT JOIN`s collected in `joins`; to-many
/// key paths become `EXISTS` subqueries (`ANY`, `ALL`, `NONE`, `IN`, `CONTAINS`) or scalar subqueries (`@count`,
/// `@sum`, `@avg`, `@min`, `@max`, `SUBQUERY(…).@count`). Comparisons that SQL's three-valued logic would make `NULL`
/// are wrapped in `COALESCE(…, 0)` where a `NOT` could otherwise turn "unknown" into a different answer from the
/// in-memory evaluator.
package struct SQLPredicateCompiler {
    package let entity: NSEntityDescription
    package let mapping: any SQLSchemaMapping
    package let dialect: any SQLDialect
    /// `LEFT JOIN` clauses the compiled SQL needs, in order.
    package private(set) var joins: [String] = []
    var joinAliases: [String: String] = [:]
    var scopes: [[String]] = []  // joins for nested subqueries
    var scopeAliases: [[String: String]] = []
    var aliasCounter = 0
    /// SUBQUERY variables in scope: name → (entity, alias).
    var boundVariables: [String: (NSEntityDescription, String)] = [:]
    /// Columns a `HAVING` predicate may name, by name (see `compileHaving`).
    var namedColumns: [String: Column] = [:]

    package init(entity: NSEntityDescription, mapping: any SQLSchemaMapping, dialect: any SQLDialect = SQLiteDialect()) {
        self.entity = entity
        self.mapping = mapping
        self.dialect = dialect
    }

    /// A piece of SQL with its arguments in text order.
    package struct Fragment: Sendable {
        package var sql: String
        package var arguments: [SQLArgument]
        package init(_ sql: String, _ arguments: [SQLArgument] = []) {
            self.sql = sql
            self.arguments = arguments
        }
    }

    // MARK: Public entry points

    /// Compiles a predicate into a boolean SQL expression over alias `t0`.
    ///
    /// - Throws: `CoreDataError(.invalidFetchRequest)` for a key the entity lacks, a comparison SQL cannot express,
    ///   or a tree deeper than `FetchPredicate.maximumDepth` (built in code; the parser refuses such format strings).
    package mutating func compile(_ predicate: FetchPredicate) throws -> Fragment {
        // Compiling recurses once per level: refuse what could overflow the stack before starting.
        let depth = predicate.depth
        guard depth <= FetchPredicate.maximumDepth else {
            throw CoreDataError(
                .invalidFetchRequest,
                "The predicate nests \(depth) levels deep; at most \(FetchPredicate.maximumDepth) can be compiled to SQL.",
                entityName: entity.name)
        }
        return try compile(predicate, entity: entity, alias: "t0", twoValued: false)
    }

    /// Compiles sort descriptors into `ORDER BY` terms (without the keyword).
    package mutating func orderTerms(_ sorts: [FetchSortDescriptor]) throws -> [String] {
        var terms: [String] = []
        for sort in sorts {
            let operand = try scalarPath(sort.keyPathComponents, context: "sort descriptor '\(sort.key)'")
            var sql = operand.sql
            if case .attribute(let type) = operand.kind {
                if type == .decimalAttributeType { sql = dialect.castToReal(sql) }
                if type == .stringAttributeType { sql = dialect.sortExpression(sql, comparison: sort.comparison) }
            }
            terms.append(dialect.orderTerm(sql, ascending: sort.ascending))
        }
        return terms
    }

    /// The SQL for a key path that names one value per row (an attribute or a to-one destination's primary key).
    package mutating func valueExpression(forKeyPath keyPath: String) throws -> (sql: String, type: NSAttributeType?) {
        let operand = try scalarPath(keyPath.split(separator: ".").map(String.init), context: "key path '\(keyPath)'")
        switch operand.kind {
        case .attribute(let t): return (operand.sql, t)
        default: return (operand.sql, nil)
        }
    }

    // MARK: Operands

    enum Kind {
        case attribute(NSAttributeType)
        case object(NSEntityDescription)
        case constant(AttributeValue)
        case objectIDConstant(NSManagedObjectID)
        case list([Operand])
        case number
    }

    struct Operand {
        var sql: String
        var arguments: [SQLArgument]
        var kind: Kind
        /// Whether the operand is a list (`{1, 2}`, a list argument).
        var isList: Bool {
            if case .list = kind { return true }
            return false
        }
        /// What error messages call the operand, spelled out only when one is written (a list of 1,000 object IDs
        /// would otherwise format every URI for nothing).
        private var described: Described

        private enum Described {
            case text(String)
            case constant(PredicateConstant)
        }

        var describe: String {
            switch described {
            case .text(let text): return text
            case .constant(.value(let v)): return PredicateConstant.literal(v)
            case .constant(.objectID(let id)): return id.description
            case .constant(let c): return c.constantFormat
            }
        }

        init(sql: String, arguments: [SQLArgument], kind: Kind, describe: String) {
            (self.sql, self.arguments, self.kind, self.described) = (sql, arguments, kind, .text(describe))
        }

        init(sql: String, arguments: [SQLArgument], kind: Kind, constant: PredicateConstant) {
            (self.sql, self.arguments, self.kind, self.described) = (sql, arguments, kind, .constant(constant))
        }
    }

    /// A key path resolved to a to-many relationship: the rest of the path applies to each destination.
    struct ToManyPath {
        let relationship: NSRelationshipDescription
        let sourceAlias: String
        let remaining: [String]
        let describe: String
    }

    enum Resolved {
        case scalar(Operand)
        case toMany(ToManyPath)
    }

    func unknownKey(_ key: String, in entity: NSEntityDescription, path: String) -> CoreDataError {
        CoreDataError(
            .unknownKey, "Entity '\(entity.name)' has no property '\(key)' (in key path '\(path)').",
            entityName: entity.name, key: path)
    }

    func unsupported(_ what: String) -> CoreDataError {
        CoreDataError(.unsupported, "OpenCoreData cannot translate \(what) to SQL.", entityName: entity.name)
    }

    mutating func alias() -> String {
        aliasCounter += 1
        return "t\(aliasCounter)"
    }

    mutating func joinAlias(for relationship: NSRelationshipDescription, from sourceAlias: String) -> String {
        let key = "\(sourceAlias).\(relationship.name)"
        if scopes.isEmpty {
            if let a = joinAliases[key] { return a }
        } else if let a = scopeAliases[scopeAliases.count - 1][key] {
            return a
        }
        let a = alias()
        let table = dialect.quote(mapping.tableName(for: relationship.destinationEntity!))
        let fk = dialect.quote(mapping.columnName(for: relationship))
        let clause = "LEFT JOIN \(table) \(a) ON \(a).\(SQLColumns.primaryKey) = \(sourceAlias).\(fk)"
        if scopes.isEmpty {
            joins.append(clause)
            joinAliases[key] = a
        } else {
            scopes[scopes.count - 1].append(clause)
            scopeAliases[scopeAliases.count - 1][key] = a
        }
        return a
    }

    /// Runs `body` in a new subquery scope; returns its result and the joins it needed.
    mutating func inSubqueryScope<T>(_ body: (inout SQLPredicateCompiler) throws -> T) rethrows -> (T, String) {
        scopes.append([])
        scopeAliases.append([:])
        defer {
            scopes.removeLast()
            scopeAliases.removeLast()
        }
        let result = try body(&self)
        return (result, scopes.last!.joined(separator: " "))
    }

    /// The SQL for a key path from `start` (whose row has `startAlias`): a column, with a join per to-one step, or,
    /// at the first to-many step, the relationship and the rest of the path for the caller's subquery.
    ///
    /// The model's resolver (`NSEntityDescription.resolveKeyPath`) checks the path; this walk adds the SQL.
    mutating func resolve(_ components: [String], from start: NSEntityDescription, alias startAlias: String) throws -> Resolved {
        let path = components.joined(separator: ".")
        if components.isEmpty {
            return .scalar(Operand(sql: "\(startAlias).\(SQLColumns.primaryKey)", arguments: [], kind: .object(start), describe: "SELF"))
        }
        var resolution: KeyPathResolution
        do {
            resolution = try start.resolveKeyPath(path)
        } catch let error as CoreDataError where error.code == .unknownKey && start.propertiesByName[components[0]] == nil {
            // A subentity's property (SwiftData's `($0 as? BusinessTrip)?.perDiem` on a fetch of trips): its column is
            // in the same table, NULL in the other entities' rows.
            guard let owner = start.selfAndDescendants.dropFirst().first(where: { $0.propertiesByName[components[0]] != nil }) else {
                throw error
            }
            resolution = try owner.resolveKeyPath(path)
        }
        var alias = startAlias
        // Until the path ends or reaches a collection operator, component i names relationships[i] (or the attribute).
        for (i, relationship) in resolution.relationships.enumerated() {
            try checkStored(relationship, path: path)
            if relationship.isToMany {
                let rest = Array(components[(i + 1)...])
                if let op = rest.first, op.hasPrefix("@") {
                    return .scalar(try collectionOperator(op, Array(rest.dropFirst()), relationship, sourceAlias: alias, path: path))
                }
                return .toMany(ToManyPath(relationship: relationship, sourceAlias: alias, remaining: rest, describe: path))
            }
            if i == components.count - 1 {
                let column = "\(alias).\(dialect.quote(mapping.columnName(for: relationship)))"
                return .scalar(Operand(sql: column, arguments: [], kind: .object(relationship.destinationEntity!), describe: path))
            }
            if resolution.collectionOperator != nil, i == resolution.relationships.count - 1 { break }
            alias = joinAlias(for: relationship, from: alias)
        }
        guard let attribute = resolution.attribute else {
            // A collection operator after a to-one step (or first): it has no collection to apply to.
            let op = components.first { $0.hasPrefix("@") } ?? path
            throw CoreDataError(
                .invalidFetchRequest, "'\(op)' in key path '\(path)' must follow a to-many relationship.",
                entityName: (resolution.relationships.last?.destinationEntity ?? start).name, key: path)
        }
        try checkStored(attribute, path: path)
        var name = mapping.columnName(for: attribute)
        if let composite = resolution.compositeAttribute {
            guard let element = mapping.columnName(forElementAt: resolution.compositeElementPath, of: composite) else {
                let owner = composite.entity?.name ?? start.name
                throw CoreDataError(
                    .invalidFetchRequest,
                    attribute.attributeType == .compositeAttributeType
                        ? "'\(path)' is a composite inside '\(owner).\(composite.name)': filter or sort on its elements instead."
                        : "The store keeps '\(owner).\(composite.name)' whole in one archived column (this project's layout before Core Data's column per element), so a fetch cannot filter or sort on '\(path)'.",
                    entityName: owner, key: path)
            }
            name = element
        }
        var column = "\(alias).\(dialect.quote(name))"
        if resolution.compositeAttribute == nil, let columns = mapping.elementColumnNames(of: attribute), !columns.isEmpty {
            // A whole composite kept a column per element: nil exactly when every element is (`address == nil`).
            let all = columns.map { "\(alias).\(dialect.quote($0))" }
            column = all.count == 1 ? all[0] : "COALESCE(\(all.joined(separator: ", ")))"
        }
        return .scalar(Operand(sql: column, arguments: [], kind: .attribute(attribute.attributeType), describe: path))
    }

    /// Throws for a transient property: it has no column to filter or sort on.
    private func checkStored(_ property: NSPropertyDescription, path: String) throws {
        guard property.isTransient else { return }
        let entity = property.entity?.name ?? ""
        throw CoreDataError(
            .invalidFetchRequest,
            "'\(entity).\(property.name)' is transient: it is not stored, so a fetch cannot filter or sort on it (key path '\(path)').",
            entityName: entity, key: path)
    }

    /// `@count`, `@sum`, `@avg`, `@min`, `@max` over a to-many relationship, as a scalar subquery.
    mutating func collectionOperator(
        _ op: String, _ rest: [String], _ relationship: NSRelationshipDescription, sourceAlias: String, path: String
    ) throws -> Operand {
        let (from, link, destAlias) = toManyFrom(relationship, sourceAlias: sourceAlias)
        if op == "@count" {
            guard rest.isEmpty else {
                throw CoreDataError(.invalidFetchRequest, "Nothing may follow @count in key path '\(path)'.", key: path)
            }
            return Operand(
                sql: "(SELECT COUNT(*) FROM \(from) WHERE \(link))", arguments: [], kind: .attribute(.integer64AttributeType),
                describe: path)
        }
        let function: String
        switch op {
        case "@sum": function = "SUM"
        case "@avg": function = "AVG"
        case "@min": function = "MIN"
        case "@max": function = "MAX"
        default:
            throw CoreDataError(
                .invalidFetchRequest,
                "Unknown collection operator '\(op)' in key path '\(path)'; expected @count, @sum, @avg, @min or @max.",
                key: path)
        }
        guard !rest.isEmpty else {
            throw CoreDataError(
                .invalidFetchRequest, "\(op) in key path '\(path)' needs the key to aggregate, as in employees.\(op).salary.", key: path)
        }
        let destination = relationship.destinationEntity!
        let (resolved, joins) = try inSubqueryScope { compiler in try compiler.resolve(rest, from: destination, alias: destAlias) }
        guard case .scalar(let value) = resolved, case .attribute(let type) = value.kind else {
            throw CoreDataError(.invalidFetchRequest, "\(op) in key path '\(path)' must aggregate an attribute.", key: path)
        }
        var column = value.sql
        if type == .decimalAttributeType || (op != "@min" && op != "@max" && !type.isNumeric) {
            guard type.isNumeric || op == "@min" || op == "@max" else {
                throw CoreDataError(
                    .wrongValueType, "\(op) in key path '\(path)' needs a numeric attribute, not \(type.xcodeName).", key: path)
            }
            column = dialect.castToReal(column)
        }
        let fromClause = joins.isEmpty ? from : from + " " + joins
        var sql = "(SELECT \(function)(\(column)) FROM \(fromClause) WHERE \(link))"
        if op == "@sum" { sql = "COALESCE(\(sql), 0)" }
        let kind: Kind = (op == "@min" || op == "@max") && type != .decimalAttributeType ? .attribute(type) : .number
        return Operand(sql: sql, arguments: [], kind: kind, describe: path)
    }

    /// The FROM clause and link condition of a to-many relationship's destination rows, and the destination alias.
    mutating func toManyFrom(_ relationship: NSRelationshipDescription, sourceAlias: String) -> (String, String, String) {
        let destination = relationship.destinationEntity!
        let destAlias = alias()
        let table = dialect.quote(mapping.tableName(for: destination))
        let pk = SQLColumns.primaryKey
        switch mapping.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            return ("\(table) \(destAlias)", "\(destAlias).\(dialect.quote(column)) = \(sourceAlias).\(pk)", destAlias)
        case .joinTable(let name, let sourceColumn, let destinationColumn):
            let j = alias()
            return (
                "\(dialect.quote(name)) \(j) JOIN \(table) \(destAlias) ON \(destAlias).\(pk) = \(j).\(dialect.quote(destinationColumn))",
                "\(j).\(dialect.quote(sourceColumn)) = \(sourceAlias).\(pk)", destAlias
            )
        }
    }

    mutating func scalarPath(_ components: [String], context: String) throws -> Operand {
        switch try resolve(components, from: entity, alias: "t0") {
        case .scalar(let o): return o
        case .toMany(let p):
            throw CoreDataError(
                .invalidFetchRequest,
                "\(context): '\(p.relationship.name)' is a to-many relationship; only one value per object can be used here.",
                entityName: entity.name, key: p.describe)
        }
    }

    mutating func operand(_ e: FetchExpression, entity: NSEntityDescription, alias: String) throws -> Resolved {
        switch e {
        case .constant(let c): return .scalar(constantOperand(c))
        case .evaluatedObject:
            return .scalar(Operand(sql: "\(alias).\(SQLColumns.primaryKey)", arguments: [], kind: .object(entity), describe: "SELF"))
        case .keyPath(.evaluatedObject, let components):
            if components.count == 1, let column = namedColumnOperand(components[0]) { return .scalar(column) }
            return try resolve(components, from: entity, alias: alias)
        case .keyPath(.variable(let name), let components):
            guard let (boundEntity, boundAlias) = boundVariables[name] else { throw unboundVariable(name) }
            return try resolve(components, from: boundEntity, alias: boundAlias)
        case .keyPath(.subquery(let collection, let variable, let predicate), let components):
            guard components == ["@count"] else {
                throw unsupported("'\(e.expressionFormat)': a SUBQUERY is used through .@count")
            }
            return .scalar(try subqueryCount(collection, variable, predicate, entity: entity, alias: alias, describe: e.expressionFormat))
        case .keyPath(let base, ["@count"]) where FetchFunction.constantMembers(of: base) != nil:
            // The size of a list of constants (`{1, 2}.@count`, `($OPEN UNION {"new"}).@count`), known before the fetch.
            return .scalar(constantOperand(.value(.integer(Int64(FetchFunction.constantMembers(of: base)!.count)))))
        case .keyPath(let base, _):
            throw unsupported("key paths on \(base.expressionFormat)")
        case .variable(let name):
            if let column = namedColumnOperand(name) { return .scalar(column) }
            guard let (boundEntity, boundAlias) = boundVariables[name] else { throw unboundVariable(name) }
            return try resolve([], from: boundEntity, alias: boundAlias)
        case .aggregate(let items):
            var operands: [Operand] = []
            for item in items {
                guard case .scalar(let o) = try operand(item, entity: entity, alias: alias) else {
                    throw unsupported("to-many key paths inside a list")
                }
                operands.append(o)
            }
            return .scalar(Operand(sql: "", arguments: [], kind: .list(operands), describe: e.expressionFormat))
        case .negate(let inner):
            let o = try numeric(try scalar(inner, entity: entity, alias: alias), in: e)
            return .scalar(Operand(sql: "(-\(o.sql))", arguments: o.arguments, kind: .number, describe: e.expressionFormat))
        case .arithmetic(let op, let a, let b):
            let x = try numeric(try scalar(a, entity: entity, alias: alias), in: e)
            let y = try numeric(try scalar(b, entity: entity, alias: alias), in: e)
            let sql: String
            switch op {
            case .divide: sql = dialect.divide(x.sql, y.sql)
            case .power: sql = dialect.power(x.sql, y.sql)
            default: sql = "(\(x.sql) \(op.rawValue) \(y.sql))"
            }
            return .scalar(Operand(sql: sql, arguments: x.arguments + y.arguments, kind: .number, describe: e.expressionFormat))
        case .function(let name, let arguments):
            return .scalar(try functionOperand(name, arguments, entity: entity, alias: alias, describe: e.expressionFormat))
        case .subquery:
            throw unsupported("'\(e.expressionFormat)' without .@count")
        case .conditional(let condition, let a, let b):
            return .scalar(try conditionalOperand(condition, a, b, entity: entity, alias: alias, describe: e.expressionFormat))
        }
    }

    func unboundVariable(_ name: String) -> CoreDataError {
        CoreDataError(
            .invalidFetchRequest,
            "The predicate uses $\(name), which no SUBQUERY binds; substitute it first with withSubstitutionVariables(_:).",
            entityName: entity.name)
    }

    /// `SUBQUERY(collection, $x, predicate).@count`: the number of destinations matching, as a scalar subquery.
    mutating func subqueryCount(
        _ collection: FetchExpression, _ variable: String, _ predicate: FetchPredicate, entity: NSEntityDescription, alias: String,
        describe: String
    ) throws -> Operand {
        guard case .toMany(let path) = try operand(collection, entity: entity, alias: alias), path.remaining.isEmpty else {
            throw unsupported("SUBQUERY over '\(collection.expressionFormat)', which is not a to-many relationship")
        }
        let destination = path.relationship.destinationEntity!
        let (from, link, destAlias) = toManyFrom(path.relationship, sourceAlias: path.sourceAlias)
        let saved = boundVariables[variable]
        boundVariables[variable] = (destination, destAlias)
        defer { boundVariables[variable] = saved }
        let (test, joins) = try inSubqueryScope { compiler in
            try compiler.compile(predicate, entity: entity, alias: alias, twoValued: false)
        }
        let fromClause = joins.isEmpty ? from : from + " " + joins
        return Operand(
            sql: "(SELECT COUNT(*) FROM \(fromClause) WHERE \(link) AND \(test.sql))", arguments: test.arguments,
            kind: .attribute(.integer64AttributeType), describe: describe)
    }

    mutating func scalar(_ e: FetchExpression, entity: NSEntityDescription, alias: String) throws -> Operand {
        switch try operand(e, entity: entity, alias: alias) {
        case .scalar(let o): return o
        case .toMany(let p):
            throw CoreDataError(
                .invalidFetchRequest,
                "'\(p.describe)' goes through the to-many relationship '\(p.relationship.name)'; compare it with ANY, ALL or NONE, or use @count.",
                entityName: entity.name, key: p.describe)
        }
    }

    func numeric(_ o: Operand, in e: FetchExpression) throws -> Operand {
        switch o.kind {
        case .number: return o
        case .attribute(let t) where t.isNumeric:
            return t == .decimalAttributeType
                ? Operand(sql: dialect.castToReal(o.sql), arguments: o.arguments, kind: .number, describe: o.describe) : o
        case .constant(let v) where v.isNumeric:
            return Operand(sql: "?", arguments: [SQLStorage.encode(v)], kind: .number, describe: o.describe)
        case .constant(let v) where v.isNull:
            // Typed, so that PostgreSQL can pick the operator (`-nil`).
            return Operand(sql: dialect.castToReal("?"), arguments: [.null], kind: .number, describe: o.describe)
        default:
            throw CoreDataError(
                .wrongValueType, "Arithmetic in '\(e.expressionFormat)' needs numbers, but '\(o.describe)' is not a number.")
        }
    }

    func constantOperand(_ c: PredicateConstant) -> Operand {
        switch c {
        case .value(let v): return Operand(sql: "?", arguments: [], kind: .constant(v), constant: c)
        case .objectID(let id): return Operand(sql: "?", arguments: [], kind: .objectIDConstant(id), constant: c)
        case .array(let items): return Operand(sql: "", arguments: [], kind: .list(items.map(constantOperand)), constant: c)
        }
    }

}
