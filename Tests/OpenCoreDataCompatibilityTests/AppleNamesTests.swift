import OpenCoreDataCompatibility
import Testing

/// Apple's spellings build the same predicates and sort descriptors as OpenCoreData's own.
@Suite struct AppleNamesTests {
    @Test func predicatesBuiltWithApplesInitializersEqualTheParsedOnes() throws {
        let parsed = try FetchPredicate(format: "price < 500 AND (name BEGINSWITH[cd] 'ch' OR NOT tag == nil)", argumentArray: [Any?]())
        let built = NSCompoundPredicate(andPredicateWithSubpredicates: [
            NSComparisonPredicate(
                leftExpression: NSExpression(forKeyPath: "price"), rightExpression: NSExpression(forConstantValue: 500), modifier: .direct,
                type: .lessThan),
            NSCompoundPredicate(orPredicateWithSubpredicates: [
                NSComparisonPredicate(
                    leftExpression: NSExpression(forKeyPath: "name"), rightExpression: NSExpression(forConstantValue: "ch"),
                    modifier: .direct, type: .beginsWith, options: [.caseInsensitive, .diacriticInsensitive]),
                NSCompoundPredicate(notPredicateWithSubpredicate: NSPredicate(format: "tag == nil")),
            ]),
        ])
        #expect(built == parsed, "\(built.predicateFormat)")
        #expect(NSPredicate(format: "%K == %@", argumentArray: ["name", "Milk"]) == NSPredicate(format: "name == 'Milk'"))
        #expect(NSPredicate(value: true) == .truePredicate && NSPredicate(value: false).predicateFormat == "FALSEPREDICATE")
        #expect(NSCompoundPredicate(type: .or, subpredicates: [NSPredicate(value: false)]) == .falsePredicate)
        #expect(built.subpredicates.count == 2)
    }

    @Test func anyAndAllComparisonsKeepTheirModifier() {
        let any = NSComparisonPredicate(
            leftExpression: NSExpression(forKeyPath: "employees.salary"), rightExpression: NSExpression(forConstantValue: 10),
            modifier: .any, type: .greaterThan)
        #expect(any.predicateFormat == "ANY employees.salary > 10")
        let all = NSComparisonPredicate(
            leftExpression: NSExpression(forKeyPath: "tags"), rightExpression: NSExpression(forConstantValue: ["a", "b"]), modifier: .all,
            type: .in)
        #expect(all.predicateFormat == "ALL tags IN {\"a\", \"b\"}")
    }

    /// `NSExpression(forUnionSet:with:)` and its kind build what `UNION`, `INTERSECT` and `MINUS` parse to; a template
    /// filled with substitution variables combines its lists.
    @Test func setExpressionsBuiltInCodeEqualTheParsedOnes() throws {
        let open = NSComparisonPredicate(
            leftExpression: NSExpression(forKeyPath: "status"),
            rightExpression: NSExpression(forUnionSet: NSExpression(format: "{'new'}"), with: NSExpression(forVariable: "MORE")),
            modifier: .direct, type: .in)
        #expect(open == NSPredicate(format: "status IN {'new'} UNION $MORE"))
        let filled = open.withSubstitutionVariables(["MORE": ["held", "new"]])
        #expect(filled.predicateFormat == "status IN {\"new\"} UNION {\"held\", \"new\"}")
        #expect(filled.evaluate(with: ["status": "held"]) && !filled.evaluate(with: ["status": "done"]))
        // (A constant array is not a parsed list, on Apple's platforms either: the lists are parsed here.)
        let both = NSExpression(forIntersectSet: NSExpression(format: "{1, 2, 3}"), with: NSExpression(format: "{2, 3, 4}"))
        let left = NSExpression(forMinusSet: NSExpression(format: "{1, 2, 3}"), with: NSExpression(forConstantValue: [2]))
        #expect(both == NSExpression(format: "{1, 2, 3} INTERSECT {2, 3, 4}"))
        #expect(NSPredicate(format: "%@.@count == 2 AND NOT 2 IN %@", both, left).evaluate(with: nil))
        // Their values are sets, as Apple's are; lists and to-many key paths are arrays.
        #expect(try both.expressionValue() as? Set<Int> == [2, 3])
        #expect(try NSExpression(format: "{3, 1} UNION tags").expressionValue(with: ["tags": [1, 2]]) as? Set<Int> == [1, 2, 3])
        #expect(try NSExpression(format: "{3, 1}").expressionValue() as? [Int] == [3, 1])
        #expect(try NSExpression(format: "kids.age").expressionValue(with: ["kids": [["age": 4], ["age": 12]]]) as? [Int] == [4, 12])
    }

    /// Code that archives a predicate with `NSKeyedArchiver` and unarchives it with `NSKeyedUnarchiver` compiles
    /// unchanged and gets the predicate back (Foundation on Linux cannot archive predicates itself).
    @Test func predicatesArchiveWithApplesArchiverCalls() throws {
        let saved = NSPredicate(format: "ANY tags.name ==[c] %@ OR due < %@", "urgent", Date(timeIntervalSinceReferenceDate: 8e8))
        let data = try NSKeyedArchiver.archivedData(withRootObject: saved, requiringSecureCoding: true)
        let read = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: NSPredicate.self, from: data))
        #expect(read == saved, "\(read.predicateFormat)")
        #expect(read.evaluate(with: ["tags": [["name": "URGENT"]], "due": Date()]))
    }

    /// `evaluate(with:)` and `evaluate(with:substitutionVariables:)` without `try`, as Apple's: in-memory filtering
    /// compiles unchanged.
    @Test func predicatesEvaluateWithoutTry() {
        let short = NSPredicate(format: "SELF.length < 3")
        #expect(["1", "12", "123", "1234"].filter { short.evaluate(with: $0) } == ["1", "12"])
        let cheap = NSPredicate(format: "price < $LIMIT")
        #expect(cheap.evaluate(with: ["price": 3], substitutionVariables: ["LIMIT": 5]))
        #expect(!cheap.evaluate(with: ["price": 8], substitutionVariables: ["LIMIT": 5]))
        #expect(NSPredicate(value: true).evaluate(with: nil))
        // Templates fill and expressions evaluate without `try` too.
        let filled = cheap.withSubstitutionVariables(["LIMIT": 5])
        filled.allowEvaluation()
        #expect(filled == NSPredicate(format: "price < 5") && filled.evaluate(with: ["price": 4]))
        #expect(NSExpression(format: "2 * price").expressionValue(with: ["price": 21], context: nil) as? Int == 42)
    }

    /// A substitution variable's value may be a list, set or dictionary when evaluating, as with Apple's
    /// `evaluate(with:substitutionVariables:)` (it stopped the program for anything but a single value).
    @Test func substitutionVariablesOfCollectionsEvaluate() {
        let member = NSPredicate(format: "name IN $NAMES")
        #expect(member.evaluate(with: ["name": "Ada"], substitutionVariables: ["NAMES": ["Ada", "Grace"]]))
        #expect(!member.evaluate(with: ["name": "Alan"], substitutionVariables: ["NAMES": Set(["Ada", "Grace"])]))
        let first = NSPredicate(format: "$a[0] > 1")
        #expect(first.evaluate(with: nil, substitutionVariables: ["a": [2]]))
        #expect(!first.evaluate(with: nil, substitutionVariables: ["a": [1]]))
        #expect(NSPredicate(format: "$a[$b] > 1").evaluate(with: nil, substitutionVariables: ["a": [5, 0], "b": 0]))
        // Single values take the direct path, as before.
        #expect(NSPredicate(format: "$a + 1 > 1").evaluate(with: nil, substitutionVariables: ["a": 1]))
    }

    /// The arithmetic functions are the expressions their operators parse to, as on Apple's platforms (one
    /// `NSFunctionExpression` for both), and print as operators.
    @Test func arithmeticFunctionsAreTheirOperators() {
        let (a, b) = (NSExpression(forKeyPath: "a"), NSExpression(forKeyPath: "b"))
        let values: [String: Any] = ["a": 8, "b": 2]
        for (name, format, value) in [
            ("add:to:", "a + b", 10), ("from:subtract:", "a - b", 6), ("multiply:by:", "a * b", 16), ("divide:by:", "a / b", 4),
            ("raise:toPower:", "a ** b", 64),
        ] {
            let built = NSExpression(forFunction: name, arguments: [a, b])
            #expect(built == NSExpression(format: format) && built.description == format && built.function == name)
            #expect((built.expressionValue(with: values, context: nil) as? NSNumber)?.intValue == value, "\(name)")
            #expect(NSExpression(format: "\(name)(a, b)") == built)
        }
        // modulus:by: has no operator: it stays a call.
        #expect(NSExpression(forFunction: "modulus:by:", arguments: [a, b]).description == "modulus:by:(a, b)")
    }

    /// Apple's accessors take a predicate apart as Apple's classes would: compound type and subpredicates, a
    /// comparison's sides, operator (with Apple's raw values), modifier and options, and each kind of expression.
    @Test func predicatesComeApartWithApplesAccessors() {
        let predicate = NSPredicate(
            format: "name BEGINSWITH[cd] 'a' AND NONE items.price > 10 AND SUBQUERY(items, $i, $i.qty > 1).@count > price * 2")
        #expect(predicate.compoundPredicateType == .and && predicate.subpredicates.count == 3)
        let name = predicate.subpredicates[0]
        #expect(name.leftExpression.expressionType == .keyPath && name.leftExpression.keyPath == "name")
        #expect(name.leftExpression.operand.expressionType == .evaluatedObject)
        #expect(name.predicateOperatorType == .beginsWith && name.predicateOperatorType.rawValue == 8)
        #expect(name.options == [.caseInsensitive, .diacriticInsensitive] && name.comparisonPredicateModifier == .direct)
        #expect(name.rightExpression.expressionType == .constantValue && name.rightExpression.constantValue as? String == "a")
        // NONE is NOT over ANY, as Apple builds it.
        let none = predicate.subpredicates[1]
        #expect(none.compoundPredicateType == .not)
        let any = none.subpredicates[0]
        #expect(any.comparisonPredicateModifier == .any && any.predicateOperatorType == .greaterThan)
        #expect(any.rightExpression.constantValue as? Int == 10)
        let counted = predicate.subpredicates[2]
        let count = counted.leftExpression
        #expect(count.expressionType == .keyPath && count.keyPath == "@count" && count.operand.expressionType == .subquery)
        let subquery = count.operand
        #expect(subquery.variable == "i" && (subquery.collection as? NSExpression)?.keyPath == "items")
        #expect(subquery.predicate == NSPredicate(format: "$i.qty > 1"))
        let product = counted.rightExpression
        #expect(product.expressionType == .function && product.function == "multiply:by:" && product.arguments?.count == 2)
        let union = NSExpression(format: "{1, 2} UNION tags")
        #expect(union.expressionType == .unionSet && union.left.expressionType == .aggregate && union.right.keyPath == "tags")
        #expect((union.left.collection as? [NSExpression])?.count == 2)
        let ternary = NSExpression(format: "TERNARY(age > 18, 'adult', 'minor')")
        #expect(ternary.expressionType == .conditional && ternary.trueExpression.constantValue as? String == "adult")
        #expect(ternary.predicate == NSPredicate(format: "age > 18") && ternary.falseExpression.constantValue as? String == "minor")
        #expect(NSExpression(forVariable: "LIMIT").variable == "LIMIT" && NSComparisonPredicate.Operator.in.rawValue == 10)
        // Built with Apple's initializers, the same expressions as parsed.
        let built = NSExpression(
            forSubquery: NSExpression(forKeyPath: "items"), usingIteratorVariable: "i", predicate: NSPredicate(format: "$i.qty > 1"))
        #expect(built == subquery)
        #expect(NSExpression(forAggregate: [NSExpression(forConstantValue: 1), NSExpression(forConstantValue: 2)]) == union.left)
        let conditional = NSExpression(
            forConditional: NSPredicate(format: "age > 18"), trueExpression: NSExpression(forConstantValue: "adult"),
            falseExpression: NSExpression(forConstantValue: "minor"))
        #expect(conditional == ternary)
    }

    @Test func sortDescriptorsByKeyAndByKeyPath() {
        #expect(NSSortDescriptor(key: "date", ascending: false) == FetchSortDescriptor(key: "date", ascending: false))
        #expect(
            NSSortDescriptor(keyPath: \Event.creationDate, ascending: false) == FetchSortDescriptor(key: "creationDate", ascending: false))
        #expect(NSExpression(forKeyPath: \Event.creationDate) == NSExpression(forKeyPath: "creationDate"))
    }
}

/// `NSExpression`'s format strings, functions and values, as tutorials and apps use them.
@Suite struct AppleExpressionTests {
    @Test func expressionsParseEvaluateAndCallFunctions() throws {
        #expect((try NSExpression(format: "4 + 5 - 2**3").expressionValue() as? NSNumber)?.doubleValue == 1)
        let sum = NSExpression(forFunction: "sum:", arguments: [NSExpression(forConstantValue: [1, 2, 3, 4])])
        #expect((try sum.expressionValue() as? NSNumber)?.intValue == 10)
        #expect((try NSExpression(format: "sum({1, 2, 3, 4})").expressionValue() as? NSNumber)?.intValue == 10)
        #expect(NSExpression(format: "sum(1, 2, 3, 4)") == NSExpression(format: "sum({1, 2, 3, 4})"))
        let stddev = NSExpression(forFunction: "stddev:", arguments: [NSExpression(forConstantValue: [2, 4, 4, 4, 5, 5, 7, 9])])
        #expect((try stddev.expressionValue() as? NSNumber)?.doubleValue == 2)
        #expect(try NSExpression(format: "uppercase('straße')").expressionValue() as? String == "STRASSE")
        #expect(try NSExpression(format: "modulus:by:(%@, 4)", 10).expressionValue() as? NSNumber == 2)
        #expect(try NSExpression(format: "{7, 8, 9}[LAST]").expressionValue() as? NSNumber == 9)
        #expect(try NSExpression(format: "now()").expressionValue() is Date)
        // Strings from input parse with the throwing form.
        #expect(throws: CoreDataError.self) { _ = try FetchExpression(format: "4 +", argumentArray: [Any?]()) }
        #expect(throws: CoreDataError.self) { _ = try FetchExpression(format: "4 5", argumentArray: [Any?]()) }
        #expect(throws: CoreDataError.self) { _ = try FetchExpression(format: "%@", argumentArray: [Any?]()) }
        // A function built in code compares as the parsed one in a predicate.
        let lowered = NSComparisonPredicate(
            leftExpression: NSExpression(forFunction: "lowercase", arguments: [NSExpression(forKeyPath: "name")]),
            rightExpression: NSExpression(forConstantValue: "ann"), modifier: .direct, type: .equalTo)
        #expect(lowered == NSPredicate(format: "lowercase:(name) == 'ann'"))
    }

    /// `expressionValue(with:)` takes any object as Apple's does: a dictionary's keys read as properties, an array's
    /// elements are subscripted, a key the object lacks is nil.
    @Test func expressionsEvaluateAgainstPlainValues() throws {
        let record: [String: Any] = ["x": 2, "y": 1, "list": [3, 4], "inner": ["a": 5] as [String: Any], "word": "hey"]
        #expect(try NSExpression(format: "12.5 * x + (y)").expressionValue(with: record) as? NSNumber == 26)
        #expect(try NSExpression(format: "12.5 * list[0] + list[1]").expressionValue(with: record) as? NSNumber == 41.5)
        #expect(try NSExpression(format: "inner.a + list.@count").expressionValue(with: record) as? NSNumber == 7)
        #expect(try NSExpression(format: "TERNARY(x > y, uppercase(word), word)").expressionValue(with: record) as? String == "HEY")
        #expect(try NSExpression(format: "missing").expressionValue(with: record) == nil)
        #expect(try NSExpression(format: "SELF * 2").expressionValue(with: 21) as? NSNumber == 42)
        #expect(try NSExpression(format: "'A'").expressionValue() as? String == "A")
        #expect(throws: CoreDataError.self) { _ = try NSExpression(format: "x + word").expressionValue(with: record) }
    }
}
