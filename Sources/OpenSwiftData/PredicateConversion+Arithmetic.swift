internal import OpenCoreData

/// `-x`, `/` and `%` on integers, and `range.contains(x)`, as Core Data's predicate language writes them.
extension PredicateExpressions.UnaryMinus: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        .expression(.negate(try converter.expression(wrapped)))
    }
}

extension PredicateExpressions.IntDivision: FetchConvertible {
    /// Swift's quotient, rounded toward zero.
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        .expression(.integerQuotient(try converter.expression(lhs), try converter.expression(rhs)))
    }
}

extension PredicateExpressions.IntRemainder: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        .expression(.remainder(try converter.expression(lhs), try converter.expression(rhs)))
    }
}

extension PredicateExpressions.RangeExpressionContains: FetchConvertible {
    /// `(low...high).contains(x)`: `x >= low AND x <= high` (`x < high` for `..<`), the bounds read from the
    /// predicate's range or from a range it captured.
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        let value = try converter.expression(element)
        if let node = range as? any PredicateRangeNode {
            let lower = try converter.expression(node.lowerNode)
            let upper = try converter.expression(node.upperNode)
            return .predicate(.range(value, from: lower, to: upper, closed: node.isClosed))
        }
        guard let constant = PredicateConverter.constantValue(of: range) as? any PredicateRangeValue else {
            throw SwiftDataError(
                "OpenSwiftData cannot run contains on \(Swift.type(of: range)) in a predicate yet.", kind: .unsupportedPredicate)
        }
        let bounds = constant.predicateBounds
        return .predicate(
            .range(
                value, from: try PredicateConverter.constant(bounds.lower), to: try PredicateConverter.constant(bounds.upper),
                closed: bounds.closed))
    }
}
