import Foundation
import OpenCoreDataModel

/// A value met while evaluating: a scalar, an object, an object ID, or a collection of these.
enum EvaluatedValue {
    case scalar(AttributeValue)
    case object(any PredicateSubject)
    case objectID(NSManagedObjectID)
    case collection([EvaluatedValue])

    static var null: EvaluatedValue { .scalar(.null) }

    var identity: NSManagedObjectID? {
        switch self {
        case .object(let o): return o.predicateObjectID
        case .objectID(let id): return id
        default: return nil
        }
    }

    var elements: [EvaluatedValue]? {
        if case .collection(let items) = self { return items }
        return nil
    }
}

extension EvaluatedValue {
    /// A Swift value as the evaluator reads it: a managed object, nil, a string or number (any attribute value), an
    /// array or set (a collection), a `[String: Any]` dictionary (its keys read as properties).
    static func of(_ value: Any?) -> EvaluatedValue {
        switch value {
        case nil: return .null
        case let subject as any PredicateSubject: return .object(subject)
        case let dictionary as [String: Any]: return .scalar(.object(OpaqueValue(dictionary)))
        case let items as [Any]: return .collection(items.map(EvaluatedValue.of))
        case let items as Set<AnyHashable>: return .collection(items.map { EvaluatedValue.of($0.base) })
        case let value?: return .scalar(AttributeValue(any: value) ?? .object(OpaqueValue(value)))
        }
    }
}

extension FetchPredicate {
    /// Evaluates the predicate against a Swift value, as Apple's `evaluate(with:)` does against any object: `SELF` is
    /// the value (nil, a string, a number, an array, a `[String: Any]` dictionary whose keys read as properties).
    ///
    /// For example:
    /// ```swift
    /// try FetchPredicate(format: "SELF BEGINSWITH[c] 'he'").evaluate(with: "Hello")                  // true
    /// try FetchPredicate(format: "ANY kids.age < 10").evaluate(with: ["kids": [["age": 4], ["age": 12]]])  // true
    /// ```
    /// - Throws: `CoreDataError(.predicateEvaluation)` for an operator applied to values it does not take.
    public func evaluate(with value: Any?, variables: [String: AttributeValue] = [:]) throws -> Bool {
        if let subject = value as? any PredicateSubject { return try evaluate(with: subject, variables: variables) }
        var evaluator = PredicateEvaluator(variables: variables.mapValues { .scalar($0) })
        return try evaluator.evaluate(self, on: .of(value))
    }

    /// Evaluates the predicate against one object in memory.
    ///
    /// - Parameters:
    ///   - object: The object to test.
    ///   - variables: Values for `$VARIABLE`s that the predicate still contains.
    /// - Returns: Whether the object matches.
    /// - Throws: `CoreDataError` for an unknown key, a to-many key used without ANY/ALL/NONE, or an operator applied
    ///   to values it does not take.
    public func evaluate(with object: any PredicateSubject, variables: [String: AttributeValue] = [:]) throws -> Bool {
        var evaluator = PredicateEvaluator(variables: variables.mapValues { .scalar($0) })
        return try evaluator.evaluate(self, on: .object(object))
    }
}

extension FetchExpression {
    /// The expression's value for `object` (`SELF`; nil for an expression of constants), as
    /// `NSExpression.expressionValue(with:context:)` computes it: `FetchExpression(format: "4 + 5 - 2**3").value()`
    /// is 1.
    ///
    /// - Throws: `CoreDataError(.predicateEvaluation)` when the value is objects or a collection, or an operation
    ///   gets values it does not take.
    public func value(with object: (any PredicateSubject)? = nil, variables: [String: AttributeValue] = [:]) throws -> AttributeValue {
        try scalar(on: object.map { .object($0) } ?? .null, variables: variables)
    }

    /// The expression's value with any Swift value as `SELF`, as Apple's `expressionValue(with:context:)` takes any
    /// object: a `[String: Any]` dictionary whose keys read as properties, an array, a string or a number (see
    /// `FetchPredicate.evaluate(with:)`).
    ///
    /// For example:
    /// ```swift
    /// try FetchExpression(format: "12.5 * x + y").value(with: ["x": 2, "y": 1])   // 26.0
    /// ```
    /// - Throws: `CoreDataError(.predicateEvaluation)` as `value(with:variables:)` does.
    public func value(with value: Any, variables: [String: AttributeValue] = [:]) throws -> AttributeValue {
        try scalar(on: .of(value), variables: variables)
    }

    /// The expression's value as Apple's `expressionValue(with:context:)` returns it: a value as Foundation holds it
    /// (numbers as `NSNumber`), a list or to-many key path as an array, a set expression's result as a set, an object
    /// as itself; `object` is `SELF`, any value `value(with:)` takes, or nil.
    package func foundationValue(with object: Any?, variables: [String: AttributeValue] = [:]) throws -> Any? {
        var evaluator = PredicateEvaluator(variables: variables.mapValues { .scalar($0) })
        var isSet = false
        if case .function(let name, _) = self { isSet = FetchFunction(rawValue: name)?.isSetOperation == true }
        return Self.foundation(try evaluator.value(of: self, on: .of(object)), asSet: isSet)
    }

    private static func foundation(_ value: EvaluatedValue, asSet: Bool = false) -> Any? {
        switch value {
        case .scalar(.object(let held)): return held.value
        case .scalar(let v): return v.foundationValue(as: .undefinedAttributeType)
        case .object(let o): return o
        case .objectID(let id): return id
        case .collection(let items):
            let converted = items.map { foundation($0) }
            guard asSet else { return converted }
            return Set(converted.compactMap { $0 as? AnyHashable })
        }
    }

    /// The expression's one value with `subject` as `SELF`.
    private func scalar(on subject: EvaluatedValue, variables: [String: AttributeValue]) throws -> AttributeValue {
        var evaluator = PredicateEvaluator(variables: variables.mapValues { .scalar($0) })
        switch try evaluator.value(of: self, on: subject) {
        case .scalar(let value): return value
        default: throw evaluator.failure("'\(expressionFormat)' is not one value (it gives objects or a collection)")
        }
    }
}

struct PredicateEvaluator {
    var variables: [String: EvaluatedValue]

    func failure(_ message: String) -> CoreDataError { CoreDataError(.predicateEvaluation, message) }

    mutating func evaluate(_ predicate: FetchPredicate, on subject: EvaluatedValue) throws -> Bool {
        switch predicate {
        case .truePredicate: return true
        case .falsePredicate: return false
        case .and(let parts):
            for p in parts where !(try evaluate(p, on: subject)) { return false }
            return true
        case .or(let parts):
            for p in parts where try evaluate(p, on: subject) { return true }
            return false
        case .not(let inner): return !(try evaluate(inner, on: subject))
        case .comparison(let c): return try evaluate(c, on: subject)
        }
    }

    private mutating func evaluate(_ c: PredicateComparison, on subject: EvaluatedValue) throws -> Bool {
        // `entity IN {'A', 'B'}`: the object's own entity, by name.
        if case .object(let object) = subject, let names = c.entityNames(on: object.predicateObjectID.entity) {
            return names.contains(object.predicateObjectID.entity.name) != (c.op == .notEqual)
        }
        let left = try value(of: c.left, on: subject)
        let right = try value(of: c.right, on: subject)
        switch c.modifier {
        case .direct:
            return try compare(left, c.op, right, options: c.options, comparison: c)
        case .any, .all, .none:
            let items = left.elements ?? (left.identity == nil && isNullScalar(left) ? [] : [left])
            switch c.modifier {
            case .any: return try items.contains { try compare($0, c.op, right, options: c.options, comparison: c) }
            case .all: return try items.allSatisfy { try compare($0, c.op, right, options: c.options, comparison: c) }
            default: return try !items.contains { try compare($0, c.op, right, options: c.options, comparison: c) }
            }
        }
    }

    private func isNullScalar(_ v: EvaluatedValue) -> Bool {
        if case .scalar(.null) = v { return true }
        return false
    }

    // MARK: Expressions

    mutating func value(of expression: FetchExpression, on subject: EvaluatedValue) throws -> EvaluatedValue {
        switch expression {
        case .constant(let c): return Self.value(of: c)
        case .evaluatedObject: return subject
        case .variable(let name):
            guard let v = variables[name] else {
                throw failure("the predicate uses $\(name), but no value was substituted for it")
            }
            return v
        case .keyPath(let base, let components):
            var current = try value(of: base, on: subject)
            for (i, component) in components.enumerated() {
                current = try step(current, component, rest: Array(components[(i + 1)...]))
                if component == "@sum" || component == "@avg" || component == "@min" || component == "@max" { break }
            }
            return current
        case .aggregate(let items):
            return .collection(try items.map { try value(of: $0, on: subject) })
        case .negate(let inner):
            guard case .scalar(let v) = try value(of: inner, on: subject) else { throw failure("cannot negate a non-number") }
            return .scalar(try Self.arithmetic(.subtract, .integer(0), v))
        case .arithmetic(let op, let a, let b):
            guard case .scalar(let x) = try value(of: a, on: subject), case .scalar(let y) = try value(of: b, on: subject)
            else { throw failure("arithmetic (\(op.rawValue)) needs numbers on both sides") }
            return .scalar(try Self.arithmetic(op, x, y))
        case .function(let name, let arguments):
            guard let function = FetchFunction(rawValue: name) else {
                throw failure("unknown function '\(name)'; the functions are \(FetchFunction.names)")
            }
            if let count = FetchFunction.sizeSubscript(name, arguments) { return try value(of: count, on: subject) }
            if function == .element, arguments.count == 2 {
                let collection = try value(of: arguments[0], on: subject)
                guard case .scalar(let index) = try value(of: arguments[1], on: subject) else { throw failure("an index must be a value") }
                // A dictionary is subscripted by key (`info['city']`).
                if case .scalar(.object(let held)) = collection, let dictionary = held.value as? [String: Any],
                    case .string(let key) = index
                {
                    return Self.element(key, of: dictionary)
                }
                return FetchFunction.element(of: collection.elements ?? (isNullScalar(collection) ? [] : [collection]), at: index) ?? .null
            }
            if function.isSetOperation {
                let word = function.setOperatorWord ?? name
                guard arguments.count == 2 else { throw failure("\(word) combines two collections") }
                let left = try members(of: try value(of: arguments[0], on: subject), word, side: "left")
                let rightValue = try value(of: arguments[1], on: subject)
                // Nil on the right leaves the left side as it is (each member once), as Apple's set expressions do.
                if isNullScalar(rightValue) { return .collection(FetchFunction.unionSet.combine(left, [], same: Self.sameMember)) }
                let right = try members(of: rightValue, word, side: "right")
                return .collection(function.combine(left, right, same: Self.sameMember))
            }
            var values: [AttributeValue] = []
            for argument in arguments {
                let v = try value(of: argument, on: subject)
                switch v {
                case .scalar(let s): values.append(s)
                case .collection(let items) where function.isStatistic:
                    for item in items {
                        if case .scalar(let s) = item {
                            values.append(s)
                        } else if function == .count {
                            values.append(.bool(true))  // count: counts objects too
                        } else {
                            throw failure("\(name) reduces values, not objects")
                        }
                    }
                default: throw failure("\(name) takes values, not objects")
                }
            }
            return .scalar(try function.apply(values))
        case .subquery(let collectionExpr, let variable, let predicate):
            let collection = try value(of: collectionExpr, on: subject)
            let items = collection.elements ?? (isNullScalar(collection) ? [] : [collection])
            var kept: [EvaluatedValue] = []
            let saved = variables[variable]
            defer { variables[variable] = saved }
            for item in items {
                variables[variable] = item
                if try evaluate(predicate, on: subject) { kept.append(item) }
            }
            return .collection(kept)
        case .conditional(let condition, let a, let b):
            return try value(of: try evaluate(condition, on: subject) ? a : b, on: subject)
        }
    }

    /// One key path step; collections map the step over their elements and flatten.
    private mutating func step(_ current: EvaluatedValue, _ key: String, rest: [String]) throws -> EvaluatedValue {
        if key.hasPrefix("@") {
            let items = current.elements ?? (isNullScalar(current) ? [] : [current])
            switch key {
            case "@count": return .scalar(.integer(Int64(items.count)))
            case "@sum", "@avg", "@min", "@max":
                // The remaining components name the key to aggregate over each element.
                var values: [AttributeValue] = []
                for item in items {
                    var v = item
                    for k in rest { v = try step(v, k, rest: []) }
                    if case .scalar(let s) = v, !s.isNull { values.append(s) }
                }
                return .scalar(try PredicateSemantics.aggregate(key, values))
            case "@distinctUnionOfObjects", "@unionOfObjects":
                return .collection(items)
            default: throw failure("unknown collection operator \(key)")
            }
        }
        switch current {
        case .collection(let items):
            return .collection(try items.map { try step($0, key, rest: rest) }.flatMap { $0.elements ?? [$0] })
        case .object(let object):
            let entity = object.predicateObjectID.entity
            if entity.propertiesByName[key] == nil,
                entity.rootEntity.selfAndDescendants.contains(where: { $0.propertiesByName[key] != nil })
            {
                // Another entity of the object's family has the key (a subentity's property read on a row of
                // another): nil, as the SQL store reads the NULL in that row's column.
                return .null
            }
            switch try object.predicateValue(forKey: key) {
            case .value(let v): return .scalar(v)
            case .object(let o?): return .object(o)
            case .object(nil): return .null
            case .objects(let os): return .collection(os.map { .object($0) })
            }
        case .scalar(.null): return .null
        case .scalar(.object(let held)) where held.value is [String: Any]:
            // An element of a composite's value (`address.street`).
            return Self.element(key, of: held.value as! [String: Any])
        case .scalar(let value):
            // What key-value coding reads from Foundation's values (`name.length`, `total.intValue`).
            if let read = PredicateSemantics.foundationProperty(key, of: value) { return .scalar(read) }
            fallthrough
        case .objectID:
            throw failure("cannot read key '\(key)' from a \(current.kindName)")
        }
    }

    /// The members of one side of a set operation: a collection's elements, or (on the right) a dictionary's values.
    ///
    /// A dictionary's values come in key order. Anything else is an error, nil on the left too, as in Apple's set
    /// expressions.
    private func members(of value: EvaluatedValue, _ word: String, side: String) throws -> [EvaluatedValue] {
        switch value {
        case .collection(let items): return items
        case .scalar(.object(let held)) where side == "right":
            if let dictionary = held.value as? [String: Any] { return dictionary.keys.sorted().map { Self.element($0, of: dictionary) } }
            throw failure("\(word) needs a collection on its \(side) side (got: \(value.kindName))")
        default: throw failure("\(word) needs a collection on its \(side) side (got: \(value.kindName))")
        }
    }

    /// Whether two members of a set are the same: objects by identity, values as `==` compares them.
    static func sameMember(_ a: EvaluatedValue, _ b: EvaluatedValue) -> Bool {
        if let x = a.identity { return x == b.identity }
        switch (a, b) {
        case (.scalar(let x), .scalar(let y)): return PredicateSemantics.equal(x, y, options: [])
        case (.collection(let x), .collection(let y)): return x.count == y.count && zip(x, y).allSatisfy { sameMember($0, $1) }
        default: return false
        }
    }

    /// A dictionary's value for `key`: a nested dictionary stays one, and a dictionary given to `evaluate(with:)` may
    /// hold arrays and objects too.
    private static func element(_ key: String, of dictionary: [String: Any]) -> EvaluatedValue {
        let element = dictionary[key]
        if let nested = element as? [String: Any] { return .scalar(.object(OpaqueValue(nested))) }
        if element is [Any] || element is any PredicateSubject { return .of(element) }
        return .scalar(AttributeValue(any: element) ?? .null)
    }

    static func arithmetic(_ op: FetchExpression.ArithmeticOperator, _ a: AttributeValue, _ b: AttributeValue) throws -> AttributeValue {
        if a.isNull || b.isNull { return .null }
        if case .integer(let x) = a, case .integer(let y) = b {
            switch op {
            case .add: let (r, o) = x.addingReportingOverflow(y); if !o { return .integer(r) }
            case .subtract: let (r, o) = x.subtractingReportingOverflow(y); if !o { return .integer(r) }
            case .multiply: let (r, o) = x.multipliedReportingOverflow(by: y); if !o { return .integer(r) }
            case .divide, .power: break
            }
        }
        guard let x = a.numericValue, let y = b.numericValue else {
            throw CoreDataError(.predicateEvaluation, "arithmetic (\(op.rawValue)) needs numbers, got \(a.kindName) and \(b.kindName)")
        }
        let result: Double
        switch op {
        case .add: result = x + y
        case .subtract: result = x - y
        case .multiply: result = x * y
        case .divide: result = y == 0 ? .nan : x / y
        case .power: result = pow(x, y)
        }
        // No number (x / 0, a negative number to a fractional power, ∞ - ∞) is nil, as SQLite makes NaN NULL: SQL
        // and memory then agree (the fuzzer found `(age + 3) ** (1/3) > 31` disagreeing for a negative base).
        return result.isNaN ? .null : .double(result)
    }

    static func value(of constant: PredicateConstant) -> EvaluatedValue {
        switch constant {
        case .value(let v): return .scalar(v)
        case .objectID(let id): return .objectID(id)
        case .array(let items): return .collection(items.map(value(of:)))
        }
    }

    // MARK: Comparison

    private func compare(
        _ left: EvaluatedValue, _ op: PredicateComparison.Operator, _ right: EvaluatedValue,
        options: PredicateComparison.Options, comparison: PredicateComparison
    ) throws -> Bool {
        switch op {
        case .equal: return try equal(left, right, options, comparison)
        case .notEqual: return try !equal(left, right, options, comparison)
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            guard case .scalar(let a) = left, case .scalar(let b) = right else {
                throw failure("'\(comparison.predicateFormat)' orders values that are not scalars")
            }
            guard let c = PredicateSemantics.compare(a, b, options: options) else { return false }
            switch op {
            case .lessThan: return c < 0
            case .lessThanOrEqual: return c <= 0
            case .greaterThan: return c > 0
            default: return c >= 0
            }
        case .between:
            guard let bounds = right.elements, bounds.count == 2,
                case .scalar(let lo) = bounds[0], case .scalar(let hi) = bounds[1]
            else { throw failure("BETWEEN needs a list of two values in '\(comparison.predicateFormat)'") }
            guard case .scalar(let v) = left else { throw failure("BETWEEN needs a scalar on its left in '\(comparison.predicateFormat)'") }
            guard let a = PredicateSemantics.compare(v, lo, options: options), let b = PredicateSemantics.compare(v, hi, options: options)
            else { return false }
            return a >= 0 && b <= 0
        case .in:
            switch right {
            case .collection(let items): return try items.contains { try equal(left, $0, options, comparison) }
            case .scalar(.string(let haystack)):
                guard case .scalar(.string(let needle)) = left else { return false }
                return PredicateSemantics.stringOperator(.contains, haystack, needle, options: options)
            case .scalar(.null): return false
            default: return try equal(left, right, options, comparison)
            }
        case .contains:
            switch left {
            case .collection(let items): return try items.contains { try equal($0, right, options, comparison) }
            case .scalar(.string(let haystack)):
                guard case .scalar(.string(let needle)) = right else { return false }
                return PredicateSemantics.stringOperator(.contains, haystack, needle, options: options)
            default: return false
            }
        case .beginsWith, .endsWith, .like, .matches:
            guard case .scalar(.string(let value)) = left, case .scalar(.string(let pattern)) = right else { return false }
            return PredicateSemantics.stringOperator(op, value, pattern, options: options)
        }
    }

    private func equal(
        _ left: EvaluatedValue, _ right: EvaluatedValue, _ options: PredicateComparison.Options, _ comparison: PredicateComparison
    ) throws -> Bool {
        if let a = left.identity {
            if let b = right.identity { return a == b }
            return isNullScalar(right) ? false : false
        }
        if right.identity != nil { return false }
        switch (left, right) {
        case (.scalar(let a), .scalar(let b)): return PredicateSemantics.equal(a, b, options: options)
        case (.collection, _), (_, .collection):
            throw failure("'\(comparison.predicateFormat)' compares a collection with ==; use ANY, ALL, NONE, IN or CONTAINS")
        default: return false
        }
    }
}

extension EvaluatedValue {
    var kindName: String {
        switch self {
        case .scalar(let v): return v.kindName
        case .object: return "object"
        case .objectID: return "object ID"
        case .collection: return "collection"
        }
    }
}
