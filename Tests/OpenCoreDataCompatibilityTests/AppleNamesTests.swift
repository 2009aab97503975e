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

    @Test func sortDescriptorsByKeyAndByKeyPath() {
        #expect(NSSortDescriptor(key: "date", ascending: false) == FetchSortDescriptor(key: "date", ascending: false))
        #expect(
            NSSortDescriptor(keyPath: \Event.creationDate, ascending: false) == FetchSortDescriptor(key: "creationDate", ascending: false))
    }
}
