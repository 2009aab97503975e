import Foundation
import GRDB
import GRDBSQLite
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Registers on every connection the SQL functions and collations the predicate compiler emits.
///
/// Each runs the same
/// Swift code as the in-memory evaluator (`PredicateSemantics`, `FetchSortDescriptor.compareStrings`), which is what
/// makes SQL and memory agree.
enum SQLiteFunctions {
    static func install(in db: Database) {
        // The string functions read their text arguments with their length (GRDB's function arguments stop at a
        // U+0000), so that text containing U+0000 compares in SQL as it does in memory.
        addTextFunction(SQLFunctionNames.fold, argumentCount: 2, in: db) { arguments in
            guard let text = arguments.text(0) else { return .null }
            return .text(PredicateSemantics.fold(text, PredicateComparison.Options(rawValue: Int(arguments.integer(1)))))
        }
        addTextFunction(SQLFunctionNames.stringOperator, argumentCount: 4, in: db) { arguments in
            guard let opName = arguments.text(0), let op = PredicateComparison.Operator(rawValue: opName),
                let value = arguments.text(1), let pattern = arguments.text(2)
            else { return .integer(0) }
            let options = PredicateComparison.Options(rawValue: Int(arguments.integer(3)))
            return .integer(PredicateSemantics.stringOperator(op, value, pattern, options: options) ? 1 : 0)
        }
        // `FetchFunction`'s calls: the function's name, then its arguments.
        addTextFunction(SQLFunctionNames.function, argumentCount: -1, in: db) { arguments in
            guard arguments.count > 0, let name = arguments.text(0), let function = FetchFunction(rawValue: name),
                let result = try? function.apply((1..<arguments.count).map(arguments.value))
            else { return .null }
            return SQLArgument(function: result)
        }
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
        installHistory(in: db)
    }
}

/// The arguments of a call of a function registered with `addTextFunction`, read from SQLite's values.
struct FunctionArguments {
    let values: UnsafeMutablePointer<OpaquePointer?>?
    /// How many arguments the call has.
    let count: Int

    /// Argument `index` as text, read with its length; nil when it is NULL.
    func text(_ index: Int) -> String? {
        guard let value = values?[index], sqlite3_value_type(value) != SQLITE_NULL, let bytes = sqlite3_value_text(value) else {
            return nil
        }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_value_bytes(value))), as: UTF8.self)
    }

    /// Argument `index` as the evaluator holds it: an integer, a real, text, data or nil, as SQLite stores it.
    func value(_ index: Int) -> AttributeValue {
        guard let value = values?[index] else { return .null }
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: return .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT: return .double(sqlite3_value_double(value))
        case SQLITE_TEXT: return text(index).map(AttributeValue.string) ?? .null
        case SQLITE_BLOB:
            guard let bytes = sqlite3_value_blob(value) else { return .data(Data()) }
            return .data(Data(bytes: bytes, count: Int(sqlite3_value_bytes(value))))
        default: return .null
        }
    }

    /// Argument `index` as an integer (0 when NULL).
    func integer(_ index: Int) -> Int64 {
        guard let value = values?[index] else { return 0 }
        return sqlite3_value_int64(value)
    }
}

/// The Swift body of a function registered with `addTextFunction`, kept alive by SQLite (freed with the function).
private final class TextFunctionBody {
    let body: (FunctionArguments) -> SQLArgument
    init(_ body: @escaping (FunctionArguments) -> SQLArgument) { self.body = body }
}

/// Registers a deterministic SQL function whose text arguments and result keep their length (GRDB's
/// `DatabaseFunction` reads and returns text up to its first U+0000).
private func addTextFunction(
    _ name: String, argumentCount: Int32, in db: Database, _ body: @escaping (FunctionArguments) -> SQLArgument
) {
    let context = Unmanaged.passRetained(TextFunctionBody(body)).toOpaque()
    _ = sqlite3_create_function_v2(
        db.sqliteConnection, name, argumentCount, SQLITE_UTF8 | SQLITE_DETERMINISTIC, context,
        { call, count, values in
            guard let call, let box = sqlite3_user_data(call) else { return }
            let function = Unmanaged<TextFunctionBody>.fromOpaque(box).takeUnretainedValue()
            switch function.body(FunctionArguments(values: values, count: Int(count))) {
            case .text(let text):
                let bytes = text.utf8CString  // NUL-terminated; the length given excludes the terminator
                bytes.withUnsafeBufferPointer { sqlite3_result_text(call, $0.baseAddress, Int32($0.count - 1), sqliteTransient) }
            case .integer(let i): sqlite3_result_int64(call, i)
            case .real(let d): sqlite3_result_double(call, d)
            case .blob, .null: sqlite3_result_null(call)
            }
        }, nil, nil,
        { box in if let box { Unmanaged<TextFunctionBody>.fromOpaque(box).release() } })
}

extension SQLArgument {
    /// A function's result: numbers and text as SQLite keeps them (a Boolean as 0 or 1), anything else NULL.
    init(function result: AttributeValue) {
        switch result {
        case .integer(let i): self = .integer(i)
        case .double(let d): self = .real(d)
        case .bool(let b): self = .integer(b ? 1 : 0)
        case .string(let s): self = .text(s)
        default: self = .null
        }
    }

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

extension SQLiteFunctions {
    /// The functions persistent history's triggers call to build and merge `ZCOLUMNS` bit sets.
    static func installHistory(in db: Database) {
        db.add(
            function: DatabaseFunction(PersistentHistory.maskFunction, argumentCount: 1, pure: true) { args in
                PersistentHistory.mask(fromFlags: String.fromDatabaseValue(args[0]) ?? "")
            })
        db.add(
            function: DatabaseFunction(PersistentHistory.unionFunction, argumentCount: 2, pure: true) { args in
                PersistentHistory.union(Data.fromDatabaseValue(args[0]) ?? Data(), Data.fromDatabaseValue(args[1]) ?? Data())
            })
    }
}
