import Foundation

/// An `NSPredicate` a transformable attribute's archive holds (a saved search, a smart folder's rule), as its format
/// text: Foundation on Linux cannot unarchive predicates, so the transformer reads it, and the context hands it out as a
/// `FetchPredicate`.
package struct ArchivedPredicate: Sendable, Equatable {
    package let format: String
}

/// How keys are written in predicate format text.
///
/// A key named like one of the parser's reserved words is escaped with `#`. Here, below the predicate module, because
/// the archive reader writes format text too.
package enum PredicateKeys {
    /// The format language's reserved words, in capitals (they are matched without regard to case).
    package static let reserved: Set<String> = [
        "AND", "OR", "NOT", "ANY", "SOME", "ALL", "NONE", "IN", "BETWEEN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE",
        "MATCHES", "TRUEPREDICATE", "FALSEPREDICATE", "TRUE", "FALSE", "YES", "NO", "NULL", "NIL", "SELF", "SUBQUERY",
        "FUNCTION", "FIRST", "LAST", "SIZE",
    ]

    /// A key as written in a format string: `#` before a reserved word or anything that does not start like an
    /// identifier (`#2n`), so that it parses back as the same key.
    package static func formatKey(_ component: String) -> String {
        if component.hasPrefix("@") { return component }
        guard let first = component.unicodeScalars.first, first.properties.isAlphabetic || first == "_" else { return "#" + component }
        return reserved.contains(component.uppercased()) ? "#" + component : component
    }
}

/// Reads archived `NSPredicate` and `NSExpression` objects (a compiled model's fetched properties and derived
/// attributes) back into format text that `FetchPredicate(format:)` parses.
package struct ArchivedPredicateReader {
    let reader: CompiledModelReader
    var depth = 0
    /// How deeply predicates and expressions may nest (each level of the tree counts once): the predicate parser's
    /// own limit, which the text made here goes through next.
    static let maximumDepth = 256

    /// The selectors of `FetchFunction` (in OpenCoreDataPredicate, above this module), which the parser reads back.
    package static let functions: Set<String> = [
        "sum:", "count:", "min:", "max:", "average:", "median:", "mode:", "stddev:", "add:to:", "from:subtract:", "multiply:by:",
        "divide:by:", "raise:toPower:", "modulus:by:", "sqrt:", "log:", "ln:", "exp:", "floor:", "ceiling:", "abs:", "trunc:",
        "bitwiseAnd:with:", "bitwiseOr:with:", "bitwiseXor:with:", "onesComplement:", "leftshift:by:", "rightshift:by:", "uppercase:",
        "lowercase:", "length:",
        "canonical:", "noindex:", "objectFrom:withIndex:",
    ]

    /// The format text of a keyed archive whose root object is an `NSPredicate`, as `NSKeyedArchiver` writes one.
    ///
    /// - Throws: `PropertyListError` for bytes that are not such an archive, or a predicate this project does not read.
    package static func predicateFormat(ofArchive data: Data) throws -> String { try predicateFormat(of: KeyedArchive(data: data)) }

    /// The format text of a keyed archive whose root object is an `NSExpression` (a derived attribute's).
    package static func expressionFormat(ofArchive data: Data) throws -> String {
        let archive = try KeyedArchive(data: data)
        var reader = ArchivedPredicateReader(reader: CompiledModelReader(anyRoot: archive, source: "an archived expression"))
        return try reader.expression(archive.root)
    }

    /// The format text of the `NSPredicate` at the root of `archive`.
    package static func predicateFormat(of archive: KeyedArchive) throws -> String {
        var reader = ArchivedPredicateReader(reader: CompiledModelReader(anyRoot: archive, source: "an archived predicate"))
        return try reader.predicate(archive.root)
    }

    /// The arithmetic functions' selectors, by the operator that writes each between its operands.
    static let arithmetic = ["add:to:": "+", "from:subtract:": "-", "multiply:by:": "*", "divide:by:": "/", "raise:toPower:": "**"]

    /// Comparison operators by Core Data's `NSComparisonPredicate.Operator` raw values.
    static let operators: [Int: String] = [
        0: "<", 1: "<=", 2: ">", 3: ">=", 4: "==", 5: "!=", 6: "MATCHES", 7: "LIKE", 8: "BEGINSWITH", 9: "ENDSWITH", 10: "IN",
        99: "CONTAINS", 100: "BETWEEN",
    ]

    func className(_ index: Int) throws -> String { try reader.archive.classes(of: index)?.first ?? "" }

    mutating func predicate(_ index: Int) throws -> String {
        depth += 1
        defer { depth -= 1 }
        guard depth < Self.maximumDepth else { throw PropertyListError("a predicate nested too deeply") }
        let fields = try reader.fields(index)
        switch try className(index) {
        case "NSCompoundPredicate":
            let parts = try reader.elements(reader.reference(fields, "NSSubpredicates")).map { "(\(try predicate($0)))" }
            switch try reader.integer(fields, "NSCompoundPredicateType") ?? 1 {
            case 0: return "NOT " + (parts.first ?? "TRUEPREDICATE")
            case 2: return parts.isEmpty ? "FALSEPREDICATE" : parts.joined(separator: " OR ")
            default: return parts.isEmpty ? "TRUEPREDICATE" : parts.joined(separator: " AND ")
            }
        case "NSComparisonPredicate":
            guard let left = reader.reference(fields, "NSLeftExpression"), let right = reader.reference(fields, "NSRightExpression"),
                let op = reader.reference(fields, "NSPredicateOperator")
            else { throw PropertyListError("a comparison without its operands") }
            let opFields = try reader.fields(op)
            guard var symbol = Self.operators[try reader.integer(opFields, "NSOperatorType") ?? -1] else {
                throw PropertyListError("a comparison with an operator this project does not read")
            }
            if try reader.bool(opFields, "NSNegate"), symbol == "==" { symbol = "!=" }
            var flags = ""
            // Comparison and equality operators encode their options as `NSOptions`; string and membership operators
            // (LIKE, BEGINSWITH, ENDSWITH, MATCHES, IN, CONTAINS) as `NSFlags`.
            let options = try reader.integer(opFields, "NSOptions") ?? reader.integer(opFields, "NSFlags") ?? 0
            if options & 1 != 0 { flags += "c" }
            if options & 2 != 0 { flags += "d" }
            // (NSComparisonPredicate.Options: 4 is normalized, 8 locale-sensitive, which the parser reads and ignores.)
            if options & 4 != 0 { flags += "n" }
            if options & 8 != 0 { flags += "l" }
            let modifier = ["", "ALL ", "ANY "][min(2, max(0, try reader.integer(opFields, "NSModifier") ?? 0))]
            return "\(modifier)\(try expression(left)) \(symbol)\(flags.isEmpty ? "" : "[\(flags)]") \(try expression(right))"
        case "NSTruePredicate": return "TRUEPREDICATE"
        case "NSFalsePredicate": return "FALSEPREDICATE"
        case let other: throw PropertyListError("a predicate of class \(other), which this project does not read")
        }
    }

    mutating func expression(_ index: Int) throws -> String {
        depth += 1
        defer { depth -= 1 }
        guard depth < Self.maximumDepth else { throw PropertyListError("an expression nested too deeply") }
        let fields = try reader.fields(index)
        switch try className(index) {
        case "NSSelfExpression": return "SELF"
        case "NSVariableExpression": return "$" + (try reader.string(fields, "NSVariable") ?? "")
        case "NSKeyPathSpecifierExpression":
            // Escaped where the key is a reserved word (`#size`), as Apple prints it.
            let path = try reader.string(fields, "NSKeyPath") ?? ""
            return path.split(separator: ".", omittingEmptySubsequences: false).map { key in
                key.hasPrefix("$") ? String(key) : PredicateKeys.formatKey(String(key))  // (a variable written into a path)
            }.joined(separator: ".")
        case "NSConstantValueExpression":
            guard let value = reader.reference(fields, "NSConstantValue") ?? nil else { return "nil" }
            return try Self.constant(try reader.archive.foundationValue(at: value, allowing: KeyedArchive.valueClassNames))
        case "NSAggregateExpression":
            // A list written in the format (`{'a', 'b'}`): its members are expressions.
            let members = try reader.elements(reader.reference(fields, "NSCollection")).map { try expression($0) }
            return "{" + members.joined(separator: ", ") + "}"
        case "NSSetExpression":
            guard let left = reader.reference(fields, "NSLeftExpression"), let right = reader.reference(fields, "NSRightExpression"),
                let word = [5: "UNION", 6: "INTERSECT", 7: "MINUS"][try reader.integer(fields, "NSExpressionType") ?? -1]
            else { throw PropertyListError("a set expression without its operands or kind") }
            return "(\(try expression(left))) \(word) (\(try expression(right)))"
        case "NSSubqueryExpression":
            guard let collection = reader.reference(fields, "NSExpression"), let condition = reader.reference(fields, "NSSubpredicate"),
                let variable = try reader.string(fields, "NSVariable")
            else { throw PropertyListError("a SUBQUERY without its collection, variable or predicate") }
            return "SUBQUERY(\(try expression(collection)), $\(variable), \(try predicate(condition)))"
        case "NSTernaryExpression":
            guard let condition = reader.reference(fields, "NSPredicate"), let whenTrue = reader.reference(fields, "NSTrueExpression"),
                let whenFalse = reader.reference(fields, "NSFalseExpression")
            else { throw PropertyListError("a TERNARY without its predicate or results") }
            return "TERNARY(\(try predicate(condition)), \(try expression(whenTrue)), \(try expression(whenFalse)))"
        case "NSAnyKeyExpression": return "ANYKEY"
        case "NSKeyPathExpression", "NSFunctionExpression":
            let selector = try reader.string(fields, "NSSelectorName") ?? ""
            let arguments = try reader.elements(reader.reference(fields, "NSArguments")).map { try expression($0) }
            if selector == "valueForKey:" || selector == "valueForKeyPath:" {
                let operand = try reader.reference(fields, "NSOperand").map { try expression($0) } ?? "SELF"
                let path = arguments.joined(separator: ".")
                return operand == "SELF" ? path : operand + "." + path
            }
            // NSExpression's functions, in the format the predicate parser reads (`count:(items)`, `now()`); arithmetic
            // as Apple prints it, between its operands.
            if selector == "now" || selector == "now:" { return "now()" }
            // `CAST(700000000, "NSDate")` as Xcode's predicate editor writes a date.
            if selector == "castObject:toType:", arguments.count == 2 { return "CAST(\(arguments[0]), \(arguments[1]))" }
            if let symbol = Self.arithmetic[selector], arguments.count == 2 { return "(\(arguments[0]) \(symbol) \(arguments[1]))" }
            if Self.functions.contains(selector), selector.filter({ $0 == ":" }).count == arguments.count || arguments.count == 1 {
                return "\(selector)(\(arguments.joined(separator: ", ")))"
            }
            throw PropertyListError("an expression calling \(selector), which this project does not read")
        case let other: throw PropertyListError("an expression of class \(other), which this project does not read")
        }
    }

    /// A constant as a format-string literal: a string quoted, a number, a date as a `CAST`, a collection as a list.
    static func constant(_ value: Any?) throws -> String {
        switch value {
        case let s as String:
            return "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        case let d as Decimal: return "\(d)"
        case let n as NSNumber:
            // Booleans as YES and NO, doubles with their point, so that each reads back as the kind it was.
            switch AttributeValue(number: n) {
            case .bool(let b): return b ? "YES" : "NO"
            case .double(let d) where d.isFinite: return "\(d)"
            default: return n.stringValue
            }
        case let d as Date: return "CAST(\(d.timeIntervalSinceReferenceDate), \"NSDate\")"
        case let items as [Any]: return "{" + (try items.map { try constant($0) }).joined(separator: ", ") + "}"
        case let items as NSOrderedSet: return try constant(items.array)
        case let items as Set<AnyHashable>: return "{" + (try items.map { try constant($0.base) }).sorted().joined(separator: ", ") + "}"
        case nil, is NSNull: return "nil"
        default: throw PropertyListError("a constant of type \(type(of: value!)), which this project does not read")
        }
    }
}
