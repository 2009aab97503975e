import Foundation
import OpenCoreDataModel
import Testing
import _TestSupport

@testable import OpenCoreDataContext

/// Changed keys travel through a batch as `PropertyMask`s (property indices) and become names only where someone
/// asks (`ContextChange.updated`, `changedValuesForCurrentEvent()`): the two must always name the same properties,
/// past the first word of 64 properties too.
@Suite struct PropertyMaskTests {
    @Test func agreesWithASetOfIndicesUnderRandomEdits() {
        var generator = SystemRandomNumberGenerator()
        let seed = UInt64.random(in: 0...UInt64.max, using: &generator)
        var random = SeededGenerator(seed: seed)
        for _ in 0..<200 {
            var mask = PropertyMask(), other = PropertyMask()
            var reference = Set<Int>(), otherReference = Set<Int>()
            for _ in 0..<Int.random(in: 0...40, using: &random) {
                let index = Int.random(in: 0..<200, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0:
                    mask.insert(index)
                    reference.insert(index)
                case 1:
                    mask.remove(index)
                    reference.remove(index)
                default:
                    other.insert(index)
                    otherReference.insert(index)
                }
            }
            #expect(mask.indices == reference.sorted(), "seed \(seed)")
            #expect(mask.isEmpty == reference.isEmpty, "seed \(seed)")
            #expect((0..<200).allSatisfy { mask.contains($0) == reference.contains($0) }, "seed \(seed)")
            var union = mask
            union.formUnion(other)
            #expect(union.indices == reference.union(otherReference).sorted(), "seed \(seed)")
            // Equal sets are equal masks whatever words they grew (a removal leaves an empty high word behind).
            var rebuilt = PropertyMask()
            for index in reference { rebuilt.insert(index) }
            #expect(rebuilt == mask, "seed \(seed)")
            #expect((rebuilt == other) == (reference == otherReference), "seed \(seed)")
        }
    }

    @Test func allAndIndicesBuildTheSameSets() {
        for count in [0, 1, 2, 63, 64, 65, 127, 128, 129, 200] {
            let all = PropertyMask(all: count)
            #expect(all.indices == Array(0..<count), "count \(count)")
            #expect(all == PropertyMask(0..<count), "count \(count)")
            #expect(!all.contains(count), "count \(count)")
        }
    }

    @Test func anEmptiedHighWordIsEmpty() {
        var mask = PropertyMask()
        mask.insert(130)
        #expect(!mask.isEmpty && mask.contains(130) && !mask.contains(2))
        mask.remove(130)
        #expect(mask.isEmpty && mask == PropertyMask() && mask.indices.isEmpty)
    }

    @Test func rowPropertiesLeaveOutToManyRelationships() throws {
        let model = try makeCompanyModel()
        let department = try #require(model.entitiesByName["Department"])
        let names = PropertyMask.rowProperties(of: department).names(in: department)
        #expect(names == ["name", "budget", "head"])
        #expect(PropertyMask(names: ["name", "nope", "offices"], in: department).names(in: department) == ["name", "offices"])
    }

    /// An entity of 70 attributes: keys past the 64th are reported by name, by the local batch, the merged one and
    /// `changedValuesForCurrentEvent()`.
    @Test func keysBeyondTheFirstWordAreReportedByName() throws {
        let model = try NSManagedObjectModel {
            Entity("Wide") {
                for i in 0..<70 { Attribute("a\(i)", .integer64, default: Int64(0)) }
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        let wide = try context.make("Wide", ["a1": Int64(1)])
        try context.save()
        var seen: [(keys: Set<String>, current: Set<String>)] = []
        let observation = context.addChangeObserver { change in
            for (object, keys) in change.updated { seen.append((keys, Set(object.changedValuesForCurrentEvent().keys))) }
        }
        defer { observation.cancel() }
        wide.setValue(Int64(5), forKey: "a66")
        wide.setValue(Int64(6), forKey: "a3")
        context.processPendingChanges()
        #expect(seen.map(\.keys) == [["a3", "a66"]])
        #expect(seen.map(\.current) == [["a3", "a66"]])
        try context.save()

        let other = stack.context()
        let copy = try #require(try other.objects("Wide").first)
        _ = copy.value(forKey: "a0")  // loaded, so that the merge compares values
        let saved = NotificationRecorder(.NSManagedObjectContextDidSave, object: context)
        wide.setValue(Int64(9), forKey: "a69")
        try context.save()
        var merged: [Set<String>] = []
        let mergeObservation = other.addChangeObserver { change in merged += change.updated.map(\.keys) }
        defer { mergeObservation.cancel() }
        other.mergeChanges(fromContextDidSave: try #require(saved.all.last))
        #expect(merged == [["a69"]])
    }

    @Test func updatedCanBeSetByName() throws {
        let model = try makeCompanyModel()
        let stack = try TestStack(model: model)
        let context = stack.context()
        let d = try context.make("Department", ["name": "D"])
        var change = ContextChange(origin: .localEdits)
        change.updated = [(d, ["name", "employees", "unknown"])]
        let indices = ["name", "employees"].compactMap { d.entity.propertyIndex(named: $0) }.sorted()
        #expect(indices.count == 2 && change.updates.map(\.keys.indices) == [indices])
        #expect(change.updated.map(\.keys) == [["name", "employees"]])
        #expect(!change.isEmpty)
    }
}
