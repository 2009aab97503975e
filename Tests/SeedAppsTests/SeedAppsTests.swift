import Foundation
import OpenCoreData
import OpenCoreDataLiveTable
import SeedApps
import Testing
import _TestSupport

/// Runs a seed app in-process and returns (exit code, output lines, error text).
func runApp<Command: SeedCommand>(_ command: Command.Type, _ arguments: [String]) -> (code: Int32, lines: [String], err: String) {
    var lines: [String] = []
    var errors = ""
    let code = SeedSession.main(command, arguments, output: { lines.append($0) }, errors: { errors += $0 + "\n" })
    return (code, lines, errors)
}

@Suite struct SeedAppsTests {
    let dir = TemporaryDirectory()

    func script(_ lines: [String], _ name: String = "script.jsonl") throws -> String {
        let url = dir.file(name)
        try Data(lines.joined(separator: "\n").utf8).write(to: url)
        return url.path
    }

    @Test func oilChangesPrintsEveryDelegateCallAsTheSeedsTableReceivesIt() throws {
        let store = dir.file("oil.sqlite").path
        let file = try script([
            #"{"op":"add","values":{"date":"2026-01-10T09:00:00Z","miles":1000,"log":"first"}}"#,
            #"{"op":"add","values":{"date":"2026-03-01T09:00:00Z","miles":4000,"log":"second"}}"#,
            #"{"op":"background-add","values":{"date":"2026-02-01T09:00:00Z","miles":2500,"log":"merged"}}"#,
            #"{"op":"edit","row":[0,2],"values":{"date":"2026-04-01T09:00:00Z"}}"#,
            #"{"op":"delete","row":[0,1]}"#,
        ])
        let result = runApp(OilChanges.self, ["--store", store, "--script", file])
        #expect(result.code == 0, "\(result.err)")
        #expect(
            result.lines == [
                "will change content", "object insert at [0, 0]: 2026-01-10  1000 mi  first", "did change content",
                "will change content", "object insert at [0, 0]: 2026-03-01  4000 mi  second", "did change content",
                "will change content", "object insert at [0, 1]: 2026-02-01  2500 mi  merged", "did change content",
                "will change content", "object move at [0, 2] to [0, 0]: 2026-04-01  1000 mi  first", "did change content",
                "will change content", "object delete at [0, 1]: 2026-03-01  4000 mi  second", "did change content",
                "rows: 2", "[0, 0]: 2026-04-01  1000 mi  first", "[0, 1]: 2026-02-01  2500 mi  merged",
            ], "\(result.lines.joined(separator: "\n"))")
        // The store keeps it: a run without a script prints the same table.
        let again = runApp(OilChanges.self, ["--store", store])
        #expect(again.lines == ["rows: 2", "[0, 0]: 2026-04-01  1000 mi  first", "[0, 1]: 2026-02-01  2500 mi  merged"])
    }

    @Test(arguments: [
        (#"{"op":"launch"}"#, "line 2: unknown op 'launch' (expected one of: add, background-add, delete, edit)"),
        (#"{"op":"delete","row":[0,5]}"#, "line 2: no row [0, 5]"),
        (#"{"op":"add","values":{"miles":"many"}}"#, "line 2: key 'miles'"),
        (#"{"op":"add","values":{"odometer":5}}"#, "line 2: unknown key 'odometer' (entity 'Entry' has: date, log, miles)"),
        (#"{"op":"add","values":{"date":"yesterday"}}"#, "line 2: key 'date' needs an ISO 8601 date"),
        ("not json", "line 2: not a JSON object"),
    ])
    func aBadLineIsNamedAndNothingFromItOnIsApplied(_ bad: String, _ message: String) throws {
        let store = dir.file("bad.sqlite").path
        let file = try script([
            #"{"op":"add","values":{"date":"2026-01-10T09:00:00Z","miles":1000,"log":"kept"}}"#, bad,
            #"{"op":"add","values":{"date":"2026-01-11T09:00:00Z","miles":1100,"log":"never"}}"#,
        ])
        let result = runApp(OilChanges.self, ["--store", store, "--script", file])
        #expect(result.code == 1 && result.err.contains(message), "\(result.err)")
        let after = runApp(OilChanges.self, ["--store", store])
        #expect(after.lines == ["rows: 1", "[0, 0]: 2026-01-10  1000 mi  kept"], "\(after.lines)")
    }

    @Test func locationsAddsEventsWhereTheAppIsAndDeletesThem() throws {
        let store = dir.file("events.sqlite").path
        let file = try script([
            #"{"op":"add","values":{"creationDate":"2026-05-01T10:00:00Z"}}"#,
            #"{"op":"add","values":{"creationDate":"2026-05-01T11:30:00Z","latitude":51.5007,"longitude":-0.1246}}"#,
            #"{"op":"delete","row":[0,1]}"#,
        ])
        let result = runApp(Locations.self, ["--store", store, "--location", "48.8584,2.2945", "--script", file])
        #expect(result.code == 0, "\(result.err)")
        #expect(
            result.lines == [
                "will change content", "object insert at [0, 0]: 2026-05-01 10:00:00  48.8584, 2.2945", "did change content",
                "will change content", "object insert at [0, 0]: 2026-05-01 11:30:00  51.5007, -0.1246", "did change content",
                "will change content", "object delete at [0, 1]: 2026-05-01 10:00:00  48.8584, 2.2945", "did change content",
                "rows: 1", "[0, 0]: 2026-05-01 11:30:00  51.5007, -0.1246",
            ], "\(result.lines.joined(separator: "\n"))")
        // A location south of the equator starts with a minus, and is still the option's value.
        let sydney = runApp(
            Locations.self,
            [
                "--store", dir.file("sydney.sqlite").path, "--location", "-33.8568,151.2153", "--script",
                try script([#"{"op":"add","values":{}}"#], "s.jsonl"),
            ])
        #expect(sydney.code == 0 && sydney.lines.last?.hasSuffix("-33.8568, 151.2153") == true, "\(sydney.err) \(sydney.lines)")
        let badLocation = runApp(Locations.self, ["--store", store, "--location", "north"])
        #expect(badLocation.code == 2 && badLocation.err.contains("--location takes LAT,LON"), "\(badLocation.err)")
    }

    /// A person adding several entries within one second (no date given: "now") sees each new one on top, as the
    /// seeds do: dates keep their fractions of a second, in the default and in scripts.
    @Test func quickAddsWithinOneSecondLandNewestFirst() throws {
        let adds = (1...4).map { #"{"op":"add","values":{"miles":\#($0)000,"log":"quick \#($0)"}}"# }
        let oil = runApp(OilChanges.self, ["--store", dir.file("quick-oil.sqlite").path, "--script", try script(adds, "oil.jsonl")])
        #expect(oil.code == 0, "\(oil.err)")
        #expect(oil.lines.filter { $0.contains("object insert") }.allSatisfy { $0.contains("at [0, 0]") }, "\(oil.lines)")
        #expect(oil.lines.suffix(4).map { $0.components(separatedBy: "  ").last ?? "" } == ["quick 4", "quick 3", "quick 2", "quick 1"])

        let places =
            (1...4).map { #"{"op":"add","values":{"latitude":\#($0).5}}"# } + [#"{"op":"background-add","values":{"latitude":9.5}}"#]
        let events = runApp(
            Locations.self,
            ["--store", dir.file("quick-events.sqlite").path, "--location", "1,2", "--script", try script(places, "events.jsonl")])
        #expect(events.code == 0, "\(events.err)")
        let latitudes = events.lines.suffix(5).map { $0.components(separatedBy: "  ").last?.components(separatedBy: ",").first ?? "" }
        #expect(latitudes == ["9.5000", "4.5000", "3.5000", "2.5000", "1.5000"], "\(events.lines.joined(separator: "\n"))")

        // Fractions of a second in a script's dates order the rows too.
        let fractional = [
            #"{"op":"add","values":{"creationDate":"2026-05-01T10:00:00.25Z","latitude":1}}"#,
            #"{"op":"add","values":{"creationDate":"2026-05-01T10:00:00.000125Z","latitude":2}}"#,
            #"{"op":"add","values":{"creationDate":"2026-05-01T10:00:00.5Z","latitude":3}}"#,
        ]
        let ordered = runApp(
            Locations.self,
            ["--store", dir.file("fraction.sqlite").path, "--location", "1,2", "--script", try script(fractional, "f.jsonl")])
        #expect(ordered.code == 0, "\(ordered.err)")
        let rows = ordered.lines.suffix(3).map { $0.components(separatedBy: "  ").last?.components(separatedBy: ",").first ?? "" }
        #expect(rows == ["3.0000", "1.0000", "2.0000"], "\(ordered.lines.joined(separator: "\n"))")
    }

    @Test func groceriesListsTheArticlesProductsBySectionAndMovesAcrossSections() throws {
        let store = dir.file("groceries.sqlite").path
        let file = try script([
            #"{"op":"add","values":{"name":"Cherry","price":7}}"#,
            #"{"op":"edit","row":[0,0],"values":{"name":"Donut"}}"#,
        ])
        let result = runApp(GroceryList.self, ["--store", store, "--script", file])
        #expect(result.code == 0, "\(result.err)")
        // An empty store gets the article's thirty products; Banana 185 then moves to the Donut section.
        #expect(
            Array(result.lines.prefix(8)) == [
                "will change content", "section insert at 2: Cherry", "object insert at [2, 0]: Cherry  7", "did change content",
                "will change content", "object move at [0, 0] to [3, 1]: Donut  185", "did change content", "rows: 31",
            ], "\(result.lines.prefix(10).joined(separator: "\n"))")
        #expect(result.lines.contains("[3, 0]: Donut  156") && result.lines.contains("[3, 1]: Donut  185"))

        // The sections and their index titles, as the terminal and web tables show them.
        let container = NSPersistentContainer(name: "Groceries", managedObjectModel: try GroceryList.model())
        container.persistentStoreDescriptions = [NSPersistentStoreDescription(url: URL(fileURLWithPath: store))]
        try container.loadPersistentStores()
        let request = NSFetchRequest<NSManagedObject>(entityName: "Products")
        request.sortDescriptors = GroceryList.spec.sortDescriptors
        let controller = NSFetchedResultsController(
            fetchRequest: request, managedObjectContext: container.viewContext, sectionNameKeyPath: "name", cacheName: nil)
        let table = try LiveTable(controller: controller, cell: GroceryList.spec.cell)
        #expect(table.sections.map(\.name) == ["Banana", "Cheddar Cheese", "Cherry", "Donut", "Flour", "Milk", "Parmesan Cheese", "Soda"])
        #expect(controller.sectionIndexTitles == ["B", "C", "D", "F", "M", "P", "S"])
        #expect(runApp(GroceryList.self, ["--store", store, "--terminal"]).err.contains("--terminal needs a terminal"))
        // An empty script (here /dev/null, read through a file handle as a pipe would be) prints the table.
        let empty = runApp(GroceryList.self, ["--store", store, "--script", "/dev/null"])
        #expect(empty.code == 0 && empty.lines.first == "rows: 31", "\(empty.err)")
    }
}

/// The RSS reader: feeds parsed and saved by an `Operation` in a background context, merged into the table's context.
@Suite struct RSSReaderTests {
    let dir = TemporaryDirectory()
    static let feeds = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Examples/data/feeds")
        .standardizedFileURL

    func importing(_ names: [String]) throws -> String {
        let url = dir.file("feeds.jsonl")
        let lines = names.map { #"{"op":"import","feed":"\#(Self.feeds.appendingPathComponent($0).path)"}"# }
        try Data(lines.joined(separator: "\n").utf8).write(to: url)
        return url.path
    }

    @Test func importsInsertThenUpdateMoveAndInsertAndTheSameFeedChangesNothing() throws {
        let store = dir.file("rss.sqlite").path
        let file = try importing(["station-news.xml", "station-news.xml", "station-news-updated.xml", "station-log.atom"])
        let result = runApp(RSSReader.self, ["--store", store, "--script", file])
        #expect(result.code == 0, "\(result.err)")
        #expect(
            result.lines == [
                "will change content",
                "object insert at [0, 0]: 2026-03-20 14:15  Anemometer replaced",
                "object insert at [0, 1]: 2026-03-10 06:30  First frost",
                "object insert at [0, 2]: 2026-03-02 08:00  Rain gauge cleaned",
                "did change content",
                // The same feed again: no batch at all. The updated feed: a new item, a redated one, a retitled one.
                "will change content",
                "object insert at [0, 1]: 2026-03-25 11:00  Solar panel wiped",
                "object move at [0, 2] to [0, 0]: 2026-03-28 08:00  Rain gauge cleaned",
                "object update at [0, 1]: 2026-03-10 06:30  First frost of the year",
                "did change content",
                // Atom: entries by id, published (else updated) dates.
                "will change content",
                "object insert at [0, 0]: 2026-04-03 09:00  Firmware 2.1",
                "object insert at [0, 1]: 2026-04-01 10:00  Battery swapped",
                "did change content",
                "rows: 6",
                "[0, 0]: 2026-04-03 09:00  Firmware 2.1", "[0, 1]: 2026-04-01 10:00  Battery swapped",
                "[0, 2]: 2026-03-28 08:00  Rain gauge cleaned", "[0, 3]: 2026-03-25 11:00  Solar panel wiped",
                "[0, 4]: 2026-03-20 14:15  Anemometer replaced", "[0, 5]: 2026-03-10 06:30  First frost of the year",
            ], "\(result.lines.joined(separator: "\n"))")
    }

    @Test func aMalformedFeedIsNamedAndNothingIsSaved() throws {
        let store = dir.file("rss.sqlite").path
        #expect(runApp(RSSReader.self, ["--store", store, "--feed", Self.feeds.appendingPathComponent("station-news.xml").path]).code == 0)
        let result = runApp(RSSReader.self, ["--store", store, "--script", try importing(["broken.xml"])])
        #expect(
            result.code == 1 && result.err.contains("line 1: The feed") && result.err.contains("is not well-formed XML"), "\(result.err)")
        let notXML = dir.file("notes.txt")
        try Data("just some notes".utf8).write(to: notXML)
        let second = runApp(RSSReader.self, ["--store", store, "--feed", notXML.path])
        #expect(second.code == 1 && second.err.contains("is not well-formed XML"), "\(second.err)")
        let after = runApp(RSSReader.self, ["--store", store])
        #expect(after.lines.first == "rows: 3", "\(after.lines)")
    }
}
