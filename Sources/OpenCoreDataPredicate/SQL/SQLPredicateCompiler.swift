import Foundation
import OpenCoreDataModel

/// Translates predicates and sort descriptors on one entity into SQLite SQL over a `SQLSchemaMapping`.
///
/// The compiler also type-checks: an unknown key, a to-many key used without `ANY`/`ALL`/`NONE`, or a constant of the
/// wrong kind for its attribute is a thrown `CoreDataError` naming the key — the same check guards in-memory
/// evaluation, so both back ends accept exactly the same predicates.
///
/// The root table's alias is `t0`. Joins through to-one relationships are `LEFT JOIN`s collected in `joins`.
/// Comparisons that SQL's three-valued logic would make `NULL` are wrapped in `COALESCE(…, 0)` where a `NOT` could
/// otherwise turn "unknown" into a different answer from the in-memory evaluator.
public struct SQLPredicateCompiler {
    public let entity: NSEntityDescription
    public let mapping: any SQLSchemaMapping
    /// `LEFT JOIN` clauses the compiled SQL needs, in order.
    public private(set) var joins: [String] = []
    private var joinAliases: [String: String] = [:]
    private var scopes: [[String]] = []  // joins for nested EXISTS subqueries
    private var scopeAliases: [[String: String]] = []
    private var aliasCounter = 0

    public init(entity: NSEntityDescription, mapping: any SQLSchemaMapping) {
        self.entity = entity
        self.mapping = mapping
    }

    /// A piece of SQL with its arguments in text order.
    public struct Fragment: Sendable {
        public var sql: String
        public var arguments: [SQLArgument]
        public init(_ sql: String, _ arguments: [SQLArgument] = []) {
            self.sql = sql
            self.arguments = arguments
        }
    }

    // MARK: Public entry points

    /// Compiles a predicate into a boolean SQL expression over alias `t0`.
    public mutating func compile(_ predicate: FetchPredicate) throws -> Fragment {
        try compile(predicate, twoValued: false)
    }

    /// Compiles sort descriptors into `ORDER BY` terms (without the keyword).
    public mutating func orderTerms(_ sorts: [FetchSortDescriptor]) throws -> [String] {
        var terms: [String] = []
        for sort in sorts {
            let operand = try scalarPath(sort.keyPathComponents, context: "sort descriptor '\(sort.key)'")
            var sql = operand.sql
            if case .attribute(let type) = operand.kind {
                if type == .decimalAttributeType { sql = "CAST(\(sql) AS REAL)" }
                if type == .stringAttributeType, let collation = SQLFunctionNames.collation(sort.comparison) {
                    sql += " COLLATE \(collation)"
                }
            }
            terms.append(sql + (sort.ascending ? " ASC" : " DESC"))
        }
        return terms
    }

    /// The SQL for a key path that names one value per row (an attribute or a to-one destination's primary key).
    public mutating func valueExpression(forKeyPath keyPath: String) throws -> (sql: String, type: NSAttributeType?) {
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
        var describe: String
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

    private func unknownKey(_ key: String, in entity: NSEntityDescription, path: String) -> CoreDataError {
        CoreDataError(
            .unknownKey, "Entity '\(entity.name)' has no property '\(key)' (in key path '\(path)').",
            entityName: entity.name, key: path)
    }

    private mutating func alias() -> String {
        aliasCounter += 1
        return "t\(aliasCounter)"
    }

    private mutating func joinAlias(for relationship: NSRelationshipDescription, from sourceAlias: String) -> String {
        let key = "\(sourceAlias).\(relationship.name)"
        if scopes.isEmpty {
            if let a = joinAliases[key] { return a }
        } else if let a = scopeAliases[scopeAliases.count - 1][key] {
            return a
        }
        let a = alias()
        let table = mapping.tableName(for: relationship.destinationEntity!)
        let fk = mapping.columnName(for: relationship)
        let clause = "LEFT JOIN \(sqlQuote(table)) \(a) ON \(a).\(SQLColumns.primaryKey) = \(sourceAlias).\(sqlQuote(fk))"
        if scopes.isEmpty {
            joins.append(clause)
            joinAliases[key] = a
        } else {
            scopes[scopes.count - 1].append(clause)
            scopeAliases[scopeAliases.count - 1][key] = a
        }
        return a
    }

    mutating func resolve(_ components: [String], from start: NSEntityDescription, alias startAlias: String) throws -> Resolved {
        let path = components.joined(separator: ".")
        var entity = start
        var alias = startAlias
        if components.isEmpty {
            return .scalar(Operand(sql: "\(alias).\(SQLColumns.primaryKey)", arguments: [], kind: .object(entity), describe: "SELF"))
        }
        for (i, key) in components.enumerated() {
            let isLast = i == components.count - 1
            if key.hasPrefix("@") {
                throw CoreDataError(
                    .invalidFetchRequest, "'\(key)' in key path '\(path)' must follow a to-many relationship.",
                    entityName: entity.name, key: path)
            }
            guard let property = entity.propertiesByName[key] else { throw unknownKey(key, in: entity, path: path) }
            if property.isTransient {
                throw CoreDataError(
                    .invalidFetchRequest,
                    "'\(entity.name).\(key)' is transient: it is not stored, so a fetch cannot filter or sort on it (key path '\(path)').",
                    entityName: entity.name, key: path)
            }
            if let attribute = property as? NSAttributeDescription {
                guard isLast else {
                    throw CoreDataError(
                        .unknownKey,
                        "'\(entity.name).\(key)' is an attribute, so key path '\(path)' cannot go further.",
                        entityName: entity.name, key: path)
                }
                let column = "\(alias).\(sqlQuote(mapping.columnName(for: attribute)))"
                return .scalar(Operand(sql: column, arguments: [], kind: .attribute(attribute.attributeType), describe: path))
            }
            let relationship = property as! NSRelationshipDescription
            if relationship.isToMany {
                let rest = Array(components[(i + 1)...])
                if rest.first == "@count" {
                    guard rest.count == 1 else {
                        throw CoreDataError(.invalidFetchRequest, "Nothing may follow @count in key path '\(path)'.", key: path)
                    }
                    var sub = Fragment("")
                    let (from, link, _) = toManyFrom(relationship, sourceAlias: alias)
                    sub.sql = "(SELECT COUNT(*) FROM \(from) WHERE \(link))"
                    return .scalar(Operand(sql: sub.sql, arguments: [], kind: .attribute(.integer64AttributeType), describe: path))
                }
                return .toMany(ToManyPath(relationship: relationship, sourceAlias: alias, remaining: rest, describe: path))
            }
            if isLast {
                let column = "\(alias).\(sqlQuote(mapping.columnName(for: relationship)))"
                return .scalar(Operand(sql: column, arguments: [], kind: .object(relationship.destinationEntity!), describe: path))
            }
            alias = joinAlias(for: relationship, from: alias)
            entity = relationship.destinationEntity!
        }
        preconditionFailure("unreachable: the loop returns on its last component")
    }

    /// The FROM clause and link condition of a to-many relationship's destination rows, and the destination alias.
    private mutating func toManyFrom(_ relationship: NSRelationshipDescription, sourceAlias: String) -> (String, String, String) {
        let destination = relationship.destinationEntity!
        let destAlias = alias()
        let table = sqlQuote(mapping.tableName(for: destination))
        switch mapping.toManyLink(for: relationship) {
        case .inverseForeignKey(let column):
            return ("\(table) \(destAlias)", "\(destAlias).\(sqlQuote(column)) = \(sourceAlias).\(SQLColumns.primaryKey)", destAlias)
        case .joinTable(let name, let sourceColumn, let destinationColumn):
            let j = alias()
            return (
                "\(sqlQuote(name)) \(j) JOIN \(table) \(destAlias) ON \(destAlias).\(SQLColumns.primaryKey) = \(j).\(sqlQuote(destinationColumn))",
                "\(j).\(sqlQuote(sourceColumn)) = \(sourceAlias).\(SQLColumns.primaryKey)", destAlias
            )
        }
    }

    private mutating func scalarPath(_ components: [String], context: String) throws -> Operand {
        switch try resolve(components, from: entity, alias: "t0") {
        case .scalar(let o): return o
        case .toMany(let p):
            throw CoreDataError(
                .invalidFetchRequest,
                "\(context): '\(p.relationship.name)' is a to-many relationship; only one value per object can be used here.",
                entityName: entity.name, key: p.describe)
        }
    }

    private mutating func operand(_ e: FetchExpression, entity: NSEntityDescription, alias: String) throws -> Resolved {
        switch e {
        case .constant(let c): return .scalar(constantOperand(c))
        case .evaluatedObject:
            return .scalar(Operand(sql: "\(alias).\(SQLColumns.primaryKey)", arguments: [], kind: .object(entity), describe: "SELF"))
        case .keyPath(.evaluatedObject, let components):
            return try resolve(components, from: entity, alias: alias)
        case .keyPath(let base, _):
            throw unsupported("key paths on \(base.expressionFormat)")
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
            case .divide: sql = "(CAST(\(x.sql) AS REAL) / \(y.sql))"
            case .power: sql = "ocd_pow(\(x.sql), \(y.sql))"
            default: sql = "(\(x.sql) \(op.rawValue) \(y.sql))"
            }
            return .scalar(Operand(sql: sql, arguments: x.arguments + y.arguments, kind: .number, describe: e.expressionFormat))
        case .variable(let name):
            throw unsupported("the variable $\(name) (substitute it with withSubstitutionVariables(_:) before fetching)")
        case .subquery:
            throw unsupported("SUBQUERY in a fetch from the SQL store")
        }
    }

    private mutating func scalar(_ e: FetchExpression, entity: NSEntityDescription, alias: String) throws -> Operand {
        switch try operand(e, entity: entity, alias: alias) {
        case .scalar(let o): return o
        case .toMany(let p):
            throw CoreDataError(
                .invalidFetchRequest,
                "'\(p.describe)' goes through the to-many relationship '\(p.relationship.name)'; compare it with ANY, ALL or NONE, or use @count.",
                entityName: entity.name, key: p.describe)
        }
    }

    private func numeric(_ o: Operand, in e: FetchExpression) throws -> Operand {
        switch o.kind {
        case .number: return o
        case .attribute(let t) where t.isNumeric:
            return t == .decimalAttributeType
                ? Operand(sql: "CAST(\(o.sql) AS REAL)", arguments: o.arguments, kind: .number, describe: o.describe) : o
        case .constant(let v) where v.isNumeric || v.isNull:
            return Operand(sql: "?", arguments: [SQLStorage.encode(v)], kind: .number, describe: o.describe)
        default:
            throw CoreDataError(
                .wrongValueType, "Arithmetic in '\(e.expressionFormat)' needs numbers, but '\(o.describe)' is not a number.")
        }
    }

    private func constantOperand(_ c: PredicateConstant) -> Operand {
        switch c {
        case .value(let v): return Operand(sql: "?", arguments: [], kind: .constant(v), describe: PredicateConstant.literal(v))
        case .objectID(let id): return Operand(sql: "?", arguments: [], kind: .objectIDConstant(id), describe: id.description)
        case .array(let items):
            return Operand(sql: "", arguments: [], kind: .list(items.map(constantOperand)), describe: c.constantFormat)
        }
    }

    private func unsupported(_ what: String) -> CoreDataError {
        CoreDataError(.unsupported, "OpenCoreData cannot translate \(what) to SQL yet.", entityName: entity.name)
    }

    // MARK: Predicates

    private mutating func compile(_ p: FetchPredicate, twoValued: Bool) throws -> Fragment {
        try compile(p, entity: entity, alias: "t0", twoValued: twoValued)
    }

    private mutating func compile(_ p: FetchPredicate, entity: NSEntityDescription, alias: String, twoValued: Bool) throws -> Fragment {
        switch p {
        case .truePredicate: return Fragment("1")
        case .falsePredicate: return Fragment("0")
        case .and(let parts), .or(let parts):
            guard !parts.isEmpty else { return Fragment(p == .and([]) ? "1" : "0") }
            let joiner: String
            if case .and = p { joiner = " AND " } else { joiner = " OR " }
            var sqls: [String] = []
            var args: [SQLArgument] = []
            for part in parts {
                let f = try compile(part, entity: entity, alias: alias, twoValued: twoValued)
                sqls.append(f.sql)
                args += f.arguments
            }
            return Fragment("(" + sqls.joined(separator: joiner) + ")", args)
        case .not(let inner):
            let f = try compile(inner, entity: entity, alias: alias, twoValued: true)
            return Fragment("(NOT \(f.sql))", f.arguments)
        case .comparison(let c):
            return try compile(c, entity: entity, alias: alias, twoValued: twoValued)
        }
    }

    private mutating func compile(_ c: PredicateComparison, entity: NSEntityDescription, alias: String, twoValued: Bool) throws -> Fragment
    {
        let left = try operand(c.left, entity: entity, alias: alias)
        let right = try operand(c.right, entity: entity, alias: alias)
        switch (left, right) {
        case (.toMany(let path), .scalar(let r)):
            switch c.modifier {
            case .direct:
                guard c.op == .contains else {
                    throw CoreDataError(
                        .invalidFetchRequest,
                        "'\(c.predicateFormat)': '\(path.describe)' is a to-many key path; use ANY, ALL or NONE, or @count.",
                        entityName: entity.name, key: path.describe)
                }
                // employees CONTAINS %@  ==  ANY employees == %@
                var equalC = c
                equalC.op = .equal
                return try quantified(path, .any, equalC, right: r, twoValued: twoValued)
            default:
                return try quantified(path, c.modifier, c, right: r, twoValued: twoValued)
            }
        case (.scalar(let l), .toMany(let path)) where c.op == .in && c.modifier == .direct:
            // %@ IN employees  ==  ANY employees == %@
            var equalC = c
            equalC.op = .equal
            return try quantified(path, .any, equalC, right: l, twoValued: twoValued)
        case (.scalar(let l), .scalar(let r)):
            return try scalarComparison(l, c.op, r, options: c.options, comparison: c, twoValued: twoValued)
        default:
            throw CoreDataError(
                .invalidFetchRequest,
                "'\(c.predicateFormat)' compares to-many key paths on both sides, which is not supported.", entityName: entity.name)
        }
    }

    private mutating func quantified(
        _ path: ToManyPath, _ modifier: PredicateComparison.Modifier, _ c: PredicateComparison, right: Operand, twoValued: Bool
    ) throws -> Fragment {
        let destination = path.relationship.destinationEntity!
        let (from, link, destAlias) = toManyFrom(path.relationship, sourceAlias: path.sourceAlias)
        scopes.append([])
        scopeAliases.append([:])
        defer {
            scopes.removeLast()
            scopeAliases.removeLast()
        }
        let element: Operand
        switch try resolve(path.remaining, from: destination, alias: destAlias) {
        case .scalar(let o): element = o
        case .toMany(let inner):
            throw unsupported("nested to-many key paths ('\(path.describe)' then '\(inner.relationship.name)')")
        }
        let test = try scalarComparison(element, c.op, right, options: c.options, comparison: c, twoValued: modifier == .all)
        let innerJoins = scopes.last!.joined(separator: " ")
        let fromClause = innerJoins.isEmpty ? from : from + " " + innerJoins
        switch modifier {
        case .all:
            return Fragment("(NOT EXISTS (SELECT 1 FROM \(fromClause) WHERE \(link) AND NOT \(test.sql)))", test.arguments)
        case .none:
            return Fragment("(NOT EXISTS (SELECT 1 FROM \(fromClause) WHERE \(link) AND \(test.sql)))", test.arguments)
        default:
            return Fragment("(EXISTS (SELECT 1 FROM \(fromClause) WHERE \(link) AND \(test.sql)))", test.arguments)
        }
    }

    // MARK: Scalar comparisons

    private enum ValueClass: Equatable { case number, decimal, string, date, data, uuid, uri, object, null }

    private func valueClass(_ o: Operand) -> ValueClass? {
        switch o.kind {
        case .attribute(let t):
            switch t {
            case .decimalAttributeType: return .decimal
            case _ where t.isNumeric: return .number
            case .stringAttributeType: return .string
            case .dateAttributeType: return .date
            case .binaryDataAttributeType: return .data
            case .UUIDAttributeType: return .uuid
            case .URIAttributeType: return .uri
            default: return nil
            }
        case .number: return .number
        case .object, .objectIDConstant: return .object
        case .constant(let v):
            switch v {
            case .null: return .null
            case .integer, .double, .bool: return .number
            case .decimal: return .decimal
            case .string: return .string
            case .date: return .date
            case .data: return .data
            case .uuid: return .uuid
            case .uri: return .uri
            }
        case .list: return nil
        }
    }

    private func compatible(_ a: ValueClass, _ b: ValueClass) -> Bool {
        if a == .null || b == .null || a == b { return true }
        let numeric: Set<ValueClass> = [.number, .decimal]
        return numeric.contains(a) && numeric.contains(b)
    }

    private func typeError(_ l: Operand, _ r: Operand, _ c: PredicateComparison) -> CoreDataError {
        func kind(_ o: Operand) -> String {
            switch o.kind {
            case .attribute(let t): return "a \(t.xcodeName) attribute"
            case .constant(let v): return "a \(v.kindName) value"
            case .object: return "an object"
            case .objectIDConstant: return "an object ID"
            case .list: return "a list"
            case .number: return "a number"
            }
        }
        return CoreDataError(
            .wrongValueType,
            "Predicate '\(c.predicateFormat)' compares \(l.describe) (\(kind(l))) with \(r.describe) (\(kind(r))), which cannot be compared.",
            entityName: entity.name, key: l.describe)
    }

    /// The SQL for one side of a scalar comparison; constants are encoded to match the other side's storage and
    /// folded for `[c]`/`[d]`.
    private func side(_ o: Operand, other: ValueClass, decimalCompare: Bool, fold: PredicateComparison.Options) -> Fragment {
        switch o.kind {
        case .constant(var v):
            if case .string(let s) = v, !fold.isEmpty { v = .string(PredicateSemantics.fold(s, fold)) }
            if decimalCompare, let d = v.numericValue { return Fragment("?", [.real(d)]) }
            return Fragment("?", [SQLStorage.encode(v)])
        case .objectIDConstant(let id):
            return Fragment("?", [id.isTemporaryID ? .integer(0) : .integer(id.primaryKey)])
        case .attribute(let t):
            var sql = o.sql
            if t == .decimalAttributeType || (decimalCompare && t.isNumeric) { sql = "CAST(\(sql) AS REAL)" }
            if t == .stringAttributeType, !fold.isEmpty { sql = "\(SQLFunctionNames.fold)(\(sql), \(fold.rawValue))" }
            return Fragment(sql, o.arguments)
        default:
            return Fragment(o.sql, o.arguments)
        }
    }

    private func wrap(_ sql: String, _ twoValued: Bool) -> String { twoValued ? "COALESCE(\(sql), 0)" : sql }

    private mutating func scalarComparison(
        _ l: Operand, _ op: PredicateComparison.Operator, _ r: Operand, options: PredicateComparison.Options,
        comparison c: PredicateComparison, twoValued: Bool
    ) throws -> Fragment {
        let fold = options.intersection([.caseInsensitive, .diacriticInsensitive])
        switch op {
        case .in:
            if case .list(let items) = r.kind { return try inList(l, items, options: fold, comparison: c, twoValued: twoValued) }
            // Substring: "needle IN haystack".
            return try stringOp(.contains, value: r, pattern: l, fold: fold, comparison: c)
        case .contains:
            if case .list(let items) = l.kind { return try inList(r, items, options: fold, comparison: c, twoValued: twoValued) }
            return try stringOp(.contains, value: l, pattern: r, fold: fold, comparison: c)
        case .beginsWith, .endsWith, .like, .matches:
            return try stringOp(op, value: l, pattern: r, fold: fold, comparison: c)
        case .between:
            guard case .list(let bounds) = r.kind, bounds.count == 2 else {
                throw CoreDataError(.invalidFetchRequest, "BETWEEN needs a list of two values in '\(c.predicateFormat)'.")
            }
            let lo = try scalarComparison(l, .greaterThanOrEqual, bounds[0], options: options, comparison: c, twoValued: twoValued)
            let hi = try scalarComparison(l, .lessThanOrEqual, bounds[1], options: options, comparison: c, twoValued: twoValued)
            return Fragment("(\(lo.sql) AND \(hi.sql))", lo.arguments + hi.arguments)
        default: break
        }
        guard let lc = valueClass(l), let rc = valueClass(r), compatible(lc, rc) else { throw typeError(l, r, c) }
        let isString = lc == .string || rc == .string
        let decimalCompare = lc == .decimal || rc == .decimal
        let f = isString ? fold : []
        let a = side(l, other: rc, decimalCompare: decimalCompare, fold: f)
        let b = side(r, other: lc, decimalCompare: decimalCompare, fold: f)
        let args = a.arguments + b.arguments
        switch op {
        case .equal: return Fragment("(\(a.sql) IS \(b.sql))", args)
        case .notEqual: return Fragment("(\(a.sql) IS NOT \(b.sql))", args)
        case .lessThan: return Fragment(wrap("(\(a.sql) < \(b.sql))", twoValued), args)
        case .lessThanOrEqual: return Fragment(wrap("(\(a.sql) <= \(b.sql))", twoValued), args)
        case .greaterThan: return Fragment(wrap("(\(a.sql) > \(b.sql))", twoValued), args)
        case .greaterThanOrEqual: return Fragment(wrap("(\(a.sql) >= \(b.sql))", twoValued), args)
        default: preconditionFailure("handled above")
        }
    }

    private mutating func inList(
        _ l: Operand, _ items: [Operand], options: PredicateComparison.Options, comparison c: PredicateComparison, twoValued: Bool
    ) throws -> Fragment {
        if items.isEmpty { return Fragment("0") }
        var parts: [String] = []
        var args: [SQLArgument] = []
        for item in items {
            let eq = try scalarComparison(l, .equal, item, options: options, comparison: c, twoValued: twoValued)
            parts.append(eq.sql)
            args += eq.arguments
        }
        return Fragment("(" + parts.joined(separator: " OR ") + ")", args)
    }

    private func stringOp(
        _ op: PredicateComparison.Operator, value: Operand, pattern: Operand, fold: PredicateComparison.Options,
        comparison c: PredicateComparison
    ) throws -> Fragment {
        guard let vc = valueClass(value), let pc = valueClass(pattern), vc == .string || vc == .null, pc == .string || pc == .null else {
            throw CoreDataError(
                .wrongValueType,
                "\(op.rawValue) in '\(c.predicateFormat)' works on strings, but \(valueClass(value) == .string ? pattern.describe : value.describe) is not a string.",
                entityName: entity.name, key: value.describe)
        }
        if op == .matches, case .constant(.string(let regex)) = pattern.kind, !PredicateSemantics.isValidRegex(regex) {
            throw CoreDataError(.predicateSyntax, "MATCHES in '\(c.predicateFormat)' has an invalid regular expression: \(regex)")
        }
        let a = side(value, other: .string, decimalCompare: false, fold: [])
        let b = side(pattern, other: .string, decimalCompare: false, fold: [])
        return Fragment(
            "\(SQLFunctionNames.stringOperator)('\(op.rawValue)', \(a.sql), \(b.sql), \(fold.rawValue))", a.arguments + b.arguments)
    }
}
