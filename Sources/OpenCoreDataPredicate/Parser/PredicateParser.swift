import Foundation
import OpenCoreDataModel

/// An object a predicate can reference as a `%@` argument and evaluate against: managed objects conform.
public protocol PredicateSubject: AnyObject {
    /// The object's identity, used when a predicate compares objects.
    var predicateObjectID: NSManagedObjectID { get }
    /// The value of one key: an attribute value, a to-one destination, or a to-many collection.
    func predicateValue(forKey key: String) throws -> PredicateKeyValue
}

/// What a key of a `PredicateSubject` holds.
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

/// A recursive-descent parser for the predicate format language.
struct PredicateParser {
    private let lexer: PredicateLexer
    private let tokens: [PredicateToken]
    private var position = 0
    private var arguments: [Any?]
    private var argumentIndex = 0
    /// How deep the tree being built is at the current token (parentheses, braces, NOT, unary minus, chains of
    /// arithmetic). Every later pass over a predicate (evaluation, SQL, printing, hashing, even its deinit) recurses
    /// once per level, so the parser refuses trees deeper than `FetchPredicate.maximumDepth` instead of letting a
    /// hostile format string overflow a thread's stack.
    private var depth = 0

    init(_ source: String, arguments: [Any?]) throws {
        lexer = PredicateLexer(source)
        tokens = try lexer.tokenize()
        self.arguments = arguments
    }

    // MARK: Token helpers

    private var current: PredicateToken { tokens[position] }

    private func describe(_ token: PredicateToken) -> String {
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

    private func error(_ message: String, at token: PredicateToken? = nil) -> CoreDataError {
        let t = token ?? current
        return lexer.error(message, at: t.offset, length: t.length)
    }

    private func expected(_ what: String) -> CoreDataError {
        error("expected \(what), found \(describe(current))")
    }

    private func isKeyword(_ word: String, _ token: PredicateToken? = nil) -> Bool {
        if case .identifier(let s) = (token ?? current).kind { return s.uppercased() == word }
        return false
    }

    private func isPunct(_ p: String) -> Bool {
        if case .punct(let s) = current.kind { return s == p }
        return false
    }

    /// Parses one level deeper, or throws when the predicate would nest deeper than `FetchPredicate.maximumDepth`.
    private mutating func nested<T>(_ parse: (inout PredicateParser) throws -> T) throws -> T {
        try checkDepth(adding: 1)
        depth += 1
        defer { depth -= 1 }
        return try parse(&self)
    }

    private func checkDepth(adding levels: Int) throws {
        guard depth + levels <= FetchPredicate.maximumDepth else {
            throw error("the predicate nests more than \(FetchPredicate.maximumDepth) levels deep; simplify it or split it into several")
        }
    }

    private mutating func advance() { if position < tokens.count - 1 { position += 1 } }

    private mutating func expectPunct(_ p: String, _ what: String? = nil) throws {
        guard isPunct(p) else { throw expected(what ?? "'\(p)'") }
        advance()
    }

    private static let reserved: Set<String> = [
        "AND", "OR", "NOT", "ANY", "SOME", "ALL", "NONE", "IN", "BETWEEN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE",
        "MATCHES", "TRUEPREDICATE", "FALSEPREDICATE", "TRUE", "FALSE", "YES", "NO", "NULL", "NIL", "SELF", "SUBQUERY",
        "FUNCTION", "FIRST", "LAST", "SIZE",
    ]

    // MARK: Predicates

    mutating func parseWholePredicate() throws -> FetchPredicate {
        if case .end = current.kind { throw error("the predicate is empty") }
        let p = try parseOr()
        guard case .end = current.kind else {
            throw expected("AND, OR or the end of the predicate")
        }
        if argumentIndex < arguments.count {
            throw lexer.error(
                "\(arguments.count) arguments were given but the format uses only \(argumentIndex)",
                at: tokens.last!.offset, length: 1)
        }
        return p
    }

    // Packrat memoisation: "(" can start a predicate or an expression, so the parser may try both readings of the
    // same tokens. Remembering each rule's outcome at a (token, argument) position keeps parsing linear instead of
    // exponential in the nesting depth (the fuzzer found inputs that took minutes without it).
    private struct MemoKey: Hashable {
        let position: Int
        let argument: Int
    }

    private enum Memo<T> {
        case success(T, position: Int, argument: Int)
        case failure(any Error, position: Int)
    }

    private var predicateMemo: [MemoKey: Memo<FetchPredicate>] = [:]
    private var expressionMemo: [MemoKey: Memo<FetchExpression>] = [:]

    private mutating func memoized<T>(
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

    private mutating func parseOr() throws -> FetchPredicate {
        try nested { try $0.memoized(\.predicateMemo) { try $0.parseOrUncached() } }
    }

    private mutating func parseOrUncached() throws -> FetchPredicate {
        var parts = [try parseAnd()]
        while isKeyword("OR") || isPunct("||") {
            advance()
            parts.append(try parseAnd())
        }
        return parts.count == 1 ? parts[0] : .or(parts)
    }

    private mutating func parseAnd() throws -> FetchPredicate {
        var parts = [try parseNot()]
        while isKeyword("AND") || isPunct("&&") {
            advance()
            parts.append(try parseNot())
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    private mutating func parseNot() throws -> FetchPredicate {
        if isKeyword("NOT") || isPunct("!") {
            advance()
            return .not(try nested { try $0.parseNot() })
        }
        return try parsePrimaryPredicate()
    }

    private mutating func parsePrimaryPredicate() throws -> FetchPredicate {
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

    private func isComparisonOperatorAhead() -> Bool {
        if case .punct(let p) = current.kind {
            return ["==", "=", "!=", "<>", "<", "<=", "=<", ">", ">=", "=>"].contains(p)
        }
        return ["IN", "BETWEEN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES"].contains { isKeyword($0) }
    }

    private mutating func parseComparison() throws -> FetchPredicate {
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

    private func isTwoElementList(_ e: FetchExpression) -> Bool {
        switch e {
        case .aggregate(let items): return items.count == 2
        case .constant(.array(let items)): return items.count == 2
        case .variable: return true
        default: return false
        }
    }

    private func isOperatorKeyword(_ token: PredicateToken) -> Bool {
        ["IN", "BETWEEN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES"].contains { isKeyword($0, token) }
    }

    private mutating func parseOperator() -> PredicateComparison.Operator? {
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

    private mutating func parseOptions(for op: PredicateComparison.Operator) throws -> PredicateComparison.Options {
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

    // MARK: Expressions

    private mutating func parseExpression() throws -> FetchExpression {
        try nested { try $0.memoized(\.expressionMemo) { try $0.parseAdditive() } }
    }

    private mutating func parseAdditive() throws -> FetchExpression {
        var left = try parseMultiplicative()
        var links = 0  // each operator adds a level above the left operand: `1+1+1` is ((1+1)+1)
        while isPunct("+") || isPunct("-") {
            let op: FetchExpression.ArithmeticOperator = isPunct("+") ? .add : .subtract
            links += 1
            try checkDepth(adding: links)
            advance()
            left = .arithmetic(op, left, try parseMultiplicative())
        }
        return left
    }

    private mutating func parseMultiplicative() throws -> FetchExpression {
        var left = try parsePower()
        var links = 0
        while isPunct("*") || isPunct("/") {
            let op: FetchExpression.ArithmeticOperator = isPunct("*") ? .multiply : .divide
            links += 1
            try checkDepth(adding: links)
            advance()
            left = .arithmetic(op, left, try parsePower())
        }
        return left
    }

    private mutating func parsePower() throws -> FetchExpression {
        let base = try parseUnary()
        if isPunct("**") {
            advance()
            return .arithmetic(.power, base, try nested { try $0.parsePower() })
        }
        return base
    }

    private mutating func parseUnary() throws -> FetchExpression {
        if isPunct("-") {
            advance()
            let operand = try nested { try $0.parseUnary() }
            switch operand {
            case .constant(.value(.integer(let v))): return .constant(.value(.integer(-v)))
            case .constant(.value(.double(let v))): return .constant(.value(.double(-v)))
            case .constant(.value(.decimal(let v))): return .constant(.value(.decimal(-v)))
            default: return .negate(operand)
            }
        }
        return try parsePostfix()
    }

    private mutating func parsePostfix() throws -> FetchExpression {
        var expr = try parseAtom()
        while isPunct(".") {
            advance()
            let component = try parseKeyComponent()
            if case .keyPath(let base, let comps) = expr {
                expr = .keyPath(base, comps + [component])
            } else {
                expr = .keyPath(expr, [component])
            }
        }
        return expr
    }

    private mutating func parseKeyComponent() throws -> String {
        switch current.kind {
        case .identifier(let name):
            guard !Self.reserved.contains(name.uppercased()) else {
                throw error("'\(name)' is a reserved word; write #\(name) to use it as a key")
            }
            advance()
            return name
        case .escapedIdentifier(let name):
            advance()
            return name
        case .atKeyword(let name):
            let known = ["count", "sum", "avg", "min", "max", "distinctUnionOfObjects", "unionOfObjects"]
            guard known.contains(name) else {
                throw error("unknown collection operator '@\(name)'; expected @count, @sum, @avg, @min or @max")
            }
            advance()
            return "@" + name
        case .format("%K"):
            let token = current
            advance()
            let path = try nextKeyPathArgument(token)
            return path.joined(separator: ".")
        default:
            throw expected("a key name after '.'")
        }
    }

    private mutating func parseAtom() throws -> FetchExpression {
        let token = current
        switch token.kind {
        case .string(let s):
            advance()
            return .constant(.value(.string(s)))
        case .integer(let v):
            advance()
            return .constant(.value(.integer(v)))
        case .double(let v):
            advance()
            return .constant(.value(.double(v)))
        case .decimal(let v):
            advance()
            return .constant(.value(.decimal(v)))
        case .variable(let name):
            advance()
            return .variable(name)
        case .format(let spec):
            advance()
            return try formatArgument(spec, token: token)
        case .atKeyword:
            // "@count" at the start of a key path applies to SELF (rare; accepted for symmetry).
            return .keyPath(.evaluatedObject, [try parseKeyComponent()])
        case .escapedIdentifier(let name):
            advance()
            return .keyPath(.evaluatedObject, [name])
        case .punct("{"):
            advance()
            var items: [FetchExpression] = []
            if !isPunct("}") {
                items.append(try parseExpression())
                while isPunct(",") {
                    advance()
                    items.append(try parseExpression())
                }
            }
            try expectPunct("}", "',' or '}' in the list")
            return .aggregate(items)
        case .punct("("):
            advance()
            let inner = try parseExpression()
            try expectPunct(")")
            return inner
        case .identifier(let name):
            switch name.uppercased() {
            case "TRUE", "YES":
                advance()
                return .constant(.value(.bool(true)))
            case "FALSE", "NO":
                advance()
                return .constant(.value(.bool(false)))
            case "NULL", "NIL":
                advance()
                return .constant(.null)
            case "SELF":
                advance()
                return .evaluatedObject
            case "SUBQUERY":
                return try nested { try $0.parseSubquery() }
            case "CAST" where tokens[safe: position + 1]?.kind == .punct("("):
                return try parseCast()
            default:
                if Self.reserved.contains(name.uppercased()) {
                    throw error("expected a value or key path, found keyword '\(name)' (write #\(name) to use it as a key)")
                }
                advance()
                return .keyPath(.evaluatedObject, [name])
            }
        case .end:
            throw expected("a value or key path")
        default:
            throw expected("a value or key path")
        }
    }

    private mutating func parseSubquery() throws -> FetchExpression {
        advance()
        try expectPunct("(", "'(' after SUBQUERY")
        let collection = try parseExpression()
        try expectPunct(",", "',' after the SUBQUERY collection")
        guard case .variable(let name) = current.kind else { throw expected("a $variable as SUBQUERY's second argument") }
        advance()
        try expectPunct(",", "',' after the SUBQUERY variable")
        let predicate = try parseOr()
        try expectPunct(")", "')' to close SUBQUERY")
        return .subquery(collection, name, predicate)
    }

    /// `CAST(value, "Type")`: the printer's spelling of dates, decimals, UUIDs, URLs, data and object IDs.
    private mutating func parseCast() throws -> FetchExpression {
        let castToken = current
        advance()
        try expectPunct("(", "'(' after CAST")
        let valueToken = current
        let raw: AttributeValue
        switch current.kind {
        case .string(let s): raw = .string(s)
        case .integer(let i): raw = .integer(i)
        case .double(let d): raw = .double(d)
        case .punct("-"):
            advance()
            switch current.kind {
            case .integer(let i): raw = .integer(-i)
            case .double(let d): raw = .double(-d)
            default: throw expected("a number after '-' in CAST")
            }
        default: throw expected("a string or number as CAST's first argument")
        }
        advance()
        try expectPunct(",", "',' after CAST's value")
        guard case .string(let typeName) = current.kind else { throw expected("a type name string such as \"NSDate\"") }
        advance()
        try expectPunct(")", "')' to close CAST")
        let text: String? = { if case .string(let s) = raw { return s } else { return nil } }()
        let number = raw.numericValue
        let value: PredicateConstant?
        switch typeName {
        case "NSDate": value = number.map { .value(.date(Date(timeIntervalSinceReferenceDate: $0))) }
        case "NSNumber": value = text.flatMap(Double.init).map { .value(.double($0)) } ?? number.map { .value(.double($0)) }
        case "NSDecimalNumber":
            value = (text ?? number.map { "\($0)" }).flatMap { Decimal(string: $0, locale: Locale(identifier: "en_US_POSIX")) }.map {
                .value(.decimal($0))
            }
        case "NSUUID", "UUID": value = text.flatMap(UUID.init(uuidString:)).map { .value(.uuid($0)) }
        case "NSURL", "URL": value = text.flatMap { URL(string: $0) }.map { .value(.uri($0)) }
        case "NSData", "Data": value = text.flatMap { Data(base64Encoded: $0) }.map { .value(.data($0)) }
        case "NSString", "String": value = text.map { .value(.string($0)) }
        case "NSManagedObjectID":
            throw error("an object ID cannot be rebuilt from text here; pass the object or its ID as a %@ argument", at: castToken)
        default:
            throw error(
                "CAST to '\(typeName)' is not supported; expected NSDate, NSNumber, NSDecimalNumber, NSUUID, NSURL, NSData, NSString or NSManagedObjectID",
                at: castToken)
        }
        guard let value else { throw error("CAST cannot convert this value to \(typeName)", at: valueToken) }
        return .constant(value)
    }

    // MARK: Format arguments

    private mutating func nextArgument(_ token: PredicateToken) throws -> Any? {
        guard argumentIndex < arguments.count else {
            throw error(
                "the format needs argument #\(argumentIndex + 1) for \(describe(token)), but only \(arguments.count) were given", at: token)
        }
        defer { argumentIndex += 1 }
        return arguments[argumentIndex]
    }

    private mutating func nextKeyPathArgument(_ token: PredicateToken) throws -> [String] {
        let arg = try nextArgument(token)
        guard let path = (arg as? String) ?? (arg as? Substring).map(String.init), !path.isEmpty else {
            throw error("%K needs a key path string argument, got \(describeArgument(arg))", at: token)
        }
        return path.split(separator: ".").map(String.init)
    }

    private func describeArgument(_ arg: Any?) -> String {
        guard let arg else { return "nil" }
        return "\(type(of: arg)) \(arg)"
    }

    private mutating func formatArgument(_ spec: String, token: PredicateToken) throws -> FetchExpression {
        switch spec {
        case "%K":
            return .keyPath(.evaluatedObject, try nextKeyPathArgument(token))
        case "%%":
            throw error("'%%' is only meaningful inside a string", at: token)
        case "%@":
            let arg = try nextArgument(token)
            guard let constant = PredicateConstant(argument: arg) else {
                throw error("argument #\(argumentIndex) for %@ is of an unsupported type: \(describeArgument(arg))", at: token)
            }
            return .constant(constant)
        case "%f", "%lf", "%g", "%e":
            let arg = try nextArgument(token)
            guard let value = AttributeValue(any: arg), let d = value.numericValue else {
                throw error("\(spec) needs a number argument, got \(describeArgument(arg))", at: token)
            }
            return .constant(.value(.double(d)))
        default:
            let arg = try nextArgument(token)
            switch AttributeValue(any: arg) {
            case .integer(let i)?: return .constant(.value(.integer(i)))
            case .bool(let b)?: return .constant(.value(.integer(b ? 1 : 0)))
            case .double(let d)? where d.rounded() == d && abs(d) < 9.2e18: return .constant(.value(.integer(Int64(d))))
            default:
                throw error("\(spec) needs an integer argument, got \(describeArgument(arg))", at: token)
            }
        }
    }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
