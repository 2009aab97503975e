import OpenCoreDataCompatibility
import Testing

/// Foundation's collections filter with OpenCoreData's `NSPredicate` and sort with its `NSSortDescriptor`, as
/// Apple's do with theirs.
@Suite struct FoundationCollectionTests {
    let short = NSPredicate(format: "SELF.length < 3")
    let start = ["1", "12", "123", "1234"]

    @Test func collectionsFilterWithAPredicate() {
        #expect(NSArray(array: start).filtered(using: short) as? [String] == ["1", "12"])
        let array = NSMutableArray(array: start)
        array.filter(using: short)
        #expect(array as? [String] == ["1", "12"])
        #expect(NSSet(array: start).filtered(using: short) == ["1", "12"])
        let set = NSMutableSet(array: start)
        set.filter(using: short)
        #expect(Set(set.allObjects.compactMap { $0 as? String }) == ["1", "12"])
        #expect(NSOrderedSet(array: start).filtered(using: short) == NSOrderedSet(array: ["1", "12"]))
        let ordered = NSMutableOrderedSet(array: start)
        ordered.filter(using: short)
        #expect(ordered.array as? [String] == ["1", "12"])
    }

    @Test func collectionsSortWithDescriptors() {
        let people: [[String: Any]] = [
            ["name": "bea", "age": 40], ["name": "Al", "age": 30], ["name": "cy", "age": 40], ["name": "Dee"],
        ]
        let byAgeThenName = [NSSortDescriptor(key: "age", ascending: false), NSSortDescriptor(key: "name", ascending: true)]
        let sorted = NSArray(array: people).sortedArray(using: byAgeThenName).compactMap { ($0 as? [String: Any])?["name"] as? String }
        // Descending age (nil last when descending, as it sorts first ascending), then name as a fetch compares them.
        #expect(sorted == ["bea", "cy", "Al", "Dee"])
        let byName = NSSortDescriptor(key: "name", ascending: true, comparison: .caseInsensitive)
        #expect(byName.compare(people[0], to: people[1]) == .orderedDescending)
        #expect(byName.reversedSortDescriptor.compare(people[0], to: people[1]) == .orderedAscending)
        let array = NSMutableArray(array: [3, 1, 2])
        array.sort(using: [NSSortDescriptor(key: "SELF", ascending: true)])
        #expect(array as? [Int] == [1, 2, 3])
        // `self` is the element itself; `compare:` is literal (capitals first), as Apple's.
        let letters = NSArray(array: ["b", "C", "a"])
        #expect(letters.sortedArray(using: [NSSortDescriptor(key: "self", ascending: true)]) as? [String] == ["C", "a", "b"])
        let folded = NSSortDescriptor(key: "self", ascending: true, comparison: .caseInsensitive)
        #expect(letters.sortedArray(using: [folded]) as? [String] == ["a", "b", "C"])
    }
}
