import Foundation
import OpenCoreDataModel

/// A filter for fetch requests and in-memory evaluation, written in Core Data's `NSPredicate` format language.
///
/// Foundation on Linux owns the name `NSPredicate`; `FetchPredicate` is OpenCoreData's, with the same format syntax.
/// One value (an immutable syntax tree) is evaluated three ways that agree: against stored rows in SQL, against
/// objects in memory (pending changes), and printed back to a format string that parses to the same tree.
///
/// For example:
/// ```swift
/// let cheap = try FetchPredicate(format: "name CONTAINS[cd] %@ AND price < %d", "cheese", 500)
/// request.predicate = cheap
/// print(cheap)   // name CONTAINS[cd] "cheese" AND price < 500
/// ```
public indirect enum FetchPredicate: Sendable, Hashable {
    /// Always true (`TRUEPREDICATE`).
    case truePredicate
    /// Always false (`FALSEPREDICATE`).
    case falsePredicate
    /// True when every sub-predicate is (`AND`, `&&`).
    case and([FetchPredicate])
    /// True when any sub-predicate is (`OR`, `||`).
    case or([FetchPredicate])
    /// True when the sub-predicate is false (`NOT`, `!`).
    case not(FetchPredicate)
    /// A comparison of two expressions.
    case comparison(PredicateComparison)

    /// How deeply a predicate may nest: parentheses, braces, `NOT`, unary minus, SUBQUERY and chains of arithmetic
    /// (`1 + 1 + 1` is three levels) each count a level.
    ///
    /// `FetchPredicate(format:)` throws a syntax error past it, and the SQL compiler refuses deeper trees built in
    /// code, because every pass over a predicate recurses once per level and a hostile format string must not be
    /// able to overflow a thread's stack. Real predicates stay far below it; `AND` and `OR` lists of any length
    /// count one level.
    public static let maximumDepth = 256
}

/// A comparison: `left OPERATOR[options] right`, optionally over every element of a to-many left side
/// (`ANY`, `ALL`, `NONE`).
///
/// For example:
/// ```swift
/// let cheap = FetchPredicate.comparison(PredicateComparison(.keyPath(.evaluatedObject, ["price"]), .lessThan, .value(.integer(100))))
/// ```
public struct PredicateComparison: Sendable, Hashable {
    /// Whether the comparison applies to one value or to every element of a to-many left side (`ANY`, `ALL`, `NONE`).
    public var modifier: Modifier
    /// The left operand.
    public var left: FetchExpression
    /// The operator.
    public var op: Operator
    /// The right operand.
    public var right: FetchExpression
    /// The operator.
    public var options: Options

    /// A comparison of `left` and `right` with `op`, directly or over a to-many left side.
    public init(_ left: FetchExpression, _ op: Operator, _ right: FetchExpression, modifier: Modifier = .direct, options: Options = []) {
        self.left = left
        self.op = op
        self.right = right
        self.modifier = modifier
        self.options = options
    }

    /// How the left side is taken when it is a collection.
    ///
    /// For example:
    /// ```swift
    /// let anyCheap = PredicateComparison(.keyPath(.evaluatedObject, ["items", "price"]), .lessThan, .value(.integer(100)), modifier: .any)
    /// ```
    public enum Modifier: Sendable, Hashable {
        /// The left side is one value.
        case direct
        /// True if the comparison holds for at least one element (`ANY`, `SOME`).
        case any
        /// True if the comparison holds for every element (`ALL`).
        case all
        /// True if the comparison holds for no element (`NONE`).
        case none
    }

    /// The comparison operators of the format language.
    ///
    /// For example:
    /// ```swift
    /// let op = PredicateComparison.Operator(rawValue: "BEGINSWITH")   // .beginsWith
    /// ```
    public enum Operator: String, Sendable, Hashable, CaseIterable {
        case lessThan = "<"
        case lessThanOrEqual = "<="
        case greaterThan = ">"
        case greaterThanOrEqual = ">="
        case equal = "=="
        case notEqual = "!="
        case matches = "MATCHES"
        case like = "LIKE"
        case beginsWith = "BEGINSWITH"
        case endsWith = "ENDSWITH"
        case `in` = "IN"
        case contains = "CONTAINS"
        case between = "BETWEEN"

        /// Whether the operator works on strings only (and so takes `[c]`, `[d]`).
        public var isStringOperator: Bool {
            switch self {
            case .matches, .like, .beginsWith, .endsWith: return true
            default: return false
            }
        }
    }

    /// String comparison options: `[c]` case-insensitive, `[d]` diacritic-insensitive, `[n]` normalized.
    ///
    /// For example:
    /// ```swift
    /// let options: PredicateComparison.Options = [.caseInsensitive, .diacriticInsensitive]   // [cd]
    /// ```
    public struct Options: OptionSet, Sendable, Hashable {
        /// The options as bits.
        public let rawValue: Int
        /// Options from their bits.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// `[c]`: case does not matter.
        public static let caseInsensitive = Options(rawValue: 1)
        /// `[d]`: accents and other diacritics do not matter.
        public static let diacriticInsensitive = Options(rawValue: 2)
        /// `[n]`: the strings are already normalized, so they compare as they are (the fastest).
        public static let normalized = Options(rawValue: 4)

        /// The bracketed suffix as written in a format string (`[cd]`), or "" for none.
        public var formatSuffix: String {
            var letters = ""
            if contains(.caseInsensitive) { letters += "c" }
            if contains(.diacriticInsensitive) { letters += "d" }
            if contains(.normalized) { letters += "n" }
            return letters.isEmpty ? "" : "[\(letters)]"
        }
    }
}

/// One side of a comparison: a constant, a key path, a variable, a list, arithmetic, an aggregate or a subquery.
///
/// For example:
/// ```swift
/// let total = FetchExpression.arithmetic(.multiply, .keyPath(.evaluatedObject, ["price"]), .value(.integer(2)))   // price * 2
/// ```
public indirect enum FetchExpression: Sendable, Hashable {
    /// A literal or a format argument.
    case constant(PredicateConstant)
    /// The object being evaluated (`SELF`).
    case evaluatedObject
    /// A key path (`name`, `department.name`, `employees.@count`) taken from a base expression, usually `SELF`.
    case keyPath(FetchExpression, [String])
    /// A substitution variable (`$NAME`), replaced by `withSubstitutionVariables(_:)` or bound by a subquery.
    case variable(String)
    /// A list of expressions (`{1, 2, name}`).
    case aggregate([FetchExpression])
    /// Arithmetic on two expressions.
    case arithmetic(ArithmeticOperator, FetchExpression, FetchExpression)
    /// A unary minus.
    case negate(FetchExpression)
    /// `SUBQUERY(collection, $variable, predicate)`: the elements of `collection` that match `predicate`.
    case subquery(FetchExpression, String, FetchPredicate)
    /// One of `NSExpression`'s built-in functions, by its selector-style name (`"now"`, `"lowercase:"`,
    /// `"modulus:by:"`, `"sum:"`), with its arguments: written `now()`, `lowercase(name)`, `modulus:by:(age, 2)`.
    /// ``FetchFunction`` lists them.
    case function(String, [FetchExpression])
    /// `TERNARY(predicate, a, b)`: `a` where the predicate holds for the evaluated object, else `b` (`NSExpression`'s
    /// conditional, `init(forConditional:trueExpression:falseExpression:)`).
    case conditional(FetchPredicate, FetchExpression, FetchExpression)

    /// A key path on the evaluated object.
    public static func key(_ path: String) -> FetchExpression {
        .keyPath(.evaluatedObject, path.split(separator: ".", omittingEmptySubsequences: false).map(String.init))
    }

    /// A constant of any supported Swift value.
    public static func value(_ value: AttributeValue) -> FetchExpression { .constant(.value(value)) }

    /// The arithmetic operators of expressions, by their predicate-format spelling.
    ///
    /// For example:
    /// ```swift
    /// let plus = FetchExpression.ArithmeticOperator(rawValue: "+")   // .add
    /// ```
    public enum ArithmeticOperator: String, Sendable, Hashable {
        case add = "+"
        case subtract = "-"
        case multiply = "*"
        case divide = "/"
        case power = "**"
    }
}

/// A constant in a predicate: one attribute value, a list, or an object's ID.
///
/// For example:
/// ```swift
/// let names = PredicateConstant.array([.value(.string("Ann")), .value(.string("Bob"))])   // {"Ann", "Bob"}
/// ```
public indirect enum PredicateConstant: Sendable, Hashable {
    case value(AttributeValue)
    case array([PredicateConstant])
    case objectID(NSManagedObjectID)

    /// The `nil` constant.
    public static let null = PredicateConstant.value(.null)
}

extension FetchPredicate {
    /// Combines predicates with AND, flattening nested ANDs.
    public static func && (a: FetchPredicate, b: FetchPredicate) -> FetchPredicate {
        switch (a, b) {
        case (.and(let x), .and(let y)): return .and(x + y)
        case (.and(let x), _): return .and(x + [b])
        case (_, .and(let y)): return .and([a] + y)
        default: return .and([a, b])
        }
    }

    /// Combines predicates with OR, flattening nested ORs.
    public static func || (a: FetchPredicate, b: FetchPredicate) -> FetchPredicate {
        switch (a, b) {
        case (.or(let x), .or(let y)): return .or(x + y)
        case (.or(let x), _): return .or(x + [b])
        case (_, .or(let y)): return .or([a] + y)
        default: return .or([a, b])
        }
    }

    /// Negates a predicate.
    public static prefix func ! (p: FetchPredicate) -> FetchPredicate { .not(p) }

    /// How many levels the predicate's tree has, counted as `maximumDepth` counts them (an `AND` or `OR` list is one
    /// level, whatever its length).
    ///
    /// It walks the tree with a stack of its own, so it measures trees of any depth without recursing.
    ///
    /// - Complexity: O(n) in the number of nodes.
    public var depth: Int {
        enum Node {
            case predicate(FetchPredicate)
            case expression(FetchExpression)
        }
        var deepest = 0
        var pending: [(Node, Int)] = [(.predicate(self), 1)]
        while let (node, level) = pending.popLast() {
            deepest = Swift.max(deepest, level)
            switch node {
            case .predicate(.and(let parts)), .predicate(.or(let parts)):
                pending += parts.map { (.predicate($0), level + 1) }
            case .predicate(.not(let inner)): pending.append((.predicate(inner), level + 1))
            case .predicate(.comparison(let c)):
                pending.append((.expression(c.left), level + 1))
                pending.append((.expression(c.right), level + 1))
            case .predicate: break
            case .expression(.keyPath(.evaluatedObject, _)): break  // a key of the object is a leaf, as the parser counts it
            case .expression(.keyPath(let base, _)): pending.append((.expression(base), level + 1))
            case .expression(.aggregate(let items)): pending += items.map { (.expression($0), level + 1) }
            case .expression(.arithmetic(_, let a, let b)):
                pending.append((.expression(a), level + 1))
                pending.append((.expression(b), level + 1))
            case .expression(.negate(let inner)): pending.append((.expression(inner), level + 1))
            case .expression(.function(_, let arguments)): pending += arguments.map { (.expression($0), level + 1) }
            case .expression(.subquery(let collection, _, let predicate)):
                pending.append((.expression(collection), level + 1))
                pending.append((.predicate(predicate), level + 1))
            case .expression(.conditional(let condition, let a, let b)):
                pending += [(.predicate(condition), level + 1), (.expression(a), level + 1), (.expression(b), level + 1)]
            case .expression: break
            }
        }
        return deepest
    }

    /// Every key path the predicate reads from the evaluated object (first components, for change tracking).
    public var referencedKeyPaths: Set<String> {
        var paths: Set<String> = []
        func visit(_ e: FetchExpression) {
            switch e {
            case .keyPath(.evaluatedObject, let comps): paths.insert(comps.joined(separator: "."))
            case .keyPath(let base, _): visit(base)
            case .aggregate(let items): items.forEach(visit)
            case .arithmetic(_, let a, let b): visit(a); visit(b)
            case .negate(let a): visit(a)
            case .subquery(let c, _, _): visit(c)
            case .function(_, let arguments): arguments.forEach(visit)
            case .conditional(let condition, let a, let b):
                walk(condition)
                visit(a)
                visit(b)
            default: break
            }
        }
        func walk(_ p: FetchPredicate) {
            switch p {
            case .and(let ps), .or(let ps): ps.forEach(walk)
            case .not(let q): walk(q)
            case .comparison(let c): visit(c.left); visit(c.right)
            default: break
            }
        }
        walk(self)
        return paths
    }
}

extension PredicateConstant {
    /// Converts a format argument or a Swift value: strings, numbers, dates, data, UUIDs, URLs, object IDs, objects
    /// (by their ID), arrays and sets of these, nil.
    ///
    /// Returns nil for a value of an unsupported type.
    public init?(argument: Any?) {
        guard let argument else {
            self = .null
            return
        }
        if let optional = argument as? any _OptionalProtocol {
            guard let wrapped = optional._wrapped else {
                self = .null
                return
            }
            self.init(argument: wrapped)
            return
        }
        // Collections before the casts to classes and protocols: casting an array to a class bridges it to an
        // NSArray first (all its elements) only to fail, which made `SELF IN %@` with 1,000 IDs cost milliseconds.
        if let ids = argument as? [NSManagedObjectID] {
            self = .array(ids.map { .objectID($0) })
            return
        }
        // A dictionary is the collection of its values, as Apple's `IN` reads one ("in the case of a dictionary, its
        // values are used"); ordered by key, so that the predicate prints the same every time.
        if let dictionary = argument as? [AnyHashable: Any] {
            var items: [PredicateConstant] = []
            for (_, value) in dictionary.sorted(by: { String(describing: $0.key) < String(describing: $1.key) }) {
                guard let c = PredicateConstant(argument: value) else { return nil }
                items.append(c)
            }
            self = .array(items)
            return
        }
        if !(argument is String), !(argument is Data), let sequence = argument as? any Sequence {
            var items: [PredicateConstant] = []
            for element in sequence {
                guard let c = PredicateConstant(argument: element) else { return nil }
                items.append(c)
            }
            self = .array(items)
            return
        }
        if let id = argument as? NSManagedObjectID {
            self = .objectID(id)
            return
        }
        if let subject = argument as? any PredicateSubject {
            self = .objectID(subject.predicateObjectID)
            return
        }
        if let constant = argument as? PredicateConstant {
            self = constant
            return
        }
        guard let value = AttributeValue(any: argument) else { return nil }
        self = .value(value)
    }
}

extension PredicateComparison {
    /// The entity names of `entity == 'Name'`, `entity != 'Name'` or `entity IN {'A', 'B'}` (the object's own entity,
    /// by name) when this comparison is one and `entity` has no property of that name; else nil.
    package func entityNames(on entity: NSEntityDescription) -> [String]? {
        guard case .keyPath(.evaluatedObject, ["entity"]) = left, modifier == .direct, entity.propertiesByName["entity"] == nil,
            case .constant(let constant) = right
        else { return nil }
        switch (op, constant) {
        case (.equal, .value(.string(let name))), (.notEqual, .value(.string(let name))): return [name]
        case (.in, .array(let items)):
            return items.compactMap { item in
                if case .value(.string(let name)) = item { return name }
                return nil
            }
        default: return nil
        }
    }
}
