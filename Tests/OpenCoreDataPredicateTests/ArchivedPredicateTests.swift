import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import Testing

/// Predicates and expressions archived with the classes and keys Apple's `NSKeyedArchiver` writes (a compiled model's
/// fetched properties and derived attributes hold them) read back as format text that parses to the same predicate.
@Suite struct ArchivedPredicateTests {
    /// Builds an archive of predicate and expression objects, as Apple's classes encode themselves.
    struct Archive {
        var encoder = KeyedArchiveEncoder()

        mutating func object(_ chain: [String], _ fields: [String: PropertyListValue]) -> Int {
            let index = encoder.reserve()
            encoder.set(index, chain + ["NSObject"], fields)
            return index
        }

        mutating func string(_ text: String) -> PropertyListValue { .uid(encoder.add(.string(text))) }

        mutating func keyPath(_ path: String) -> Int {
            object(["NSKeyPathSpecifierExpression", "NSExpression"], ["NSExpressionType": .integer(3), "NSKeyPath": string(path)])
        }

        mutating func constant(_ value: Any?) throws -> Int {
            let reference = try encoder.reference(value, depth: 0)
            return object(
                ["NSConstantValueExpression", "NSExpression"], ["NSExpressionType": .integer(0), "NSConstantValue": .uid(reference)])
        }

        mutating func list(_ members: [Int]) -> Int {
            let array = object(["NSArray"], ["NS.objects": .array(members.map { .uid($0) })])
            return object(["NSAggregateExpression", "NSExpression"], ["NSExpressionType": .integer(14), "NSCollection": .uid(array)])
        }

        mutating func comparison(_ left: Int, _ type: Int, _ right: Int, modifier: Int = 0, options: Int = 0) -> Int {
            let op = object(
                ["NSPredicateOperator"],
                ["NSOperatorType": .integer(Int64(type)), "NSModifier": .integer(Int64(modifier)), "NSOptions": .integer(Int64(options))])
            return object(
                ["NSComparisonPredicate", "NSPredicate"],
                ["NSLeftExpression": .uid(left), "NSRightExpression": .uid(right), "NSPredicateOperator": .uid(op)])
        }

        mutating func format(of root: Int) throws -> String {
            try ArchivedPredicateReader.predicateFormat(ofArchive: encoder.finish(root: root))
        }
    }

    @Test func listsSetExpressionsSubqueriesAndTernariesReadBack() throws {
        var archive = Archive()
        // status IN {'new', 'held'} UNION $MORE
        let variable = archive.object(
            ["NSVariableExpression", "NSExpression"], ["NSExpressionType": .integer(2), "NSVariable": archive.string("MORE")])
        let union = archive.object(
            ["NSSetExpression", "NSExpression"],
            [
                "NSExpressionType": .integer(5),
                "NSLeftExpression": .uid(archive.list([try archive.constant("new"), try archive.constant("held")])),
                "NSRightExpression": .uid(variable),
            ])
        let membership = archive.comparison(archive.keyPath("status"), 10, union)
        let text = try archive.format(of: membership)
        let parsed = try FetchPredicate(format: text)
        #expect(parsed == (try FetchPredicate(format: "status IN {'new', 'held'} UNION $MORE")), "\(text)")

        // SUBQUERY(items, $i, $i.qty > 1).@count > 0, with a TERNARY and a constant array beside it.
        var second = Archive()
        let qty = second.keyPath("$i.qty")
        let condition = second.comparison(qty, 2, try second.constant(1))
        let subquery = second.object(
            ["NSSubqueryExpression", "NSExpression"],
            [
                "NSExpressionType": .integer(13), "NSExpression": .uid(second.keyPath("items")), "NSVariable": second.string("i"),
                "NSSubpredicate": .uid(condition),
            ])
        let counted = second.object(
            ["NSFunctionExpression", "NSExpression"],
            [
                "NSExpressionType": .integer(4), "NSSelectorName": second.string("count:"),
                "NSArguments": .uid(second.object(["NSArray"], ["NS.objects": .array([.uid(subquery)])])),
            ])
        let ternary = second.object(
            ["NSTernaryExpression", "NSExpression"],
            [
                "NSExpressionType": .integer(20),
                "NSPredicate": .uid(second.comparison(second.keyPath("flag"), 4, try second.constant(true))),
                "NSTrueExpression": .uid(counted), "NSFalseExpression": .uid(try second.constant(0)),
            ])
        let both = second.object(
            ["NSCompoundPredicate", "NSPredicate"],
            [
                "NSCompoundPredicateType": .integer(1),
                "NSSubpredicates": .uid(
                    second.object(
                        ["NSArray"],
                        [
                            "NS.objects": .array([
                                .uid(second.comparison(ternary, 2, try second.constant(0))),
                                .uid(second.comparison(second.keyPath("code"), 10, try second.constant([3, 4]))),
                            ])
                        ])),
            ])
        let secondText = try second.format(of: both)
        #expect(
            try FetchPredicate(format: secondText)
                == FetchPredicate(format: "TERNARY(flag == YES, count:(SUBQUERY(items, $i, $i.qty > 1)), 0) > 0 AND code IN {3, 4}"),
            "\(secondText)")
    }

    /// The options' bits are `NSComparisonPredicate.Options`': case 1, diacritics 2, normalized 4 (locale-sensitive 8,
    /// which the format reads and ignores), with ANY as modifier 2.
    @Test func comparisonOptionsAndModifiersReadBack() throws {
        var archive = Archive()
        let all = archive.comparison(archive.keyPath("tags.name"), 8, try archive.constant("a"), modifier: 2, options: 7)
        let text = try archive.format(of: all)
        #expect(text == "ANY tags.name BEGINSWITH[cdn] \"a\"")
        var second = Archive()
        let local = second.comparison(second.keyPath("name"), 4, try second.constant("a"), options: 9)
        #expect(try FetchPredicate(format: try second.format(of: local)) == FetchPredicate(format: "name ==[c] 'a'"))
    }

    /// Apple's string operators (`NSLikePredicateOperator`, …) keep their options under `NSFlags`, not `NSOptions`; a
    /// date constant written `CAST(…, "NSDate")` in Xcode's predicate editor is archived as a `castObject:toType:`
    /// function on `_NSPredicateUtilities`.
    @Test func stringOperatorFlagsAndCastsReadBack() throws {
        var archive = Archive()
        let like = archive.object(
            ["NSLikePredicateOperator", "NSStringPredicateOperator", "NSPredicateOperator"],
            ["NSOperatorType": .integer(7), "NSModifier": .integer(0), "NSFlags": .integer(3)])
        let named = archive.object(
            ["NSComparisonPredicate", "NSPredicate"],
            [
                "NSLeftExpression": .uid(archive.keyPath("name")), "NSRightExpression": .uid(try archive.constant("a*")),
                "NSPredicateOperator": .uid(like),
            ])
        let utilities = archive.object(
            ["NSConstantValueExpression", "NSExpression"],
            ["NSExpressionType": .integer(0), "NSConstantValueClassName": archive.string("_NSPredicateUtilities")])
        let arguments = archive.object(
            ["NSArray"], ["NS.objects": .array([.uid(try archive.constant(700_000_000)), .uid(try archive.constant("NSDate"))])])
        let cast = archive.object(
            ["NSFunctionExpression", "NSExpression"],
            [
                "NSExpressionType": .integer(4), "NSSelectorName": archive.string("castObject:toType:"), "NSOperand": .uid(utilities),
                "NSArguments": .uid(arguments),
            ])
        let dated = archive.comparison(archive.keyPath("created"), 2, cast)
        let both = archive.object(
            ["NSCompoundPredicate", "NSPredicate"],
            [
                "NSCompoundPredicateType": .integer(1),
                "NSSubpredicates": .uid(archive.object(["NSArray"], ["NS.objects": .array([.uid(named), .uid(dated)])])),
            ])
        let text = try archive.format(of: both)
        #expect(
            try FetchPredicate(format: text) == FetchPredicate(format: "name LIKE[cd] 'a*' AND created > CAST(700000000, 'NSDate')"),
            "\(text)")
    }

    @Test func aSetExpressionOfAnUnknownKindIsRefusedByName() throws {
        var archive = Archive()
        let odd = archive.object(
            ["NSSetExpression", "NSExpression"],
            [
                "NSExpressionType": .integer(9), "NSLeftExpression": .uid(archive.keyPath("a")),
                "NSRightExpression": .uid(archive.keyPath("b")),
            ])
        let predicate = archive.comparison(archive.keyPath("x"), 10, odd)
        let error = #expect(throws: PropertyListError.self) { _ = try archive.format(of: predicate) }
        #expect(error?.description.contains("set expression") == true)
    }
}
