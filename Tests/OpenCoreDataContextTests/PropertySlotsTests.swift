import Foundation
import Testing
import _TestSupport

@testable import OpenCoreDataContext

/// An object's pending values live in `PropertySlots`; it must behave as the `[Int: Value]` it replaced.
@Suite struct PropertySlotsTests {
    @Test func randomEditsMatchADictionary() {
        let seeds: [UInt64] = ProcessInfo.processInfo.environment["OCD_SEED"].flatMap(UInt64.init).map { [$0] } ?? Array(1...30)
        for seed in seeds {
            var rng = SeededGenerator(seed: seed)
            var reference: [Int: Int] = [:]
            var slots: PropertySlots<Int> = [:]
            let width = Int.random(in: 1...40, using: &rng)  // narrow and wide entities (growth past 16 slots)
            // Half the seeds start as a new object does: room made for a width that may fall short of the indexes used.
            if seed % 2 == 0 { slots.reserveWidth(Int.random(in: 0...width, using: &rng)) }
            for step in 0..<600 {
                let index = Int.random(in: 0..<width, using: &rng)
                switch Int.random(in: 0...3, using: &rng) {
                case 0, 1:
                    reference[index] = step
                    slots[index] = step
                case 2:
                    #expect(reference.removeValue(forKey: index) == slots.removeValue(forKey: index), "seed \(seed), step \(step)")
                case 3 where step % 97 == 0:
                    reference.removeAll()
                    slots.removeAll()
                default:
                    reference[index] = nil
                    slots[index] = nil
                }
                #expect(slots[index] == reference[index], "seed \(seed), step \(step)")
                #expect(slots.count == reference.count && slots.isEmpty == reference.isEmpty, "seed \(seed), step \(step)")
            }
            // Iteration visits the set slots once each, in property order.
            #expect(slots.map(\.key) == reference.keys.sorted(), "seed \(seed)")
            #expect(slots.map(\.value) == reference.keys.sorted().map { reference[$0]! }, "seed \(seed)")
            #expect(slots.keys == reference.keys.sorted(), "seed \(seed)")
            #expect(slots[width + 100] == nil)
        }
    }

    @Test func literalsAndClearing() {
        var slots: PropertySlots<String> = [3: "c", 0: "a"]
        #expect(slots.count == 2 && slots[0] == "a" && slots[3] == "c" && slots[1] == nil)
        slots[20] = nil  // clearing past the end allocates nothing and changes nothing
        #expect(slots.count == 2)
        slots = [:]
        #expect(slots.isEmpty && Array(slots).isEmpty)
    }
}
