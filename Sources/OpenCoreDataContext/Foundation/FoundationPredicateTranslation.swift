import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

extension FetchPredicate {
    /// Translates a Foundation `#Predicate` on a typed subclass into a predicate on model keys.
    ///
    /// For example:
    /// ```swift
    /// request.predicate = try FetchPredicate(#Predicate<Product> { $0.price < 500 && $0.name != nil })
    /// ```
    /// Supported: `&&`, `||`, `!`, `==`, `!=`, `<`, `<=`, `>`, `>=`, `+`, `-`, `*`, `/`, `%`, unary minus, `nil`,
    /// `@Managed` key paths (through to-one relationships with `?.` or `!`), `.count` of a to-many, `count` and
    /// `isEmpty` of a string, `(a...b).contains(x)` and `(a..<b).contains(x)`, `String.contains(_:)`,
    /// `starts(with:)`, `[values].contains(key)`, and `contains { … }` / `allSatisfy { … }` over a to-many.
    ///
    /// - Throws: `CoreDataError(.unsupported)` naming the construct that has no counterpart in a fetch.
    public init<Root: NSManagedObject>(_ predicate: Predicate<Root>) throws {
        var translator = FoundationPredicateTranslator()
        translator.bind(predicate.variable.key, to: .evaluatedObject, type: Root.self)
        self = try translator.predicate(predicate.expression)
    }
}

extension FetchSortDescriptor {
    /// Translates a Foundation `SortDescriptor` (or `KeyPathComparator`'s key path and order) on a typed subclass.
    ///
    /// `SortDescriptor(\Product.price, order: .reverse)` becomes `FetchSortDescriptor(key: "price", ascending: false)`;
    /// a string comparator maps to the nearest comparison (`.localizedStandard` → `.localizedStandard`, …).
    ///
    /// - Throws: `CoreDataError(.unsupported)` when the key path reads no `@Managed` property.
    public init<Root: NSManagedObject>(_ descriptor: SortDescriptor<Root>) throws {
        // SortDescriptor keeps its key path inside a private enum; reflection reads it without private API.
        let comparison = Mirror(reflecting: descriptor).children.first { $0.label == "comparison" }?.value
        let payload = comparison.flatMap { Mirror(reflecting: $0).children.first?.value }
        let parts = payload.map { Mirror(reflecting: $0).children.map(\.value) } ?? []
        guard let keyPath = parts.last as? AnyKeyPath, let keys = KeyRecorder.keys(of: keyPath, root: Root.self) else {
            throw CoreDataError(
                .unsupported, "This SortDescriptor<\(Root.self)> does not sort on a @Managed property; use FetchSortDescriptor(key:).")
        }
        var kind = FetchSortDescriptor.Comparison.default
        if let comparator = parts.first as? String.StandardComparator {
            let fields = Dictionary(
                uniqueKeysWithValues: Mirror(reflecting: comparator).children.compactMap { c in c.label.map { ($0, c.value) } })
            let options = fields["options"] as? String.CompareOptions ?? []
            let localized = fields["isLocalized"] as? Bool ?? false
            switch (localized, options.contains(.numeric), options.contains(.caseInsensitive)) {
            case (_, true, _): kind = .localizedStandard
            case (true, false, true): kind = .localizedCaseInsensitive
            case (true, false, false): kind = .localized
            case (false, false, true): kind = .caseInsensitive
            default: kind = .default
            }
        }
        self.init(key: keys.joined(separator: "."), ascending: descriptor.order == .forward, comparison: kind)
    }
}

extension FetchSortDescriptor {
    /// A sort on the `@Managed` property a Swift key path reads (Core Data's `NSSortDescriptor(keyPath:ascending:)`).
    ///
    /// For example:
    /// ```swift
    /// request.sortDescriptors = [FetchSortDescriptor(keyPath: \Entry.date, ascending: false)]
    /// ```
    /// A key path through to-one relationships sorts on the key path (`\Employee.department?.name` is
    /// `department.name`). A key path that reads no `@Managed` property is a programming error, as on Apple
    /// platforms: it stops with a precondition failure naming the type.
    public init<Root: NSManagedObject, Value>(keyPath: KeyPath<Root, Value>, ascending: Bool = true) {
        guard let keys = KeyRecorder.keys(of: keyPath, root: Root.self) else {
            preconditionFailure("The key path given to FetchSortDescriptor(keyPath:) reads no @Managed property of \(Root.self).")
        }
        self.init(key: keys.joined(separator: "."), ascending: ascending)
    }
}

extension FetchExpression {
    /// The `@Managed` property a Swift key path reads, as a key path expression (Apple's
    /// `NSExpression(forKeyPath:)` with a Swift key path).
    ///
    /// For example:
    /// ```swift
    /// let date = FetchExpression(forKeyPath: \Entry.date)   // date
    /// ```
    /// A key path that reads no `@Managed` property is a programming error, as on Apple platforms: it stops with a
    /// precondition failure naming the type.
    public init<Root: NSManagedObject, Value>(forKeyPath keyPath: KeyPath<Root, Value>) {
        guard let keys = KeyRecorder.keys(of: keyPath, root: Root.self) else {
            preconditionFailure("The key path given to NSExpression(forKeyPath:) reads no @Managed property of \(Root.self).")
        }
        self = .keyPath(.evaluatedObject, keys)
    }
}

extension FetchSortDescriptor {
    /// Translates a Foundation `KeyPathComparator` on a typed subclass (its key path and order).
    ///
    /// - Throws: `CoreDataError(.unsupported)` when the key path reads no `@Managed` property.
    public init<Root: NSManagedObject>(_ comparator: KeyPathComparator<Root>) throws {
        guard let keys = KeyRecorder.keys(of: comparator.keyPath, root: Root.self) else {
            throw CoreDataError(
                .unsupported, "This KeyPathComparator<\(Root.self)> does not compare a @Managed property; use FetchSortDescriptor(key:).")
        }
        self.init(key: keys.joined(separator: "."), ascending: comparator.order == .forward)
    }
}

/// Walks a Foundation predicate expression tree.
struct FoundationPredicateTranslator {
    enum Translated {
        case predicate(FetchPredicate)
        case expression(FetchExpression)
    }

    /// What each `PredicateExpressions.Variable` stands for, and the Swift type of its values.
    private var variables: [PredicateExpressions.VariableID: (FetchExpression, Any.Type)] = [:]
    private var subqueryCounter = 0

    mutating func bind(_ id: PredicateExpressions.VariableID, to expression: FetchExpression, type: Any.Type) {
        variables[id] = (expression, type)
    }

    func variable(_ id: PredicateExpressions.VariableID) throws -> (FetchExpression, Any.Type) {
        guard let bound = variables[id] else { throw unsupported("a variable the predicate does not bind") }
        return bound
    }

    mutating func nextSubqueryName() -> String {
        subqueryCounter += 1
        return "v\(subqueryCounter)"
    }

    func unsupported(_ what: String) -> CoreDataError {
        CoreDataError(.unsupported, "#Predicate: \(what) cannot be translated into a fetch predicate.")
    }

    mutating func translate(_ node: Any) throws -> Translated {
        guard let translatable = node as? any FoundationPredicateNode else {
            throw unsupported("\(String(describing: type(of: node)).prefix(80))")
        }
        return try translatable.translate(&self)
    }

    mutating func predicate(_ node: Any) throws -> FetchPredicate {
        switch try translate(node) {
        case .predicate(let p): return p
        // A Boolean key path used as a condition: `$0.active`.
        case .expression(let e): return .comparison(PredicateComparison(e, .equal, .value(.bool(true))))
        }
    }

    mutating func expression(_ node: Any) throws -> FetchExpression {
        switch try translate(node) {
        case .expression(let e): return e
        case .predicate(let p): throw unsupported("the condition '\(p)' used as a value")
        }
    }

    mutating func compare(_ lhs: Any, _ op: PredicateComparison.Operator, _ rhs: Any) throws -> Translated {
        // `(key ?? fallback) OP x`  →  (key != nil AND key OP x) OR (key == nil AND fallback OP x)
        if let coalesce = lhs as? any NilCoalesceNode {
            return try expandCoalesce(coalesce) { t, side in try t.compare(side, op, rhs) }
        }
        if let coalesce = rhs as? any NilCoalesceNode {
            return try expandCoalesce(coalesce) { t, side in try t.compare(lhs, op, side) }
        }
        let left = try translate(lhs), right = try translate(rhs)
        switch (left, right) {
        case (.expression(let a), .expression(let b)):
            return .predicate(.comparison(PredicateComparison(a, op, b)))
        // A condition compared with a Boolean: `$0.name?.starts(with: "A") == true`.
        case (.predicate(let p), .expression(.constant(.value(.bool(let b))))),
            (.expression(.constant(.value(.bool(let b)))), .predicate(let p)):
            guard op == .equal || op == .notEqual else { throw unsupported("ordering a condition") }
            return .predicate((op == .equal) == b ? p : .not(p))
        default:
            throw unsupported("comparing two conditions")
        }
    }

    private mutating func expandCoalesce(
        _ node: any NilCoalesceNode, _ compare: (inout FoundationPredicateTranslator, Any) throws -> Translated
    ) throws -> Translated {
        let key = try expression(node.optionalNode)
        guard case .predicate(let whenSet) = try compare(&self, node.optionalNode),
            case .predicate(let whenNil) = try compare(&self, node.fallbackNode)
        else { throw unsupported("a ?? expression in this position") }
        let isNil = FetchPredicate.comparison(PredicateComparison(key, .equal, .constant(.null)))
        return .predicate((.not(isNil) && whenSet) || (isNil && whenNil))
    }

    /// Appends keys to a key path expression.
    static func append(_ keys: [String], to base: FetchExpression) -> FetchExpression {
        switch base {
        case .keyPath(let root, let existing): return .keyPath(root, existing + keys)
        default: return .keyPath(base, keys)
        }
    }
}

/// A `PredicateExpressions` node that can be translated.
protocol FoundationPredicateNode {
    func translate(_ translator: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated
}

extension PredicateExpressions.Variable: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .expression(try t.variable(key).0)
    }
}

extension PredicateExpressions.KeyPath: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        let base = try t.expression(root)
        if let cls = Root.Output.self as? NSManagedObject.Type {
            guard let keys = KeyRecorder.keys(of: keyPath, root: cls) else {
                throw t.unsupported("the key path \(keyPath) (it reads no @Managed property of \(cls))")
            }
            return .expression(FoundationPredicateTranslator.append(keys, to: base))
        }
        // A string's `count` is its length; `isEmpty`, its being "".
        if Root.Output.self == String.self, keyPath == \String.count { return .expression(.length(base)) }
        if Root.Output.self == String.self, keyPath == \String.isEmpty {
            return .predicate(.comparison(PredicateComparison(base, .equal, .value(.string("")))))
        }
        // `.count` of a to-many relationship (a Set or Array of objects; not a string's length).
        if Root.Output.self is any Collection.Type, !(Root.Output.self is any StringProtocol.Type), Output.self == Int.self {
            return .expression(FoundationPredicateTranslator.append(["@count"], to: base))
        }
        throw t.unsupported("the key path \(keyPath) on \(Root.Output.self)")
    }
}

extension PredicateExpressions.Value: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        guard let constant = PredicateConstant(argument: value) else {
            throw t.unsupported("the value \(value) of type \(Output.self)")
        }
        return .expression(.constant(constant))
    }
}

extension PredicateExpressions.NilLiteral: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .expression(.constant(.null))
    }
}

extension PredicateExpressions.Conjunction: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .predicate(try t.predicate(lhs) && t.predicate(rhs))
    }
}

extension PredicateExpressions.Disjunction: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .predicate(try t.predicate(lhs) || t.predicate(rhs))
    }
}

extension PredicateExpressions.Negation: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .predicate(.not(try t.predicate(wrapped)))
    }
}

extension PredicateExpressions.Equal: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        try t.compare(lhs, .equal, rhs)
    }
}

extension PredicateExpressions.NotEqual: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        try t.compare(lhs, .notEqual, rhs)
    }
}

extension PredicateExpressions.Comparison: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        switch op {
        case .lessThan: return try t.compare(lhs, .lessThan, rhs)
        case .lessThanOrEqual: return try t.compare(lhs, .lessThanOrEqual, rhs)
        case .greaterThan: return try t.compare(lhs, .greaterThan, rhs)
        case .greaterThanOrEqual: return try t.compare(lhs, .greaterThanOrEqual, rhs)
        @unknown default: throw t.unsupported("the comparison operator \(op)")
        }
    }
}

extension PredicateExpressions.Arithmetic: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        let operation: FetchExpression.ArithmeticOperator
        switch op {
        case .add: operation = .add
        case .subtract: operation = .subtract
        case .multiply: operation = .multiply
        @unknown default: throw t.unsupported("the arithmetic operator \(op)")
        }
        return .expression(.arithmetic(operation, try t.expression(lhs), try t.expression(rhs)))
    }
}

extension PredicateExpressions.FloatDivision: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .expression(.arithmetic(.divide, try t.expression(lhs), try t.expression(rhs)))
    }
}

extension PredicateExpressions.UnaryMinus: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .expression(.negate(try t.expression(wrapped)))
    }
}

extension PredicateExpressions.ForcedUnwrap: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        .expression(try t.expression(inner))
    }
}

extension PredicateExpressions.OptionalFlatMap: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        // `$0.department?.name`: the transform's variable stands for the unwrapped department.
        t.bind(variable.key, to: try t.expression(wrapped), type: Wrapped.self)
        return try t.translate(transform)
    }
}

/// `lhs ?? rhs`, expanded by the comparison that uses it.
protocol NilCoalesceNode {
    var optionalNode: Any { get }
    var fallbackNode: Any { get }
}

extension PredicateExpressions.NilCoalesce: NilCoalesceNode {
    var optionalNode: Any { lhs }
    var fallbackNode: Any { rhs }
}

extension PredicateExpressions.CollectionContainsCollection: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        try t.compare(base, .contains, other)
    }
}

extension PredicateExpressions.SequenceStartsWith: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        try t.compare(base, .beginsWith, prefix)
    }
}

extension PredicateExpressions.SequenceContains: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        try t.compare(element, .in, sequence)
    }
}

extension FoundationPredicateTranslator {
    /// `SUBQUERY(collection, $v, test).@count OP n`, with the closure's variable bound to `$v`.
    mutating func subqueryCount(
        _ sequence: Any, _ variable: PredicateExpressions.VariableID, _ test: Any, negateTest: Bool,
        _ op: PredicateComparison.Operator, _ count: Int64
    ) throws -> Translated {
        let collection = try expression(sequence)
        let name = nextSubqueryName()
        bind(variable, to: .variable(name), type: Any.self)
        let condition = try predicate(test)
        let counted = FetchExpression.keyPath(.subquery(collection, name, negateTest ? .not(condition) : condition), ["@count"])
        return .predicate(.comparison(PredicateComparison(counted, op, .value(.integer(count)))))
    }
}

extension PredicateExpressions.SequenceContainsWhere: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        // `$0.projects.contains { $0.title == "x" }`  →  SUBQUERY(projects, $v, $v.title == "x").@count > 0
        try t.subqueryCount(sequence, variable.key, test, negateTest: false, .greaterThan, 0)
    }
}

extension PredicateExpressions.SequenceAllSatisfy: FoundationPredicateNode {
    func translate(_ t: inout FoundationPredicateTranslator) throws -> FoundationPredicateTranslator.Translated {
        // `$0.projects.allSatisfy { … }`  →  SUBQUERY(projects, $v, NOT (…)).@count == 0
        try t.subqueryCount(sequence, variable.key, test, negateTest: true, .equal, 0)
    }
}
