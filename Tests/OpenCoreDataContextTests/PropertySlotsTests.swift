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
            var slots: PropertySlots<IntSlots> = [:]
            var copies: [(step: Int, slots: PropertySlots<IntSlots>, reference: [Int: Int])] = []
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
                // Copies share the storage until one changes: each keeps what it held when it was made.
                if step % 50 == 0 { copies.append((step, slots, reference)) }
                #expect(slots.count == reference.count && slots.isEmpty == reference.isEmpty, "seed \(seed), step \(step)")
            }
            // Iteration visits the set slots once each, in property order.
            #expect(slots.map(\.key) == reference.keys.sorted(), "seed \(seed)")
            #expect(slots.map(\.value) == reference.keys.sorted().map { reference[$0]! }, "seed \(seed)")
            #expect(slots.keys == reference.keys.sorted(), "seed \(seed)")
            #expect(slots[width + 100] == nil)
            for copy in copies {
                let held = Dictionary(uniqueKeysWithValues: copy.slots.map { ($0.key, $0.value) })
                #expect(held == copy.reference, "seed \(seed), copy at \(copy.step)")
            }
        }
    }

    @Test func valuesAreReleasedWithTheirSlots() {
        weak var first: SlotToken?
        weak var second: SlotToken?
        weak var moved: SlotToken?
        do {
            var slots: PropertySlots<TrackedSlots> = [:]
            slots.reserveWidth(2)
            let a = SlotToken(), b = SlotToken(), c = SlotToken()
            (first, second, moved) = (a, b, c)
            slots[0] = a
            slots[1] = b
            slots[30] = c  // grows past the reserved width: the values move to the new storage
            // Changes to slots nothing shares happen in place; a shared storage is copied once, on the first change.
            let before = slots.storageIdentity
            slots[0] = a
            slots.removeValue(forKey: 5)
            #expect(slots.storageIdentity == before)
            var copy = slots
            copy[1] = nil
            let copied = copy.storageIdentity
            #expect(copied != before && slots.storageIdentity == before)
            copy[0] = a
            #expect(copy.storageIdentity == copied)  // the copy gets storage of its own; `b` stays in `slots`
            #expect(slots[1] === b && copy[1] == nil && copy[0] === a && copy[30] === c)
        }
        #expect(first == nil && second == nil && moved == nil)
    }

    @Test func literalsAndClearing() {
        var slots: PropertySlots<StringSlots> = [3: "c", 0: "a"]
        #expect(slots.count == 2 && slots[0] == "a" && slots[3] == "c" && slots[1] == nil)
        slots[20] = nil  // clearing past the end allocates nothing and changes nothing
        #expect(slots.count == 2)
        slots = [:]
        #expect(slots.isEmpty && Array(slots).isEmpty)
    }
}

final class IntSlots: ManagedBuffer<Int, Int?>, SlotStorage {
    typealias Value = Int
    deinit { destroySlots() }
}

final class StringSlots: ManagedBuffer<Int, String?>, SlotStorage {
    typealias Value = String
    deinit { destroySlots() }
}

final class SlotToken {}

final class TrackedSlots: ManagedBuffer<Int, SlotToken?>, SlotStorage {
    typealias Value = SlotToken
    deinit { destroySlots() }
}
