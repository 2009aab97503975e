// Models and data code in the styles public SwiftData apps write them (written for this project, not copied): a public
// model with CloudKit-style optional to-many arrays and defaults on every property, a self-referencing folder tree, a
// many-to-many tag relationship, a model that is itself Codable (decoded from JSON, then inserted), `#Unique` and
// `#Index` with attribute options Linux has no use for (`.spotlight`, `.ephemeral`, `.allowsCloudEncryption`), a
// `@ModelActor` importer, searches with `??` after optional chains, `isEmpty` and Finder-order sorting. With
// `import OpenSwiftData` changed to `import SwiftData` it is an Apple-platform file.
import Foundation
import OpenSwiftData

enum Priority: Int, Codable, CaseIterable, Comparable {
    case low, medium, high
    static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }
}

/// A folder of notes, in a tree.
@Model
public final class Folder {
    /// The folder's name.
    public var name: String = ""
    /// When the folder was made.
    public var createdAt: Date = Date.now
    /// The notes in the folder (deleted with it).
    @Relationship(deleteRule: .cascade, inverse: \Note.folder)
    public var notes: [Note]? = []
    var parent: Folder?
    @Relationship(deleteRule: .cascade, inverse: \Folder.parent)
    var children: [Folder]? = []

    /// A folder in `parent`, or at the top.
    public init(name: String, parent: Folder? = nil) {
        self.name = name
        self.parent = parent
    }
}

/// A note.
@Model
public final class Note {
    /// The note's identity, unique.
    @Attribute(.unique) public var id: UUID = UUID()
    /// The note's title.
    public var title: String = ""
    /// The note's text.
    public var body: String = ""
    /// Whether the note is pinned to the top.
    public var isPinned: Bool = false
    var priority: Priority = Priority.medium
    /// The folder holding the note.
    public var folder: Folder?
    @Relationship(inverse: \Tag.notes) var tags: [Tag] = []
    @Attribute(.externalStorage) var attachment: Data?
    var wordCount: Int { body.split(separator: " ").count }
    @Transient var isSelected: Bool = false

    /// A note in `folder`.
    public init(title: String, body: String = "", folder: Folder? = nil) {
        self.title = title
        self.body = body
        self.folder = folder
    }
}

@Model
class Tag {
    @Attribute(.unique) var name: String
    var notes: [Note] = []
    var colorHex: String = "#FFFFFF"

    init(name: String) { self.name = name }
}

@Model
final class Expense: Codable {
    enum CodingKeys: String, CodingKey { case title, amount, date, category }
    var title: String
    var amount: Double
    var date: Date
    var category: String

    init(title: String, amount: Double, date: Date, category: String) {
        self.title = title
        self.amount = amount
        self.date = date
        self.category = category
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        title = try container.decode(String.self, forKey: .title)
        amount = try container.decode(Double.self, forKey: .amount)
        date = try container.decode(Date.self, forKey: .date)
        category = try container.decode(String.self, forKey: .category)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(title, forKey: .title)
        try container.encode(amount, forKey: .amount)
        try container.encode(date, forKey: .date)
        try container.encode(category, forKey: .category)
    }
}

@Model
final class Habit {
    #Unique<Habit>([\.name, \.startedAt])
    #Index<Habit>([\.name], [\.startedAt])
    var name: String
    var startedAt: Date
    var completions: [Date] = []
    var settings: [String: String] = [:]
    var goal: Int? = nil
    private(set) var streak: Int = 0
    @Attribute(.ephemeral) var lastViewed: Date?
    @Attribute(.spotlight) var summary: String = ""
    @Attribute(.allowsCloudEncryption) var secret: String = ""

    init(name: String, startedAt: Date = .now) {
        self.name = name
        self.startedAt = startedAt
    }

    func complete(on day: Date) {
        completions.append(day)
        streak += 1
    }
}

@ModelActor
actor NoteImporter {
    func importNotes(_ titles: [String]) throws -> [PersistentIdentifier] {
        let notes = titles.map { Note(title: $0) }
        for note in notes { modelContext.insert(note) }
        try modelContext.save()
        return notes.map(\.persistentModelID)
    }

    func title(of id: PersistentIdentifier) -> String? {
        self[id, as: Note.self]?.title
    }
}

enum PatternsStore {
    static func container() throws -> ModelContainer {
        let schema = Schema([Folder.self, Note.self, Tag.self, Expense.self, Habit.self])
        let configuration = ModelConfiguration(schema: schema, isStoredInMemoryOnly: true)
        return try ModelContainer(for: schema, configurations: [configuration])
    }

    static func queries(_ context: ModelContext, search: String, since: Date) throws -> [Note] {
        var descriptor = FetchDescriptor<Note>(
            predicate: #Predicate<Note> { note in
                (note.folder?.name.localizedStandardContains(search) ?? false) || note.title.contains(search)
            },
            sortBy: [SortDescriptor(\Note.title, comparator: .localizedStandard), SortDescriptor(\.priority, order: .reverse)])
        descriptor.fetchLimit = 10
        descriptor.relationshipKeyPathsForPrefetching = [\.folder]
        descriptor.propertiesToFetch = [\.title]
        let a = try context.fetch(descriptor)
        let pinned = try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.isPinned }))
        let unpinned = try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { !$0.isPinned && $0.tags.isEmpty }))
        let tagged = try context.fetchCount(FetchDescriptor<Note>(predicate: #Predicate { $0.tags.contains { $0.name == search } }))
        let recent = try context.fetch(FetchDescriptor<Habit>(predicate: #Predicate { $0.startedAt >= since && $0.goal != nil }))
        let high = Priority.high
        let important = try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.priority == high }))
        _ = (pinned, unpinned, tagged, recent, important)
        return a
    }
}

enum Recurrence: Codable, Equatable {
    case none
    case daily
    case weekly(days: [Int])
}

@Model
final class Reminder {
    @Attribute(.unique) var code: String
    var title: String
    var dueDate: Date?
    var nickname: String?
    var recurrence: Recurrence = Recurrence.none
    var labels: Set<String> = []
    var weights: [Double] = [1, 0.5]
    var amount: Double = 0
    var list: ReminderList?

    init(code: String, title: String, dueDate: Date? = nil) {
        self.code = code
        self.title = title
        self.dueDate = dueDate
    }

    convenience init() {
        self.init(code: UUID().uuidString, title: "New")
    }

    static let placeholder = "Untitled"
    static func dueBefore(_ date: Date) -> Predicate<Reminder> {
        let far = Date.distantFuture
        return #Predicate<Reminder> { ($0.dueDate ?? far) < date }
    }
}

@Model
final class ReminderList {
    var name: String
    @Relationship(deleteRule: .cascade) var reminders: [Reminder]? = []
    init(name: String) { self.name = name }
}

// A model that declares `Comparable` (with `<` in an extension), `Hashable` and `Identifiable` itself, and one that
// is `CustomStringConvertible`: `@Model` must not make the class's own operators ambiguous (with a member macro whose
// names are `arbitrary`, the compiler found `<` twice and the class did not conform).
@Model final class Pin: Identifiable, Hashable, Comparable {
    var label: String = ""
    var order: Int = 0
    init(label: String, order: Int) { self.label = label; self.order = order }

}

@Model final class Board: CustomStringConvertible {
    var title: String
    @Relationship(deleteRule: .cascade) var pins: [Pin] = []
    init(title: String) { self.title = title }
    var description: String { "Board(\(title))" }
    var sortedPins: [Pin] { pins.sorted { $0.order < $1.order } }
    /// Not persisted, not observed: a cache the app keeps beside the model.
    @ObservationIgnored var renderCount = 0
}

extension Pin {
    static func < (a: Pin, b: Pin) -> Bool { a.order < b.order }
}
