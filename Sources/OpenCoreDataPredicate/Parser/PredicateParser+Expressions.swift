import Foundation
import OpenCoreDataModel

// Expressions of the predicate language: arithmetic and bitwise operators, key paths, subscripts, functions, literals,
// lists, SUBQUERY, CAST and format arguments.
extension PredicateParser {
    // MARK: Expressions

    mutating func parseExpression() throws -> FetchExpression {
        try nested { try $0.memoized(\.expressionMemo) { try $0.parseSetOperations() } }
    }

    /// `a UNION b`, `a INTERSECT b`, `a MINUS b`: NSExpression's set expressions, loosest of all operators and read
    /// left to right.
    ///
    /// The words are operators only between two operands, so a key named `union` or `minus` still reads as a key.
    mutating func parseSetOperations() throws -> FetchExpression {
        var left = try parseBitwise(0)
        var links = 0
        while case .identifier(let word) = current.kind, let function = FetchFunction.setOperators[word.uppercased()] {
            links += 1
            try checkDepth(adding: links)
            advance()
            left = .function(function.rawValue, [left, try parseBitwise(0)])
        }
        return left
    }

    /// The bitwise operators, loosest first as in C: `|`, `^`, `&`, then `<<` and `>>`; each is one of NSExpression's
    /// functions (`a & b` is `bitwiseAnd:with:(a, b)`).
    static let bitwiseLevels: [[String: FetchFunction]] = [
        ["|": .bitwiseOr], ["^": .bitwiseXor], ["&": .bitwiseAnd], ["<<": .leftShift, ">>": .rightShift],
    ]

    mutating func parseBitwise(_ level: Int) throws -> FetchExpression {
        guard level < Self.bitwiseLevels.count else { return try parseAdditive() }
        var left = try parseBitwise(level + 1)
        var links = 0
        while case .punct(let p) = current.kind, let function = Self.bitwiseLevels[level][p] {
            links += 1
            try checkDepth(adding: links)
            advance()
            left = .function(function.rawValue, [left, try parseBitwise(level + 1)])
        }
        return left
    }

    mutating func parseAdditive() throws -> FetchExpression {
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

    mutating func parseMultiplicative() throws -> FetchExpression {
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

    mutating func parsePower() throws -> FetchExpression {
        let base = try parseUnary()
        if isPunct("**") {
            advance()
            return .arithmetic(.power, base, try nested { try $0.parsePower() })
        }
        return base
    }

    mutating func parseUnary() throws -> FetchExpression {
        if isPunct("~") {
            advance()
            return .function(FetchFunction.onesComplement.rawValue, [try nested { try $0.parseUnary() }])
        }
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

    mutating func parsePostfix() throws -> FetchExpression {
        var expr = try parseAtom()
        while isPunct(".") || isPunct("[") {
            if isPunct("[") {
                advance()
                expr = try nested { try $0.parseSubscript(of: expr) }
                continue
            }
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

    /// `list[2]`, `list[FIRST]`, `list[LAST]`, `list[SIZE]` (`objectFrom:withIndex:`; SIZE computed as `count:`), after
    /// the `[`.
    mutating func parseSubscript(of collection: FetchExpression) throws -> FetchExpression {
        if case .identifier(let word) = current.kind, ["FIRST", "LAST", "SIZE"].contains(word.uppercased()),
            tokens[safe: position + 1]?.kind == .punct("]")
        {
            advance()
            advance()
            return .function(FetchFunction.element.rawValue, [collection, .constant(.value(.string(word.uppercased())))])
        }
        let index = try parseExpression()
        try expectPunct("]", "']' after the index")
        return .function(FetchFunction.element.rawValue, [collection, index])
    }

    mutating func parseKeyComponent() throws -> String {
        switch current.kind {
        case .identifier(let name):
            guard !name.contains(":") else { throw error("unexpected ':' in the key '\(name)'") }
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

    mutating func parseAtom() throws -> FetchExpression {
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
            return .aggregate(try parseExpressionList(closedBy: "}", "',' or '}' in the list"))
        case .punct("("):
            advance()
            let inner = try parseExpression()
            try expectPunct(")")
            return inner
        case .identifier(let name) where name.uppercased() == "TERNARY" && tokens[safe: position + 1]?.kind == .punct("("):
            return try nested { try $0.parseTernary() }
        case .identifier(let name)
        where name.contains(":")
            || (tokens[safe: position + 1]?.kind == .punct("(") && name.uppercased() != "CAST"
                && (name.uppercased() == "FUNCTION" || !Self.reserved.contains(name.uppercased()))):
            // Not `nested`: the arguments are (each a parseExpression), so a call is one level, as `x[SIZE]` is.
            return try parseFunctionCall(name)
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

    /// Expressions separated by commas up to `closing` (consumed); none when `closing` comes first.
    mutating func parseExpressionList(closedBy closing: String, _ what: String) throws -> [FetchExpression] {
        var items: [FetchExpression] = []
        if !isPunct(closing) {
            items.append(try parseExpression())
            while isPunct(",") {
                advance()
                items.append(try parseExpression())
            }
        }
        try expectPunct(closing, what)
        return items
    }

    /// `now()`, `lowercase(name)`, `modulus:by:(age, 2)`: one of `FetchFunction`'s, with its arguments.
    mutating func parseFunctionCall(_ name: String) throws -> FetchExpression {
        let token = current
        if name.uppercased() == "FUNCTION" {
            throw error(
                "FUNCTION(…) calls an Objective-C method on the object, which Swift on Linux cannot; use a built-in function (\(FetchFunction.names)) or a key path"
            )
        }
        advance()
        guard isPunct("(") else { throw expected("'(' after the function name '\(name)'") }
        advance()
        var arguments = try parseExpressionList(closedBy: ")", "',' or ')' after the arguments of \(name)")
        guard let function = FetchFunction(called: name, argumentCount: arguments.count) else {
            throw error("unknown function '\(name)'; the functions are \(FetchFunction.names)", at: token)
        }
        if function.isStatistic {
            guard !arguments.isEmpty else {
                throw error("\(function.rawValue) needs a collection or values to reduce", at: token)
            }
            // `sum(1, 2, 3)` is `sum({1, 2, 3})`.
            if arguments.count > 1 { arguments = [.aggregate(arguments)] }
        } else if arguments.count != function.arity {
            throw error(
                "\(function.rawValue) takes \(function.arity) argument\(function.arity == 1 ? "" : "s"), not \(arguments.count)", at: token)
        }
        // `add:to:(a, b)` is `a + b`, as on Apple's platforms (where both are the one function expression).
        if let op = function.arithmeticOperator { return .arithmetic(op, arguments[0], arguments[1]) }
        return .function(function.rawValue, arguments)
    }

    mutating func parseSubquery() throws -> FetchExpression {
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

    /// `TERNARY(predicate, whenTrue, whenFalse)`, at `TERNARY`.
    mutating func parseTernary() throws -> FetchExpression {
        advance()
        try expectPunct("(", "'(' after TERNARY")
        let condition = try parseOr()
        try expectPunct(",", "',' after TERNARY's condition")
        let whenTrue = try parseExpression()
        try expectPunct(",", "',' after TERNARY's second argument")
        let whenFalse = try parseExpression()
        try expectPunct(")", "')' to close TERNARY")
        return .conditional(condition, whenTrue, whenFalse)
    }

    /// `CAST(value, "Type")`: the printer's spelling of dates, decimals, UUIDs, URLs, data and object IDs.
    mutating func parseCast() throws -> FetchExpression {
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
        case .format(let spec) where spec != "%K" && spec != "%%":
            // `CAST(%f, "NSDate")`, the usual way to compare with a time interval.
            guard case .constant(.value(let value)) = try formatArgument(spec, token: valueToken) else {
                throw error("CAST takes a string, number or date argument", at: valueToken)
            }
            switch value {
            case .string, .integer, .double: raw = value
            case .decimal(let d): raw = .string(NSDecimalNumber(decimal: d).stringValue)
            // A date to NSDate stays itself; to NSNumber it is its time interval (as NSDate's `doubleValue`).
            case .date(let date): raw = .double(date.timeIntervalSinceReferenceDate)
            default: throw error("CAST takes a string, number or date argument, not \(value.kindName)", at: valueToken)
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

    mutating func nextArgument(_ token: PredicateToken) throws -> Any? {
        guard argumentIndex < arguments.count else {
            throw error(
                "the format needs argument #\(argumentIndex + 1) for \(describe(token)), but only \(arguments.count) were given", at: token)
        }
        defer { argumentIndex += 1 }
        return arguments[argumentIndex]
    }

    mutating func nextKeyPathArgument(_ token: PredicateToken) throws -> [String] {
        let arg = try nextArgument(token)
        guard let path = (arg as? String) ?? (arg as? Substring).map(String.init), !path.isEmpty else {
            throw error("%K needs a key path string argument, got \(describeArgument(arg))", at: token)
        }
        return path.split(separator: ".").map(String.init)
    }

    func describeArgument(_ arg: Any?) -> String {
        guard let arg else { return "nil" }
        return "\(type(of: arg)) \(arg)"
    }

    mutating func formatArgument(_ spec: String, token: PredicateToken) throws -> FetchExpression {
        switch spec {
        case "%K":
            // `self` as a key is the object itself (key-value coding's `self`), as Apple prints it: SELF.
            var path = try nextKeyPathArgument(token)
            if path.first?.lowercased() == "self" { path.removeFirst() }
            return path.isEmpty ? .evaluatedObject : .keyPath(.evaluatedObject, path)
        case "%%":
            throw error("'%%' is only meaningful inside a string", at: token)
        case "%@":
            let arg = try nextArgument(token)
            // An expression stands for itself, as NSPredicate substitutes an NSExpression (`"%@ > 1", $count`).
            if let expression = arg as? FetchExpression { return expression }
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
