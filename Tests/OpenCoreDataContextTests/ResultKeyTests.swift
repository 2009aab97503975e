import Foundation
import OpenCoreData
@_spi(Engine) import OpenCoreDataStore
import Testing
import _TestSupport

/// The row query behind batched fetched results: the values it hands over for each row, and which of them it says
/// repeat the previous row's (the controller then skips comparing section values).
@Suite struct ResultKeyTests {
    /// Offices of the given cities, saved; then every row the row query reads, sorted by city then primary key:
    /// (city value, whether the store said it repeats).
    private func rows(_ cities: [String?]) throws -> [(value: AttributeValue, unchanged: Bool)] {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        for city in cities { try context.make("Office", ["city": city]) }
        try context.save()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Office")
        request.sortDescriptors = [FetchSortDescriptor(key: "city")]
        var rows: [(AttributeValue, Bool)] = []
        let handled = try stack.context()._fetchResultKeys(request, values: ["city"]) { _, _, values in
            #expect(values.count == 1)
            rows.append((values[0], values.isUnchanged(0)))
        }
        #expect(handled)
        return rows
    }

    @Test func repeatedTextIsReportedUnchangedAndEveryValueIsRight() throws {
        let cities: [String?] = ["Bonn", nil, "Aachen", "Bonn", "Aachen", nil, "Bonn", "", ""]
        let read = try rows(cities)
        // SQLite sorts NULL first; the sort is stable, like the primary-key tie-break.
        let expected = cities.sorted { a, b in
            guard let a else { return b != nil }
            guard let b else { return false }
            return a < b
        }
        #expect(read.map(\.value) == expected.map { $0.map(AttributeValue.string) ?? .null })
        // Known unchanged exactly where a text value repeats the previous row's (NULLs are never compared).
        let repeats = expected.indices.map { $0 > 0 && expected[$0] != nil && expected[$0] == expected[$0 - 1] }
        #expect(read.map(\.unchanged) == repeats)
    }

    @Test func aColumnThatRarelyRepeatsStopsBeingComparedAndStaysRight() throws {
        // 100 distinct cities, then a run of one city: past 64 changes the store stops comparing, so the run is no
        // longer reported unchanged, but every value is still read.
        let cities: [String?] = (0..<100).map { String(format: "city %03d", $0) } + Array(repeating: "zz", count: 5)
        let read = try rows(cities)
        #expect(read.map(\.value) == cities.map { .string($0!) })
        #expect(read.allSatisfy { !$0.unchanged })
    }
}
