import Foundation
import OpenCoreDataModel

// Scalar comparisons: type checks, constant encoding, folding, and the string operators.
extension SQLPredicateCompiler {
    // MARK: Scalar comparisons

    enum ValueClass: Equatable { case number, decimal, string, date, data, uuid, uri, object, null }

    func valueClass(_ o: Operand) -> ValueClass? {
        switch o.kind {
        case .attribute(let t):
            switch t {
            case .decimalAttributeType: return .decimal
            case _ where t.isNumeric: return .number
            case .stringAttributeType: return .string
            case .dateAttributeType: return .date
            case .binaryDataAttributeType, .transformableAttributeType, .compositeAttributeType: return .data
            case .UUIDAttributeType: return .uuid
            case .URIAttributeType: return .uri
            default: return nil
            }
        case .number: return .number
        case .object, .objectIDConstant: return .object
        case .constant(let v):
            switch v {
            case .null: return .null
            case .integer, .double, .bool: return .number
            case .decimal: return .decimal
            case .string: return .string
            case .date: return .date
            case .data: return .data
            case .uuid: return .uuid
            case .uri: return .uri
            case .object: return nil  // no column holds one
            }
        case .list: return nil
        }
    }

    func compatible(_ a: ValueClass, _ b: ValueClass) -> Bool {
        if a == .null || b == .null || a == b { return true }
        let numeric: Set<ValueClass> = [.number, .decimal]
        return numeric.contains(a) && numeric.contains(b)
    }

    func typeError(_ l: Operand, _ r: Operand, _ c: PredicateComparison) -> CoreDataError {
        func kind(_ o: Operand) -> String {
            switch o.kind {
            case .attribute(let t): return "a \(t.xcodeName) attribute"
            case .constant(let v): return "a \(v.kindName) value"
            case .object: return "an object"
            case .objectIDConstant: return "an object ID"
            case .list: return "a list"
            case .number: return "a number"
            }
        }
        return CoreDataError(
            .wrongValueType,
            "Predicate '\(c.predicateFormat)' compares \(l.describe) (\(kind(l))) with \(r.describe) (\(kind(r))), which cannot be compared.",
            entityName: entity.name, key: l.describe)
    }

    /// The SQL for one side of a scalar comparison; constants are encoded to match the other side's storage and
    /// folded for `[c]`/`[d]`.
    func side(_ o: Operand, other: ValueClass, decimalCompare: Bool, fold: PredicateComparison.Options) -> Fragment {
        switch o.kind {
        case .constant(var v):
            if case .string(let s) = v, !fold.isEmpty { v = .string(PredicateSemantics.fold(s, fold)) }
            if decimalCompare, let d = v.numericValue { return Fragment("?", [.real(d)]) }
            return Fragment("?", [SQLStorage.encode(v, uuidBytes: mapping.storesUUIDsAsBytes)])
        case .objectIDConstant(let id):
            // A literal, not a parameter: lists of thousands of objects stay under SQLite's parameter limit.
            return Fragment(id.isTemporaryID ? "0" : String(id.primaryKey), [])
        case .attribute(let t):
            var sql = o.sql
            if t == .decimalAttributeType || (decimalCompare && t.isNumeric) { sql = dialect.castToReal(sql) }
            if t == .stringAttributeType, !fold.isEmpty { sql = dialect.fold(sql, flags: fold.rawValue) }
            return Fragment(sql, o.arguments)
        default:
            return Fragment(o.sql, o.arguments)
        }
    }

    func wrap(_ sql: String, _ twoValued: Bool) -> String { twoValued ? "COALESCE(\(sql), \(dialect.false))" : sql }

    mutating func scalarComparison(
        _ l: Operand, _ op: PredicateComparison.Operator, _ r: Operand, options: PredicateComparison.Options,
        comparison c: PredicateComparison, twoValued: Bool
    ) throws -> Fragment {
        let fold = options.intersection([.caseInsensitive, .diacriticInsensitive])
        switch op {
        case .in:
            if case .list(let items) = r.kind { return try inList(l, items, options: fold, comparison: c, twoValued: twoValued) }
            // Substring: "needle IN haystack".
            return try stringOp(.contains, value: r, pattern: l, fold: fold, comparison: c)
        case .contains:
            if case .list(let items) = l.kind { return try inList(r, items, options: fold, comparison: c, twoValued: twoValued) }
            return try stringOp(.contains, value: l, pattern: r, fold: fold, comparison: c)
        case .beginsWith, .endsWith, .like, .matches:
            return try stringOp(op, value: l, pattern: r, fold: fold, comparison: c)
        case .between:
            guard case .list(let bounds) = r.kind, bounds.count == 2 else {
                throw CoreDataError(.invalidFetchRequest, "BETWEEN needs a list of two values in '\(c.predicateFormat)'.")
            }
            let lo = try scalarComparison(l, .greaterThanOrEqual, bounds[0], options: options, comparison: c, twoValued: twoValued)
            let hi = try scalarComparison(l, .lessThanOrEqual, bounds[1], options: options, comparison: c, twoValued: twoValued)
            return Fragment("(\(lo.sql) AND \(hi.sql))", lo.arguments + hi.arguments)
        default: break
        }
        guard let lc = valueClass(l), let rc = valueClass(r), compatible(lc, rc) else { throw typeError(l, r, c) }
        let isString = lc == .string || rc == .string
        let decimalCompare = lc == .decimal || rc == .decimal
        let f = isString ? fold : []
        let a = side(l, other: rc, decimalCompare: decimalCompare, fold: f)
        let b = side(r, other: lc, decimalCompare: decimalCompare, fold: f)
        let args = a.arguments + b.arguments
        switch op {
        case .equal: return Fragment("(\(dialect.isNotDistinct(a.sql, b.sql)))", args)
        case .notEqual: return Fragment("(\(dialect.isDistinct(a.sql, b.sql)))", args)
        case .lessThan: return Fragment(wrap("(\(a.sql) < \(b.sql))", twoValued), args)
        case .lessThanOrEqual: return Fragment(wrap("(\(a.sql) <= \(b.sql))", twoValued), args)
        case .greaterThan: return Fragment(wrap("(\(a.sql) > \(b.sql))", twoValued), args)
        case .greaterThanOrEqual: return Fragment(wrap("(\(a.sql) >= \(b.sql))", twoValued), args)
        default: preconditionFailure("handled above")
        }
    }

    mutating func inList(
        _ l: Operand, _ items: [Operand], options: PredicateComparison.Options, comparison c: PredicateComparison, twoValued: Bool
    ) throws -> Fragment {
        if items.isEmpty { return Fragment(dialect.false) }
        // Plain constants: one SQL `IN`, which SQLite answers from an index (10,000 objects: milliseconds instead of
        // seconds). Under a NOT, COALESCE keeps nil IN (…) false, as the OR chain below and the memory evaluator have it.
        if options.isEmpty, let lc = valueClass(l), ![.decimal, .null, .data].contains(lc),
            items.allSatisfy({ item in
                switch item.kind {
                case .objectIDConstant: return lc == .object
                case .constant(let v):
                    guard v != .null, let ic = valueClass(item) else { return false }
                    return ic != .decimal && compatible(lc, ic)
                default: return false
                }
            })
        {
            let a = side(l, other: lc, decimalCompare: false, fold: [])
            // Objects: their primary keys as one argument where the engine takes a list so (the statement stays the
            // same, and cached, whatever the objects); a temporary ID, which no row has, as 0.
            func primaryKey(_ item: Operand) -> Int64 {
                guard case .objectIDConstant(let id) = item.kind, !id.isTemporaryID else { return 0 }
                return id.primaryKey
            }
            if lc == .object, let (sql, argument) = dialect.inIntegerList(a.sql, items.map(primaryKey)) {
                return Fragment(wrap(sql, twoValued), a.arguments + [argument])
            }
            var list: [String] = []
            var args = a.arguments
            for item in items {
                let b = side(item, other: lc, decimalCompare: false, fold: [])
                list.append(b.sql)
                args += b.arguments
            }
            // Wrapped only under a NOT: SQLite cannot use an index for an IN inside a function call, so fetching
            // objects by ID (`SELF IN %@`) would scan the whole table.
            return Fragment(wrap("\(a.sql) IN (\(list.joined(separator: ", ")))", twoValued), args)
        }
        var parts: [String] = []
        var args: [SQLArgument] = []
        for item in items {
            let eq = try scalarComparison(l, .equal, item, options: options, comparison: c, twoValued: twoValued)
            parts.append(eq.sql)
            args += eq.arguments
        }
        return Fragment(Self.balanced(parts[...], "OR"), args)
    }

    /// `(a OR b OR …)` (or `AND`) nested as a balanced tree: SQLite parses a flat chain as one level per term and
    /// refuses expressions deeper than 1,000, so a long `IN` list (`SELF IN %@` with thousands of objects) or a long
    /// `AND`/`OR` list must not be flat.
    ///
    /// The terms, and so the arguments, keep their left-to-right order.
    static func balanced(_ parts: ArraySlice<String>, _ connective: String) -> String {
        if parts.count <= 16 { return "(" + parts.joined(separator: " \(connective) ") + ")" }
        let middle = parts.startIndex + parts.count / 2
        return "(" + balanced(parts[..<middle], connective) + " \(connective) " + balanced(parts[middle...], connective) + ")"
    }

    func stringOp(
        _ op: PredicateComparison.Operator, value: Operand, pattern: Operand, fold: PredicateComparison.Options,
        comparison c: PredicateComparison
    ) throws -> Fragment {
        guard let vc = valueClass(value), let pc = valueClass(pattern), vc == .string || vc == .null, pc == .string || pc == .null else {
            throw CoreDataError(
                .wrongValueType,
                "\(op.rawValue) in '\(c.predicateFormat)' works on strings, but \(valueClass(value) == .string ? pattern.describe : value.describe) is not a string.",
                entityName: entity.name, key: value.describe)
        }
        if op == .matches, case .constant(.string(let regex)) = pattern.kind, !PredicateSemantics.isValidRegex(regex) {
            throw CoreDataError(.predicateSyntax, "MATCHES in '\(c.predicateFormat)' has an invalid regular expression: \(regex)")
        }
        let a = side(value, other: .string, decimalCompare: false, fold: [])
        let b = side(pattern, other: .string, decimalCompare: false, fold: [])
        return Fragment(dialect.stringOperator(op.rawValue, a.sql, b.sql, flags: fold.rawValue), a.arguments + b.arguments)
    }
}
