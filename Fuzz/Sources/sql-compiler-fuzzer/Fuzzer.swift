// libFuzzer target: every input is a predicate format string, fetched from a store. A predicate that parses either
// fetches, or fails with a named error; SQLite never sees SQL it cannot parse (other than nesting deeper than its
// parser allows). When both the SQL fetch and the in-memory evaluation of the objects succeed, they agree.
import Foundation
import FuzzDriver
import OpenCoreData

@_cdecl("sql_compiler_fuzzer_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in
        guard let data else { return 0 }
        return fuzzOne(String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self))
    }
}

/// A store in memory with a few departments and employees whose values cover nil, empty and extreme values. (The
/// fuzzer calls in one thread; the context is only used inside its `performAndWait`.)
final class FuzzStore: @unchecked Sendable {
    let container: NSPersistentContainer
    let context: NSManagedObjectContext
    let employees: [NSManagedObject]
    init(_ parts: (NSPersistentContainer, NSManagedObjectContext, [NSManagedObject])) {
        (container, context, employees) = parts
    }
}

let stack = FuzzStore(makeStore())

func makeStore() -> (NSPersistentContainer, NSManagedObjectContext, [NSManagedObject]) {
    let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "../../../Tests/_TestSupport/Fixtures/Company.xcdatamodeld"
    ).standardizedFileURL
    do {
        let container = NSPersistentContainer(name: "Fuzz", managedObjectModel: try NSManagedObjectModel(contentsOf: url))
        let description = NSPersistentStoreDescription(url: URL(fileURLWithPath: "/dev/null"))
        description.type = NSInMemoryStoreType
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        let employees = try context.performAndWait {
            let toys = NSEntityDescription.insertNewObject(forEntityName: "Department", into: context)
            toys.setValue("Toys", forKey: "name")
            toys.setValue(Decimal(string: "12.5"), forKey: "budget")
            var made: [NSManagedObject] = []
            let values: [(String, Int, Double, Bool)] = [
                ("Ann", 30, 1.5, true), ("bob", -7, 0, false), ("Zoë", 32767, -1e300, true), ("", 0, .infinity, false),
            ]
            for (name, age, salary, active) in values {
                let e = NSEntityDescription.insertNewObject(forEntityName: "Employee", into: context)
                e.setValue(name, forKey: "name")
                e.setValue(age, forKey: "age")
                e.setValue(salary, forKey: "salary")
                e.setValue(active, forKey: "active")
                e.setValue(name.isEmpty ? nil : toys, forKey: "department")
                made.append(e)
            }
            try context.save()
            return made
        }
        return (container, context, employees)
    } catch {
        preconditionFailure("cannot set up the store: \(error)")
    }
}

func fuzzOne(_ text: String) -> CInt {
    guard let predicate = try? FetchPredicate(format: text) else { return 0 }
    let context = stack.context
    context.performAndWait {
        let request = NSFetchRequest<NSManagedObject>(entityName: "Employee")
        request.predicate = predicate
        let fetched: [NSManagedObject]
        do {
            fetched = try context.fetch(request)
        } catch let error as CoreDataError {
            let message = error.message
            precondition(
                !(message.contains("syntax error") || message.contains("unrecognized token") || message.contains("incomplete input")),
                "the SQL compiler wrote SQL that SQLite cannot parse: \(message)")
            return
        } catch {
            preconditionFailure("a fetch threw a non-CoreDataError: \(error)")
        }
        var expected: Set<ObjectIdentifier> = []
        for employee in stack.employees {
            guard let matches = try? predicate.evaluate(with: employee) else { return }
            if matches { expected.insert(ObjectIdentifier(employee)) }
        }
        let found = Set(fetched.map(ObjectIdentifier.init))
        precondition(found == expected, "SQL and memory disagree on \(predicate.predicateFormat) (from \(text))")
    }
    return 0
}
