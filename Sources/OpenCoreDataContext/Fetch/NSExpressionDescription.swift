import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// A computed column of a dictionary fetch: its key in each dictionary, the expression that computes it, and the
/// type of its values.
///
/// An aggregate (`sum:`, `count:`, `min:`, `max:`, `average:` of a key path or of an expression of one) sums up the
/// matching rows, or each group of them with `propertiesToGroupBy`; any other expression is computed for each row;
/// `SELF` gives each object's ID. All of it runs in SQL.
///
/// For example:
/// ```swift
/// let total = NSExpressionDescription()
/// total.name = "total"
/// total.expression = FetchExpression.function("sum:", [.key("amount")])
/// total.expressionResultType = .doubleAttributeType
/// request.resultType = .dictionaryResultType
/// request.propertiesToFetch = ["category", total]
/// request.propertiesToGroupBy = ["category"]
/// let totals = try context.fetch(request)   // [["category": "Food", "total": 42.5], …]
/// ```
public final class NSExpressionDescription: @unchecked Sendable, CustomStringConvertible {
    /// The key of the computed value in each dictionary.
    public var name: String = ""
    /// What computes the value (`NSExpression` with the compatibility names).
    public var expression: FetchExpression?
    /// The type the values are handed out as (`NSNumber` of that width for numbers, `Date`, `String`…;
    /// `.objectIDAttributeType` for `SELF` or a to-one relationship); `.undefinedAttributeType`: the expression's own.
    public var expressionResultType: NSAttributeType = .undefinedAttributeType

    /// An empty description: set `name` and `expression`.
    public init() {}

    /// A description with its name, expression and result type.
    public init(name: String, expression: FetchExpression, resultType: NSAttributeType = .undefinedAttributeType) {
        self.name = name
        self.expression = expression
        expressionResultType = resultType
    }

    /// The name and the expression, for logs.
    public var description: String {
        "<NSExpressionDescription name: \(name), expression: \(expression?.expressionFormat ?? "nil")>"
    }
}
