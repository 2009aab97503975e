import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// A Swift range's bounds, for a `#Predicate`'s `range.contains(x)` when the range is a captured value.
package protocol PredicateRangeValue {
    /// The bounds, and whether the upper one is in the range.
    var predicateBounds: (lower: Any, upper: Any, closed: Bool) { get }
}

extension ClosedRange: PredicateRangeValue {
    package var predicateBounds: (lower: Any, upper: Any, closed: Bool) { (lowerBound, upperBound, true) }
}

extension Range: PredicateRangeValue {
    package var predicateBounds: (lower: Any, upper: Any, closed: Bool) { (lowerBound, upperBound, false) }
}

/// A `#Predicate`'s range node (`lower...upper`, `lower..<upper`): its bound nodes.
package protocol PredicateRangeNode {
    var lowerNode: Any { get }
    var upperNode: Any { get }
    var isClosed: Bool { get }
}

extension PredicateExpressions.ClosedRange: PredicateRangeNode {
    package var lowerNode: Any { lower }
    package var upperNode: Any { upper }
    package var isClosed: Bool { true }
}

extension PredicateExpressions.Range: PredicateRangeNode {
    package var lowerNode: Any { lower }
    package var upperNode: Any { upper }
    package var isClosed: Bool { false }
}

extension FetchPredicate {
    /// `lower...upper` (or `lower..<upper`) contains `element`: `element >= lower AND element <= upper` (`<`).
    package static func range(_ element: FetchExpression, from lower: FetchExpression, to upper: FetchExpression, closed: Bool)
        -> FetchPredicate
    {
        .and([
            .comparison(PredicateComparison(element, .greaterThanOrEqual, lower)),
            .comparison(PredicateComparison(element, closed ? .lessThanOrEqual : .lessThan, upper)),
        ])
    }
}

extension FetchExpression {
    /// Swift's `/` on integers: the quotient rounded toward zero (`trunc:(divide:by:(a, b))`).
    package static func integerQuotient(_ a: FetchExpression, _ b: FetchExpression) -> FetchExpression {
        .function(FetchFunction.trunc.rawValue, [.arithmetic(.divide, a, b)])
    }

    /// Swift's `%`: `modulus:by:(a, b)`, whose sign is the dividend's.
    package static func remainder(_ a: FetchExpression, _ b: FetchExpression) -> FetchExpression {
        .function(FetchFunction.modulus.rawValue, [a, b])
    }

    /// A string's `count` in a predicate: `length:`, in UTF-16 code units (NSString's length, which is the number of
    /// characters for text without combined characters or characters beyond the Basic Multilingual Plane).
    package static func length(_ string: FetchExpression) -> FetchExpression {
        .function(FetchFunction.length.rawValue, [string])
    }
}

extension PredicateExpressions.RangeExpressionContains: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        let value = try t.expression(element)
        if let node = range as? any PredicateRangeNode {
            return .predicate(
                .range(value, from: try t.expression(node.lowerNode), to: try t.expression(node.upperNode), closed: node.isClosed))
        }
        if let constant = (range as? any PredicateExpressionValueNode)?.constantValue as? any PredicateRangeValue {
            let bounds = constant.predicateBounds
            guard let lower = PredicateConstant(argument: bounds.lower), let upper = PredicateConstant(argument: bounds.upper) else {
                throw t.unsupported("a range of \(type(of: bounds.lower))")
            }
            return .predicate(.range(value, from: .constant(lower), to: .constant(upper), closed: bounds.closed))
        }
        throw t.unsupported("contains on \(String(describing: type(of: range)).prefix(80))")
    }
}

/// A constant node's value.
protocol PredicateExpressionValueNode {
    var constantValue: Any { get }
}

extension PredicateExpressions.Value: PredicateExpressionValueNode {
    var constantValue: Any { value }
}

extension PredicateExpressions.IntDivision: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .expression(.integerQuotient(try t.expression(lhs), try t.expression(rhs)))
    }
}

extension PredicateExpressions.IntRemainder: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .expression(.remainder(try t.expression(lhs), try t.expression(rhs)))
    }
}
