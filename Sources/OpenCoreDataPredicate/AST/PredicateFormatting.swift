import Foundation
import OpenCoreDataModel

extension FetchPredicate: CustomStringConvertible {
    /// The canonical format string: parsing it gives back an equal predicate.
    public var predicateFormat: String { format(self, parentPrecedence: 0) }

    /// The predicate in Core Data's format syntax (`predicateFormat`).
    public var description: String { predicateFormat }

    private func format(_ p: FetchPredicate, parentPrecedence: Int) -> String {
        switch p {
        case .truePredicate: return "TRUEPREDICATE"
        case .falsePredicate: return "FALSEPREDICATE"
        case .and(let parts):
            let text = parts.map { format($0, parentPrecedence: 2) }.joined(separator: " AND ")
            return parts.count < 2 || parentPrecedence > 0 ? "(\(text))" : text
        case .or(let parts):
            let text = parts.map { format($0, parentPrecedence: 1) }.joined(separator: " OR ")
            return parts.count < 2 || parentPrecedence > 0 ? "(\(text))" : text
        case .not(let inner):
            return "NOT " + format(inner, parentPrecedence: 3)
        case .comparison(let c):
            return c.predicateFormat
        }
    }
}

extension PredicateComparison: CustomStringConvertible {
    /// The comparison as a format string.
    public var predicateFormat: String {
        let prefix: String
        switch modifier {
        case .direct: prefix = ""
        case .any: prefix = "ANY "
        case .all: prefix = "ALL "
        case .none: prefix = "NONE "
        }
        return "\(prefix)\(left.expressionFormat) \(op.rawValue)\(options.formatSuffix) \(right.expressionFormat)"
    }

    /// The predicate in Core Data's format syntax (`predicateFormat`).
    public var description: String { predicateFormat }
}

extension FetchExpression: CustomStringConvertible {
    /// The expression as a format string.
    public var expressionFormat: String { format(Self.topLevel) }

    /// The expression in Core Data's format syntax.
    public var description: String { expressionFormat }

    private static let reserved: Set<String> = [
        "AND", "OR", "NOT", "ANY", "SOME", "ALL", "NONE", "IN", "BETWEEN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE",
        "MATCHES", "TRUEPREDICATE", "FALSEPREDICATE", "TRUE", "FALSE", "YES", "NO", "NULL", "NIL", "SELF", "SUBQUERY",
        "FUNCTION", "FIRST", "LAST", "SIZE",
    ]

    /// A key as written in a format string: `#` before a reserved word or anything that does not start like an
    /// identifier (`#2n`), so that it parses back as the same key.
    static func formatKey(_ component: String) -> String {
        if component.hasPrefix("@") { return component }
        guard let first = component.unicodeScalars.first, first.properties.isAlphabetic || first == "_" else { return "#" + component }
        return reserved.contains(component.uppercased()) ? "#" + component : component
    }

    /// The precedence an expression standing alone is printed at: below every operator's.
    static let topLevel = -10
    /// The bitwise operators' precedences, below arithmetic's (1–3), loosest first as the parser reads them.
    static let bitwisePrecedence: [String: Int] = [
        FetchFunction.bitwiseOr.rawValue: -4, FetchFunction.bitwiseXor.rawValue: -3, FetchFunction.bitwiseAnd.rawValue: -2,
        FetchFunction.leftShift.rawValue: -1, FetchFunction.rightShift.rawValue: -1,
    ]
    static let bitwiseOperators: [String: String] = [
        FetchFunction.bitwiseOr.rawValue: "|", FetchFunction.bitwiseXor.rawValue: "^", FetchFunction.bitwiseAnd.rawValue: "&",
        FetchFunction.leftShift.rawValue: "<<", FetchFunction.rightShift.rawValue: ">>",
    ]

    private func format(_ parentPrecedence: Int) -> String {
        switch self {
        case .constant(let c): return c.constantFormat
        case .evaluatedObject: return "SELF"
        case .variable(let name): return "$" + name
        case .keyPath(let base, let components):
            let path = components.map(Self.formatKey).joined(separator: ".")
            switch base {
            case .evaluatedObject: return path
            default: return base.format(10) + "." + path
            }
        case .aggregate(let items): return "{" + items.map { $0.format(Self.topLevel) }.joined(separator: ", ") + "}"
        case .negate(let inner): return "-" + inner.format(9)
        case .arithmetic(let op, let a, let b):
            let precedence: Int
            switch op {
            case .add, .subtract: precedence = 1
            case .multiply, .divide: precedence = 2
            case .power: precedence = 3
            }
            // Left-associative: the right operand needs parentheses at equal precedence (power is right-associative).
            let leftText = a.format(op == .power ? precedence + 1 : precedence)
            let rightText = b.format(op == .power ? precedence : precedence + 1)
            let text = "\(leftText) \(op.rawValue) \(rightText)"
            return parentPrecedence > precedence ? "(\(text))" : text
        case .subquery(let collection, let variable, let predicate):
            return "SUBQUERY(\(collection.format(Self.topLevel)), $\(variable), \(predicate.predicateFormat))"
        case .function(FetchFunction.element.rawValue, let arguments) where arguments.count == 2:
            let index: String
            switch arguments[1] {
            case .constant(.value(.string(let word))) where word == "FIRST" || word == "LAST": index = word
            default: index = arguments[1].format(Self.topLevel)
            }
            return arguments[0].format(10) + "[" + index + "]"
        case .function(FetchFunction.onesComplement.rawValue, let arguments) where arguments.count == 1:
            return "~" + arguments[0].format(9)
        case .function(let name, let arguments) where arguments.count == 2 && Self.bitwisePrecedence[name] != nil:
            // The operator form, which parses back to the same tree at the same depth (nested calls go deeper).
            let precedence = Self.bitwisePrecedence[name]!
            let text = "\(arguments[0].format(precedence)) \(Self.bitwiseOperators[name]!) \(arguments[1].format(precedence + 1))"
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
            return name + "(" + listed.map { $0.format(Self.topLevel) }.joined(separator: ", ") + ")"
        }
    }
}

extension PredicateConstant {
    /// The constant as a format-string literal.
    public var constantFormat: String {
        switch self {
        case .objectID(let id): return "CAST(\"\(id.uriRepresentation().absoluteString)\", \"NSManagedObjectID\")"
        case .array(let items): return "{" + items.map(\.constantFormat).joined(separator: ", ") + "}"
        case .value(let v): return Self.literal(v)
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
