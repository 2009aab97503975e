import ArgumentParser
import Foundation
import OpenCoreData
import OpenCoreDataLiveTable

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The RSS reader (seed 000): feed items, newest first; an `Operation` parses a feed and saves it in a background
/// context, and the main context merges the save, which the table follows.
///
/// For example:
/// ```swift
/// let code = SeedSession.main(RSSReader.self, ["--feed", "news.xml"], output: { print($0) }, errors: { print($0) })
/// ```
public struct RSSReader: SeedCommand {
    /// The command's name and summary.
    public static let configuration = CommandConfiguration(
        commandName: "rss-reader", abstract: "Feed items, newest first, imported in the background into a live table.")

    @OptionGroup var options: SeedOptions

    @Option(help: ArgumentHelp("A feed to import first: an RSS 2.0 or Atom file, or an http(s) URL.", valueName: "url-or-file"))
    var feed: String?

    /// A command to be filled in by the argument parser.
    public init() {}

    /// The app: `FeedItem` (title, link, guid, pubDate, summary), newest first, 20 rows a batch, cache "Root"; the
    /// script's `{"op":"import","feed":PATH}` imports a feed.
    public static var spec: SeedAppSpec {
        SeedAppSpec(
            name: "RSSReader",
            model: {
                try NSManagedObjectModel {
                    Entity("FeedItem") {
                        Attribute("title", .string)
                        Attribute("link", .string)
                        Attribute("guid", .string, optional: false)
                        Attribute("pubDate", .date, optional: false)
                        Attribute("summary", .string)
                    }
                }
            },
            entityName: "FeedItem",
            sortDescriptors: [FetchSortDescriptor(key: "pubDate", ascending: false)],
            cacheName: "Root",
            fetchBatchSize: 20,
            cell: { item in
                let date = (item.value(forKey: "pubDate") as? Date).map(minuteFormatter.string(from:)) ?? "?"
                return "\(date)  \(item.value(forKey: "title") as? String ?? "")"
            },
            operations: [
                "import": { fields, script in
                    guard let feed = fields["feed"] as? String else { throw SeedFailure("\"feed\" (a path or URL) is missing") }
                    try importFeed(feed, container: script.container, script: script)
                }
            ])
    }

    /// Parses `feed` and saves its items in a background context on an `OperationQueue`, merging the save into the
    /// table's context: new items are inserted, known ones (by guid) updated where they changed.
    static func importFeed(_ feed: String, container: NSPersistentContainer, script: LiveTableScript) throws {
        let operation = FeedImportOperation(feed: feed, container: container)
        let queue = OperationQueue()
        try script.mergingBackgroundSaves { queue.addOperations([operation], waitUntilFinished: true) }
        if let failure = operation.failure { throw failure }
    }

    /// Runs the app.
    public func run(output: @escaping (String) -> Void) throws {
        var spec = Self.spec
        if let feed { spec.prepare = { script in try Self.importFeed(feed, container: script.container, script: script) } }
        try SeedSession.run(spec, options: options, output: output)
    }
}

/// The seed's background import: parse, then insert or update by guid in a context of its own, and save once.
final class FeedImportOperation: Operation, @unchecked Sendable {
    let feed: String
    let container: NSPersistentContainer
    /// Why the import failed, if it did (nothing was saved then).
    private(set) var failure: (any Error)?

    init(feed: String, container: NSPersistentContainer) {
        self.feed = feed
        self.container = container
    }

    override func main() {
        do {
            let entries = try FeedParser.parse(try Self.read(feed), source: feed)
            let context = container.newBackgroundContext()
            try context.performAndWait {
                let request = NSFetchRequest<NSManagedObject>(entityName: "FeedItem")
                request.predicate = try FetchPredicate(format: "guid IN %@", entries.map(\.guid))
                var known: [String: NSManagedObject] = [:]
                for item in try context.fetch(request) { known[item.value(forKey: "guid") as? String ?? ""] = item }
                for entry in entries {
                    let item = try known[entry.guid] ?? NSEntityDescription.checkedInsertNewObject(forEntityName: "FeedItem", into: context)
                    known[entry.guid] = item
                    let values: [String: Any] = [
                        "title": entry.title, "link": entry.link, "guid": entry.guid, "pubDate": entry.pubDate, "summary": entry.summary,
                    ]
                    // Only what changed is set, so that importing the same feed again changes nothing.
                    for (key, value) in values where !Self.same(item.value(forKey: key), value) {
                        try item.setCheckedValue(value, forKey: key)
                    }
                }
                if context.hasChanges { try context.save() }
            }
        } catch {
            failure = error
        }
    }

    private static func same(_ a: Any?, _ b: Any) -> Bool {
        if let a = a as? String, let b = b as? String { return a == b }
        if let a = a as? Date, let b = b as? Date { return a == b }
        return false
    }

    private static func read(_ feed: String) throws -> Data {
        if let url = URL(string: feed), let scheme = url.scheme, ["http", "https", "file"].contains(scheme) {
            do { return try Data(contentsOf: url) } catch {
                throw SeedFailure("Cannot read the feed \(feed): \(error.localizedDescription)")
            }
        }
        guard let data = FileManager.default.contents(atPath: feed) else { throw SeedFailure("Cannot read the feed \(feed).") }
        return data
    }
}

/// Times as `2026-11-23 14:05`, in UTC.
var minuteFormatter: DateFormatter { utcFormatter("yyyy-MM-dd HH:mm") }
