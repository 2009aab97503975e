import Foundation
import OpenCoreData

extension FetchPredicate {
    /// Parses a predicate format string as Apple's `NSPredicate(format:_:)` does: without `try`.
    ///
    /// For example:
    /// ```swift
    /// let p = NSPredicate(format: "name == %@", "Cheddar Cheese")
    /// ```
    /// A malformed format string is a programming error, as on Apple platforms (where it raises): it stops the program
    /// with the parser's message, a caret under the offending token. Parse strings that come from input with
    /// `try FetchPredicate(format:argumentArray:)`, which throws instead.
    public init(format: String, _ arguments: Any?...) {
        self.init(parsing: format, arguments)
    }

    /// Parses a predicate format string with arguments from an array, as Apple's `NSPredicate(format:argumentArray:)`.
    ///
    /// For example:
    /// ```swift
    /// let p = NSPredicate(format: "%K == %@", argumentArray: ["name", "Milk"])
    /// ```
    public init(format: String, argumentArray: [Any]?) {
        self.init(parsing: format, (argumentArray ?? []).map { Optional($0) })
    }

    /// The same for a non-optional array (so that an array literal picks this form, not the throwing one).
    public init(format: String, argumentArray: [Any]) {
        self.init(parsing: format, argumentArray.map { Optional($0) })
    }

    private init(parsing format: String, _ arguments: [Any?]) {
        do {
            let parsed: FetchPredicate = try FetchPredicate(format: format, argumentArray: arguments)
            self = parsed
        } catch {
            preconditionFailure("NSPredicate(format:): \(error)")
        }
    }

    /// A predicate that is always true or always false (`TRUEPREDICATE`, `FALSEPREDICATE`).
    ///
    /// For example:
    /// ```swift
    /// request.predicate = NSPredicate(value: true)
    /// ```
    public init(value: Bool) {
        self = value ? .truePredicate : .falsePredicate
    }

    /// True when every subpredicate is (true for none), as `NSCompoundPredicate(andPredicateWithSubpredicates:)`.
    public init(andPredicateWithSubpredicates subpredicates: [FetchPredicate]) {
        self = subpredicates.count == 1 ? subpredicates[0] : .and(subpredicates)
    }

    /// True when any subpredicate is (false for none), as `NSCompoundPredicate(orPredicateWithSubpredicates:)`.
    public init(orPredicateWithSubpredicates subpredicates: [FetchPredicate]) {
        self = subpredicates.count == 1 ? subpredicates[0] : .or(subpredicates)
    }

    /// True when the subpredicate is false, as `NSCompoundPredicate(notPredicateWithSubpredicate:)`.
    public init(notPredicateWithSubpredicate subpredicate: FetchPredicate) {
        self = .not(subpredicate)
    }

    /// Apple's `NSCompoundPredicate.LogicalType`.
    ///
    /// For example:
    /// ```swift
    /// let both = NSCompoundPredicate(type: .and, subpredicates: [inStock, cheap])
    /// ```
    public enum LogicalType: UInt, Sendable {
        case not = 0
        case and = 1
        case or = 2
    }

    /// A compound predicate of a logical type, as `NSCompoundPredicate(type:subpredicates:)` (`.not` takes the first
    /// subpredicate).
    public init(type: LogicalType, subpredicates: [FetchPredicate]) {
        switch type {
        case .and: self.init(andPredicateWithSubpredicates: subpredicates)
        case .or: self.init(orPredicateWithSubpredicates: subpredicates)
        case .not:
            precondition(subpredicates.count == 1, "A NOT predicate takes exactly one subpredicate, not \(subpredicates.count).")
            self = .not(subpredicates[0])
        }
    }

    /// The subpredicates of an AND, OR or NOT (empty for other predicates), as `NSCompoundPredicate.subpredicates`; a
    /// NONE comparison is NOT over the ANY comparison, as Apple builds it.
    public var subpredicates: [FetchPredicate] {
        switch self {
        case .and(let parts), .or(let parts): return parts
        case .not(let inner): return [inner]
        case .comparison(let comparison) where comparison.modifier == .none: return appleForm.subpredicates
        default: return []
        }
    }

    /// Apple's `NSComparisonPredicate.Operator`, with its case names.
    ///
    /// For example:
    /// ```swift
    /// let p = NSComparisonPredicate(leftExpression: NSExpression(forKeyPath: "price"), rightExpression: NSExpression(forConstantValue: 100), type: .lessThan)
    /// ```
    public enum Operator: UInt, Sendable {
        case lessThan = 0
        case lessThanOrEqualTo = 1
        case greaterThan = 2
        case greaterThanOrEqualTo = 3
        case equalTo = 4
        case notEqualTo = 5
        case matches = 6
        case like = 7
        case beginsWith = 8
        case endsWith = 9
        case `in` = 10
        case contains = 99
        case between = 100

        /// The operator in OpenCoreData's tree: the one whose Apple raw value this is.
        var comparisonOperator: PredicateComparison.Operator {
            PredicateComparison.Operator.allCases.first { UInt($0.appleOperatorType) == rawValue }!
        }
    }

    /// Apple's `NSComparisonPredicate.Modifier`.
    ///
    /// For example:
    /// ```swift
    /// let p = NSComparisonPredicate(leftExpression: NSExpression(forKeyPath: "items.price"), rightExpression: NSExpression(forConstantValue: 5), modifier: .any, type: .lessThan)
    /// ```
    public enum Modifier: UInt, Sendable {
        case direct = 0
        case all = 1
        case any = 2
    }

    /// Apple's `NSComparisonPredicate.Options`.
    ///
    /// For example:
    /// ```swift
    /// let p = NSComparisonPredicate(leftExpression: NSExpression(forKeyPath: "name"), rightExpression: NSExpression(forConstantValue: "cafe"), type: .equalTo, options: [.caseInsensitive, .diacriticInsensitive])
    /// ```
    public struct Options: OptionSet, Sendable {
        /// The options as bits.
        public let rawValue: UInt
        /// Options from their bits.
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// `[c]`: case does not matter.
        public static let caseInsensitive = Options(rawValue: 1)
        /// `[d]`: accents and other diacritics do not matter.
        public static let diacriticInsensitive = Options(rawValue: 2)
        /// `[n]`: the strings are already normalized.
        public static let normalized = Options(rawValue: 4)
    }

    /// A comparison of two expressions, as `NSComparisonPredicate(leftExpression:rightExpression:modifier:type:options:)`.
    public init(
        leftExpression: FetchExpression, rightExpression: FetchExpression, modifier: Modifier = .direct, type: Operator,
        options: Options = []
    ) {
        // (The same bits: case 1, diacritics 2, normalized 4.)
        let comparisonOptions = PredicateComparison.Options(rawValue: Int(options.rawValue & 7))
        let quantifier: PredicateComparison.Modifier =
            switch modifier {
            case .direct: .direct
            case .all: .all
            case .any: .any
            }
        self = .comparison(
            PredicateComparison(leftExpression, type.comparisonOperator, rightExpression, modifier: quantifier, options: comparisonOptions))
    }
}

extension FetchExpression {
    /// The value of a key path of the evaluated object, as `NSExpression(forKeyPath:)`.
    public init(forKeyPath keyPath: String) {
        self = .key(keyPath)
    }

    /// A constant, as `NSExpression(forConstantValue:)`: strings, numbers, dates, data, UUIDs, URLs, objects and
    /// their IDs, and arrays or sets of these.
    ///
    /// A value of another type is a programming error (Apple raises too).
    public init(forConstantValue value: Any?) {
        guard let constant = PredicateConstant(argument: value) else {
            preconditionFailure("NSExpression(forConstantValue:) cannot hold a \(type(of: value as Any)).")
        }
        self = .constant(constant)
    }

    /// The evaluated object itself (`SELF`), as `NSExpression.expressionForEvaluatedObject()`.
    public static func expressionForEvaluatedObject() -> FetchExpression { .evaluatedObject }

    /// A variable (`$name`), substituted later, as `NSExpression(forVariable:)`.
    public init(forVariable name: String) {
        self = .variable(name)
    }

    /// Parses an expression format string, as Apple's `NSExpression(format:)`: `NSExpression(format: "4 + 5 - 2**3")`.
    ///
    /// A malformed format string stops the program with the parser's message, as Apple's raises; parse strings that
    /// come from input with `try FetchExpression(format:argumentArray:)`, which throws instead.
    public init(format: String, _ arguments: Any?...) {
        do {
            self = try FetchExpression(format: format, argumentArray: arguments)
        } catch {
            preconditionFailure("NSExpression(format:): \(error)")
        }
    }

    /// One of NSExpression's built-in functions (`"sum:"`, `"lowercase:"`, `"now"`, …; `FetchFunction` lists them),
    /// as `NSExpression(forFunction:arguments:)`.
    ///
    /// An unknown name is a programming error (Apple raises too).
    public init(forFunction name: String, arguments: [FetchExpression]) {
        guard let function = FetchFunction(called: name, argumentCount: arguments.count) else {
            preconditionFailure("NSExpression(forFunction:) has no function \(name); the functions are \(FetchFunction.names).")
        }
        // `add:to:` and its kind are the expression `a + b` parses to, as on Apple's platforms.
        if let op = function.arithmeticOperator, arguments.count == 2 {
            self = .arithmetic(op, arguments[0], arguments[1])
        } else {
            self = .function(function.rawValue, arguments)
        }
    }

    /// A list of expressions (`{1, 2, name}`), as `NSExpression(forAggregate:)`.
    public init(forAggregate subexpressions: [FetchExpression]) {
        self = .aggregate(subexpressions)
    }

    /// The members of a collection that a predicate holds for (`SUBQUERY(items, $item, $item.price > 5)`), as
    /// `NSExpression(forSubquery:usingIteratorVariable:predicate:)`.
    public init(forSubquery collection: FetchExpression, usingIteratorVariable variable: String, predicate: FetchPredicate) {
        self = .subquery(collection, variable, predicate)
    }

    /// `TERNARY(predicate, whenTrue, whenFalse)`, as `NSExpression(forConditional:trueExpression:falseExpression:)`.
    public init(forConditional predicate: FetchPredicate, trueExpression: FetchExpression, falseExpression: FetchExpression) {
        self = .conditional(predicate, trueExpression, falseExpression)
    }

    /// The members of both collections, as `NSExpression(forUnionSet:with:)`: written `a UNION b`.
    ///
    /// For example:
    /// ```swift
    /// let open = NSExpression(forUnionSet: NSExpression(forConstantValue: ["new"]), with: NSExpression(forVariable: "MORE"))
    /// ```
    public init(forUnionSet left: FetchExpression, with right: FetchExpression) {
        self = .function(FetchFunction.unionSet.rawValue, [left, right])
    }

    /// The members of `left` that `right` holds too, as `NSExpression(forIntersectSet:with:)`: `a INTERSECT b`.
    public init(forIntersectSet left: FetchExpression, with right: FetchExpression) {
        self = .function(FetchFunction.intersectSet.rawValue, [left, right])
    }

    /// The members of `left` that `right` does not hold, as `NSExpression(forMinusSet:with:)`: `a MINUS b`.
    public init(forMinusSet left: FetchExpression, with right: FetchExpression) {
        self = .function(FetchFunction.minusSet.rawValue, [left, right])
    }

    /// The expression's value for `object` (nil for an expression of constants), as Apple's
    /// `expressionValue(with:context:)`: numbers as `NSNumber`, strings, dates, data, nil for no value; a list or a
    /// to-many key path as an array, the result of `UNION`, `INTERSECT` or `MINUS` as a `Set`, objects as themselves.
    ///
    /// The object is a managed object, or any value `FetchPredicate.evaluate(with:)` takes (a dictionary whose keys
    /// read as properties, an array, a string, a number).
    ///
    /// - Throws: `CoreDataError` where Apple raises: an unknown key, a value of the wrong kind.
    public func expressionValue(with object: Any? = nil) throws -> Any? {
        try foundationValue(with: object)
    }
}

extension NSKeyedArchiver {
    /// Archives a predicate as Apple's archiver does (see `FetchPredicate.archivedData()`), so that code archiving an
    /// `NSPredicate` compiles unchanged: Foundation on Linux cannot archive predicates itself.
    ///
    /// For example:
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: predicate, requiringSecureCoding: true)
    /// ```
    public static func archivedData(withRootObject predicate: NSPredicate, requiringSecureCoding: Bool) throws -> Data {
        try predicate.archivedData()
    }
}

extension NSKeyedUnarchiver {
    /// Unarchives a predicate archived by Apple's archiver or this project's (see `FetchPredicate(archivedData:)`), so
    /// that code unarchiving an `NSPredicate` compiles unchanged: Foundation on Linux cannot unarchive predicates.
    ///
    /// For example:
    /// ```swift
    /// let predicate = try NSKeyedUnarchiver.unarchivedObject(ofClass: NSPredicate.self, from: data)
    /// ```
    public static func unarchivedObject(ofClass cls: NSPredicate.Type, from data: Data) throws -> NSPredicate? {
        try NSPredicate(archivedData: data)
    }
}

extension FetchPredicate {
    /// Evaluates the predicate against an object, as Apple's `NSPredicate.evaluate(with:)`: without `try`, so that
    /// in-memory filtering (`items.filter { predicate.evaluate(with: $0) }`) compiles unchanged.
    ///
    /// An evaluation that fails (an operator applied to values it does not take, an unknown key) is a programming error,
    /// as on Apple platforms (where it raises): it stops the program with the evaluator's message. Evaluate predicates
    /// made from input with `try evaluate(with:variables:)`, which throws instead.
    public func evaluate(with object: Any?) -> Bool {
        evaluate(with: object, substitutionVariables: nil)
    }

    /// The same with values for the predicate's `$VARIABLE`s, as Apple's `evaluate(with:substitutionVariables:)`.
    ///
    /// A value may be anything `withSubstitutionVariables(_:)` takes: a number, string, date or other single value, and
    /// also a list, set or object (`$LIST[0] > 1`, `name IN $NAMES`), which are substituted into the predicate first.
    public func evaluate(with object: Any?, substitutionVariables: [String: Any]?) -> Bool {
        do {
            var variables: [String: AttributeValue] = [:]
            for (name, value) in substitutionVariables ?? [:] {
                guard let converted = AttributeValue.converting(value) else {
                    let filled = try withSubstitutionVariables(substitutionVariables!.mapValues { Optional($0) })
                    return try filled.evaluate(with: object, variables: [:])
                }
                variables[name] = converted
            }
            return try evaluate(with: object, variables: variables)
        } catch {
            preconditionFailure("NSPredicate.evaluate(with:): \(error)")
        }
    }
}

extension FetchPredicate {
    /// The predicate with its `$VARIABLE`s replaced, as Apple's `withSubstitutionVariables(_:)`: without `try`.
    ///
    /// A variable with no value, or a value of a type a predicate cannot hold, is a programming error, as on Apple
    /// platforms (where it raises). Fill templates from input with `try withSubstitutionVariables(_:)` on
    /// `[String: Any?]`, which throws instead.
    public func withSubstitutionVariables(_ variables: [String: Any]) -> FetchPredicate {
        do {
            return try withSubstitutionVariables(variables.mapValues { Optional($0) })
        } catch {
            preconditionFailure("NSPredicate.withSubstitutionVariables(_:): \(error)")
        }
    }

    /// Does nothing: a predicate read from an archive evaluates here without it (Apple's archived predicates must be
    /// allowed to evaluate first).
    public func allowEvaluation() {}
}

extension FetchExpression {
    /// The expression's value for `object`, as Apple's `expressionValue(with:context:)`: without `try` (the context
    /// dictionary, where Apple's functions keep scratch values, is not used).
    ///
    /// An evaluation that fails is a programming error, as on Apple platforms (where it raises); use
    /// `try expressionValue(with:)` for expressions made from input.
    public func expressionValue(with object: Any?, context: NSMutableDictionary?) -> Any? {
        do {
            return try expressionValue(with: object)
        } catch {
            preconditionFailure("NSExpression.expressionValue(with:context:): \(error)")
        }
    }
}
