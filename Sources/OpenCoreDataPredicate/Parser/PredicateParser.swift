import Foundation
import OpenCoreDataModel

/// An object a predicate can reference as a `%@` argument and evaluate against: managed objects conform.
///
/// For example:
/// ```swift
/// let matches = try predicate.evaluate(with: product)   // any NSManagedObject is a PredicateSubject
/// ```
public protocol PredicateSubject: AnyObject {
    /// The object's identity, used when a predicate compares objects.
    var predicateObjectID: NSManagedObjectID { get }
    /// The value of one key: an attribute value, a to-one destination, or a to-many collection.
    func predicateValue(forKey key: String) throws -> PredicateKeyValue
}

/// What a key of a `PredicateSubject` holds.
///
/// For example:
/// ```swift
/// if case .value(let price) = try product.predicateValue(forKey: "price") { print(price) }
/// ```
public enum PredicateKeyValue {
    case value(AttributeValue)
    case object((any PredicateSubject)?)
    case objects([any PredicateSubject])
}

extension FetchPredicate {
    /// Parses a format string, substituting `%@`, `%K`, `%d`, `%f`, … with `arguments` in order.
    ///
    /// For example:
    /// ```swift
    /// let p = try FetchPredicate(format: "%K BEGINSWITH[c] %@ AND price BETWEEN {%d, %d}", "name", "ch", 100, 500)
    /// ```
    /// - Throws: `CoreDataError(.predicateSyntax)` whose message shows the format string with a caret under the
    ///   offending token and says what was expected.
    /// (Disfavoured, so that the non-throwing initializer of `OpenCoreDataCompatibility`, which has Apple's
    /// signature, wins where that module is imported.)
    @_disfavoredOverload
    public init(format: String, _ arguments: Any?...) throws {
        try self.init(format: format, argumentArray: arguments)
    }

    /// Parses a format string with arguments from an array.
    @_disfavoredOverload
    public init(format: String, argumentArray: [Any?]) throws {
        var parser = try PredicateParser(format, arguments: argumentArray)
        self = try parser.parseWholePredicate()
    }
}

extension FetchExpression {
    /// Parses an expression format string, as `NSExpression(format:)` does: `4 + 5 - 2**3`, `lowercase(name)`,
    /// `sum({1, 2, 3})`, `%K.@count` with its arguments.
    ///
    /// - Throws: `CoreDataError(.predicateSyntax)` showing where the string stops making sense.
    @_disfavoredOverload
    public init(format: String, _ arguments: Any?...) throws {
        try self.init(format: format, argumentArray: arguments)
    }

    /// Parses an expression format string with arguments from an array.
    @_disfavoredOverload
    public init(format: String, argumentArray: [Any?]) throws {
        var parser = try PredicateParser(format, arguments: argumentArray)
        if case .end = parser.current.kind { throw parser.error("the expression is empty") }
        let expression = try parser.parseExpression()
        guard case .end = parser.current.kind else { throw parser.expected("an operator or the end of the expression") }
        self = expression
    }
}

/// A recursive-descent parser for the predicate format language.
struct PredicateParser {
    let lexer: PredicateLexer
    let tokens: [PredicateToken]
    var position = 0
    var arguments: [Any?]
    var argumentIndex = 0
    /// How deep the tree being built is at the current token (parentheses, braces, NOT, unary minus, chains of
    /// arithmetic).
    ///
    /// Every later pass over a predicate (evaluation, SQL, printing, hashing, even its deinit) recurses
    /// once per level, so the parser refuses trees deeper than `FetchPredicate.maximumDepth` instead of letting a
    /// hostile format string overflow a thread's stack.
    var depth = 0

    init(_ source: String, arguments: [Any?]) throws {
        lexer = PredicateLexer(source)
        tokens = try lexer.tokenize()
        self.arguments = arguments
    }

    // MARK: Token helpers

    var current: PredicateToken { tokens[position] }

    func describe(_ token: PredicateToken) -> String {
        switch token.kind {
        case .end: return "end of input"
        case .identifier(let s): return "'\(s)'"
        case .escapedIdentifier(let s): return "'#\(s)'"
        case .string(let s): return "string \"\(s)\""
        case .integer(let v): return "number \(v)"
        case .double(let v): return "number \(v)"
        case .decimal(let v): return "number \(v)"
        case .variable(let s): return "'$\(s)'"
        case .format(let s): return "'\(s)'"
        case .atKeyword(let s): return "'@\(s)'"
        case .punct(let s): return "'\(s)'"
        }
    }

    func error(_ message: String, at token: PredicateToken? = nil) -> CoreDataError {
        let t = token ?? current
        return lexer.error(message, at: t.offset, length: t.length)
    }

    func expected(_ what: String) -> CoreDataError {
        error("expected \(what), found \(describe(current))")
    }

    func isKeyword(_ word: String, _ token: PredicateToken? = nil) -> Bool {
        if case .identifier(let s) = (token ?? current).kind { return s.uppercased() == word }
        return false
    }

    func isPunct(_ p: String) -> Bool {
        if case .punct(let s) = current.kind { return s == p }
        return false
    }

    /// Parses one level deeper, or throws when the predicate would nest deeper than `FetchPredicate.maximumDepth`.
    mutating func nested<T>(_ parse: (inout PredicateParser) throws -> T) throws -> T {
        try checkDepth(adding: 1)
        depth += 1
        defer { depth -= 1 }
        return try parse(&self)
    }

    func checkDepth(adding levels: Int) throws {
        guard depth + levels <= FetchPredicate.maximumDepth else {
            throw error("the predicate nests more than \(FetchPredicate.maximumDepth) levels deep; simplify it or split it into several")
        }
    }

    mutating func advance() { if position < tokens.count - 1 { position += 1 } }

    mutating func expectPunct(_ p: String, _ what: String? = nil) throws {
        guard isPunct(p) else { throw expected(what ?? "'\(p)'") }
        advance()
    }

    static let reserved = PredicateKeys.reserved

    // MARK: Predicates

    mutating func parseWholePredicate() throws -> FetchPredicate {
        if case .end = current.kind { throw error("the predicate is empty") }
        let p = try parseOr()
        guard case .end = current.kind else {
            throw expected("AND, OR or the end of the predicate")
        }
        // Arguments the format does not use are ignored, as Apple's parser ignores them (it cannot count C varargs):
        // `SELF == '%@'` with an argument compares with the two characters in quotes.
        return p
    }

    // Packrat memoisation: "(" can start a predicate or an expression, so the parser may try both readings of the
    // same tokens. Remembering each rule's outcome at a (token, argument) position keeps parsing linear instead of
    // exponential in the nesting depth (the fuzzer found inputs that took minutes without it).
    struct MemoKey: Hashable {
        let position: Int
        let argument: Int
    }

    enum Memo<T> {
        case success(T, position: Int, argument: Int)
        case failure(any Error, position: Int)
    }

    var predicateMemo: [MemoKey: Memo<FetchPredicate>] = [:]
    var expressionMemo: [MemoKey: Memo<FetchExpression>] = [:]

    mutating func memoized<T>(
        _ memo: WritableKeyPath<PredicateParser, [MemoKey: Memo<T>]>, _ parse: (inout PredicateParser) throws -> T
    ) throws -> T {
        let key = MemoKey(position: position, argument: argumentIndex)
        if let known = self[keyPath: memo][key] {
            switch known {
            case .success(let value, let end, let argument):
                position = end
                argumentIndex = argument
                return value
            case .failure(let error, let end):
                position = end
                throw error
            }
        }
        do {
            let value = try parse(&self)
            self[keyPath: memo][key] = .success(value, position: position, argument: argumentIndex)
            return value
        } catch {
            self[keyPath: memo][key] = .failure(error, position: position)
            throw error
        }
    }

    mutating func parseOr() throws -> FetchPredicate {
        try nested { try $0.memoized(\.predicateMemo) { try $0.parseOrUncached() } }
    }

    mutating func parseOrUncached() throws -> FetchPredicate {
        var parts = [try parseAnd()]
        while isKeyword("OR") || isPunct("||") {
            advance()
            parts.append(try parseAnd())
        }
        return parts.count == 1 ? parts[0] : .or(parts)
    }

    mutating func parseAnd() throws -> FetchPredicate {
        var parts = [try parseNot()]
        while isKeyword("AND") || isPunct("&&") {
            advance()
            parts.append(try parseNot())
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    mutating func parseNot() throws -> FetchPredicate {
        if isKeyword("NOT") || isPunct("!") {
            advance()
            return .not(try nested { try $0.parseNot() })
        }
        return try parsePrimaryPredicate()
    }

    mutating func parsePrimaryPredicate() throws -> FetchPredicate {
        if isKeyword("TRUEPREDICATE") { advance(); return .truePredicate }
        if isKeyword("FALSEPREDICATE") { advance(); return .falsePredicate }
        var predicateError: (offset: Int, error: any Error)?
        if isPunct("(") {
            // Either a parenthesised predicate or a comparison whose left side starts with "(".
            let saved = (position, argumentIndex)
            advance()
            do {
                let inner = try parseOr()
                if isPunct(")") {
                    advance()
                    if !isComparisonOperatorAhead() { return inner }
                } else {
                    predicateError = (current.offset, expected("')' to close the '(' at offset \(tokens[saved.0].offset)"))
                }
            } catch {
                predicateError = (current.offset, error)
            }
            (position, argumentIndex) = saved
        }
        do {
            return try parseComparison()
        } catch {
            // Report whichever reading of "(" got further into the input.
            if let predicateError, predicateError.offset > current.offset { throw predicateError.error }
            throw error
        }
    }

    func isComparisonOperatorAhead() -> Bool {
        if case .punct(let p) = current.kind {
            return ["==", "=", "!=", "<>", "<", "<=", "=<", ">", ">=", "=>"].contains(p)
        }
        return ["IN", "BETWEEN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES"].contains { isKeyword($0) }
    }

    mutating func parseComparison() throws -> FetchPredicate {
        var modifier = PredicateComparison.Modifier.direct
        if isKeyword("ANY") || isKeyword("SOME") {
            modifier = .any; advance()
        } else if isKeyword("ALL") {
            modifier = .all; advance()
        } else if isKeyword("NONE") {
            modifier = .none; advance()
        }
        let leftToken = current
        let left = try parseExpression()
        // A bare boolean expression with no operator is not a predicate in the format language.
        let opToken = current
        var negated = false
        if isKeyword("NOT"), let next = tokens[safe: position + 1], isOperatorKeyword(next) {
            // "a NOT IN b", "a NOT CONTAINS b": sugar for NOT (a IN b).
            negated = true
            advance()
        }
        guard let op = parseOperator() else {
            if case .end = opToken.kind, modifier == .direct, position == 1 {
                throw error("expected a comparison operator after \(describe(leftToken))", at: opToken)
            }
            throw expected("a comparison operator (==, !=, <, <=, >, >=, IN, BETWEEN, BEGINSWITH, ENDSWITH, CONTAINS, LIKE, MATCHES)")
        }
        let options = try parseOptions(for: op)
        let right = try parseExpression()
        if op == .between {
            guard isTwoElementList(right) else {
                throw error("BETWEEN takes a list of two values, as in {1, 10}", at: opToken)
            }
        }
        let comparison = FetchPredicate.comparison(PredicateComparison(left, op, right, modifier: modifier, options: options))
        return negated ? .not(comparison) : comparison
    }

    func isTwoElementList(_ e: FetchExpression) -> Bool {
        switch e {
        case .aggregate(let items): return items.count == 2
        case .constant(.array(let items)): return items.count == 2
        case .variable: return true
        default: return false
        }
    }

    func isOperatorKeyword(_ token: PredicateToken) -> Bool {
        ["IN", "BETWEEN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES"].contains { isKeyword($0, token) }
    }

    mutating func parseOperator() -> PredicateComparison.Operator? {
        let op: PredicateComparison.Operator?
        switch current.kind {
        case .punct("=="), .punct("="): op = .equal
        case .punct("!="), .punct("<>"): op = .notEqual
        case .punct("<"): op = .lessThan
        case .punct("<="), .punct("=<"): op = .lessThanOrEqual
        case .punct(">"): op = .greaterThan
        case .punct(">="), .punct("=>"): op = .greaterThanOrEqual
        case .identifier(let word):
            switch word.uppercased() {
            case "IN": op = .in
            case "BETWEEN": op = .between
            case "BEGINSWITH": op = .beginsWith
            case "ENDSWITH": op = .endsWith
            case "CONTAINS": op = .contains
            case "LIKE": op = .like
            case "MATCHES": op = .matches
            default: op = nil
            }
        default: op = nil
        }
        if op != nil { advance() }
        return op
    }

    mutating func parseOptions(for op: PredicateComparison.Operator) throws -> PredicateComparison.Options {
        guard isPunct("["), current.offset == tokens[position - 1].offset + tokens[position - 1].length else { return [] }
        let open = current
        advance()
        guard case .identifier(let letters) = current.kind else {
            throw expected("comparison options such as c, d or cd inside [ ]")
        }
        var options: PredicateComparison.Options = []
        for letter in letters.lowercased() {
            switch letter {
            case "c": options.insert(.caseInsensitive)
            case "d": options.insert(.diacriticInsensitive)
            case "n": options.insert(.normalized)
            case "l": continue  // locale-sensitive: accepted, folding is locale-independent
            default: throw error("unknown comparison option '\(letter)'; expected c, d, n or l")
            }
        }
        advance()
        try expectPunct("]", "']' to close the comparison options opened at offset \(open.offset)")
        return options
    }

}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
