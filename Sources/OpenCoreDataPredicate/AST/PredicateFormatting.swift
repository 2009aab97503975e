import Foundation
import OpenCoreDataModel

/// How a predicate is printed.
package enum PredicateFormatStyle: Sendable {
    /// As Apple's `predicateFormat` prints it: constants as their description (`1` and `0` for Booleans, `41` for
    /// 41.0, `CAST(699993000.000000, "NSDate")`, a UUID or URL bare). What code ported from Apple's platforms compares
    /// with; it does not always parse back to the same predicate (nor does Apple's).
    case apple
    /// Exact: every constant spelled so that parsing the text gives back an equal predicate (`YES`, `41.0`, a date to
    /// the last bit, `CAST("…", "NSUUID")`). For what is stored and read back: fetch request templates, cache keys.
    case canonical
}

extension FetchPredicate: CustomStringConvertible {
    /// The predicate as a format string, printed as Apple's Core Data prints it.
    ///
    /// Constants appear as Apple shows them — a Boolean as `1` or `0`, a whole double without `.0`, a date as
    /// `CAST(699993000.000000, "NSDate")` — so that code comparing `predicateFormat` with the strings it expects on
    /// Apple's platforms passes here. As on Apple's platforms, this is a description, not a way to store a predicate:
    /// it parses, but not always back to the same predicate (a Boolean comes back as a number).
    public var predicateFormat: String { format(self, parentPrecedence: 0, style: .apple) }

    /// The predicate as a format string that parses back to an equal predicate: every constant spelled exactly
    /// (`YES`, `41.0`, a date's interval to the last bit, `CAST("…", "NSUUID")`).
    ///
    /// An addition to Core Data's API, for keeping a predicate as text and reading it back (Apple's answer is to
    /// archive it): fetch request templates stored in a model use it.
    public var canonicalFormat: String { format(self, parentPrecedence: 0, style: .canonical) }

    /// The predicate in Core Data's format syntax (`predicateFormat`).
    public var description: String { predicateFormat }

    package func format(style: PredicateFormatStyle) -> String { format(self, parentPrecedence: 0, style: style) }

    private func format(_ p: FetchPredicate, parentPrecedence: Int, style: PredicateFormatStyle) -> String {
        switch p {
        case .truePredicate: return "TRUEPREDICATE"
        case .falsePredicate: return "FALSEPREDICATE"
        // Of nothing, an AND holds and an OR does not (what Apple prints for them).
        case .and([]): return "TRUEPREDICATE"
        case .or([]): return "FALSEPREDICATE"
        // Of one predicate, that predicate (as Apple prints it; the parser never makes such a compound).
        case .and(let parts) where parts.count == 1, .or(let parts) where parts.count == 1:
            return format(parts[0], parentPrecedence: parentPrecedence, style: style)
        case .and(let parts):
            let text = parts.map { format($0, parentPrecedence: 2, style: style) }.joined(separator: " AND ")
            return parentPrecedence > 0 ? "(\(text))" : text
        case .or(let parts):
            let text = parts.map { format($0, parentPrecedence: 1, style: style) }.joined(separator: " OR ")
            return parentPrecedence > 0 ? "(\(text))" : text
        case .not(let inner):
            // Inside AND or OR, in parentheses as Apple prints it: `(NOT a == 1) AND b == 2`. Not in the canonical
            // spelling (it reads the same without), where every parenthesis would count towards the parser's depth
            // limit: a predicate parsed near the limit must print to text that parses again.
            let text = "NOT " + format(inner, parentPrecedence: 3, style: style)
            return style == .apple && (parentPrecedence == 1 || parentPrecedence == 2) ? "(\(text))" : text
        case .comparison(let c):
            return c.format(style: style)
        }
    }
}

extension PredicateComparison: CustomStringConvertible {
    /// The comparison as a format string, as Apple prints it (see `FetchPredicate.predicateFormat`).
    public var predicateFormat: String { format(style: .apple) }

    package func format(style: PredicateFormatStyle) -> String {
        let prefix: String
        switch modifier {
        case .direct: prefix = ""
        case .any: prefix = "ANY "
        case .all: prefix = "ALL "
        case .none: prefix = "NONE "
        }
        return "\(prefix)\(left.format(style: style)) \(op.rawValue)\(options.formatSuffix) \(right.format(style: style))"
    }

    /// The predicate in Core Data's format syntax (`predicateFormat`).
    public var description: String { predicateFormat }
}

extension FetchExpression: CustomStringConvertible {
    /// The expression as a format string, as Apple prints it (see `FetchPredicate.predicateFormat`).
    public var expressionFormat: String { format(Self.topLevel, .apple) }

    package func format(style: PredicateFormatStyle) -> String { format(Self.topLevel, style) }

    /// The expression in Core Data's format syntax.
    public var description: String { expressionFormat }

    /// A key as written in a format string (see `PredicateKeys.formatKey`).
    static func formatKey(_ component: String) -> String { PredicateKeys.formatKey(component) }

    /// The precedence an expression standing alone is printed at: below every operator's.
    static let topLevel = -10
    /// The bitwise operators' precedences, below arithmetic's (1–3), loosest first as the parser reads them.
    static let bitwisePrecedence: [String: Int] = [
        FetchFunction.bitwiseOr.rawValue: -4, FetchFunction.bitwiseXor.rawValue: -3, FetchFunction.bitwiseAnd.rawValue: -2,
        FetchFunction.leftShift.rawValue: -1, FetchFunction.rightShift.rawValue: -1,
    ]
    /// The precedence of `UNION`, `INTERSECT` and `MINUS`: below the bitwise operators'.
    static let setOperationPrecedence = -5
    static let bitwiseOperators: [String: String] = [
        FetchFunction.bitwiseOr.rawValue: "|", FetchFunction.bitwiseXor.rawValue: "^", FetchFunction.bitwiseAnd.rawValue: "&",
        FetchFunction.leftShift.rawValue: "<<", FetchFunction.rightShift.rawValue: ">>",
    ]

    /// The expression as an operand of an arithmetic or bitwise operator.
    ///
    /// Apple's printing puts an operand that is itself such an operator in parentheses, whatever the precedences
    /// (`a + b * 2` prints as `a + (b * 2)`, `(a + b) + c` as written); the canonical spelling adds only the
    /// parentheses the precedences need (each one counts towards the parser's depth limit).
    private func operand(_ precedence: Int, _ style: PredicateFormatStyle) -> String {
        guard style == .apple else { return format(precedence, style) }
        switch self {
        case .arithmetic: return "(" + format(Self.topLevel, style) + ")"
        case .function(let name, let arguments) where arguments.count == 2 && Self.bitwisePrecedence[name] != nil:
            return "(" + format(Self.topLevel, style) + ")"
        default: return format(precedence, style)
        }
    }

    private func format(_ parentPrecedence: Int, _ style: PredicateFormatStyle) -> String {
        switch self {
        case .constant(let c): return c.format(style: style)
        case .evaluatedObject: return "SELF"
        case .variable(let name): return "$" + name
        case .keyPath(let base, let components):
            let path = components.map(Self.formatKey).joined(separator: ".")
            switch base {
            case .evaluatedObject: return path
            default: return base.format(10, style) + "." + path
            }
        case .aggregate(let items): return "{" + items.map { $0.format(Self.topLevel, style) }.joined(separator: ", ") + "}"
        case .negate(let inner): return "-" + inner.format(9, style)
        case .arithmetic(let op, let a, let b):
            let precedence: Int
            switch op {
            case .add, .subtract: precedence = 1
            case .multiply, .divide: precedence = 2
            case .power: precedence = 3
            }
            // Left-associative: the right operand needs parentheses at equal precedence (power is right-associative).
            let leftText = a.operand(op == .power ? precedence + 1 : precedence, style)
            let rightText = b.operand(op == .power ? precedence : precedence + 1, style)
            let text = "\(leftText) \(op.rawValue) \(rightText)"
            return parentPrecedence > precedence ? "(\(text))" : text
        case .subquery(let collection, let variable, let predicate):
            return "SUBQUERY(\(collection.format(Self.topLevel, style)), $\(variable), \(predicate.format(style: style)))"
        case .conditional(let condition, let a, let b):
            return "TERNARY(\(condition.format(style: style)), \(a.format(Self.topLevel, style)), \(b.format(Self.topLevel, style)))"
        case .function(FetchFunction.element.rawValue, let arguments) where arguments.count == 2:
            let index: String
            switch arguments[1] {
            case .constant(.value(.string(let word))) where word == "FIRST" || word == "LAST" || word == "SIZE": index = word
            default: index = arguments[1].format(Self.topLevel, style)
            }
            return arguments[0].format(10, style) + "[" + index + "]"
        case .function(FetchFunction.onesComplement.rawValue, let arguments) where arguments.count == 1:
            return "~" + arguments[0].format(9, style)
        case .function(let name, let arguments) where arguments.count == 2 && FetchFunction(rawValue: name)?.isSetOperation == true:
            // Below every other operator, left to right, as the parser reads them.
            let precedence = Self.setOperationPrecedence
            let (left, right) = (arguments[0].format(precedence, style), arguments[1].format(precedence + 1, style))
            let text = "\(left) \(FetchFunction(rawValue: name)!.setOperatorWord!) \(right)"
            return parentPrecedence > precedence ? "(\(text))" : text
        case .function(let name, let arguments) where arguments.count == 2 && Self.bitwisePrecedence[name] != nil:
            // The operator form, which parses back to the same tree at the same depth (nested calls go deeper).
            let precedence = Self.bitwisePrecedence[name]!
            let (left, right) = (arguments[0].operand(precedence, style), arguments[1].operand(precedence + 1, style))
            let text = "\(left) \(Self.bitwiseOperators[name]!) \(right)"
            return parentPrecedence > precedence ? "(\(text))" : text
        case .function(let name, let arguments):
            // `sum(1, 2, 3)` as written, rather than `sum:({1, 2, 3})`, which nests one level deeper.
            let listed: [FetchExpression]
            if case .aggregate(let items) = arguments.first, arguments.count == 1, items.count > 1,
                FetchFunction(rawValue: name)?.isStatistic == true
            {
                listed = items
            } else {
                listed = arguments
            }
            return name + "(" + listed.map { $0.format(Self.topLevel, style) }.joined(separator: ", ") + ")"
        }
    }
}

extension PredicateConstant {
    /// The constant as a format-string literal, as Apple prints it (see `FetchPredicate.predicateFormat`).
    public var constantFormat: String { format(style: .apple) }

    package func format(style: PredicateFormatStyle) -> String {
        switch self {
        case .objectID(let id): return "CAST(\"\(id.uriRepresentation().absoluteString)\", \"NSManagedObjectID\")"
        case .array(let items): return "{" + items.map { $0.format(style: style) }.joined(separator: ", ") + "}"
        case .value(let v): return style == .apple ? Self.appleLiteral(v) : Self.literal(v)
        }
    }

    /// A value as Apple's `predicateFormat` prints it: its description (`NSNumber`'s for numbers and Booleans, a
    /// UUID's or URL's string bare), strings quoted, dates as a `CAST` of their interval to six decimals.
    static func appleLiteral(_ v: AttributeValue) -> String {
        switch v {
        case .bool(let b): return b ? "1" : "0"
        case .double(let d) where d.isFinite && d == d.rounded() && abs(d) < 1e15:
            return (d.sign == .minus && d == 0 ? "-" : "") + String(Int64(d))
        case .decimal(let d): return "\(d)"
        case .date(let d): return "CAST(" + String(format: "%f", d.timeIntervalSinceReferenceDate) + ", \"NSDate\")"
        case .uuid(let u): return u.uuidString
        case .uri(let u): return u.absoluteString
        case .object(let o): return String(describing: o.value)
        case .null, .integer, .double, .string, .data: return literal(v)
        }
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case "\0": out += "\\0"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static func literal(_ v: AttributeValue) -> String {
        switch v {
        case .null: return "nil"
        case .integer(let i): return String(i)
        case .double(let d):
            if d.isNaN || d.isInfinite { return "CAST(\"\(d)\", \"NSNumber\")" }
            var text = "\(d)"
            if !text.contains(".") && !text.contains("e") { text += ".0" }
            return text
        case .decimal(let d): return "CAST(\"\(d)\", \"NSDecimalNumber\")"
        case .bool(let b): return b ? "YES" : "NO"
        case .string(let s): return quote(s)
        case .date(let d): return "CAST(\(d.timeIntervalSinceReferenceDate), \"NSDate\")"
        case .data(let d): return "CAST(\"\(d.base64EncodedString())\", \"NSData\")"
        case .uuid(let u): return "CAST(\"\(u.uuidString)\", \"NSUUID\")"
        case .uri(let u): return "CAST(\"\(u.absoluteString)\", \"NSURL\")"
        case .object(let o): return quote(String(describing: o.value))
        }
    }
}
