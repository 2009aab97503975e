import Foundation
import OpenCoreDataModel

// Predicates to SQL: AND/OR/NOT, comparisons, and quantified (ANY/ALL/NONE) comparisons over to-many paths.
extension SQLPredicateCompiler {
    // MARK: Predicates

    mutating func compile(_ p: FetchPredicate, entity: NSEntityDescription, alias: String, twoValued: Bool) throws -> Fragment {
        switch p {
        case .truePredicate: return Fragment(dialect.true)
        case .falsePredicate: return Fragment(dialect.false)
        case .and(let parts), .or(let parts):
            let isAnd: Bool
            if case .and = p { isAnd = true } else { isAnd = false }
            guard !parts.isEmpty else { return Fragment(isAnd ? dialect.true : dialect.false) }
            var sqls: [String] = []
            var args: [SQLArgument] = []
            for part in parts {
                let f = try compile(part, entity: entity, alias: alias, twoValued: twoValued)
                sqls.append(f.sql)
                args += f.arguments
            }
            return Fragment(Self.balanced(sqls[...], isAnd ? "AND" : "OR"), args)
        case .not(let inner):
            let f = try compile(inner, entity: entity, alias: alias, twoValued: true)
            return Fragment("(NOT \(f.sql))", f.arguments)
        case .comparison(let c):
            return try compile(c, entity: entity, alias: alias, twoValued: twoValued)
        }
    }

    mutating func compile(_ c: PredicateComparison, entity: NSEntityDescription, alias: String, twoValued: Bool) throws -> Fragment {
        if let names = c.entityNames(on: entity) {
            // `entity IN {'BusinessTrip', …}`: the row's entity number.
            guard let model = entity.managedObjectModel else { throw unsupported("'\(c.predicateFormat)' (its entity has no model)") }
            let numbers = try names.map { name in
                guard let named = model.entitiesByName[name] else {
                    throw CoreDataError(
                        .invalidFetchRequest, "'\(c.predicateFormat)' names no entity of the model: '\(name)'.", entityName: entity.name)
                }
                return String(named.entityID)
            }
            let test = numbers.isEmpty ? dialect.false : "\(alias).\(SQLColumns.entity) IN (\(numbers.joined(separator: ", ")))"
            return Fragment(c.op == .notEqual ? "(NOT \(test))" : test)
        }
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
                var equal = c
                equal.op = .equal
                return try quantified(path, .any, equal, right: r)
            default:
                return try quantified(path, c.modifier, c, right: r)
            }
        case (.scalar(let l), .toMany(let path)) where c.op == .in && c.modifier == .direct:
            // %@ IN employees  ==  ANY employees == %@
            var equal = c
            equal.op = .equal
            return try quantified(path, .any, equal, right: l)
        case (.scalar(let l), .scalar(let r)) where c.modifier != .direct && !l.isList:
            // ANY, ALL or NONE of one value: of no value when it is nil, as in memory (ALL and NONE of nothing hold).
            var direct = c
            direct.modifier = .direct
            let test = try scalarComparison(l, c.op, r, options: c.options, comparison: direct, twoValued: true)
            let isNull: Fragment
            if case .constant(let value) = l.kind {
                isNull = Fragment(value.isNull ? dialect.true : dialect.false)
            } else {
                isNull = Fragment("(\(l.sql) IS NULL)", l.arguments)
            }
            switch c.modifier {
            case .any: return Fragment("(NOT \(isNull.sql) AND \(test.sql))", isNull.arguments + test.arguments)
            case .all: return Fragment("(\(isNull.sql) OR \(test.sql))", isNull.arguments + test.arguments)
            default: return Fragment("(\(isNull.sql) OR NOT \(test.sql))", isNull.arguments + test.arguments)
            }
        case (.scalar(let l), .scalar(let r)):
            return try scalarComparison(l, c.op, r, options: c.options, comparison: c, twoValued: twoValued)
        default:
            throw CoreDataError(
                .invalidFetchRequest,
                "'\(c.predicateFormat)' compares to-many key paths on both sides, which is not supported.", entityName: entity.name)
        }
    }

    /// `ANY`/`ALL`/`NONE` over a to-many path, possibly through further to-many relationships (each level one
    /// `EXISTS`); the elements are the flattened destinations, as in memory.
    mutating func quantified(
        _ path: ToManyPath, _ modifier: PredicateComparison.Modifier, _ c: PredicateComparison, right: Operand
    ) throws -> Fragment {
        let exists = try existsClause(path, c, right: right, negateTest: modifier == .all)
        switch modifier {
        case .all, .none: return Fragment("(NOT \(exists.sql))", exists.arguments)
        default: return exists
        }
    }

    /// `EXISTS (SELECT 1 FROM destinations WHERE link AND test)`, recursing through nested to-many relationships.
    mutating func existsClause(_ path: ToManyPath, _ c: PredicateComparison, right: Operand, negateTest: Bool) throws -> Fragment {
        let destination = path.relationship.destinationEntity!
        let (from, link, destAlias) = toManyFrom(path.relationship, sourceAlias: path.sourceAlias)
        let (test, joins) = try inSubqueryScope { compiler -> Fragment in
            switch try compiler.resolve(path.remaining, from: destination, alias: destAlias) {
            case .scalar(let element):
                let t = try compiler.scalarComparison(element, c.op, right, options: c.options, comparison: c, twoValued: negateTest)
                return negateTest ? Fragment("NOT \(t.sql)", t.arguments) : t
            case .toMany(let inner):
                return try compiler.existsClause(inner, c, right: right, negateTest: negateTest)
            }
        }
        let fromClause = joins.isEmpty ? from : from + " " + joins
        return Fragment("(EXISTS (SELECT 1 FROM \(fromClause) WHERE \(link) AND \(test.sql)))", test.arguments)
    }
}
