import Foundation
import OpenCoreDataModel

/// Computed columns of dictionary fetches (`NSExpressionDescription`): an expression per row, or an aggregate of a
/// per-row expression over the matching rows (or each group of them), and predicates over such columns (`HAVING`).
extension SQLPredicateCompiler {
    /// A computed column as SQL.
    package struct Column: Sendable {
        package var sql: String
        package var arguments: [SQLArgument]
        /// What its values are: an attribute type, or nil for an object's primary key (`SELF`, a to-one
        /// relationship) — `entity` is then the object's entity.
        package var type: NSAttributeType?
        package var entity: NSEntityDescription?
        /// Whether it aggregates rows (`sum:`, `count:`, `min:`, `max:`, `average:` at its top).
        package var isAggregate: Bool
    }

    /// The statistics that aggregate rows when they top a column's expression, and their SQL.
    static let aggregates: [FetchFunction: String] = [.sum: "SUM", .count: "COUNT", .min: "MIN", .max: "MAX", .average: "AVG"]

    /// Compiles a column's expression over alias `t0`: a statistic at its top aggregates the per-row value of its
    /// argument over the rows (`sum:(price)` is `SUM(t0.ZPRICE)`); anything else is one value per row.
    ///
    /// - Throws: `CoreDataError(.invalidFetchRequest)` for an unknown key, a to-many key path, a statistic SQL has
    ///   no aggregate for (`median:`, `mode:`, `stddev:`), a statistic inside another expression.
    package mutating func column(_ e: FetchExpression) throws -> Column {
        if case .function(let name, let arguments) = e, let count = FetchFunction.sizeSubscript(name, arguments) {
            return try column(count)
        }
        if case .function(let name, let arguments) = e, let function = FetchFunction(rawValue: name), function.isStatistic {
            guard let aggregate = Self.aggregates[function] else {
                throw unsupported(
                    "'\(name)' in a fetched expression: the statistics that aggregate rows are sum:, count:, min:, max: and average:")
            }
            guard arguments.count == 1 else {
                throw CoreDataError(.invalidFetchRequest, "'\(e.expressionFormat)': \(name) takes one argument.", entityName: entity.name)
            }
            let inner = try perRow(arguments[0], in: e)
            var value = inner.sql
            let type: NSAttributeType?
            switch function {
            case .count:
                return Column(
                    sql: "COUNT(\(value))", arguments: inner.arguments, type: .integer64AttributeType, entity: nil, isAggregate: true)
            case .average:
                value = dialect.castToReal(value)
                type = .doubleAttributeType
            case .sum:
                guard let t = inner.type, t.isNumeric else {
                    throw CoreDataError(
                        .wrongValueType, "'\(e.expressionFormat)' sums values that are not numbers.", entityName: entity.name)
                }
                let integral = [.integer16AttributeType, .integer32AttributeType, .integer64AttributeType, .booleanAttributeType].contains(
                    t)
                // The sum of no rows is 0, as the in-memory statistic is.
                let sql =
                    integral
                    ? "CAST(COALESCE(SUM(\(value)), 0) AS \(dialect.columnType("INTEGER")))"
                    : "COALESCE(SUM(\(dialect.castToReal(value))), 0)"
                return Column(
                    sql: sql, arguments: inner.arguments, type: integral ? .integer64AttributeType : .doubleAttributeType, entity: nil,
                    isAggregate: true)
            default:
                if inner.type == .decimalAttributeType { value = dialect.castToReal(value) }
                type = inner.type == .decimalAttributeType ? .doubleAttributeType : inner.type
            }
            return Column(sql: "\(aggregate)(\(value))", arguments: inner.arguments, type: type, entity: inner.entity, isAggregate: true)
        }
        return try perRow(e, in: e)
    }

    /// One value per row of `e`, as a column.
    private mutating func perRow(_ e: FetchExpression, in whole: FetchExpression) throws -> Column {
        if containsStatistic(e) {
            throw unsupported("'\(whole.expressionFormat)': a statistic of rows must be the whole expression of a fetched column")
        }
        let operand = try scalar(e, entity: entity, alias: "t0")
        switch operand.kind {
        case .attribute(let t):
            return Column(sql: operand.sql, arguments: operand.arguments, type: t, entity: nil, isAggregate: false)
        case .number:
            return Column(sql: operand.sql, arguments: operand.arguments, type: .doubleAttributeType, entity: nil, isAggregate: false)
        case .object(let destination):
            return Column(sql: operand.sql, arguments: operand.arguments, type: nil, entity: destination, isAggregate: false)
        case .constant(let value):
            return Column(
                sql: "?", arguments: [SQLStorage.encode(value)], type: Self.attributeType(of: value), entity: nil, isAggregate: false)
        case .objectIDConstant, .list:
            throw unsupported("'\(whole.expressionFormat)' as a fetched column (it is not one value per row)")
        }
    }

    /// The attribute type a constant column's value reads back as.
    static func attributeType(of value: AttributeValue) -> NSAttributeType? {
        switch value {
        case .integer: return .integer64AttributeType
        case .double: return .doubleAttributeType
        case .decimal: return .decimalAttributeType
        case .bool: return .booleanAttributeType
        case .string: return .stringAttributeType
        case .date: return .dateAttributeType
        case .data: return .binaryDataAttributeType
        case .uuid: return .UUIDAttributeType
        case .uri: return .URIAttributeType
        case .null, .object: return .undefinedAttributeType
        }
    }

    /// Whether a statistic function appears anywhere in `e`.
    private func containsStatistic(_ e: FetchExpression) -> Bool {
        switch e {
        case .function(let name, let arguments):
            if FetchFunction(rawValue: name)?.isStatistic == true { return true }
            return arguments.contains(where: containsStatistic)
        case .arithmetic(_, let a, let b): return containsStatistic(a) || containsStatistic(b)
        case .negate(let inner): return containsStatistic(inner)
        default: return false
        }
    }

    /// Compiles a `HAVING` predicate: a key path or `$variable` that is a column's name stands for that column's
    /// value (its aggregate, repeated: PostgreSQL does not let `HAVING` name a column alias); other key paths are
    /// the entity's, as in a `WHERE` clause.
    package mutating func compileHaving(_ predicate: FetchPredicate, columns: [String: Column]) throws -> Fragment {
        namedColumns = columns
        defer { namedColumns = [:] }
        return try compile(predicate)
    }

    /// The operand a column's name stands for in a `HAVING` predicate.
    func namedColumnOperand(_ name: String) -> Operand? {
        guard let column = namedColumns[name] else { return nil }
        let kind: Kind = column.type.map { .attribute($0) } ?? .object(column.entity ?? entity)
        return Operand(sql: column.sql, arguments: column.arguments, kind: kind, describe: name)
    }
}
