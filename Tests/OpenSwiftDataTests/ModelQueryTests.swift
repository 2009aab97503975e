import OpenCoreDataTesting
import OpenSwiftData
import Testing

@Model final class Chore {
    var group: String
    var rank: Int
    var label: String

    init(group: String, rank: Int, label: String) {
        self.group = group
        self.rank = rank
        self.label = label
    }
}

/// The live query: random edit scripts saved by one context, the query in another, every batch applied to a table
/// that checks it as UIKit would, and the table compared with a fresh fetch after each.
@Suite struct ModelQueryTests {
    let order = [SortDescriptor(\Chore.group), SortDescriptor(\Chore.rank), SortDescriptor(\Chore.label)]

    /// The next batch the query reports, waiting up to five seconds.
    func nextBatch(_ iterator: inout AsyncStream<ChangeBatch<PersistentIdentifier>>.Iterator) async -> ChangeBatch<PersistentIdentifier>? {
        let box = IteratorBox(iterator)
        let batch = await withTaskGroup(of: ChangeBatch<PersistentIdentifier>?.self) { group in
            group.addTask { await box.next() }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        iterator = box.iterator
        return batch
    }

    @Test(arguments: [11, 12, 13, 14, 15, 16] as [UInt64])
    func randomEditScriptsAppliedToATableMatchAFreshFetch(seed: UInt64) async throws {
        var state = seed
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let container = try ModelContainer(for: Chore.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let writer = ModelContext(container)
        var written: [Chore] = []
        for i in 0..<12 {
            let task = Chore(group: ["a", "b", "c"][next(3)], rank: next(10), label: "t\(i)")
            writer.insert(task)
            written.append(task)
        }
        try writer.save()
        let reader = ModelContext(container)
        let query = try ModelQuery(FetchDescriptor<Chore>(sortBy: order), sectionedBy: \.group, in: reader)
        func items() -> SectionedItems<PersistentIdentifier> {
            SectionedItems(query.sections.map { .init(name: $0.name, items: $0.results.map(\.persistentModelID)) })
        }
        let initial = Dictionary(query.results.map { ($0.persistentModelID, $0.label) }, uniquingKeysWith: { a, _ in a })
        let table = TableViewModel(items()) { initial[$0] ?? "?" }
        #expect(table.items.allItems.count == 12, "seed \(seed)")
        var iterator = query.changes.makeAsyncIterator()
        var made = 12
        for step in 0..<25 {
            for _ in 0..<(1 + next(4)) {
                switch next(5) {
                case 0:
                    made += 1
                    let task = Chore(group: ["a", "b", "c", "d"][next(4)], rank: next(10), label: "t\(made)")
                    writer.insert(task)
                    written.append(task)
                case 1 where written.count > 2:
                    writer.delete(written.remove(at: next(written.count)))
                case 2 where !written.isEmpty: written[next(written.count)].rank = next(10)
                case 3 where !written.isEmpty: written[next(written.count)].group = ["a", "b", "c", "d"][next(4)]
                default: if !written.isEmpty { written[next(written.count)].label = "edited \(step)" }
                }
            }
            // (A step whose sets all wrote the values already there changes nothing: no batch to wait for.)
            guard writer.hasChanges else { continue }
            try writer.save()
            guard let batch = await nextBatch(&iterator) else {
                Issue.record("no batch reached the query after step \(step) (seed \(seed))")
                return
            }
            let labels = Dictionary(query.results.map { ($0.persistentModelID, $0.label) }, uniquingKeysWith: { a, _ in a })
            do {
                try table.apply(batch, dataSource: items()) { labels[$0] ?? "?" }
            } catch {
                Issue.record("step \(step): \(error) (seed \(seed))\n\(batch)")
                return
            }
            let fresh = try ModelContext(container).fetch(FetchDescriptor<Chore>(sortBy: order))
            #expect(table.items.allItems == fresh.map(\.persistentModelID), "step \(step) (seed \(seed))")
            #expect(table.contents.flatMap { $0 } == fresh.map(\.label), "step \(step) contents (seed \(seed))")
        }
    }

    @Test func aQueryInTheSameContextUpdatesAfterInsertAndDeleteAndIsObservable() throws {
        let container = try ModelContainer(for: Chore.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let query = try ModelQuery(FetchDescriptor<Chore>(sortBy: [SortDescriptor(\.rank)]), in: context)
        #expect(query.results.isEmpty)
        let changed = Changes()
        withObservationTracking {
            _ = query.results.count
        } onChange: {
            changed.count += 1
        }
        let second = Chore(group: "a", rank: 2, label: "second")
        context.insert(second)
        context.insert(Chore(group: "a", rank: 1, label: "first"))
        #expect(changed.count == 1)
        #expect(query.results.map(\.label) == ["first", "second"])
        context.delete(second)
        #expect(query.results.map(\.label) == ["first"])
        #expect(query.sections.map(\.name) == [""])
    }

    @Test func aQueryNeedsAnOrder() throws {
        let container = try ModelContainer(for: Chore.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        #expect(throws: SwiftDataError.self) { try ModelQuery(FetchDescriptor<Chore>(), in: ModelContext(container)) }
    }
}

/// An iterator shared with a child task.
final class IteratorBox: @unchecked Sendable {
    var iterator: AsyncStream<ChangeBatch<PersistentIdentifier>>.Iterator
    init(_ iterator: AsyncStream<ChangeBatch<PersistentIdentifier>>.Iterator) { self.iterator = iterator }
    func next() async -> ChangeBatch<PersistentIdentifier>? { await iterator.next() }
}
