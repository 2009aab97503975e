import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// A string may contain U+0000: it is stored whole, read back whole, and found by comparisons with it.
@Suite struct TextWithNULTests {
    @Test func aStringWithNULReadsBackWholeAndIsFoundByEquality() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let names = ["a\u{0}b", "a", "\u{0}", "x\u{0}\u{0}y\u{0}"]
        try stack.context().performAndWait {
            let context = stack.context()
            for name in names { try context.make("Department", ["name": name]) }
            try context.save()
        }
        let reader = stack.context()
        try reader.performAndWait {
            let stored = try reader.objects("Department", sort: ["name"]).map { $0.string("name") ?? "?" }
            #expect(stored == names.sorted(), "\(stored.map { $0.unicodeScalars.map { $0.value } })")
            for name in names {
                let found = try reader.objects("Department", "name == %@", name).map { $0.string("name") ?? "?" }
                #expect(found == [name], "\(name.unicodeScalars.map(\.value)): \(found.map { $0.unicodeScalars.map(\.value) })")
            }
            // Other paths that read stored text: counts, IDs and dictionaries.
            let request = NSFetchRequest<NSDictionary>(entityName: "Department")
            request.resultType = .dictionaryResultType
            request.propertiesToFetch = ["name"]
            request.predicate = try FetchPredicate(format: "name == %@", "a\u{0}b")
            let rows = try reader.fetch(request)
            #expect(rows.count == 1 && rows.first?["name"] as? String == "a\u{0}b", "\(rows)")
            let count = NSFetchRequest<NSManagedObject>(entityName: "Department")
            count.predicate = try FetchPredicate(format: "name == %@ OR name == %@", "a\u{0}b", "\u{0}")
            #expect(try reader.count(for: count) == 2)
            // String operators see the whole text too, in SQL as in memory (the fuzzer found BEGINSWITH disagreeing).
            let all = try reader.objects("Department")
            for format in [
                "name BEGINSWITH[cd] %@", "name BEGINSWITH %@", "name ENDSWITH %@", "name CONTAINS %@", "name LIKE %@", "name ==[c] %@",
            ] {
                for argument in ["a\u{0}", "\u{0}\u{0}\u{0}", "\u{0}y", "a", "\u{0}"] {
                    let predicate = try FetchPredicate(format: format, argument)
                    let inSQL = Set(try reader.objects("Department", format, argument).map(ObjectIdentifier.init))
                    let inMemory = Set(try all.filter { try predicate.evaluate(with: $0) }.map(ObjectIdentifier.init))
                    #expect(inSQL == inMemory, "\(format) with \(argument.unicodeScalars.map(\.value))")
                }
            }
        }
    }
}
