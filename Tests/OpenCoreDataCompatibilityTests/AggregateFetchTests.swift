import OpenCoreDataCompatibility
import Testing
import _TestSupport

/// Aggregates and grouping as Core Data code writes them, only the import changed.
@Suite struct AggregateFetchTests {
    /// A group-by written as Core Data code writes it (a count and a sum per value of a column, a having predicate
    /// on a variable), only the import changed.
    @Test func groupByCountAndSumWrittenForCoreData() throws {
        let model = try NSManagedObjectModel {
            Entity("Record") {
                Attribute("col", .string)
                Attribute("value", .integer64)
            }
        }
        let stack = try TestStack(model: model, inMemory: true)
        let context = stack.container.viewContext
        for (col, value) in [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("a", 5), ("c", 6)] {
            let record = NSEntityDescription.insertNewObject(forEntityName: "Record", into: context)
            record.setValue(col, forKey: "col")
            record.setValue(value, forKey: "value")
        }
        try context.save()

        let keypathExp = NSExpression(forKeyPath: "value")
        let countDesc = NSExpressionDescription()
        countDesc.expression = NSExpression(forFunction: "count:", arguments: [keypathExp])
        countDesc.name = "count"
        countDesc.expressionResultType = .integer64AttributeType
        let sumDesc = NSExpressionDescription()
        sumDesc.expression = NSExpression(forFunction: "sum:", arguments: [keypathExp])
        sumDesc.name = "sum"
        sumDesc.expressionResultType = .integer64AttributeType

        let request = NSFetchRequest<NSFetchRequestResult>(entityName: "Record")
        request.returnsObjectsAsFaults = false
        request.propertiesToGroupBy = ["col"]
        request.propertiesToFetch = ["col", countDesc, sumDesc]
        request.resultType = .dictionaryResultType
        request.sortDescriptors = [NSSortDescriptor(key: "col", ascending: true)]
        request.havingPredicate = NSPredicate(format: "%@ > 1", NSExpression(forVariable: "count"))
        let results = try context.fetch(request) as! [[String: Any]]
        #expect(results.map { $0["col"] as? String } == ["a", "c"])
        #expect(results.map { $0["count"] as? Int } == [3, 2])
        #expect(results.map { $0["sum"] as? Int } == [9, 10])
    }

    /// Managed objects as substitution variables' values when evaluating in memory (`SELF == $OBJ`, `SELF IN $OBJS`),
    /// as Apple's `evaluate(with:substitutionVariables:)` takes them.
    @Test func managedObjectsAsSubstitutionVariablesEvaluate() throws {
        let model = try NSManagedObjectModel {
            Entity("Record") { Attribute("col", .string) }
        }
        let stack = try TestStack(model: model, inMemory: true)
        let context = stack.container.viewContext
        let records = (0..<3).map { index in
            let record = NSEntityDescription.insertNewObject(forEntityName: "Record", into: context)
            record.setValue("r\(index)", forKey: "col")
            return record
        }
        try context.save()
        let same = NSPredicate(format: "SELF == $OBJ")
        #expect(same.evaluate(with: records[0], substitutionVariables: ["OBJ": records[0]]))
        #expect(!same.evaluate(with: records[1], substitutionVariables: ["OBJ": records[0]]))
        let member = NSPredicate(format: "SELF IN $OBJS")
        #expect(
            records.filter { member.evaluate(with: $0, substitutionVariables: ["OBJS": [records[0], records[2]]]) } == [
                records[0], records[2],
            ])
    }

    /// An expression description whose result type is decimal hands out an `NSDecimalNumber`, as Core Data does (code
    /// reads it `as? Decimal` or `as? NSDecimalNumber`): an average computed as a double included.
    @Test func decimalResultTypesReadAsNSDecimalNumber() throws {
        let model = try NSManagedObjectModel {
            Entity("Item") {
                Attribute("count", .integer32)
                Attribute("price", .decimal)
            }
        }
        let stack = try TestStack(model: model, inMemory: true)
        let context = stack.container.viewContext
        for index in 1...4 {
            let item = NSEntityDescription.insertNewObject(forEntityName: "Item", into: context)
            item.setValue(index, forKey: "count")
            item.setValue(NSDecimalNumber(string: "\(index).25"), forKey: "price")
        }
        try context.save()
        func aggregate(_ function: String, _ key: String, _ type: NSAttributeType) throws -> Any? {
            let description = NSExpressionDescription()
            description.name = "value"
            description.expression = NSExpression(forFunction: function, arguments: [NSExpression(forKeyPath: key)])
            description.expressionResultType = type
            let request = NSFetchRequest<NSFetchRequestResult>(entityName: "Item")
            request.resultType = .dictionaryResultType
            request.propertiesToFetch = [description]
            return (try context.fetch(request) as? [[String: Any]])?.first?["value"]
        }
        #expect(try aggregate("average:", "count", .decimalAttributeType) as? NSDecimalNumber == NSDecimalNumber(string: "2.5"))
        #expect(try aggregate("sum:", "count", .decimalAttributeType) as? Decimal == 10)
        #expect(try aggregate("sum:", "price", .decimalAttributeType) as? Decimal == Decimal(string: "11"))
        // Other result types are as before: a double is an NSNumber.
        let average = try aggregate("average:", "count", .doubleAttributeType)
        #expect(average as? Double == 2.5 && !(average is NSDecimalNumber))
    }
}
