import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Registers on every connection the SQL functions and collations the predicate compiler emits. Each runs the same
/// Swift code as the in-memory evaluator (`PredicateSemantics`, `FetchSortDescriptor.compareStrings`), which is what
/// makes SQL and memory agree.
enum SQLiteFunctions {
    static func install(in db: Database) {
        db.add(
            function: DatabaseFunction(SQLFunctionNames.fold, argumentCount: 2, pure: true) { args in
                guard let s = String.fromDatabaseValue(args[0]) else { return nil }
                let flags = Int.fromDatabaseValue(args[1]) ?? 0
                return PredicateSemantics.fold(s, PredicateComparison.Options(rawValue: flags))
            })
        db.add(
            function: DatabaseFunction(SQLFunctionNames.stringOperator, argumentCount: 4, pure: true) { args in
                guard let opName = String.fromDatabaseValue(args[0]),
                    let op = PredicateComparison.Operator(rawValue: opName),
                    let value = String.fromDatabaseValue(args[1]),
                    let pattern = String.fromDatabaseValue(args[2])
                else { return 0 }
                let flags = Int.fromDatabaseValue(args[3]) ?? 0
                return PredicateSemantics.stringOperator(op, value, pattern, options: PredicateComparison.Options(rawValue: flags)) ? 1 : 0
            })
        db.add(
            function: DatabaseFunction(SQLFunctionNames.power, argumentCount: 2, pure: true) { args in
                guard let x = Double.fromDatabaseValue(args[0]), let y = Double.fromDatabaseValue(args[1]) else { return nil }
                return pow(x, y)
            })
        for comparison in FetchSortDescriptor.Comparison.allCases {
            guard let name = SQLFunctionNames.collation(comparison) else { continue }
            db.add(
                collation: DatabaseCollation(name) { a, b in
                    let c = FetchSortDescriptor.compareStrings(a, b, comparison)
                    return c < 0 ? .orderedAscending : (c > 0 ? .orderedDescending : .orderedSame)
                })
        }
    }
}

extension SQLArgument {
    var databaseValue: DatabaseValue {
        switch self {
        case .null: return .null
        case .integer(let i): return i.databaseValue
        case .real(let d): return d.databaseValue
        case .text(let s): return s.databaseValue
        case .blob(let d): return d.databaseValue
        }
    }

    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let i): self = .integer(i)
        case .double(let d): self = .real(d)
        case .string(let s): self = .text(s)
        case .blob(let d): self = .blob(d)
        }
    }
}

extension StatementArguments {
    // Through existentials: GRDB's initializer for a sequence of concrete values maps it through a key path that is
    // instantiated anew on every call. (Fetches bind a few arguments per query; saves bind rows without
    // `StatementArguments`, see `Statement.runBinding`.)
    init(sqlArguments: [SQLArgument]) {
        self.init(sqlArguments.map { $0.databaseValue as (any DatabaseValueConvertible)? })
    }
}
