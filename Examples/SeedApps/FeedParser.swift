import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// One item of a feed, as the reader stores it.
public struct FeedEntry: Equatable, Sendable {
    /// The item's title.
    public var title: String
    /// Its link.
    public var link: String
    /// What identifies it across fetches of the feed (RSS `guid`, Atom `id`; else the link).
    public var guid: String
    /// When it was published (RSS `pubDate`, Atom `published`, else `updated`).
    public var pubDate: Date
    /// Its summary (RSS `description`, Atom `summary` or `content`).
    public var summary: String
}

/// Reads an RSS 2.0 or Atom feed with Foundation's `XMLParser`.
///
/// For example:
/// ```swift
/// let entries = try FeedParser.parse(Data(contentsOf: URL(fileURLWithPath: "news.xml")), source: "news.xml")
/// ```
public final class FeedParser: NSObject, XMLParserDelegate {
    private var entries: [FeedEntry] = []
    private var fields: [String: String]?
    private var text = ""
    private var badDate: String?
    /// Open elements, to catch a closing tag that does not match (libxml2 on Linux may recover from it silently).
    private var open: [String] = []
    private var mismatch: String?

    /// The feed's items, in document order.
    ///
    /// - Throws: `SeedFailure` naming `source` and the line for XML that is not well-formed, and for an item without
    ///   a date the reader can read.
    public static func parse(_ data: Data, source: String) throws -> [FeedEntry] {
        let delegate = FeedParser()
        let parser = XMLParser(data: data)
        parser.delegate = delegate
        guard parser.parse() || delegate.mismatch != nil else {
            let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "unknown error"
            throw SeedFailure(
                "The feed \(source) is not well-formed XML (line \(parser.lineNumber), column \(parser.columnNumber): \(reason)); nothing was saved."
            )
        }
        if let mismatch = delegate.mismatch {
            throw SeedFailure("The feed \(source) is not well-formed XML (\(mismatch)); nothing was saved.")
        }
        if let badDate = delegate.badDate {
            throw SeedFailure("The feed \(source) has an item whose date cannot be read: \"\(badDate)\"; nothing was saved.")
        }
        return delegate.entries
    }

    /// Starts an item or a field.
    public func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        open.append(elementName)
        switch elementName {
        case "item", "entry": fields = [:]
        case "link" where fields != nil && attributes["href"] != nil:
            // Atom: the alternate link (or the first) is in an attribute.
            if attributes["rel"] == nil || attributes["rel"] == "alternate", fields?["link"] == nil { fields?["link"] = attributes["href"] }
        default: break
        }
        text = ""
    }

    /// Records an error the parser recovered from: the feed is still not well-formed.
    public func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        mismatch = mismatch ?? "line \(parser.lineNumber), column \(parser.columnNumber): \(parseError.localizedDescription)"
    }

    /// Collects text.
    public func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    /// Collects CDATA as text.
    public func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) { text += String(decoding: CDATABlock, as: UTF8.self) }

    /// Ends a field or an item.
    public func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        guard open.popLast() == elementName else {
            mismatch = mismatch ?? "line \(parser.lineNumber): </\(elementName)> closes no open <\(elementName)>"
            parser.abortParsing()
            return
        }
        guard var item = fields else { return }
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        switch elementName {
        case "item", "entry":
            let dateText = item["pubDate"] ?? item["published"] ?? item["updated"] ?? ""
            guard let date = Self.date(dateText) else {
                badDate = badDate ?? dateText
                fields = nil
                return
            }
            let link = item["link"] ?? ""
            entries.append(
                FeedEntry(
                    title: item["title"] ?? "", link: link, guid: item["guid"] ?? item["id"] ?? link, pubDate: date,
                    summary: item["description"] ?? item["summary"] ?? item["content"] ?? ""))
            fields = nil
            return
        case "link" where !value.isEmpty: item["link"] = value
        case "title", "guid", "id", "pubDate", "published", "updated", "description", "summary", "content": item[elementName] = value
        default: break
        }
        fields = item
    }

    /// RFC 822 dates (RSS) and ISO 8601 ones (Atom).
    static func date(_ text: String) -> Date? {
        if let date = ISO8601DateFormatter().date(from: text) { return date }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        for format in [
            "EEE, dd MMM yyyy HH:mm:ss Z", "EEE, dd MMM yyyy HH:mm:ss zzz", "dd MMM yyyy HH:mm:ss Z", "EEE, dd MMM yyyy HH:mm Z",
        ] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
