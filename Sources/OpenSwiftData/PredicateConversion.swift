internal import OpenCoreData

/// Turns a Foundation `#Predicate` into the fetch predicate OpenCoreData compiles to SQL: the predicate's expression
/// tree, walked node by node, each kind of node with its counterpart in Core Data's predicate language.
///
/// Supported: key paths through persisted properties (to-one relationships followed, `count` of a to-many), constants
/// (enums by their raw values, models by their rows), `==`, `!=`, `<`, `<=`, `>`, `>=`, `&&`, `||`, `!`, `+`, `-`,
/// `*`, `/`, `%`, unary `-`, `(a...b).contains(x)` and `(a..<b).contains(x)`, `count` of a string (its UTF-16
/// length, as `length:`), `contains` (of a string: CONTAINS; of a constant list: IN; of a to-many: the model among its models),
/// `starts(with:)` (BEGINSWITH), `contains(where:)`, `allSatisfy` and `filter` on a
/// to-many (SUBQUERY), `isEmpty` of a to-many or a string, `is` and `as?` a model subclass, `/` on floating-point values, a model's `persistentModelID` (its row), optional chaining through a to-one, `??` (the condition around it split on whether its left side is nil), `? :` between conditions or values (split on the test), a Bool property as a condition.
/// Anything else throws an error naming the expression.
struct PredicateConverter {
    private var variables: [PredicateExpressions.VariableID: FetchExpression] = [:]
    private var nextVariable = 0
    /// The `??` and `? :` values of the condition being converted: each stands in it as a variable, and the condition is
    /// split on whether the value is nil, or on the test, when it is done (`predicate(_:)`).
    private var coalesced: [(name: String, split: Split)] = []

    /// How a condition splits on a value that stands in it as a variable.
    private enum Split {
        /// `value ?? fallback`.
        case coalescing(FetchExpression, fallback: FetchExpression)
        /// `test ? value : otherwise`.
        case choosing(FetchPredicate, FetchExpression, otherwise: FetchExpression)
    }
    /// The schema the predicate's models belong to.
    let schema: Schema
    /// The row a model identifier names.
    let objectID: (PersistentIdentifier) -> NSManagedObjectID?

    /// The fetch predicate of `predicate` on `schema`'s models; `objectID` finds the rows of the model identifiers it
    /// holds.
    static func convert<T: PersistentModel>(
        _ predicate: Predicate<T>, schema: Schema, objectID: @escaping (PersistentIdentifier) -> NSManagedObjectID?
    ) throws -> FetchPredicate {
        var converter = PredicateConverter(schema: schema, objectID: objectID)
        converter.variables[predicate.variable.key] = .evaluatedObject
        return try converter.predicate(predicate.expression)
    }

    /// A node that must be a condition (a Bool-valued expression is compared with true).
    mutating func predicate(_ node: Any) throws -> FetchPredicate {
        let outer = coalesced
        coalesced = []
        defer { coalesced = outer }
        var condition = asCondition(try convert(node))
        // `f(a ?? b)`: `(a != nil AND f(a)) OR (a == nil AND f(b))`; `f(t ? a : b)`: `(t AND f(a)) OR (NOT t AND f(b))`;
        // innermost last.
        for (name, split) in coalesced.reversed() {
            let (test, value, otherwise): (FetchPredicate, FetchExpression, FetchExpression)
            switch split {
            case .coalescing(let wrapped, let fallback):
                (test, value, otherwise) = (
                    .not(.comparison(PredicateComparison(wrapped, .equal, .constant(.value(.null))))), wrapped, fallback
                )
            case .choosing(let condition, let chosen, let other): (test, value, otherwise) = (condition, chosen, other)
            }
            condition = .or([
                .and([test, condition.replacingVariable(name, with: value)]),
                .and([.not(test), condition.replacingVariable(name, with: otherwise)]),
            ])
        }
        return condition
    }

    /// A variable standing for `value ?? fallback` in the condition being converted.
    mutating func coalescing(_ value: FetchExpression, _ fallback: FetchExpression) -> FetchExpression {
        let name = "coalesced\(coalesced.count)_\(freshVariableName())"
        coalesced.append((name, .coalescing(value, fallback: fallback)))
        return .variable(name)
    }

    /// A variable standing for `test ? value : otherwise` in the condition being converted.
    mutating func choosing(_ test: FetchPredicate, _ value: FetchExpression, _ otherwise: FetchExpression) -> FetchExpression {
        let name = "chosen\(coalesced.count)_\(freshVariableName())"
        coalesced.append((name, .choosing(test, value, otherwise: otherwise)))
        return .variable(name)
    }

    /// A node that must be a value.
    mutating func expression(_ node: Any) throws -> FetchExpression {
        switch try convert(node) {
        case .expression(let expression): return expression
        case .predicate(let predicate):
            throw SwiftDataError(
                "A condition is used as a value in a predicate (\(predicate)): compare it with true instead.", kind: .unsupportedPredicate)
        }
    }

    mutating func convert(_ node: Any) throws -> FetchNode {
        // A part that reads no model (`searchText.isEmpty`, `limit * 2`, `names.count`) is worked out now, as
        // Foundation would, and is a constant of the query.
        if !(node is any PredicateVariableNode), let expression = node as? any PredicateExpression, let folded = try fold(expression) {
            return folded
        }
        guard let convertible = node as? any FetchConvertible else {
            throw SwiftDataError("OpenSwiftData cannot run \(Swift.type(of: node)) in a predicate yet.", kind: .unsupportedPredicate)
        }
        return try convertible.fetchNode(&self)
    }

    /// The constant `expression` stands for when it reads no variable (its evaluation without bindings succeeds), else
    /// nil.
    private mutating func fold<E: PredicateExpression>(_ expression: E) throws -> FetchNode? {
        guard let value = Self.constantValue(of: expression) else { return nil }
        return try PredicateExpressions.Value(value).fetchNode(&self)
    }

    /// The value `expression` stands for when it reads no variable (its evaluation without bindings succeeds), else nil.
    static func constantValue<E: PredicateExpression>(of expression: E) -> E.Output? {
        try? expression.evaluate(PredicateBindings())
    }

    /// Binds a predicate variable (of a closure inside the predicate) for the nodes converted in `body`.
    mutating func binding<R>(_ key: PredicateExpressions.VariableID, to expression: FetchExpression, _ body: (inout Self) throws -> R)
        rethrows -> R
    {
        let saved = variables[key]
        variables[key] = expression
        defer { variables[key] = saved }
        return try body(&self)
    }

    /// A fresh name for a SUBQUERY variable.
    mutating func freshVariableName() -> String {
        nextVariable += 1
        return "v\(nextVariable)"
    }

    func variable(_ key: PredicateExpressions.VariableID) throws -> FetchExpression {
        guard let bound = variables[key] else {
            throw SwiftDataError("A predicate uses a variable it does not declare.", kind: .unsupportedPredicate)
        }
        return bound
    }

    /// The store name of `keyPath` on `root`: a persisted property of a model class, or `@count` of a collection.
    static func keyName(_ keyPath: AnyKeyPath, root: Any.Type) throws -> String {
        let (base, _) = Schema.unwrapped(root)
        if let model = base as? any PersistentModel.Type {
            guard let property = model.schemaMetadata.first(where: { $0.keyPath == keyPath }) else {
                throw SwiftDataError(
                    "\(keyPath) is not a persisted property of \(model): a predicate can read persisted properties only.",
                    kind: .unsupportedKeyPath)
            }
            return property.name
        }
        if let array = base as? any ModelArray.Type, keyPath == array.countKeyPath { return "@count" }
        // A field of a struct stored as a composite: the element's name (`address.city`).
        if let codable = base as? any Codable.Type, case .composite = CodableStorage.shape(of: codable),
            let name = CodableStorage.fieldName(of: keyPath, in: codable)
        {
            return name
        }
        if let array = base as? any ModelArray.Type {
            throw SwiftDataError(
                "A to-many relationship of \(array.modelElement) is read through \(keyPath) in a predicate: only its count, isEmpty, contains, contains(where:), allSatisfy and filter can be.",
                kind: .unsupportedKeyPath)
        }
        throw SwiftDataError("\(keyPath) (a property of \(base)) cannot be read in a predicate.", kind: .unsupportedKeyPath)
    }

    /// A constant of a Swift value (an enum as its raw value, a model as its row).
    static func constant(_ value: Any?) throws -> FetchExpression {
        guard let constant = PredicateConstant(argument: value) else {
            throw SwiftDataError(
                "\(value.map { "\(Swift.type(of: $0))" } ?? "nil") cannot be a constant in a predicate.", kind: .unsupportedPredicate)
        }
        return .constant(constant)
    }
}

/// A converted node: a condition or a value.
enum FetchNode {
    case predicate(FetchPredicate)
    case expression(FetchExpression)
}

/// A `#Predicate` node OpenSwiftData can convert.
protocol FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode
}

/// Whether `keyPath` reads the raw value of an `R` (`\Diet.rawValue`): checked on the type's cases (all of them when it
/// is `CaseIterable`, else its first), as a key path to a concrete type's property does not compare equal to one made
/// through the protocol.
private func readsRawValue<R: RawRepresentable>(_ keyPath: AnyKeyPath, of type: R.Type) -> Bool {
    guard let typed = keyPath as? KeyPath<R, R.RawValue> else { return false }
    let samples: [R] =
        (R.self as? any CaseIterable.Type).map { allCases(of: $0).compactMap { $0 as? R } } ?? (firstCase(R.self).map { [$0] } ?? [])
    return !samples.isEmpty && samples.allSatisfy { ($0[keyPath: typed] as? AnyHashable) == ($0.rawValue as? AnyHashable) }
}

private func allCases<C: CaseIterable>(of type: C.Type) -> [Any] { Array(C.allCases) }

/// Appends a key to a key path expression.
private func appending(_ name: String, to base: FetchExpression) -> FetchExpression {
    if case .keyPath(let root, let names) = base { return .keyPath(root, names + [name]) }
    return .keyPath(base, [name])
}

func compare(
    _ left: FetchExpression, _ op: PredicateComparison.Operator, _ right: FetchExpression, options: PredicateComparison.Options = []
) -> FetchNode {
    .predicate(.comparison(PredicateComparison(left, op, right, options: options)))
}

/// A node that is a variable or a constant already (never folded).
protocol PredicateVariableNode {}
extension PredicateExpressions.Variable: PredicateVariableNode {}
extension PredicateExpressions.Value: PredicateVariableNode {}

extension PredicateExpressions.Conditional: FetchConvertible {
    /// `test ? a : b` on conditions: `(test AND a) OR (NOT test AND b)` (a constant test was folded to its branch); on
    /// values, a variable in the condition around it, which is split on the test (`($0.priority > 0 ? $0.title : "")
    /// == "c1"`).
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        let condition = try converter.predicate(test)
        guard If.Output.self == Bool.self else {
            return .expression(converter.choosing(condition, try converter.expression(trueBranch), try converter.expression(falseBranch)))
        }
        return .predicate(
            .or([.and([condition, try converter.predicate(trueBranch)]), .and([.not(condition), try converter.predicate(falseBranch)])]))
    }
}

extension PredicateExpressions.Variable: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode { .expression(try converter.variable(key)) }
}

extension PredicateExpressions.KeyPath: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        let base = try converter.expression(root)
        // A model's identifier (`persistentModelID`, or `id` when the class does not declare one) is the row itself.
        if Output.self == PersistentIdentifier.self { return .expression(base) }
        // An enum property is stored as its raw value: its `rawValue` is the stored value itself.
        if let raw = Root.Output.self as? any RawRepresentable.Type, readsRawValue(keyPath, of: raw) { return .expression(base) }
        // `isEmpty` of a to-many (no related model) or of a string.
        let (valueType, _) = Schema.unwrapped(Root.Output.self)
        if let array = valueType as? any ModelArray.Type, keyPath == array.isEmptyKeyPath {
            return compare(appending("@count", to: base), .equal, .constant(.value(.integer(0))))
        }
        if valueType == String.self, keyPath == \String.isEmpty { return compare(base, .equal, .constant(.value(.string("")))) }
        if valueType == String.self, keyPath == \String.count { return .expression(.length(base)) }
        return .expression(appending(try PredicateConverter.keyName(keyPath, root: Root.Output.self), to: base))
    }
}

extension PredicateExpressions.Value: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        if let identifier = value as? PersistentIdentifier {
            guard let objectID = converter.objectID(identifier) else {
                throw SwiftDataError("\(identifier) in a predicate names no model of this container.", kind: .unsupportedPredicate)
            }
            return .expression(.constant(.objectID(objectID)))
        }
        if let identifiers = value as? [PersistentIdentifier] {
            let objectIDs = try identifiers.map { identifier in
                guard let objectID = converter.objectID(identifier) else {
                    throw SwiftDataError("\(identifier) in a predicate names no model of this container.", kind: .unsupportedPredicate)
                }
                return PredicateConstant.objectID(objectID)
            }
            return .expression(.constant(.array(objectIDs)))
        }
        return .expression(try PredicateConverter.constant(ModelValues.encode(value)))
    }
}

extension PredicateExpressions.Equal: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        try converter.equality(lhs, rhs, equal: true)
    }
}

extension PredicateExpressions.NotEqual: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        try converter.equality(lhs, rhs, equal: false)
    }
}

extension PredicateConverter {
    /// `a == b` or `a != b`; a side that is a condition (`$0.tags.isEmpty == false`) is compared as one.
    mutating func equality(_ lhs: Any, _ rhs: Any, equal: Bool) throws -> FetchNode {
        // `$0.name.caseInsensitiveCompare(x) == same`: a condition on the strings.
        if let ordering = lhs as? any OrderingComparison, let result = Self.comparisonResult(rhs) {
            return try ordering.condition(result, equal: equal, &self)
        }
        if let ordering = rhs as? any OrderingComparison, let result = Self.comparisonResult(lhs) {
            return try ordering.condition(result, equal: equal, &self)
        }
        let left = try convert(lhs)
        let right = try convert(rhs)
        switch (left, right) {
        case (.expression(let a), .expression(let b)): return compare(a, equal ? .equal : .notEqual, b)
        default:
            let a = asCondition(left)
            let b = asCondition(right)
            let same = FetchPredicate.or([.and([a, b]), .and([.not(a), .not(b)])])
            return .predicate(equal ? same : .not(same))
        }
    }

    /// The `ComparisonResult` an expression that reads no model stands for (nil when it reads one, or is no result).
    static func comparisonResult(_ node: Any) -> ComparisonResult? {
        guard let expression = node as? any PredicateExpression else { return nil }
        return constantValue(of: expression) as? ComparisonResult
    }

    /// A node as a condition: a value is compared with true.
    func asCondition(_ node: FetchNode) -> FetchPredicate {
        switch node {
        case .predicate(let predicate): predicate
        case .expression(.constant(.value(.bool(let value)))): value ? .truePredicate : .falsePredicate
        case .expression(let expression): .comparison(PredicateComparison(expression, .equal, .constant(.value(.bool(true)))))
        }
    }
}

extension PredicateExpressions.Comparison: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        let op: PredicateComparison.Operator =
            switch self.op {
            case .lessThan: .lessThan
            case .lessThanOrEqual: .lessThanOrEqual
            case .greaterThan: .greaterThan
            case .greaterThanOrEqual: .greaterThanOrEqual
            }
        return compare(try converter.expression(lhs), op, try converter.expression(rhs))
    }
}

extension PredicateExpressions.Conjunction: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        .predicate(.and([try converter.predicate(lhs), try converter.predicate(rhs)]))
    }
}

extension PredicateExpressions.Disjunction: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        .predicate(.or([try converter.predicate(lhs), try converter.predicate(rhs)]))
    }
}

extension PredicateExpressions.Negation: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        .predicate(.not(try converter.predicate(wrapped)))
    }
}

extension PredicateExpressions.Arithmetic: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        let op: FetchExpression.ArithmeticOperator =
            switch self.op {
            case .add: .add
            case .subtract: .subtract
            case .multiply: .multiply
            }
        return .expression(.arithmetic(op, try converter.expression(lhs), try converter.expression(rhs)))
    }
}

extension PredicateExpressions.SequenceContains: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        let container = try converter.expression(sequence)
        let member = try converter.expression(element)
        // A constant list: the element is IN it; a to-many key path: the model is among its models.
        if case .constant = container { return compare(member, .in, container) }
        return compare(container, .contains, member)
    }
}

extension PredicateExpressions.CollectionContainsCollection: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        compare(try converter.expression(base), .contains, try converter.expression(other))
    }
}

extension PredicateExpressions.SequenceStartsWith: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        compare(try converter.expression(base), .beginsWith, try converter.expression(prefix))
    }
}

extension PredicateExpressions.SequenceContainsWhere: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        // ANY: SUBQUERY(collection, $v, test).@count > 0
        compare(try converter.subqueryCount(sequence, variable.key, test, negated: false), .greaterThan, .constant(.value(.integer(0))))
    }
}

extension PredicateExpressions.SequenceAllSatisfy: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        // ALL: no member fails the test — SUBQUERY(collection, $v, NOT test).@count == 0
        compare(try converter.subqueryCount(sequence, variable.key, test, negated: true), .equal, .constant(.value(.integer(0))))
    }
}

extension PredicateExpressions.Filter: FetchConvertible {
    /// `models.filter { test }`: `SUBQUERY(models, $v, test)` (its `count` is the subquery's `@count`).
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        let base = try converter.expression(sequence)
        let name = converter.freshVariableName()
        let condition = try converter.binding(variable.key, to: .variable(name)) { try $0.predicate(filter) }
        return .expression(.subquery(base, name, condition))
    }
}

extension PredicateExpressions.FloatDivision: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        .expression(.arithmetic(.divide, try converter.expression(lhs), try converter.expression(rhs)))
    }
}

extension PredicateConverter {
    /// `SUBQUERY(collection, $v, test).@count`, the closure's variable bound to `$v` (the test negated when asked).
    mutating func subqueryCount(_ collection: Any, _ key: PredicateExpressions.VariableID, _ test: Any, negated: Bool) throws
        -> FetchExpression
    {
        let base = try expression(collection)
        let name = freshVariableName()
        let condition = try binding(key, to: .variable(name)) { try $0.predicate(test) }
        return .keyPath(.subquery(base, name, negated ? .not(condition) : condition), ["@count"])
    }
}
