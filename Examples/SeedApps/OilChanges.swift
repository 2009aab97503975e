import ArgumentParser
import Foundation
import OpenCoreData

/// Oil Changes (seed 001): entries of the date, the odometer's miles and a note, newest first; entries added in a
/// background context are merged into the main context, which the table follows.
///
/// For example:
/// ```swift
/// let code = SeedSession.main(OilChanges.self, ["--script", "session.jsonl"], output: { print($0) }, errors: { print($0) })
/// ```
public struct OilChanges: SeedCommand {
    /// The command's name and summary.
    public static let configuration = CommandConfiguration(
        commandName: "oil-changes", abstract: "Oil changes, newest first, in a live table over a fetched results controller.")

    @OptionGroup var options: SeedOptions

    /// A command to be filled in by the argument parser.
    public init() {}

    /// The app: one entity, `Entry` (date, miles, log), sorted by date descending.
    public static var spec: SeedAppSpec {
        SeedAppSpec(
            name: "OilChanges",
            model: {
                try NSManagedObjectModel {
                    Entity("Entry") {
                        Attribute("date", .date, optional: false)
                        Attribute("miles", .integer32, default: 0)
                        Attribute("log", .string)
                    }
                }
            },
            entityName: "Entry",
            sortDescriptors: [FetchSortDescriptor(key: "date", ascending: false)],
            cell: { entry in
                let date = (entry.value(forKey: "date") as? Date).map(dayFormatter.string(from:)) ?? "?"
                return "\(date)  \(entry.value(forKey: "miles") as? Int ?? 0) mi  \(entry.value(forKey: "log") as? String ?? "")"
            },
            defaults: { values in
                var values = values
                if values["date"] == nil { values["date"] = Date() }  // now, to the fraction of a second
                return values
            },
            newObjectValues: { ["log": "Oil change"] })
    }

    /// Runs the app.
    public func run(output: @escaping (String) -> Void) throws {
        try SeedSession.run(Self.spec, options: options, output: output)
    }
}

/// Days as `2026-11-23`, in UTC, so that a script prints the same everywhere.
var dayFormatter: DateFormatter { utcFormatter("yyyy-MM-dd") }
