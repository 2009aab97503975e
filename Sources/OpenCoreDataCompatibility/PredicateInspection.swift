import Foundation
import OpenCoreData

// Apple's accessors for taking a predicate apart (`NSComparisonPredicate.leftExpression`, `NSExpression.keyPath`, …),
// so that code walking a predicate's tree (to translate it into another query language, say) ports unchanged. The
// tree is OpenCoreData's; each accessor answers as Apple's class of that node would. Asking a node for what its class
// does not have (the left expression of an AND) is a programming error, as on Apple platforms (an unrecognized
// selector there): it stops the program naming the node.

extension FetchPredicate {
    private var comparison: PredicateComparison {
        guard case .comparison(let comparison) = appleForm else { preconditionFailure("\(self) is not an NSComparisonPredicate") }
        return comparison
    }

    /// AND, OR or NOT, as `NSCompoundPredicate.compoundPredicateType` (a NONE comparison is a NOT, as Apple builds it).
    public var compoundPredicateType: LogicalType {
        switch appleForm {
        case .and: return .and
        case .or: return .or
        case .not: return .not
        default: preconditionFailure("\(self) is not an NSCompoundPredicate")
        }
    }

    /// The left side of a comparison, as `NSComparisonPredicate.leftExpression`.
    public var leftExpression: FetchExpression { comparison.left }

    /// The right side of a comparison, as `NSComparisonPredicate.rightExpression`.
    public var rightExpression: FetchExpression { comparison.right }

    /// The comparison's operator, as `NSComparisonPredicate.predicateOperatorType`.
    public var predicateOperatorType: Operator { Operator(rawValue: UInt(comparison.op.appleOperatorType))! }

    /// Direct, ANY or ALL, as `NSComparisonPredicate.comparisonPredicateModifier`.
    public var comparisonPredicateModifier: Modifier {
        switch comparison.modifier {
        case .direct: return .direct
        case .all: return .all
        case .any, .none: return .any
        }
    }

    /// The comparison's string options, as `NSComparisonPredicate.options`.
    public var options: Options { Options(rawValue: UInt(comparison.options.rawValue)) }
}

extension FetchExpression {
    /// Apple's `NSExpression.ExpressionType`, with its raw values.
    public enum ExpressionType: UInt, Sendable {
        case constantValue = 0
        case evaluatedObject = 1
        case variable = 2
        case keyPath = 3
        case function = 4
        case unionSet = 5
        case intersectSet = 6
        case minusSet = 7
        case subquery = 13
        case aggregate = 14
        case anyKey = 15
        case block = 19
        case conditional = 20
    }

    /// The kind of expression, as `NSExpression.expressionType`: arithmetic and negation are functions (`add:to:`,
    /// `from:subtract:`), as Apple builds them.
    public var expressionType: ExpressionType {
        switch self {
        case .constant: return .constantValue
        case .evaluatedObject: return .evaluatedObject
        case .variable: return .variable
        case .keyPath: return .keyPath
        case .aggregate: return .aggregate
        case .subquery: return .subquery
        case .conditional: return .conditional
        case .arithmetic, .negate: return .function
        case .function(let name, _):
            switch name {
            case FetchFunction.unionSet.rawValue: return .unionSet
            case FetchFunction.intersectSet.rawValue: return .intersectSet
            case FetchFunction.minusSet.rawValue: return .minusSet
            default: return .function
            }
        }
    }

    /// A constant's value (numbers as `NSNumber`, strings, dates, arrays, nil), as `NSExpression.constantValue`.
    public var constantValue: Any? {
        guard case .constant = self else { preconditionFailure("\(self) is not a constant value expression") }
        return expressionValue(with: nil, context: nil)
    }

    /// A key path expression's path (`department.name`), as `NSExpression.keyPath`; its `operand` is what it is taken
    /// from (`SELF`, or a variable in `$item.price`).
    public var keyPath: String {
        guard case .keyPath(_, let path) = self else { preconditionFailure("\(self) is not a key path expression") }
        return path.joined(separator: ".")
    }

    /// A variable's name (without `$`), or a subquery's, as `NSExpression.variable`.
    public var variable: String {
        switch self {
        case .variable(let name), .subquery(_, let name, _): return name
        default: preconditionFailure("\(self) is not a variable or subquery expression")
        }
    }

    /// The function's selector-style name (`sum:`, `add:to:`, `now`), as `NSExpression.function`.
    public var function: String { functionParts.name }

    /// The function's arguments, as `NSExpression.arguments`.
    public var arguments: [FetchExpression]? { functionParts.arguments }

    private var functionParts: (name: String, arguments: [FetchExpression]) {
        guard let function = appleFunction else { preconditionFailure("\(self) is not a function expression") }
        return (function.selector, function.arguments)
    }

    /// What a key path is taken from, as `NSExpression.operand` (`SELF` for a plain key path).
    public var operand: FetchExpression {
        guard case .keyPath(let base, _) = self else { preconditionFailure("\(self) is not a key path expression") }
        return base
    }

    /// A list's members (`[NSExpression]`), or the collection a subquery filters (an `NSExpression`), as
    /// `NSExpression.collection`.
    public var collection: Any {
        switch self {
        case .aggregate(let members): return members
        case .subquery(let collection, _, _): return collection
        default: preconditionFailure("\(self) is not an aggregate or subquery expression")
        }
    }

    /// A subquery's or a conditional's predicate, as `NSExpression.predicate`.
    public var predicate: FetchPredicate {
        switch self {
        case .subquery(_, _, let predicate), .conditional(let predicate, _, _): return predicate
        default: preconditionFailure("\(self) is not a subquery or conditional expression")
        }
    }

    /// A set expression's left side, as `NSExpression.left`.
    public var left: FetchExpression { setSides.left }

    /// A set expression's right side, as `NSExpression.right`.
    public var right: FetchExpression { setSides.right }

    private var setSides: (left: FetchExpression, right: FetchExpression) {
        guard case .function(_, let arguments) = self, [.unionSet, .intersectSet, .minusSet].contains(expressionType), arguments.count == 2
        else { preconditionFailure("\(self) is not a set expression") }
        return (arguments[0], arguments[1])
    }

    /// A conditional's value where its predicate holds, as `NSExpression.trueExpression`.
    public var trueExpression: FetchExpression {
        guard case .conditional(_, let whenTrue, _) = self else { preconditionFailure("\(self) is not a conditional expression") }
        return whenTrue
    }

    /// A conditional's value where its predicate does not hold, as `NSExpression.falseExpression`.
    public var falseExpression: FetchExpression {
        guard case .conditional(_, _, let whenFalse) = self else { preconditionFailure("\(self) is not a conditional expression") }
        return whenFalse
    }
}
