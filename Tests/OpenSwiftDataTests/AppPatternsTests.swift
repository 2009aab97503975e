import Foundation
import OpenSwiftData
import Testing
import _TestSupport

/// The app patterns of `AppPatterns.swift`, run.
@Suite struct AppPatternsTests {
    /// A folder tree with notes and tags, models decoded from JSON, a habit with collections, the searches, a
    /// background importer and a cascading delete by predicate.
    @Test func notesFoldersTagsAndImports() async throws {
        let container = try PatternsStore.container()
        let context = ModelContext(container)
        let root = Folder(name: "Work")
        let sub = Folder(name: "Projects", parent: root)
        context.insert(sub)
        let n1 = Note(title: "Plan", body: "a b c", folder: sub)
        let n2 = Note(title: "Ideas", folder: root)
        n2.isPinned = true
        n2.priority = .high
        let tag = Tag(name: "urgent")
        n1.tags.append(tag)
        context.insert(n1)
        context.insert(n2)
        #expect(root.children?.map(\.name) == ["Projects"])
        #expect(n1.wordCount == 3)
        #expect(tag.notes.map(\.title) == ["Plan"])
        let json = #"[{"title":"Lunch","amount":12.5,"date":0,"category":"Food"}]"#
        let expenses = try JSONDecoder().decode([Expense].self, from: Data(json.utf8))
        for e in expenses { context.insert(e) }
        let habit = Habit(name: "Run", startedAt: Date(timeIntervalSince1970: 1000))
        habit.complete(on: .now)
        habit.settings["unit"] = "km"
        habit.goal = 5
        context.insert(habit)
        try context.save()
        let found = try PatternsStore.queries(context, search: "Proj", since: Date(timeIntervalSince1970: 0))
        #expect(found.map(\.title) == ["Plan"])
        let c2 = ModelContext(container)
        let h = try #require(try c2.fetch(FetchDescriptor<Habit>()).first)
        #expect(h.streak == 1)
        #expect(h.completions.count == 1)
        #expect(h.settings == ["unit": "km"])
        let e = try #require(try c2.fetch(FetchDescriptor<Expense>()).first)
        #expect(e.title == "Lunch")
        let encoded = try JSONEncoder().encode(e)
        #expect(String(decoding: encoded, as: UTF8.self).contains("Lunch"))
        let notes = try c2.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.priority, order: .reverse)]))
        #expect(notes.map(\.title) == ["Ideas", "Plan"])
        #expect(notes[0].id != notes[1].id)
        let pinned = try c2.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.isPinned }))
        #expect(pinned.map(\.title) == ["Ideas"])
        let untagged = try c2.fetch(FetchDescriptor<Note>(predicate: #Predicate { !$0.isPinned && $0.tags.isEmpty }))
        #expect(untagged.isEmpty)
        // Optional to-many arrays (CloudKit style) in predicates: their count through `?.` and `??`, `isEmpty`.
        let withNotes = try c2.fetch(
            FetchDescriptor<Folder>(predicate: #Predicate { ($0.notes?.count ?? 0) > 0 }, sortBy: [SortDescriptor(\.name)]))
        #expect(withNotes.map(\.name) == ["Projects", "Work"])
        let parents = try c2.fetch(FetchDescriptor<Folder>(predicate: #Predicate { $0.children?.isEmpty == false }))
        #expect(parents.map(\.name) == ["Work"])
        let leaves = try c2.fetch(FetchDescriptor<Folder>(predicate: #Predicate { $0.children?.isEmpty ?? true }))
        #expect(leaves.map(\.name) == ["Projects"])
        // SwiftData's value accessors.
        let plan = try #require(notes.first { $0.title == "Plan" })
        plan.setValue(forKey: \.body, to: plan.getValue(forKey: \.body) + " d")
        #expect(plan.wordCount == 4)
        let importer = NoteImporter(modelContainer: container)
        let ids = try await importer.importNotes(["x", "y"])
        #expect(await importer.title(of: ids[1]) == "y")
        try c2.delete(model: Folder.self, where: #Predicate { $0.name == "Work" })
        try c2.save()
        #expect(try c2.fetchCount(FetchDescriptor<Folder>()) == 0)
        #expect(try c2.fetchCount(FetchDescriptor<Note>()) == 2)
    }

    /// `.localizedStandard` and `.localized` exist on Linux (its Foundation declares only `.lexical`) and sort in memory.
    @Test func stringComparatorsLinuxLacks() {
        let s = String.StandardComparator.localizedStandard
        #expect(s != .lexical)
        #expect(String.StandardComparator.localized != .lexical)
        #expect(["file10", "File9", "apple"].sorted(using: SortDescriptor(\String.self, comparator: s)) == ["apple", "File9", "file10"])
    }
}
@Suite struct AppPatternsReminderTests {
    /// Codable enums with payloads, sets and arrays as transformable values, `??` with a captured date, a Bool
    /// comparison through an optional chain, division, a to-one's attribute as a sort key, upsert, observation.
    @MainActor @Test func remindersWithCollectionsAndOptionalChains() throws {
        let container = try ModelContainer(
            for: Reminder.self, ReminderList.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = container.mainContext
        let list = ReminderList(name: "Home")
        context.insert(list)
        let a = Reminder(code: "a", title: "Bins", dueDate: Date(timeIntervalSince1970: 100))
        a.recurrence = .weekly(days: [1, 4])
        a.labels = ["x", "y"]
        a.amount = 30
        list.reminders?.append(a)
        let b = Reminder()
        b.nickname = "bee"
        context.insert(b)
        try context.save()
        let c2 = ModelContext(container)
        let all = try c2.fetch(FetchDescriptor<Reminder>(sortBy: [SortDescriptor(\.code)]))
        #expect(all.count == 2)
        let first = try #require(all.first { $0.code == "a" })
        #expect(first.title == "Bins")
        #expect(first.recurrence == .weekly(days: [1, 4]))
        #expect(first.labels == ["x", "y"])
        #expect(first.weights == [1, 0.5])
        #expect(first.list?.name == "Home")
        let due = try c2.fetch(FetchDescriptor<Reminder>(predicate: Reminder.dueBefore(Date(timeIntervalSince1970: 1000))))
        #expect(due.map(\.code) == ["a"])
        let nick = try c2.fetch(FetchDescriptor<Reminder>(predicate: #Predicate { $0.nickname?.contains("e") == true }))
        #expect(nick.count == 1)
        let notNick = try c2.fetch(FetchDescriptor<Reminder>(predicate: #Predicate { $0.nickname?.contains("e") != true }))
        #expect(notNick.map(\.code) == ["a"])
        let half = try c2.fetch(FetchDescriptor<Reminder>(predicate: #Predicate { $0.amount / 2 > 10 }))
        #expect(half.map(\.code) == ["a"])
        let code = "a"
        let byList = try c2.fetch(FetchDescriptor<Reminder>(sortBy: [SortDescriptor(\.list?.name)]))
        #expect(byList.map { $0.list?.name } == [nil, "Home"])
        let byListReversed = try c2.fetch(FetchDescriptor<Reminder>(sortBy: [SortDescriptor(\.list?.name, order: .reverse)]))
        #expect(byListReversed.map { $0.list?.name } == ["Home", nil])
        // Upsert by unique code: the inserted model's values replace the stored ones.
        context.insert(Reminder(code: "a", title: "Bins again"))
        try context.save()
        #expect(
            try ModelContext(container).fetch(FetchDescriptor<Reminder>(predicate: #Predicate { $0.code == "a" })).map(\.title) == [
                "Bins again"
            ])
        let id = first.persistentModelID
        let again = c2.model(for: id) as? Reminder
        #expect(again?.code == code)
        #expect(changeIsObserved(reading: { _ = first.title }, after: { first.title = "changed" }))
    }
}

/// Models that declare protocols of their own.
@Suite struct AppPatternsConformanceTests {
    @Test func aModelThatIsComparableSortsItsPins() throws {
        let container = try ModelContainer(for: Board.self, Pin.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let board = Board(title: "Trip")
        board.pins = [Pin(label: "c", order: 3), Pin(label: "a", order: 1), Pin(label: "b", order: 2)]
        context.insert(board)
        try context.save()
        let fetched = try #require(try ModelContext(container).fetch(FetchDescriptor<Board>()).first)
        #expect(fetched.description == "Board(Trip)")
        #expect(fetched.pins.sorted().map(\.label) == ["a", "b", "c"])
        #expect(fetched.sortedPins.map(\.label) == ["a", "b", "c"])
        #expect(Set(fetched.pins).count == 3)
        // An `@ObservationIgnored` property stays a plain stored property, with its initial value after a fetch.
        board.renderCount = 5
        #expect(board.renderCount == 5 && fetched.renderCount == 0)
    }
}
