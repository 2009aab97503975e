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
}
