import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// Arriving rows are sorted by byte keys encoded from their sort values: the keys must order exactly as
/// `SortValues.order` does, for every kind they take, and decline what they cannot encode.
@Suite struct SortKeysTests {
    static let strings: [AttributeValue] = [
        .null, .string(""), .string("a"), .string("a\u{0}"), .string("a\u{0}b"), .string("a\u{1}"), .string("ab"), .string("B"),
        .string("b"), .string("é"), .string("e\u{301}"), .string("Z"), .string("ß"), .string("SS"), .string("\u{10FFFF}"),
        .string("a string longer than fifteen bytes"),
    ]
    static let integers: [AttributeValue] = [
        .null, .integer(.min), .integer(-1), .integer(0), .integer(1), .integer(2), .integer(.max), .bool(false), .bool(true),
    ]
    static let doubles: [AttributeValue] = [
        .null, .double(-.infinity), .double(-1.5), .double(-0.0), .double(0), .double(.leastNonzeroMagnitude), .double(1),
        .double(.infinity),
    ]
    static let dates: [AttributeValue] = [
        .null, .date(.distantPast), .date(Date(timeIntervalSinceReferenceDate: -0.5)), .date(Date(timeIntervalSinceReferenceDate: 0)),
        .date(Date(timeIntervalSinceReferenceDate: 812_345_678.25)), .date(.distantFuture),
    ]

    /// Every pair of keys under `sorts` against `SortValues.order`, and the positions `resultOrder` returns against a
    /// sort by `SortValues.order` with store orders breaking ties.
    func expectAgreement(_ values: [SortValues], _ sorts: [FetchSortDescriptor], _ label: String) {
        guard let keys = SortKeys(values, sorts) else {
            Issue.record("no keys for \(label)")
            return
        }
        for i in values.indices {
            for j in values.indices {
                let expected = values[i].order(values[j], sorts).signum()
                let got = keys.order(i, j)
                #expect(got == expected, "\(label): \(values[i].array) against \(values[j].array): \(got), expected \(expected)")
            }
        }
        let storeOrders = values.indices.map { (Int8(1), Int64(($0 * 7) % 5)) }
        let reference = values.indices.sorted { a, b in
            let c = values[a].order(values[b], sorts)
            return c != 0 ? c < 0 : (storeOrders[a] < storeOrders[b] || (storeOrders[a] == storeOrders[b] && a < b))
        }
        let got = ResultsEngine.resultOrder(values: values, storeOrders: storeOrders, sorts)
        // Results with equal values and equal store orders may come in either order: compare what each position holds.
        #expect(got.map { values[$0] } == reference.map { values[$0] }, "\(label): resultOrder")
        #expect(got.map { storeOrders[$0].1 } == reference.map { storeOrders[$0].1 }, "\(label): resultOrder's ties")
    }

    @Test(arguments: [true, false])
    func keysOrderAsSortValuesDoForEveryKindAndDirection(ascending: Bool) {
        let columns: [(String, [AttributeValue])] = [
            ("strings", Self.strings), ("integers", Self.integers), ("doubles", Self.doubles), ("dates", Self.dates),
        ]
        for (firstName, first) in columns {
            for (secondName, second) in columns {
                for comparison in [FetchSortDescriptor.Comparison.default, .caseInsensitive] {
                    let sorts = [
                        FetchSortDescriptor(key: "a", ascending: ascending, comparison: comparison),
                        FetchSortDescriptor(key: "b", ascending: !ascending),
                    ]
                    let values = first.flatMap { a in second.map { b in SortValues([a, b], count: 2) } }
                    expectAgreement(values, sorts, "\(firstName), \(secondName), \(comparison), ascending \(ascending)")
                }
            }
            let one = first.map { SortValues([$0], count: 1) }
            expectAgreement(one, [FetchSortDescriptor(key: "a", ascending: ascending)], "\(firstName) alone")
        }
        let three = Self.integers.flatMap { a in
            Self.strings.prefix(6).flatMap { b in Self.dates.prefix(3).map { c in SortValues([a, b, c], count: 3) } }
        }
        let sorts = [
            FetchSortDescriptor(key: "a", ascending: ascending), FetchSortDescriptor(key: "b"),
            FetchSortDescriptor(key: "c", ascending: false),
        ]
        expectAgreement(three, sorts, "three keys")
    }

    /// Random strings (with zero bytes, shared prefixes, multi-byte scalars) and random numbers, seeded.
    @Test func keysOrderAsSortValuesDoForRandomValues() {
        let seeds: [UInt64] = ProcessInfo.processInfo.environment["OCD_SEED"].flatMap(UInt64.init).map { [$0] } ?? Array(1...10)
        let alphabet: [Character] = ["a", "b", "A", "\u{0}", "é", "ü", "\u{1F600}", "z"]
        for seed in seeds {
            var rng = SeededGenerator(seed: seed)
            var values: [SortValues] = []
            for _ in 0..<150 {
                let length = Int.random(in: 0...6, using: &rng)
                let text = String((0..<length).map { _ in alphabet.randomElement(using: &rng)! })
                let string: AttributeValue = Int.random(in: 0..<10, using: &rng) == 0 ? .null : .string(text)
                let number: AttributeValue =
                    Bool.random(using: &rng)
                    ? .integer(Int64.random(in: -3...3, using: &rng)) : .integer(Int64.random(in: .min ... .max, using: &rng))
                values.append(SortValues([string, number], count: 2))
            }
            for comparison in [FetchSortDescriptor.Comparison.default, .caseInsensitive] {
                let sorts = [FetchSortDescriptor(key: "s", comparison: comparison), FetchSortDescriptor(key: "n", ascending: false)]
                expectAgreement(values, sorts, "seed \(seed), \(comparison)")
            }
        }
    }

    /// What the keys cannot order as `compare` does, they decline: the caller compares `SortValues` instead (and
    /// `resultOrder` still sorts).
    @Test func keysDeclineWhatTheyCannotEncode() {
        let ascending = [FetchSortDescriptor(key: "a")]
        let declined: [(String, [AttributeValue], [FetchSortDescriptor])] = [
            ("integers beside doubles", [.integer(1), .double(0.5)], ascending),
            ("dates beside doubles", [.date(Date(timeIntervalSinceReferenceDate: 1)), .double(0.5)], ascending),
            ("strings beside numbers", [.string("1"), .integer(1)], ascending),
            ("a NaN", [.double(.nan), .double(1)], ascending),
            ("decimals", [.decimal(Decimal(1)), .decimal(Decimal(2))], ascending),
            ("UUIDs", [.uuid(UUID()), .uuid(UUID())], ascending),
            ("a localized comparison", [.string("a"), .string("B")], [FetchSortDescriptor(key: "a", comparison: .localized)]),
        ]
        for (label, column, sorts) in declined {
            let values = column.map { SortValues([$0], count: 1) }
            #expect(SortKeys(values, sorts) == nil, "\(label)")
            let order = ResultsEngine.resultOrder(values: values, storeOrders: values.indices.map { (1, Int64($0)) }, sorts)
            #expect(Set(order) == Set(values.indices), "\(label): resultOrder still returns every position")
        }
        #expect(SortKeys([], ascending) == nil)
        #expect(SortKeys([SortValues([.integer(1)], count: 1)], []) == nil)
    }
}
