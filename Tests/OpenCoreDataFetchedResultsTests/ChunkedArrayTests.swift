import Foundation
import Testing
import _TestSupport

@testable import OpenCoreDataFetchedResults

/// The controller's chunked result list must behave exactly like an array under any sequence of edits.
@Suite struct ChunkedArrayTests {
    @Test func randomEditsMatchAnArray() {
        let seeds: [UInt64] = ProcessInfo.processInfo.environment["OCD_SEED"].flatMap(UInt64.init).map { [$0] } ?? Array(1...20)
        for seed in seeds {
            var rng = SeededGenerator(seed: seed)
            let start = Int.random(in: 0...3000, using: &rng)
            var reference = Array(0..<start)
            var chunked = ChunkedArray(reference)
            var next = start
            for step in 0..<4000 {
                if reference.isEmpty || Int.random(in: 0...9, using: &rng) < 6 {
                    // Bias toward one spot now and then, so chunks split repeatedly.
                    let at =
                        Int.random(in: 0...3, using: &rng) == 0 ? reference.count / 3 : Int.random(in: 0...reference.count, using: &rng)
                    reference.insert(next, at: at)
                    chunked.insert(next, at: at)
                    next += 1
                } else {
                    let at = Int.random(in: 0..<reference.count, using: &rng)
                    #expect(reference.remove(at: at) == chunked.remove(at: at), "seed \(seed), step \(step)")
                }
                if step % 500 == 0 || step == 3999 {
                    #expect(Array(chunked) == reference, "seed \(seed), step \(step): iteration differs")
                    var visited: [Int] = []
                    chunked.forEachInPlace { visited.append($0.pointee) }
                    #expect(visited == reference, "seed \(seed), step \(step): the in-place walk differs")
                    #expect(chunked.count == reference.count)
                    if !reference.isEmpty {
                        let i = Int.random(in: 0..<reference.count, using: &rng)
                        #expect(chunked[i] == reference[i], "seed \(seed), step \(step): element \(i)")
                        let j = Int.random(in: i...reference.count, using: &rng)
                        #expect(chunked.elements(in: i..<j) == Array(reference[i..<j]), "seed \(seed), step \(step): range \(i)..<\(j)")
                        // Partitioned by position: the first position at or after a threshold.
                        let threshold = reference[i]
                        let positions = Dictionary(uniqueKeysWithValues: reference.enumerated().map { ($1, $0) })
                        #expect(
                            chunked.partitioningIndex { positions[$0.pointee]! >= positions[threshold]! } == i,
                            "seed \(seed), step \(step): partitioning index")
                        #expect(chunked.partitioningIndex { _ in false } == reference.count)
                        #expect(chunked.partitioningIndex { _ in true } == 0)
                    }
                }
            }
        }
    }

    @Test func emptyAndSingle() {
        var list = ChunkedArray<Int>()
        #expect(list.isEmpty && Array(list).isEmpty && list.elements(in: 0..<0).isEmpty)
        list.insert(7, at: 0)
        #expect(Array(list) == [7] && list[0] == 7)
        #expect(list.remove(at: 0) == 7 && list.isEmpty)
        list.insert(1, at: 0)
        list.insert(0, at: 0)
        list.insert(2, at: 2)
        #expect(Array(list) == [0, 1, 2])
    }

    @Test func aCopyIsUnchangedUntilEitherSideChanges() {
        let original = ChunkedArray(0..<5_000)
        var copy = original
        #expect(copy.isUnchangedCopy(of: original))
        copy[4_999] = -1
        #expect(!copy.isUnchangedCopy(of: original))
        var other = original
        other.insert(7, at: 0)
        #expect(!original.isUnchangedCopy(of: other))
        var shrunk = original
        _ = shrunk.remove(at: 10)
        #expect(!shrunk.isUnchangedCopy(of: original))
        #expect(!ChunkedArray(0..<5_000).isUnchangedCopy(of: original), "equal elements in other storage")
    }

    /// Draining hands over every element in order and leaves the array empty; the elements are moved, not copied:
    /// each arrives as the only reference to its object (a copy would leave a second one in the old chunk).
    @Test func drainMovesEveryElementOutInOrder() {
        final class Box {
            let value: Int
            init(_ value: Int) { self.value = value }
        }
        var list = ChunkedArray((0..<2_500).map(Box.init))
        list.insert(Box(-1), at: 1_000)  // a chunk that split
        let expected = Array(list).map(\.value)
        var values: [Int] = []
        var shared = 0
        var drained = list.drain()
        #expect(list.isEmpty, "emptied at once")
        while var box = drained.next() {
            if !isKnownUniquelyReferenced(&box) { shared += 1 }
            values.append(box.value)
        }
        #expect(values == expected)
        #expect(shared == 0, "\(shared) elements were copied rather than moved")
        #expect(list.isEmpty && Array(list).isEmpty)
        list.insert(Box(9), at: 0)
        #expect(list.map(\.value) == [9])
    }
}
