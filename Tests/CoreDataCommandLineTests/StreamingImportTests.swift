import Foundation
import OpenCoreData
import Testing
import _TestSupport

@testable import CoreDataCommandLine

/// The import reads its file as a stream and saves in batches inside one transaction: the records, the errors and the
/// resulting store are those of reading the whole file at once.
@Suite struct StreamingImportTests {
    let dir = TemporaryDirectory()

    static var cases: Int { Int(ProcessInfo.processInfo.environment["OCD_PROPERTY_CASES"] ?? "") ?? 60 }

    // MARK: The stream

    @Test func streamedRecordsAreThoseOfTheWholeFile() throws {
        for seed in 1...UInt64(Self.cases) {
            var random = SeededGenerator(seed: seed)
            let text = Self.randomFile(&random)
            let whole = try JSONReader.parse(Data(text.utf8))
            let chunk = Int.random(in: 1...13, using: &random)
            let streamed = try Self.stream(Array(text.utf8), chunkSize: chunk)
            #expect(Self.canonical(streamed) == Self.canonical(whole), "seed \(seed), chunk \(chunk): \(text)")
        }
    }

    @Test func aBrokenFileFailsAtTheSamePlaceAsWhenReadWhole() throws {
        var compared = 0
        for seed in 1...UInt64(Self.cases * 4) {
            var random = SeededGenerator(seed: seed)
            var bytes = Array(Self.randomFile(&random).utf8)
            // One byte replaced by a character that breaks JSON in most places, or one byte dropped.
            let at = Int.random(in: 0..<bytes.count, using: &random)
            if Bool.random(using: &random) {
                bytes[at] = [UInt8(ascii: "@"), UInt8(ascii: "}"), UInt8(ascii: ","), UInt8(ascii: "\"")].randomElement(using: &random)!
            } else {
                bytes.remove(at: at)
            }
            let text = String(decoding: bytes, as: UTF8.self)
            let chunk = Int.random(in: 1...13, using: &random)
            let whole = Result { try JSONReader.parse(Data(bytes)) }
            let streamed = Result { try Self.stream(bytes, chunkSize: chunk) }
            switch (whole, streamed) {
            case (.success(let a), .success(let b)):
                #expect(Self.canonical(a) == Self.canonical(b), "seed \(seed): \(text)")
            case (.failure(let a as JSONSyntaxError), .failure(let b as JSONSyntaxError)):
                #expect(a.line == b.line && a.column == b.column, "seed \(seed), chunk \(chunk): whole \(a), streamed \(b) in \(text)")
                compared += 1
            case (.failure(let a), .failure(let b)):
                // Valid JSON of the wrong shape fails the stream only; invalid JSON must fail both.
                #expect(!(a is JSONSyntaxError), "seed \(seed): whole \(a), streamed \(b) in \(text)")
            case (.failure(let a), .success):
                Issue.record("seed \(seed): the whole file fails (\(a)) but the stream read it: \(text)")
            case (.success, .failure(let b)):
                #expect(!(b is JSONSyntaxError), "seed \(seed): the stream says \(b) of valid JSON \(text)")
            }
        }
        #expect(compared > Self.cases, "most mutations break the file: \(compared)")
    }

    @Test func positionsCountLinesAndCharactersAcrossChunks() throws {
        // Column 22 of line 3 is the 't' of "tru": "é" is one character of two bytes.
        let text = Array("[\n  {\"name\": \"ü\"},\n  {\"name\": \"é\", \"x\": tru}\n]".utf8)
        for chunk in 1...9 {
            #expect(throws: JSONSyntaxError.self) { try Self.stream(text, chunkSize: chunk) }
            do {
                _ = try Self.stream(text, chunkSize: chunk)
            } catch let error as JSONSyntaxError {
                #expect(error.line == 3 && error.column == 22, "chunk \(chunk): \(error)")
            }
        }
        let duplicate = Array("{\"Products\": [],\n \"Products\": []}".utf8)
        do {
            _ = try Self.stream(duplicate, chunkSize: 3)
            Issue.record("a key that appears twice is refused")
        } catch let error as JSONSyntaxError {
            #expect(error.line == 2 && error.column == 2 && error.reason.contains("\"Products\" appears twice"), "\(error)")
        }
    }

    // MARK: The import

    @Test func batchesBuildTheSameGraphWhateverTheOrderAndTheSideThatNamesARelationship() throws {
        let model = try writeLibraryModel()
        for seed in 1...UInt64(max(8, Self.cases / 4)) {
            var random = SeededGenerator(seed: seed)
            let graph = LibraryGraph.random(&random)
            let file = dir.file("library-\(seed).json")
            let text = graph.json(&random)
            try Data(text.utf8).write(to: file)
            let store = dir.file("library-\(seed).sqlite").path
            let batch = Int.random(in: 1...4, using: &random)
            let result = coredata(["import", "--model", model, "--store", store, "--batch-size", "\(batch)", file.path])
            #expect(result.code == 0, "seed \(seed), batch \(batch): \(result.err) in \(text)")
            guard result.code == 0 else { continue }
            let stored = try LibraryGraph.read(model: model, store: store)
            #expect(stored == graph, "seed \(seed), batch \(batch): stored \(stored), expected \(graph) from \(text)")
        }
    }

    @Test func aFailureInALaterBatchLeavesTheStoreAsItWas() throws {
        let model = try writeLibraryModel()
        let store = dir.file("library.sqlite").path
        let first = dir.file("first.json")
        try Data(#"{"Author": [{"@id": "a", "name": "A", "books": ["b"]}], "Book": [{"@id": "b", "title": "B"}]}"#.utf8).write(to: first)
        #expect(coredata(["import", "--model", model, "--store", store, first.path]).code == 0)
        let before = try LibraryGraph.read(model: model, store: store)
        // Tags: their relationships are optional, so that each batch of 5 is saved as it fills.
        let tags = (1...40).map { #"{"@id": "t\#($0)", "label": "T\#($0)"}"# }.joined(separator: ",")
        let failures = [
            // A value that does not fit, in record 37: batches of 5 before it were saved inside the transaction.
            (#"{"Tag": [\#(tags), {"label": 5}]}"#, "Record #41 of 'Tag'"),
            // A syntax error after the last record.
            (#"{"Tag": [\#(tags)], }"#, "not valid JSON"),
            // A reference that nothing in the file answers, found at the end.
            (#"{"Tag": [\#(tags), {"label": "X", "books": ["nobody"]}]}"#, "\"nobody\""),
        ]
        for (json, expected) in failures {
            let file = dir.file("bad.json")
            try Data(json.utf8).write(to: file)
            let result = coredata(["import", "--model", model, "--store", store, "--batch-size", "5", file.path])
            #expect(result.code == 1 && result.err.contains(expected), "\(result.err)")
            #expect(try LibraryGraph.read(model: model, store: store) == before, "\(expected): the store is as it was")
        }
    }

    /// An import killed at a random moment while it saves many batches leaves the store with all of it or none.
    ///
    /// The store opens and holds what it held before or everything. Needs the `coredata` executable beside the test
    /// bundle (`swift build` makes it).
    @Test(.enabled(if: Requirement.executableIsBuilt("coredata"), "needs the coredata executable beside the tests (swift build)"))
    func anImportKilledAtAnyMomentLeavesAllOrNothing() throws {
        let tool = try #require(builtExecutable("coredata"))
        let model = Fixtures.url("Groceries.xcdatamodel").path
        let store = dir.file("killed.sqlite").path
        let seedFile = dir.file("seed.json")
        try Data(groceriesJSON.utf8).write(to: seedFile)
        #expect(coredata(["import", "--model", model, "--store", store, "--entity", "Products", seedFile.path]).code == 0)
        let count = 30_000
        let big = dir.file("big.json")
        try Data(("[" + (0..<count).map { #"{"name": "Item \#($0)", "price": \#($0 % 1000)}"# }.joined(separator: ",\n") + "]").utf8)
            .write(to: big)
        let seed = UInt64(Date().timeIntervalSince1970)
        var random = SeededGenerator(seed: seed)
        var outcomes: [Int] = []
        for attempt in 0..<4 {
            let process = try ChildProcess(
                tool.path, ["import", "--model", model, "--store", store, "--entity", "Products", "--batch-size", "500", big.path])
            let delay = Double.random(in: 0.05...3.0, using: &random)
            Thread.sleep(forTimeInterval: delay)
            kill(process.pid, SIGKILL)
            #expect(process.wait(timeout: 30) != nil, "seed \(seed), attempt \(attempt): the killed import did not end")
            let result = coredata(["fetch", "--model", model, "--store", store, "--entity", "Products", "--result", "count"])
            let stored = Int(result.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
            #expect(result.code == 0, "seed \(seed), attempt \(attempt), killed after \(delay) s: \(result.err)")
            let completed = (stored - 9) / count
            #expect(
                stored >= 9 && (stored - 9) % count == 0, "seed \(seed), attempt \(attempt), killed after \(delay) s: \(stored) objects")
            outcomes.append(completed)
        }
        print("StreamingImportTests: imports completed before their kill: \(outcomes)")
    }

    @Test func aRequiredRelationshipThatNothingFillsFailsTheImport() throws {
        let model = try writeLibraryModel()
        let file = dir.file("orphan.json")
        try Data(#"{"Author": [{"name": "Lonely"}]}"#.utf8).write(to: file)
        let store = dir.file("orphan.sqlite").path
        let result = coredata(["import", "--model", model, "--store", store, "--batch-size", "1", file.path])
        #expect(result.code == 1 && result.err.contains("record #1 of 'Author'") && result.err.contains("'books'"), "\(result.err)")
        #expect(!FileManager.default.fileExists(atPath: store))
    }

    // MARK: Helpers

    /// A model whose relationships are required in both directions, so that a batch cannot be saved before its
    /// references are set: every book has an author, every author at least one book; sequels and tags are optional.
    func writeLibraryModel() throws -> String {
        try dir.writeModel(
            "Library",
            """
                <entity name="Author" representedClassName="Author" syncable="YES">
                    <attribute name="name" attributeType="String"/>
                    <relationship name="books" toMany="YES" minCount="1" deletionRule="Cascade" destinationEntity="Book" inverseName="author" inverseEntity="Book"/>
                </entity>
                <entity name="Book" representedClassName="Book" syncable="YES">
                    <attribute name="title" attributeType="String"/>
                    <relationship name="author" maxCount="1" deletionRule="Nullify" destinationEntity="Author" inverseName="books" inverseEntity="Author"/>
                    <relationship name="sequel" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Book" inverseName="prequel" inverseEntity="Book"/>
                    <relationship name="prequel" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Book" inverseName="sequel" inverseEntity="Book"/>
                    <relationship name="tags" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Tag" inverseName="books" inverseEntity="Tag"/>
                </entity>
                <entity name="Tag" representedClassName="Tag" syncable="YES">
                    <attribute name="label" attributeType="String"/>
                    <relationship name="books" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Book" inverseName="tags" inverseEntity="Book"/>
                </entity>
            """
        ).path
    }

    static func stream(_ bytes: [UInt8], chunkSize: Int) throws -> Any {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("stream-\(UUID().uuidString).json")
        try Data(bytes).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        var stream = try JSONRecordStream(path: url.path, chunkSize: chunkSize)
        func records() throws -> [Any] {
            var list: [Any] = []
            while let record = try stream.nextRecord() { list.append(record) }
            return list
        }
        let result: Any
        switch try stream.begin() {
        case .array:
            result = try records()
        case .object:
            var object: [String: Any] = [:]
            while let key = try stream.nextEntity() { object[key] = try records() }
            result = object
        }
        try stream.finish()
        return result
    }

    /// A JSON file of the import's shapes: an array of records, or an object of such arrays; records hold strings
    /// with escapes and non-ASCII characters, numbers, literals and nested values, with white space between tokens.
    static func randomFile(_ random: inout SeededGenerator) -> String {
        func space() -> String { ["", " ", "\n", "\t ", "\r\n  "].randomElement(using: &random)! }
        func scalar() -> String {
            [
                #""plain""#, #""ü ß → 😀""#, #""quote \" and \\ slash""#, #""\u00e9\n""#, #""[not {an} array]""#, "12", "-0.5e3",
                "true", "false", "null",
            ].randomElement(using: &random)!
        }
        func value(_ depth: Int) -> String {
            switch depth < 2 ? Int.random(in: 0..<6, using: &random) : 0 {
            case 4:
                return "[" + (0..<Int.random(in: 0...3, using: &random)).map { _ in space() + value(depth + 1) }.joined(separator: ",")
                    + "]"
            case 5: return record(depth + 1)
            default: return scalar()
            }
        }
        func record(_ depth: Int) -> String {
            let keys = ["a", "b", "név", "c d"].shuffled(using: &random).prefix(Int.random(in: 0...4, using: &random))
            return "{" + keys.map { space() + "\"\($0)\"" + space() + ":" + space() + value(depth) }.joined(separator: ",") + space() + "}"
        }
        func array() -> String {
            "[" + (0..<Int.random(in: 0...5, using: &random)).map { _ in space() + record(0) + space() }.joined(separator: ",") + "]"
        }
        if Bool.random(using: &random) { return space() + array() + space() }
        let entities = ["Products", "Other", "Third"].prefix(Int.random(in: 0...3, using: &random))
        return space() + "{" + entities.map { space() + "\"\($0)\"" + space() + ":" + space() + array() }.joined(separator: ",") + space()
            + "}"
    }

    /// A text that is equal for equal JSON values (keys sorted, numbers by their literal).
    static func canonical(_ value: Any) -> String {
        switch value {
        case let object as [String: Any]:
            return "{" + object.keys.sorted().map { "\($0.debugDescription):\(canonical(object[$0]!))" }.joined(separator: ",") + "}"
        case let array as [Any]: return "[" + array.map(canonical).joined(separator: ",") + "]"
        case let string as String: return string.debugDescription
        case let number as JSONNumber: return number.text
        case let bool as Bool: return bool ? "true" : "false"
        default: return "null"
        }
    }
}

/// The objects of the library model and how they are related, by name.
struct LibraryGraph: Equatable {
    struct Book: Equatable {
        var author: String
        var sequel: String?
    }
    var authors: Set<String> = []
    var books: [String: Book] = [:]
    var tags: [String: Set<String>] = [:]

    /// A graph in which every author has a book; sequels pair books one to one; tags hold any books.
    static func random(_ random: inout SeededGenerator) -> LibraryGraph {
        var graph = LibraryGraph()
        let authors = (0..<Int.random(in: 1...4, using: &random)).map { "A\($0)" }
        graph.authors = Set(authors)
        let titles = (0..<Int.random(in: authors.count...(authors.count + 6), using: &random)).map { "B\($0)" }
        for (index, title) in titles.enumerated() {
            let author = index < authors.count ? authors[index] : authors.randomElement(using: &random)!
            graph.books[title] = Book(author: author)
        }
        let order = titles.shuffled(using: &random)
        for pair in stride(from: 0, to: order.count - 1, by: 2) where Bool.random(using: &random) {
            graph.books[order[pair]]!.sequel = order[pair + 1]
        }
        for tag in 0..<Int.random(in: 0...3, using: &random) {
            graph.tags["T\(tag)"] = Set(titles.filter { _ in Bool.random(using: &random) })
        }
        return graph
    }

    /// The graph as an import file: entities and records in random order, each relationship named from one side or
    /// from both, so that references point forward and backward.
    func json(_ random: inout SeededGenerator) -> String {
        enum Side: CaseIterable { case mine, theirs, both }
        var authorBooks: [String: [String]] = [:]
        var bookFields = books.mapValues { _ in [String: String]() }
        var bookTags: [String: [String]] = [:]
        var tagBooks: [String: [String]] = [:]
        for (title, book) in books.sorted(by: { $0.key < $1.key }) {
            let side = Side.allCases.randomElement(using: &random)!
            if side != .theirs { bookFields[title]!["author"] = book.author }
            if side != .mine { authorBooks[book.author, default: []].append(title) }
            if let sequel = book.sequel {
                let side = Side.allCases.randomElement(using: &random)!
                if side != .theirs { bookFields[title]!["sequel"] = sequel }
                if side != .mine { bookFields[sequel, default: [:]]["prequel"] = title }
            }
        }
        for (tag, members) in tags.sorted(by: { $0.key < $1.key }) {
            tagBooks[tag] = []
            for title in members.sorted() {
                let side = Side.allCases.randomElement(using: &random)!
                if side != .theirs { tagBooks[tag]!.append(title) }
                if side != .mine { bookTags[title, default: []].append(tag) }
            }
        }
        func list(_ ids: [String]) -> String { "[" + ids.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }
        let authorRecords = authors.sorted().map { name in
            #"{"@id": "\#(name)", "name": "\#(name)""# + (authorBooks[name].map { #", "books": \#(list($0))"# } ?? "") + "}"
        }
        let bookRecords = books.keys.sorted().map { title in
            let fields = bookFields[title, default: [:]].sorted(by: { $0.key < $1.key }).map { #", "\#($0.key)": "\#($0.value)""# }
            return #"{"@id": "\#(title)", "title": "\#(title)""# + fields.joined()
                + (bookTags[title].map { #", "tags": \#(list($0))"# } ?? "")
                + "}"
        }
        let tagRecords = tags.keys.sorted().map { #"{"@id": "\#($0)", "label": "\#($0)", "books": \#(list(tagBooks[$0]!))}"# }
        let arrays = [("Author", authorRecords), ("Book", bookRecords), ("Tag", tagRecords)].shuffled(using: &random)
        return "{\n"
            + arrays.map { name, records in
                "\"\(name)\": [\n  " + records.shuffled(using: &random).joined(separator: ",\n  ") + "\n]"
            }.joined(separator: ",\n") + "\n}\n"
    }

    /// The graph a store holds.
    static func read(model: String, store: String) throws -> LibraryGraph {
        let container = NSPersistentContainer(
            name: "Library", managedObjectModel: try NSManagedObjectModel(contentsOf: URL(fileURLWithPath: model)))
        let description = NSPersistentStoreDescription(url: URL(fileURLWithPath: store))
        description.isReadOnly = true
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        defer { for store in container.persistentStoreCoordinator.persistentStores { try? store.close() } }
        let context = container.viewContext
        func all(_ entity: String) throws -> [NSManagedObject] { try context.fetch(NSFetchRequest<NSManagedObject>(entityName: entity)) }
        var graph = LibraryGraph()
        for author in try all("Author") { graph.authors.insert(author.string("name")!) }
        for book in try all("Book") {
            graph.books[book.string("title")!] = Book(
                author: (book.value(forKey: "author") as? NSManagedObject)?.string("name") ?? "none",
                sequel: (book.value(forKey: "sequel") as? NSManagedObject)?.string("title"))
        }
        for tag in try all("Tag") {
            let members = tag.value(forKey: "books") as? Set<NSManagedObject> ?? []
            graph.tags[tag.string("label")!] = Set(members.compactMap { $0.string("title") })
        }
        return graph
    }
}
