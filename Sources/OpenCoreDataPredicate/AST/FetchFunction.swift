import Foundation
import OpenCoreDataModel

/// The built-in functions of `NSExpression` that a predicate may call, by their selector-style names.
///
/// A format string calls them as `now()`, `lowercase(name)`, `abs:(balance)` or `modulus:by:(age, 2)`; a function of
/// one argument may be written without its colon. In a fetch they run in SQL, with the same results as in memory:
/// SQLite calls the Swift code below, PostgreSQL runs its own functions written to agree with it.
///
/// For example:
/// ```swift
/// let even = try FetchPredicate(format: "modulus:by:(quantity, 2) == 0")
/// let shouting = try FetchPredicate(format: "uppercase(name) == name")
/// ```
public enum FetchFunction: String, CaseIterable, Sendable {
    // Statistics of a collection (a to-many key path or a list): `sum(items.price)` is `items.@sum.price`.
    case sum = "sum:"
    case count = "count:"
    case min = "min:"
    case max = "max:"
    case average = "average:"
    case median = "median:"
    case mode = "mode:"
    case stddev = "stddev:"
    // Arithmetic, as the operators compute it.
    case add = "add:to:"
    case subtract = "from:subtract:"
    case multiply = "multiply:by:"
    case divide = "divide:by:"
    case power = "raise:toPower:"
    case modulus = "modulus:by:"
    // Numbers.
    case sqrt = "sqrt:"
    case log = "log:"
    case ln = "ln:"
    case exp = "exp:"
    case floor = "floor:"
    case ceiling = "ceiling:"
    case abs = "abs:"
    case trunc = "trunc:"
    case bitwiseAnd = "bitwiseAnd:with:"
    case bitwiseOr = "bitwiseOr:with:"
    case bitwiseXor = "bitwiseXor:with:"
    case onesComplement = "onesComplement:"
    case leftShift = "leftshift:by:"
    case rightShift = "rightshift:by:"
    // Strings.
    case uppercase = "uppercase:"
    case lowercase = "lowercase:"
    case length = "length:"
    /// Core Data's `canonical:`: the string folded case- and diacritic-insensitively, as `[cd]` compares it.
    case canonical = "canonical:"
    // Others.
    /// Its argument, unchanged (a hint to Apple's SQL store not to use an index).
    case noindex = "noindex:"
    /// The current date, when the predicate is evaluated or the fetch compiled.
    case now = "now"
    /// `list[2]`, `list[FIRST]`, `list[LAST]`: an element of a list (the index `FIRST` or `LAST` is that word, as a
    /// string constant); `list[SIZE]` (the word `SIZE`) is `count:` of the list, kept in this form to print as written.
    case element = "objectFrom:withIndex:"
    // Collections combined (NSExpression's set expressions, not functions there): written `a UNION b`,
    // `a INTERSECT b`, `a MINUS b`, each side an array, a set or a list (a dictionary's values on the right).
    /// The members of either side (`unionSet:with:`, written `a UNION b`).
    case unionSet = "unionSet:with:"
    /// The members of the left side that the right side holds too (`a INTERSECT b`).
    case intersectSet = "intersectSet:with:"
    /// The members of the left side that the right side does not hold (`a MINUS b`).
    case minusSet = "minusSet:with:"

    /// How many arguments the function takes (a statistic takes one collection, or a list written as arguments).
    public var arity: Int { rawValue.filter { $0 == ":" }.count }

    /// Whether the function reduces a collection to one value.
    public var isStatistic: Bool {
        switch self {
        case .sum, .count, .min, .max, .average, .median, .mode, .stddev: true
        default: false
        }
    }

    /// Whether the function combines two collections (`UNION`, `INTERSECT`, `MINUS`), which a format string writes
    /// as an operator between them rather than as a call.
    public var isSetOperation: Bool {
        switch self {
        case .unionSet, .intersectSet, .minusSet: true
        default: false
        }
    }

    /// The set operations by the word that writes them between their operands.
    package static let setOperators: [String: FetchFunction] = ["UNION": .unionSet, "INTERSECT": .intersectSet, "MINUS": .minusSet]

    /// The word that writes a set operation between its operands.
    package var setOperatorWord: String? { Self.setOperators.first { $0.value == self }?.key }

    /// The arithmetic operator the function is, for `add:to:` and its kind.
    public var arithmeticOperator: FetchExpression.ArithmeticOperator? {
        switch self {
        case .add: .add
        case .subtract: .subtract
        case .multiply: .multiply
        case .divide: .divide
        case .power: .power
        default: nil
        }
    }

    /// The function a format string calls by `name` with `argumentCount` arguments (`lowercase` with one is
    /// `lowercase:`), or nil when there is none.
    public init?(called name: String, argumentCount: Int) {
        if let exact = FetchFunction(rawValue: name) {
            self = exact
        } else if !name.contains(":"), let function = FetchFunction(rawValue: name + ":") {
            self = function
        } else {
            return nil
        }
    }

    /// The members of a set operation whose operands are constants (lists, list arguments, other such set operations;
    /// nil on the right), in order: the left side's, then (for `UNION`) the right side's others; nil when an operand is
    /// not constant (a key path, a variable not substituted yet) or the left side is nil (an error in memory too).
    ///
    /// A fetch computes constant set operations before it runs (`status IN $OPEN UNION {"new"}` once substituted).
    package static func constantMembers(of expression: FetchExpression) -> [PredicateConstant]? {
        switch expression {
        case .constant(.array(let items)): return items
        case .constant: return nil
        case .aggregate(let items):
            var members: [PredicateConstant] = []
            for item in items {
                guard case .constant(let c) = item else { return nil }
                members.append(c)
            }
            return members
        case .function(let name, let arguments) where arguments.count == 2:
            guard let function = FetchFunction(rawValue: name), function.isSetOperation, let left = constantMembers(of: arguments[0])
            else { return nil }
            // Nil on the right leaves the left side as it is, as Apple's set expressions do.
            if case .constant(.value(.null)) = arguments[1] { return unionSet.combine(left, [], same: sameMember) }
            guard let right = constantMembers(of: arguments[1]) else { return nil }
            return function.combine(left, right, same: sameMember)
        default: return nil
        }
    }

    /// Whether two constants are the same member of a set, as the evaluator compares members.
    private static func sameMember(_ a: PredicateConstant, _ b: PredicateConstant) -> Bool {
        PredicateEvaluator.sameMember(PredicateEvaluator.value(of: a), PredicateEvaluator.value(of: b))
    }

    /// The set operation applied to two lists of members, each member once, in the order described at
    /// `constantMembers(of:)`.
    package func combine<T>(_ left: [T], _ right: [T], same: (T, T) throws -> Bool) rethrows -> [T] {
        var result: [T] = []
        for member in left where try !result.contains(where: { try same($0, member) }) {
            let inRight = try right.contains { try same($0, member) }
            if self == .unionSet || (self == .intersectSet) == inRight { result.append(member) }
        }
        if self == .unionSet {
            for member in right where try !result.contains(where: { try same($0, member) }) { result.append(member) }
        }
        return result
    }

    /// `count:(list)` when `name` and `arguments` are `list[SIZE]`, which is computed as that; else nil.
    package static func sizeSubscript(_ name: String, _ arguments: [FetchExpression]) -> FetchExpression? {
        guard name == element.rawValue, arguments.count == 2, case .constant(.value(.string("SIZE"))) = arguments[1] else { return nil }
        return .function(count.rawValue, [arguments[0]])
    }

    /// The element of `items` that `index` names (a number from 0, `"FIRST"` or `"LAST"`); nil past either end.
    public static func element<T>(of items: [T], at index: AttributeValue) -> T? {
        let position: Int?
        switch index {
        case .string("FIRST"): position = 0
        case .string("LAST"): position = items.count - 1
        case .integer(let i): position = Int(exactly: i)
        case .double(let d): position = Int(exactly: d)
        default: position = nil
        }
        guard let position, items.indices.contains(position) else { return nil }
        return items[position]
    }

    /// The names of the functions, for error messages.
    public static var names: String {
        allCases.filter { !$0.isSetOperation }.map { $0 == .now ? "now()" : $0.rawValue }.joined(separator: ", ")
    }

    /// The function applied to values (nil is `.null`).
    ///
    /// It is the evaluator's result, and SQLite's `ocd_function` returns it too. A statistic's values are its
    /// collection's, nils left out.
    ///
    /// - Throws: `CoreDataError(.predicateEvaluation)` for a value of the wrong kind (`length:` of a number).
    public func apply(_ values: [AttributeValue]) throws -> AttributeValue {
        if isStatistic { return try statistic(values.filter { !$0.isNull }) }
        if isSetOperation {
            throw CoreDataError(.predicateEvaluation, "\(setOperatorWord ?? rawValue) combines collections, not single values")
        }
        if self == .element {
            // The list's values, then the index.
            guard let index = values.last else { return .null }
            if case .string("SIZE") = index { return .integer(Int64(values.count - 1)) }
            return Self.element(of: Array(values.dropLast()), at: index) ?? .null
        }
        if self == .now { return .date(Date()) }
        guard values.count == arity else {
            throw CoreDataError(.predicateEvaluation, "\(rawValue) takes \(arity) argument(s), not \(values.count)")
        }
        if values.contains(where: \.isNull) { return .null }
        if let op = arithmeticOperator { return try PredicateEvaluator.arithmetic(op, values[0], values[1]) }
        switch self {
        case .uppercase, .lowercase, .length, .canonical:
            guard case .string(let s) = values[0] else {
                throw CoreDataError(.predicateEvaluation, "\(rawValue) needs a string, got \(values[0].kindName)")
            }
            switch self {
            case .uppercase: return .string(s.uppercased())
            case .lowercase: return .string(s.lowercased())
            case .canonical: return .string(PredicateSemantics.fold(s, [.caseInsensitive, .diacriticInsensitive]))
            default: return .integer(Int64(s.utf16.count))
            }
        case .noindex: return values[0]
        case .bitwiseAnd, .bitwiseOr, .bitwiseXor, .onesComplement, .leftShift, .rightShift:
            let bits = try values.map { try integer($0, truncating: true) }
            guard bits.allSatisfy({ $0 != nil }) else { return .null }
            switch self {
            case .bitwiseAnd: return .integer(bits[0]! & bits[1]!)
            case .bitwiseOr: return .integer(bits[0]! | bits[1]!)
            case .bitwiseXor: return .integer(bits[0]! ^ bits[1]!)
            // Swift's shifts: a negative count shifts the other way, 64 or more leaves 0 (or -1, shifting a negative
            // number right), as SQLite's `<<` and `>>` do.
            case .leftShift: return .integer(bits[0]! << bits[1]!)
            case .rightShift: return .integer(bits[0]! >> bits[1]!)
            default: return .integer(~bits[0]!)
            }
        case .modulus:
            if let x = try integer(values[0], truncating: false), let y = try integer(values[1], truncating: false) {
                guard y != 0 else { return .null }
                return .integer(x.remainderReportingOverflow(dividingBy: y).partialValue)
            }
            let (x, y) = (try number(values[0]), try number(values[1]))
            return y == 0 ? .null : real(fmod(x, y))
        case .abs, .floor, .ceiling, .trunc:
            if let x = try integer(values[0], truncating: false) {
                guard self == .abs else { return .integer(x) }
                return x == .min ? .double(-Double(x)) : .integer(Swift.abs(x))
            }
            let x = try number(values[0])
            switch self {
            case .abs: return real(Swift.abs(x))
            case .floor: return real(x.rounded(.down))
            case .ceiling: return real(x.rounded(.up))
            default: return real(x.rounded(.towardZero))
            }
        default:
            let x = try number(values[0])
            switch self {
            case .sqrt: return real(x.squareRoot())
            case .log: return real(Foundation.log10(x))
            case .ln: return real(Foundation.log(x))
            default: return real(Foundation.exp(x))
            }
        }
    }

    private func statistic(_ values: [AttributeValue]) throws -> AttributeValue {
        switch self {
        case .count: return .integer(Int64(values.count))
        case .sum: return try PredicateSemantics.aggregate("@sum", values)
        case .average: return try PredicateSemantics.aggregate("@avg", values)
        case .min: return try PredicateSemantics.aggregate("@min", values)
        case .max: return try PredicateSemantics.aggregate("@max", values)
        default:
            let numbers = try values.map(number).sorted()
            guard !numbers.isEmpty else { return .null }
            switch self {
            case .median:
                let middle = numbers.count / 2
                return .double(numbers.count % 2 == 1 ? numbers[middle] : (numbers[middle - 1] + numbers[middle]) / 2)
            case .mode:
                var counts: [Double: Int] = [:]
                for n in numbers { counts[n, default: 0] += 1 }
                let most = counts.values.max()!
                return .double(numbers.first { counts[$0] == most }!)
            default:
                let mean = numbers.reduce(0, +) / Double(numbers.count)
                return .double((numbers.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(numbers.count)).squareRoot())
            }
        }
    }

    /// An integer value (a Boolean is 0 or 1); a real one when `truncating` (nil when out of range), else nil.
    private func integer(_ value: AttributeValue, truncating: Bool) throws -> Int64? {
        switch value {
        case .integer(let i): return i
        case .bool(let b): return b ? 1 : 0
        default:
            let x = try number(value)
            return truncating ? Int64(exactly: x.rounded(.towardZero)) : nil
        }
    }

    private func number(_ value: AttributeValue) throws -> Double {
        guard let x = value.numericValue else {
            throw CoreDataError(.predicateEvaluation, "\(rawValue) needs a number, got \(value.kindName)")
        }
        return x
    }

    /// No number (the square root of -1) is nil, as SQL keeps NaN as NULL.
    private func real(_ x: Double) -> AttributeValue { x.isNaN ? .null : .double(x) }
}
