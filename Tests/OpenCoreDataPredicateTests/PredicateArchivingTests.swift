import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import Testing

/// Predicates written as Apple's `NSKeyedArchiver` writes an `NSPredicate` (the bytes a transformable attribute holds
/// for one) read back as the same predicate.
@Suite struct PredicateArchivingTests {
    /// The predicate written, then read back through the archive reader and the parser.
    func roundTrip(_ predicate: FetchPredicate) throws -> (FetchPredicate, String) {
        let text = try ArchivedPredicateReader.predicateFormat(ofArchive: try predicate.keyedArchive())
        return (try FetchPredicate(format: text), text)
    }

    @Test(arguments: [
        "name == 'Ann'", "name ==[c] 'ann'", "name !=[cd] 'x'", "age < 30", "age <= 30", "age > 2.5", "age >= -3",
        "name LIKE[c] 'a*'", "name BEGINSWITH[cd] 'x'", "name ENDSWITH 'y'", "name MATCHES '^[a-z]+$'", "name CONTAINS[n] 'z'",
        "status IN {'a', 'b'}", "tags CONTAINS 'x'", "age BETWEEN {1, 10}", "ANY items.price > 10", "ALL items.price > 10",
        "flag == YES", "flag == NO", "note == nil", "TRUEPREDICATE", "FALSEPREDICATE", "NOT (a == 1) AND (b == 2 OR c == 3)",
        "a + b * 2 > c - 1", "2 ** 3 == 8", "price / 2 >= 1.5", "items.@count > 2", "items.@sum.price > 10",
        "SUBQUERY(items, $i, $i.qty > 1 AND $i.name BEGINSWITH 'a').@count > 0", "TERNARY(age > 18, 'adult', 'minor') == 'adult'",
        "lowercase(name) == 'ann'", "now() > created", "created > CAST(700000000.5, 'NSDate')", "status IN {'a'} UNION $MORE",
        "{1, 2} INTERSECT scores == {2}", "$NAME == name", "modulus:by:(age, 2) == 0", "abs(score) > 1", "department.name == 'R&D'",
        "name == \"quote \\\" and backslash \\\\\"", "score == 1e300", "#size == 2 AND department.#in == 1",
    ])
    func archivedPredicatesReadBackUnchanged(_ format: String) throws {
        let predicate = try FetchPredicate(format: format)
        let (read, text) = try roundTrip(predicate)
        #expect(read == predicate, "\(format) read back as \(text)")
    }

    /// What Foundation has no class for is written as it writes it: NONE as NOT ANY, a negation as a subtraction from
    /// zero; each reads back as an equal predicate.
    @Test func noneAndNegationReadBackAsFoundationWritesThem() throws {
        #expect(
            try roundTrip(try FetchPredicate(format: "NONE items.price > 10")).0
                == (try FetchPredicate(format: "NOT (ANY items.price > 10)")))
        let negated = try roundTrip(try FetchPredicate(format: "-age < 3")).0
        #expect(negated == (try FetchPredicate(format: "0 - age < 3")))
        #expect(try negated.evaluate(with: ["age": 1]) && negated.evaluate(with: ["age": -5]) == false)
    }

    /// The archive holds Apple's classes and keys: the operator's class by kind, its options under the key that class
    /// encodes them with, built-in functions on `_NSPredicateUtilities` named by `NSConstantValueClassName`.
    @Test func theArchiveHoldsApplesClassesAndKeys() throws {
        let data = try FetchPredicate(format: "name LIKE[cd] 'a*' OR abs(score) ==[c] 1").keyedArchive()
        let archive = try KeyedArchive(data: data)
        #expect(try archive.classes(of: archive.root) == ["NSCompoundPredicate", "NSPredicate", "NSObject"])
        var operators: [String: [String: PropertyListValue]] = [:]
        var utilities = 0
        for index in 1..<archive.objects.count {
            guard let chain = try archive.classes(of: index), case .dictionary(let fields) = try archive.object(index) else { continue }
            if chain.contains("NSPredicateOperator") { operators[chain[0]] = fields }
            if case .uid(let name)? = fields["NSConstantValueClassName"], case .string("_NSPredicateUtilities") = try archive.object(name) {
                utilities += 1
            }
        }
        let like = try #require(operators["NSLikePredicateOperator"])
        #expect(like["NSOperatorType"] == .integer(7) && like["NSFlags"] == .integer(3) && like["NSOptions"] == nil)
        let equality = try #require(operators["NSEqualityPredicateOperator"])
        #expect(equality["NSOperatorType"] == .integer(4) && equality["NSOptions"] == .integer(1) && equality["NSNegate"] == .bool(false))
        #expect(utilities == 1)
    }

    /// The public pair: `archivedData()` and `init(archivedData:)`, with errors that say what is wrong.
    @Test func archivedDataReadsBackAndBadBytesAreNamedErrors() throws {
        let predicate = try FetchPredicate(format: "title CONTAINS[cd] %@ AND rating >= 4", "milk")
        #expect(try FetchPredicate(archivedData: predicate.archivedData()) == predicate)
        let notAnArchive = #expect(throws: CoreDataError.self) { try FetchPredicate(archivedData: Data("plain text".utf8)) }
        #expect(notAnArchive?.code == .valueTransformation, "\(notAnArchive?.message ?? "")")
        let array = try KeyedArchive.archive(["a", "b"])
        let notAPredicate = #expect(throws: CoreDataError.self) { try FetchPredicate(archivedData: array) }
        #expect(notAPredicate?.message.contains("NSArray") == true, "\(notAPredicate?.message ?? "")")
        let unarchivable = #expect(throws: CoreDataError.self) { try FetchPredicate(format: "id == %@", UUID()).archivedData() }
        #expect(unarchivable?.code == .valueTransformation && unarchivable?.message.contains("UUID") == true)
    }

    /// What an archive cannot hold, or this project could not read back, is refused by name before anything is written.
    @Test func predicatesThatWouldNotReadBackAreRefused() throws {
        let uuid = try FetchPredicate(format: "id == %@", UUID())
        let error = #expect(throws: PropertyListError.self) { try uuid.keyedArchive() }
        #expect(error?.description.contains("UUID") == true, "\(error.map { "\($0)" } ?? "")")
        let url = try FetchPredicate(format: "link == %@", URL(string: "https://example.com")!)
        #expect(throws: PropertyListError.self) { try url.keyedArchive() }
        // A predicate inside a collection would not read back through a transformer: refused too.
        let nested = #expect(throws: PropertyListError.self) { try KeyedArchive.archive([try FetchPredicate(format: "a == 1")]) }
        #expect(nested?.description.contains("inside a collection") == true)
    }
}
