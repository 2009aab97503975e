import Foundation
import OpenCoreDataModel

// TERNARY in SQL.
extension SQLPredicateCompiler {
    /// `TERNARY(predicate, a, b)` as `CASE WHEN … THEN … ELSE … END`: the condition as it filters (unknown is false,
    /// as in memory), the branches one value per row of the same kind (or nil), which is the result's kind.
    mutating func conditionalOperand(
        _ condition: FetchPredicate, _ a: FetchExpression, _ b: FetchExpression, entity: NSEntityDescription, alias: String,
        describe: String
    ) throws -> Operand {
        let test = try compile(condition, entity: entity, alias: alias, twoValued: true)
        let branches = [try scalar(a, entity: entity, alias: alias), try scalar(b, entity: entity, alias: alias)]
        // A branch's kind: an attribute type, or nil for a computed number; a nil branch has none and takes the other's.
        func type(_ o: Operand) throws -> NSAttributeType?? {
            switch o.kind {
            case .attribute(let t): return t
            case .number: return .some(nil)
            case .constant(.null): return nil
            case .constant(let v): return Self.attributeType(of: v)
            case .object, .objectIDConstant, .list:
                throw unsupported("'\(describe)': TERNARY's results must be values (attributes, numbers, strings, dates)")
            }
        }
        let types = try branches.compactMap(type)  // the branches that are not nil
        func isNumber(_ t: NSAttributeType?) -> Bool { t?.isNumeric ?? true }
        let kind: Kind
        if types.isEmpty {
            kind = .constant(.null)
        } else if types.allSatisfy({ $0 == types[0] }), let t = types[0] {
            kind = .attribute(t)
        } else if types.allSatisfy(isNumber) {
            kind = .number
        } else {
            throw CoreDataError(
                .wrongValueType, "'\(describe)': TERNARY's two results are of different kinds, which a fetch cannot compare.",
                entityName: entity.name)
        }
        let sides = branches.map { side($0, other: .null, decimalCompare: false, fold: []) }
        return Operand(
            sql: "(CASE WHEN \(test.sql) THEN \(sides[0].sql) ELSE \(sides[1].sql) END)",
            arguments: test.arguments + sides[0].arguments + sides[1].arguments, kind: kind, describe: describe)
    }
}
