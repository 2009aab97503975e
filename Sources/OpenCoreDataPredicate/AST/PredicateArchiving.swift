import Foundation
import OpenCoreDataModel

// Predicates written as Apple's `NSKeyedArchiver` writes an `NSPredicate`: the classes and keys each of Foundation's
// predicate, expression and operator classes encodes (`ArchivedPredicateReader` in the model module reads them back).
// A transformable attribute that holds a predicate (a saved search, a smart folder's rule) stores these bytes, which
// Core Data on Apple platforms unarchives as the same predicate.

extension FetchPredicate: KeyedArchiveWritable {
    /// `NSPredicate`: the class a transformer must allow for the value.
    package var archivedClassName: String { "NSPredicate" }

    /// Writes the predicate's objects into `encoder` and returns the index of its root.
    ///
    /// - Throws: `PropertyListError` for a predicate that holds what an archive cannot (an object ID, a custom value)
    ///   or what this project could not read back (a UUID, URL or data constant).
    package func write(into encoder: inout KeyedArchiveEncoder) throws -> Int {
        try PredicateArchiveWriter.writeReadable(self, into: &encoder, write: { try $0.predicate(self) }) {
            _ = try FetchPredicate(format: ArchivedPredicateReader.predicateFormat(ofArchive: $0))
        }
    }

    /// The predicate as the bytes of an `NSKeyedArchiver` archive whose root object is an `NSPredicate`.
    package func keyedArchive() throws -> Data { try KeyedArchive.archive(self) }
}

// The public face: archiving and unarchiving as Apple's `NSKeyedArchiver` and `NSKeyedUnarchiver` do for `NSPredicate`.
extension FetchPredicate {
    /// The predicate archived as Apple's `NSKeyedArchiver` archives an `NSPredicate`: Core Data and Foundation on Apple
    /// platforms unarchive these bytes as the same predicate, and `init(archivedData:)` reads them here.
    ///
    /// For example:
    /// ```swift
    /// let rule = try FetchPredicate(format: "ANY tags.name ==[c] %@", "urgent")
    /// UserDefaults.standard.set(try rule.archivedData(), forKey: "savedSearch")
    /// ```
    /// A `NONE` comparison is written as `NOT ANY` and a negation as a subtraction from zero (Foundation has no class
    /// for either); both read back as equal predicates.
    ///
    /// - Throws: `CoreDataError(.valueTransformation)` for a predicate with a constant an archive cannot hold or this
    ///   project could not read back (an object ID, a UUID, URL, data or custom value).
    public func archivedData() throws -> Data {
        do {
            return try keyedArchive()
        } catch let error as PropertyListError {
            throw CoreDataError(.valueTransformation, "The predicate \(self) cannot be archived: \(error.description).")
        }
    }

    /// The predicate in an archive of an `NSPredicate`, as Apple's `NSKeyedArchiver` or `archivedData()` writes one
    /// (Foundation on Linux cannot unarchive predicates).
    ///
    /// For example:
    /// ```swift
    /// let saved = try FetchPredicate(archivedData: bytesFromAnIOSApp)
    /// ```
    /// - Throws: `CoreDataError(.valueTransformation)` for bytes that are not such an archive, or a predicate that uses
    ///   what this project does not read (a custom selector, a block).
    public init(archivedData data: Data) throws {
        let format: String
        do {
            let archive = try KeyedArchive(data: data)
            guard try archive.classes(of: archive.root)?.contains("NSPredicate") == true else {
                throw PropertyListError(
                    "its root object is a \(try archive.classes(of: archive.root)?.first ?? "value"), not an NSPredicate")
            }
            format = try ArchivedPredicateReader.predicateFormat(of: archive)
        } catch let error as PropertyListError {
            throw CoreDataError(.valueTransformation, "The data is not an archived predicate this project reads: \(error.description).")
        }
        try self.init(format: format)
    }
}

// The shapes Foundation's classes give the tree where it differs from OpenCoreData's, shared by the archiver and by
// the compatibility module's accessors (`leftExpression`, `function`, …), so both answer as Apple's classes do.

extension PredicateComparison.Operator {
    /// `NSComparisonPredicate.Operator`'s raw value (`NSOperatorType` in an archive).
    package var appleOperatorType: Int {
        switch self {
        case .lessThan: 0
        case .lessThanOrEqual: 1
        case .greaterThan: 2
        case .greaterThanOrEqual: 3
        case .equal: 4
        case .notEqual: 5
        case .matches: 6
        case .like: 7
        case .beginsWith: 8
        case .endsWith: 9
        case .in: 10
        case .contains: 99
        case .between: 100
        }
    }
}

extension FetchPredicate {
    /// The predicate as Foundation builds it: a NONE comparison is NOT over the ANY comparison (Foundation has no NONE
    /// modifier); anything else as it is.
    package var appleForm: FetchPredicate {
        guard case .comparison(var comparison) = self, comparison.modifier == .none else { return self }
        comparison.modifier = .any
        return .not(.comparison(comparison))
    }
}

extension FetchExpression {
    /// The expression as Foundation's `NSFunctionExpression` holds it, for arithmetic (`add:to:`, …), negation (a
    /// subtraction from zero: Foundation has no negation) and built-in functions; nil for other expressions, set
    /// expressions included (they are `NSSetExpression`s).
    package var appleFunction: (selector: String, arguments: [FetchExpression])? {
        switch self {
        case .arithmetic(let op, let left, let right):
            let function = FetchFunction.allCases.first { $0.arithmeticOperator == op }!
            return (function.rawValue, [left, right])
        case .negate(let operand): return (FetchFunction.subtract.rawValue, [.value(.integer(0)), operand])
        case .function(let name, let arguments) where FetchFunction(rawValue: name)?.isSetOperation != true: return (name, arguments)
        default: return nil
        }
    }
}

/// Writes predicate and expression objects with the class chains and keys of Apple's classes.
private struct PredicateArchiveWriter {
    var encoder: KeyedArchiveEncoder
    var depth = 0

    /// `NSExpression.ExpressionType` raw values.
    enum ExpressionType: Int64 {
        case constant = 0, evaluatedObject = 1, variable = 2, keyPath = 3, function = 4, union = 5, intersect = 6, minus = 7
        case keyPathSpecifier = 10, subquery = 13, aggregate = 14, conditional = 20
    }

    /// Writes `value`'s objects into `encoder` with `write`, only if they read back.
    ///
    /// A stored value must not become one that cannot be read: the objects are first written into an archive of their
    /// own, which `readBack` reads and parses.
    static func writeReadable(
        _ value: Any, into encoder: inout KeyedArchiveEncoder, write: (inout Self) throws -> Int, readBack: (Data) throws -> Void
    ) throws -> Int {
        var alone = Self(encoder: KeyedArchiveEncoder())
        let aloneRoot = try write(&alone)
        do {
            try readBack(alone.encoder.finish(root: aloneRoot))
        } catch {
            throw PropertyListError("\(value) would not read back from its archive (\(error))")
        }
        var writer = Self(encoder: encoder)
        let root = try write(&writer)
        encoder = writer.encoder
        return root
    }

    mutating func object(_ chain: [String], _ build: (inout Self) throws -> [String: PropertyListValue]) throws -> Int {
        depth += 1
        defer { depth -= 1 }
        guard depth < FetchPredicate.maximumDepth else { throw PropertyListError("a predicate nested too deeply to archive") }
        let index = encoder.reserve()
        let fields = try build(&self)
        encoder.set(index, chain + ["NSObject"], fields)
        return index
    }

    mutating func string(_ text: String) -> PropertyListValue { .uid(encoder.add(.string(text))) }

    mutating func array(_ members: [Int]) throws -> PropertyListValue {
        .uid(try object(["NSArray"]) { _ in ["NS.objects": .array(members.map { .uid($0) })] })
    }

    mutating func predicate(_ predicate: FetchPredicate) throws -> Int {
        switch predicate.appleForm {
        case .truePredicate: return try object(["NSTruePredicate", "NSPredicate"]) { _ in [:] }
        case .falsePredicate: return try object(["NSFalsePredicate", "NSPredicate"]) { _ in [:] }
        case .and(let parts): return try compound(1, parts)
        case .or(let parts): return try compound(2, parts)
        case .not(let inner): return try compound(0, [inner])
        case .comparison(let comparison): return try self.comparison(comparison)
        }
    }

    /// `NSCompoundPredicate`: type 0 NOT, 1 AND, 2 OR.
    mutating func compound(_ type: Int64, _ parts: [FetchPredicate]) throws -> Int {
        try object(["NSCompoundPredicate", "NSPredicate"]) { writer in
            var members: [Int] = []
            for part in parts { members.append(try writer.predicate(part)) }
            return ["NSCompoundPredicateType": .integer(type), "NSSubpredicates": try writer.array(members)]
        }
    }

    mutating func comparison(_ comparison: PredicateComparison) throws -> Int {
        try object(["NSComparisonPredicate", "NSPredicate"]) { writer in
            let left = try writer.expression(comparison.left)
            let right = try writer.expression(comparison.right)
            let op = try writer.predicateOperator(comparison)
            return ["NSLeftExpression": .uid(left), "NSRightExpression": .uid(right), "NSPredicateOperator": .uid(op)]
        }
    }

    /// The operator object: its class by kind, as Foundation's parser makes them, with the options under the key that
    /// class encodes them with (`NSOptions` for comparisons and equality, `NSFlags` for string and membership operators).
    mutating func predicateOperator(_ comparison: PredicateComparison) throws -> Int {
        let type = PropertyListValue.integer(Int64(comparison.op.appleOperatorType))
        let options = PropertyListValue.integer(Int64(comparison.options.rawValue))
        let stringOperators: [PredicateComparison.Operator: String] = [
            .matches: "NSMatchingPredicateOperator", .like: "NSLikePredicateOperator", .beginsWith: "NSBeginsWithPredicateOperator",
            .endsWith: "NSEndsWithPredicateOperator",
        ]
        let chain: [String]
        var fields: [String: PropertyListValue]
        switch comparison.op {
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            chain = ["NSComparisonPredicateOperator"]
            fields = ["NSVariant": type, "NSOptions": options]
        case .equal, .notEqual:
            chain = ["NSEqualityPredicateOperator"]
            fields = ["NSNegate": .bool(comparison.op == .notEqual), "NSOptions": options]
        case .matches, .like, .beginsWith, .endsWith:
            chain = [stringOperators[comparison.op]!, "NSStringPredicateOperator"]
            fields = ["NSFlags": options]
        case .in, .contains:
            chain = ["NSInPredicateOperator"]
            fields = ["NSFlags": options]
        case .between:
            chain = ["NSBetweenPredicateOperator"]
            fields = [:]
        }
        fields["NSOperatorType"] = type
        fields["NSModifier"] = .integer(comparison.modifier == .all ? 1 : comparison.modifier == .direct ? 0 : 2)
        let written = fields
        return try object(chain + ["NSPredicateOperator"]) { _ in written }
    }

    mutating func expression(_ expression: FetchExpression) throws -> Int {
        switch expression {
        case .evaluatedObject:
            return try object(["NSSelfExpression", "NSExpression"]) { _ in
                ["NSExpressionType": .integer(ExpressionType.evaluatedObject.rawValue)]
            }
        case .constant(let constant):
            return try object(["NSConstantValueExpression", "NSExpression"]) { writer in
                ["NSExpressionType": .integer(ExpressionType.constant.rawValue), "NSConstantValue": .uid(try writer.constant(constant))]
            }
        case .variable(let name):
            return try object(["NSVariableExpression", "NSExpression"]) { writer in
                ["NSExpressionType": .integer(ExpressionType.variable.rawValue), "NSVariable": writer.string(name)]
            }
        case .keyPath(let base, let path):
            return try object(["NSKeyPathExpression", "NSFunctionExpression", "NSExpression"]) { writer in
                let operand = try writer.expression(base)
                let specifier = try writer.object(["NSKeyPathSpecifierExpression", "NSExpression"]) { writer in
                    [
                        "NSExpressionType": .integer(ExpressionType.keyPathSpecifier.rawValue),
                        "NSKeyPath": writer.string(path.joined(separator: ".")),
                    ]
                }
                return [
                    "NSExpressionType": .integer(ExpressionType.keyPath.rawValue),
                    "NSSelectorName": writer.string(path.count == 1 ? "valueForKey:" : "valueForKeyPath:"), "NSOperand": .uid(operand),
                    "NSArguments": try writer.array([specifier]),
                ]
            }
        case .aggregate(let members):
            return try object(["NSAggregateExpression", "NSExpression"]) { writer in
                var written: [Int] = []
                for member in members { written.append(try writer.expression(member)) }
                return ["NSExpressionType": .integer(ExpressionType.aggregate.rawValue), "NSCollection": try writer.array(written)]
            }
        case .arithmetic, .negate:
            let (selector, arguments) = expression.appleFunction!
            return try function(selector, arguments)
        case .subquery(let collection, let variable, let condition):
            return try object(["NSSubqueryExpression", "NSExpression"]) { writer in
                [
                    "NSExpressionType": .integer(ExpressionType.subquery.rawValue), "NSExpression": .uid(try writer.expression(collection)),
                    "NSVariable": writer.string(variable), "NSSubpredicate": .uid(try writer.predicate(condition)),
                ]
            }
        case .function(let name, let arguments):
            if let type = [
                FetchFunction.unionSet.rawValue: ExpressionType.union, FetchFunction.intersectSet.rawValue: .intersect,
                FetchFunction.minusSet.rawValue: .minus,
            ][name], arguments.count == 2 {
                return try object(["NSSetExpression", "NSExpression"]) { writer in
                    [
                        "NSExpressionType": .integer(type.rawValue), "NSLeftExpression": .uid(try writer.expression(arguments[0])),
                        "NSRightExpression": .uid(try writer.expression(arguments[1])),
                    ]
                }
            }
            return try function(name, arguments)
        case .conditional(let condition, let whenTrue, let whenFalse):
            return try object(["NSTernaryExpression", "NSExpression"]) { writer in
                [
                    "NSExpressionType": .integer(ExpressionType.conditional.rawValue), "NSPredicate": .uid(try writer.predicate(condition)),
                    "NSTrueExpression": .uid(try writer.expression(whenTrue)), "NSFalseExpression": .uid(try writer.expression(whenFalse)),
                ]
            }
        }
    }

    /// One of `NSExpression`'s built-in functions: an `NSFunctionExpression` whose operand is the class that implements
    /// them, archived by name (`NSConstantValueClassName`), as Foundation archives a class constant.
    mutating func function(_ selector: String, _ arguments: [FetchExpression]) throws -> Int {
        try object(["NSFunctionExpression", "NSExpression"]) { writer in
            let operand = try writer.object(["NSConstantValueExpression", "NSExpression"]) { writer in
                [
                    "NSExpressionType": .integer(ExpressionType.constant.rawValue),
                    "NSConstantValueClassName": writer.string("_NSPredicateUtilities"),
                ]
            }
            var written: [Int] = []
            for argument in arguments { written.append(try writer.expression(argument)) }
            return [
                "NSExpressionType": .integer(ExpressionType.function.rawValue), "NSSelectorName": writer.string(selector),
                "NSOperand": .uid(operand), "NSArguments": try writer.array(written),
            ]
        }
    }

    /// A constant as the Foundation object an `NSConstantValueExpression` holds (`$null` for nil).
    mutating func constant(_ constant: PredicateConstant) throws -> Int {
        try encoder.reference(try Self.foundationValue(constant), depth: depth)
    }

    static func foundationValue(_ constant: PredicateConstant) throws -> Any? {
        switch constant {
        case .array(let items): return try items.map { try foundationValue($0) as Any }
        case .objectID(let id):
            throw PropertyListError(
                "a predicate that compares with an object (\(id)) cannot be archived: an object ID is no archivable value")
        case .value(let value):
            switch value {
            case .null: return nil
            case .integer, .double, .decimal, .bool, .string, .date: return value
            case .uuid, .uri, .data, .object:
                throw PropertyListError(
                    "a predicate holding a \(value.kindName) constant cannot be archived: only strings, numbers, dates and lists of them read back"
                )
            }
        }
    }
}

/// Writes the predicates and expressions of a model's compiled form (fetched properties, fetch request templates,
/// derived attributes) from their format text.
package struct PredicateFormatArchiver: PredicateArchiveWriting {
    package init() {}

    package func writePredicate(format: String, into encoder: inout KeyedArchiveEncoder) throws -> Int {
        try FetchPredicate(format: format).write(into: &encoder)
    }

    package func writeExpression(format: String, into encoder: inout KeyedArchiveEncoder) throws -> Int {
        let expression = try FetchExpression(format: format)
        return try PredicateArchiveWriter.writeReadable(expression, into: &encoder, write: { try $0.expression(expression) }) {
            _ = try FetchExpression(format: ArchivedPredicateReader.expressionFormat(ofArchive: $0))
        }
    }
}
