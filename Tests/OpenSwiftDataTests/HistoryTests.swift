import OpenSwiftData
import Testing
import _TestSupport

@Model final class Parcel {
    @Attribute(.preserveValueOnDeletion) var label: String
    var weight: Int
    init(label: String, weight: Int) {
        self.label = label
        self.weight = weight
    }
}

@Suite struct HistoryTests {
    /// A store with three transactions: two parcels inserted (author "desk"), one's weight changed, the other deleted.
    static func store(_ directory: TemporaryDirectory) throws -> (ModelContainer, ModelContext) {
        let container = try ModelContainer(
            for: Parcel.self, configurations: ModelConfiguration(url: directory.file("parcels.store")))
        let context = ModelContext(container)
        context.author = "desk"
        let small = Parcel(label: "small", weight: 1)
        let large = Parcel(label: "large", weight: 9)
        context.insert(small)
        context.insert(large)
        try context.save()
        context.author = "scale"
        small.weight = 2
        try context.save()
        context.delete(large)
        try context.save()
        return (container, context)
    }

    @Test func transactionsListWhatEachSaveChanged() throws {
        let directory = TemporaryDirectory()
        let (container, _) = try Self.store(directory)
        let reader = ModelContext(container)
        let transactions = try reader.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(transactions.count == 3)
        #expect(transactions.map(\.author) == ["desk", "scale", "scale"])
        #expect(transactions.map(\.token) == transactions.map(\.token).sorted())
        // First: two inserts, of the two parcels the store has now or had.
        let inserted = transactions[0].changes.compactMap { change -> PersistentIdentifier? in
            guard case .insert(let insert as DefaultHistoryInsert<Parcel>) = change else { return nil }
            return insert.changedPersistentIdentifier
        }
        #expect(inserted.count == 2)
        let remaining = try reader.fetch(FetchDescriptor<Parcel>())
        #expect(remaining.count == 1)
        #expect(inserted.contains(try #require(remaining.first).persistentModelID))
        // Second: the weight of the small one.
        guard case .update(let update as DefaultHistoryUpdate<Parcel>) = try #require(transactions[1].changes.first) else {
            Issue.record("the second transaction is not an update: \(transactions[1].changes)")
            return
        }
        #expect(update.updatedAttributes == [\Parcel.weight])
        #expect(update.changedPersistentIdentifier == remaining.first?.persistentModelID)
        // Third: the deletion, with the preserved label in its tombstone and the weight not preserved.
        guard case .delete(let deletion as DefaultHistoryDelete<Parcel>) = try #require(transactions[2].changes.first) else {
            Issue.record("the third transaction is not a delete: \(transactions[2].changes)")
            return
        }
        #expect(deletion.tombstone[\.label] == "large")
        #expect(deletion.tombstone[\.weight] == nil)
    }

    /// The way Apple's trips sample reads the history: changes told apart by `is any HistoryInsert<Model>` (the
    /// protocols have their model as primary associated type), the change's `changedPersistentIdentifier` read on the
    /// `HistoryChange` itself, the token and author compared in the predicate, a store kept in memory.
    @Test func changesAreMatchedByModelAndReadThroughTheChange() throws {
        let container = try ModelContainer(for: Parcel.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        context.author = "widget"
        let parcel = Parcel(label: "box", weight: 3)
        context.insert(parcel)
        try context.save()
        let token = try #require(try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).last?.token)
        parcel.weight = 4
        try context.save()
        context.author = "app"
        parcel.weight = 5
        try context.save()
        let author = "widget"
        var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
        descriptor.predicate = #Predicate { transaction in (transaction.token > token) && (transaction.author == author) }
        let transactions = try ModelContext(container).fetchHistory(descriptor)
        #expect(transactions.count == 1)
        let changes = transactions.flatMap(\.changes)
        let kinds = changes.map { change -> String in
            switch change {
            case .insert(let insert): insert is any HistoryInsert<Parcel> ? "insert" : "?"
            case .update(let update): update is any HistoryUpdate<Parcel> && !(update is any HistoryUpdate<Leg>) ? "update" : "?"
            case .delete(let delete): delete is any HistoryDelete<Parcel> ? "delete" : "?"
            }
        }
        #expect(kinds == ["update"])
        #expect(changes.map(\.changedPersistentIdentifier) == [parcel.persistentModelID])
        #expect(changes.allSatisfy { $0.changeIdentifier > 0 })
    }

    @Test func aPredicateOnTheTokenReadsOnlyWhatCameAfterIt() throws {
        let directory = TemporaryDirectory()
        let (_, context) = try Self.store(directory)
        let first = try #require(try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).first)
        let token = first.token
        var descriptor = HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > token })
        descriptor.sortBy = [SortDescriptor(\.transactionIdentifier, order: .reverse)]
        let after = try context.fetchHistory(descriptor)
        #expect(after.count == 2)
        #expect(after.map(\.transactionIdentifier) == after.map(\.transactionIdentifier).sorted(by: >))
        #expect(after.allSatisfy { $0.token > token })
        descriptor.fetchLimit = 1
        #expect(try context.fetchHistory(descriptor).count == 1)
        // The token survives being encoded (an app keeps it between launches).
        let decoded = try JSONDecoder().decode(DefaultHistoryToken.self, from: JSONEncoder().encode(token))
        #expect(decoded == token)
    }

    @Test func deletingTheOldestTransactionsLeavesTheRest() throws {
        let directory = TemporaryDirectory()
        let (_, context) = try Self.store(directory)
        // Only the transactions of "scale" are selected: the older one of "desk" would have to go first.
        let error = #expect(throws: SwiftDataError.self) {
            try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.author == "scale" }))
        }
        #expect(error?.description.contains("oldest") == true)
        #expect(try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count == 3)
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.author == "desk" }))
        let left = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(left.map(\.author) == ["scale", "scale"])
    }
}
