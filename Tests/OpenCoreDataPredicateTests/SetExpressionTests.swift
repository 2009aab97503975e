import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import Testing

/// NSExpression's set expressions, and collections given as arguments.
@Suite struct SetExpressionTests {
    /// `UNION`, `INTERSECT` and `MINUS` (NSExpression's set expressions) combine collections: loosest of all
    /// operators, read left to right, each member once; the words stay usable as keys.
    @Test func setExpressionsCombineCollections() throws {
        func holds(_ format: String, _ value: Any? = nil) throws -> Bool { try FetchPredicate(format: format).evaluate(with: value) }
        #expect(try holds("{1, 2} UNION {2, 3} CONTAINS 3"))
        #expect(try holds("({1, 2} UNION {2, 3}).@count == 3"))
        #expect(try holds("({1, 2, 2} INTERSECT {2, 3}).@count == 1 AND ANY {1, 2} INTERSECT {2, 3} == 2"))
        #expect(try holds("NOT 1 IN {1, 2} MINUS {1} AND 2 IN {1, 2} MINUS {1}"))
        // Left to right: ({1, 2} MINUS {2}) UNION {2} holds 2; {1, 2} MINUS ({2} UNION {2}) does not.
        #expect(try holds("2 IN {1, 2} MINUS {2} UNION {2}"))
        #expect(try holds("NOT 2 IN {1, 2} MINUS ({2} UNION {2})"))
        // Looser than arithmetic: 1 + 1 is computed first.
        #expect(try holds("2 IN {1 + 1} INTERSECT {2}"))
        // Numbers compare by value. Nil on the right leaves the left side as it is (INTERSECT too), as Apple's does;
        // nil on the left is an error.
        #expect(try holds("({1, 2.0} UNION {1.0, 2}).@count == 2"))
        let tagged = try FetchPredicate(format: "ANY tags UNION $more == 'c'")
        #expect(try tagged.evaluate(with: ["tags": ["a", "b"]], variables: ["more": .null]) == false)
        #expect(try holds("({1, 1, 2} INTERSECT nil).@count == 2 AND 1 IN {1} MINUS nil"))
        #expect(
            FetchFunction.constantMembers(of: try FetchExpression(format: "{1, 1, 2} INTERSECT nil")) == [
                .value(.integer(1)), .value(.integer(2)),
            ])
        #expect(throws: CoreDataError.self) { try holds("1 IN nil UNION {1}") }
        #expect(FetchFunction.constantMembers(of: try FetchExpression(format: "nil UNION {1}")) == nil)
        #expect(try tagged.withSubstitutionVariables(["more": ["c"]]).evaluate(with: ["tags": ["a"]]))
        // A dictionary gives its values.
        let dictionary: [String: Any] = ["x": "b"]
        #expect(try FetchPredicate(format: "ANY tags INTERSECT %@ == 'b'", dictionary).evaluate(with: ["tags": ["a", "b"]]))
        #expect(try FetchPredicate(format: "ANY tags INTERSECT info == 'b'").evaluate(with: ["tags": ["a", "b"], "info": dictionary]))
        // Printed as written, and parsed back to the same tree.
        for (input, printed) in [
            ("a union b == c", "a UNION b == c"), ("x IN {1} UNION {2} MINUS $y", "x IN {1} UNION {2} MINUS $y"),
            ("x IN {1} UNION ({2} INTERSECT {3})", "x IN {1} UNION ({2} INTERSECT {3})"),
            ("x IN {1} | 2 UNION {3}", "x IN {1} | 2 UNION {3}"), ("union == minus", "union == minus"),
        ] {
            let p = try FetchPredicate(format: input)
            #expect(p.canonicalFormat == printed)
            #expect(try FetchPredicate(format: p.canonicalFormat) == p)
        }
        let built = FetchExpression.function(FetchFunction.minusSet.rawValue, [.key("a"), .key("b")])
        #expect(built.expressionFormat == "a MINUS b")
        #expect(
            FetchFunction.constantMembers(of: try FetchExpression(format: "{3, 1} UNION {1, 2} MINUS {2}")) == [
                .value(.integer(3)), .value(.integer(1)),
            ])
        #expect(FetchFunction.constantMembers(of: try FetchExpression(format: "{1} UNION tags")) == nil)
        // A side that is not a collection is an error that names the operator.
        let error = #expect(throws: CoreDataError.self) { try holds("ANY {1} UNION 2 == 1") }
        #expect(error?.message.contains("UNION needs a collection on its right side") == true)
    }

    /// A dictionary as a `%@` argument is the collection of its values, as Apple's `IN` reads one; it prints in key
    /// order, the same every time.
    @Test func aDictionaryArgumentIsItsValues() throws {
        let codes: [String: Int] = ["b": 2, "a": 1, "c": 30]
        let p = try FetchPredicate(format: "code IN %@", codes)
        #expect(p.predicateFormat == "code IN {1, 2, 30}")
        #expect(try p.evaluate(with: ["code": 30]))
        #expect(try p.evaluate(with: ["code": 3]) == false)
        #expect(try FetchPredicate(format: "ANY %@ == 2", ["x": 2] as NSDictionary).evaluate(with: nil))
        #expect(throws: CoreDataError.self) { _ = try FetchPredicate(format: "code IN %@", ["a": NSObject()]) }
    }
}
