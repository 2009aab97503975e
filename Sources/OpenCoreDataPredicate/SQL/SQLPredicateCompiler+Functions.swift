import Foundation
import OpenCoreDataModel

/// `FetchFunction` calls in SQL: statistics over a to-many relationship as its collection operator (`sum(items.price)`
/// is `items.@sum.price`), arithmetic as the operators, the rest through the dialect; calls on constants only are
/// computed here by the evaluator's code.
extension SQLPredicateCompiler {
    mutating func functionOperand(
        _ name: String, _ arguments: [FetchExpression], entity: NSEntityDescription, alias: String, describe: String
    ) throws -> Operand {
        guard let function = FetchFunction(rawValue: name) else {
            throw unsupported("the function '\(name)' (the functions are \(FetchFunction.names))")
        }
        if function == .now { return constantOperand(.value(.date(Date()))) }
        if case .function(let count, let collection) = FetchFunction.sizeSubscript(name, arguments) {
            return try functionOperand(count, collection, entity: entity, alias: alias, describe: describe)
        }
        if function.isStatistic {
            guard arguments.count == 1 else { throw unsupported("\(name) of \(arguments.count) arguments") }
            return try statistic(function, of: arguments[0], entity: entity, alias: alias, describe: describe)
        }
        if function == .element {
            // An element of a list of constants; a to-many relationship's objects have no order to index in SQL.
            var items: [PredicateConstant]?
            switch arguments.first {
            case .constant(.array(let constants)): items = constants
            case .aggregate(let expressions):
                items = expressions.map { if case .constant(let c) = $0 { c } else { nil } }.compactMap { $0 }
                if items?.count != expressions.count { items = nil }
            default: items = nil
            }
            guard let items, arguments.count == 2, case .constant(.value(let index)) = arguments[1] else {
                throw unsupported("'\(describe)': a subscript is computed in a fetch only for a list of constants and a constant index")
            }
            return constantOperand(FetchFunction.element(of: items, at: index) ?? .null)
        }
        if function.isSetOperation {
            // Computed before the fetch runs: SQL has no collections to combine row by row.
            guard let members = FetchFunction.constantMembers(of: .function(name, arguments)) else {
                throw unsupported("'\(describe)' (UNION, INTERSECT and MINUS of anything but constant lists and substituted variables)")
            }
            return constantOperand(.array(members))
        }
        guard arguments.count == function.arity else {
            throw CoreDataError(
                .invalidFetchRequest, "\(name) takes \(function.arity) argument(s), not \(arguments.count) ('\(describe)').")
        }
        if let op = function.arithmeticOperator {
            return try scalar(.arithmetic(op, arguments[0], arguments[1]), entity: entity, alias: alias)
        }
        var operands: [Operand] = []
        for argument in arguments { operands.append(try scalar(argument, entity: entity, alias: alias)) }
        if function == .noindex { return operands[0] }
        let constants = operands.compactMap { operand -> AttributeValue? in
            if case .constant(let v) = operand.kind { return v }
            return nil
        }
        if constants.count == operands.count {
            do {
                return constantOperand(.value(try function.apply(constants)))
            } catch let error as CoreDataError {
                throw CoreDataError(.wrongValueType, "'\(describe)': \(error.message)")
            }
        }
        switch function {
        case .uppercase, .lowercase, .length, .canonical:
            let text = operands[0]
            switch text.kind {
            case .attribute(.stringAttributeType): break
            default:
                throw CoreDataError(.wrongValueType, "\(name) in '\(describe)' needs a string, but '\(text.describe)' is not one.")
            }
            let sql = dialect.call(function, [text.sql], integral: [false])
            return Operand(
                sql: sql, arguments: text.arguments,
                kind: function == .length ? .attribute(.integer64AttributeType) : .attribute(.stringAttributeType),
                describe: describe)
        default:
            let expression = FetchExpression.function(name, arguments)
            let numbers = try operands.map { try numeric($0, in: expression) }
            let integral = operands.map { operand -> Bool in
                switch operand.kind {
                case .attribute(let type):
                    return [.integer16AttributeType, .integer32AttributeType, .integer64AttributeType, .booleanAttributeType].contains(type)
                case .constant(.integer), .constant(.bool): return true
                default: return false
                }
            }
            return Operand(
                sql: dialect.call(function, numbers.map(\.sql), integral: integral), arguments: numbers.flatMap(\.arguments),
                kind: .number, describe: describe)
        }
    }

    /// `sum(items.price)`, `count(items)`, `max({1, 2, age})`: the statistic of a to-many key path is its collection
    /// operator; of one value, the value; of a list of constants, computed here.
    private mutating func statistic(
        _ function: FetchFunction, of argument: FetchExpression, entity: NSEntityDescription, alias: String, describe: String
    ) throws -> Operand {
        if case .aggregate(let items) = argument {
            var values: [AttributeValue] = []
            for item in items {
                guard case .scalar(let operand) = try operand(item, entity: entity, alias: alias), case .constant(let v) = operand.kind
                else {
                    throw unsupported("'\(describe)': \(function.rawValue) of a list is computed in SQL only when the list holds constants")
                }
                values.append(v)
            }
            do {
                return constantOperand(.value(try function.apply(values)))
            } catch let error as CoreDataError {
                throw CoreDataError(.wrongValueType, "'\(describe)': \(error.message)")
            }
        }
        switch try operand(argument, entity: entity, alias: alias) {
        case .toMany(let path):
            guard case .keyPath(let base, let components) = argument else {
                throw unsupported("'\(describe)': \(function.rawValue) of '\(argument.expressionFormat)'")
            }
            let collectionOperator: String
            switch function {
            case .count: collectionOperator = "@count"
            case .sum: collectionOperator = "@sum"
            case .average: collectionOperator = "@avg"
            case .min: collectionOperator = "@min"
            case .max: collectionOperator = "@max"
            default:
                throw unsupported("'\(describe)': \(function.rawValue) over a to-many relationship (sum, count, min, max and average are)")
            }
            let prefix = Array(components.dropLast(path.remaining.count))
            let rest = function == .count ? [] : path.remaining
            return try scalar(.keyPath(base, prefix + [collectionOperator] + rest), entity: entity, alias: alias)
        case .scalar(let value):
            // One value (or none, when it is nil) reduced.
            switch function {
            case .count:
                return Operand(
                    sql: "(CASE WHEN \(value.sql) IS NULL THEN 0 ELSE 1 END)", arguments: value.arguments,
                    kind: .attribute(.integer64AttributeType), describe: describe)
            case .sum:
                let number = try numeric(value, in: argument)
                return Operand(sql: "COALESCE(\(number.sql), 0)", arguments: number.arguments, kind: .number, describe: describe)
            case .stddev:
                let number = try numeric(value, in: argument)
                return Operand(
                    sql: "(CASE WHEN \(number.sql) IS NULL THEN NULL ELSE 0.0 END)", arguments: number.arguments, kind: .number,
                    describe: describe)
            case .min, .max: return value
            default: return try numeric(value, in: argument)
            }
        }
    }
}
