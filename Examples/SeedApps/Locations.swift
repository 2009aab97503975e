import ArgumentParser
import Foundation
import OpenCoreData

/// Locations (seed 004): events at the place they were added, newest first.
///
/// Adding and deleting drive the table through the controller's delegate. There is no CoreLocation on Linux: the
/// current location is `--location`.
///
/// For example:
/// ```swift
/// let code = SeedSession.main(Locations.self, ["--location", "48.8584,2.2945"], output: { print($0) }, errors: { print($0) })
/// ```
public struct Locations: SeedCommand {
    /// The command's name and summary.
    public static let configuration = CommandConfiguration(
        commandName: "locations", abstract: "Events where they were added, newest first, in a live table.")

    @OptionGroup var options: SeedOptions

    // Unconditional: a southern or western location starts with a minus (`--location -33.86,151.21`).
    @Option(parsing: .unconditional, help: ArgumentHelp("The current location, for events added without one.", valueName: "lat,lon"))
    var location: String = "0,0"

    /// A command to be filled in by the argument parser.
    public init() {}

    /// The app: `Event` (creationDate, latitude, longitude), sorted by creation date descending.
    public static func spec(location: (Double, Double)) -> SeedAppSpec {
        SeedAppSpec(
            name: "Locations",
            model: {
                try NSManagedObjectModel {
                    Entity("Event") {
                        Attribute("creationDate", .date, optional: false)
                        Attribute("latitude", .double, default: 0.0)
                        Attribute("longitude", .double, default: 0.0)
                    }
                }
            },
            entityName: "Event",
            sortDescriptors: [FetchSortDescriptor(key: "creationDate", ascending: false)],
            cell: { event in
                let date = (event.value(forKey: "creationDate") as? Date).map(timeFormatter.string(from:)) ?? "?"
                let latitude = event.value(forKey: "latitude") as? Double ?? 0
                let longitude = event.value(forKey: "longitude") as? Double ?? 0
                return "\(date)  \(String(format: "%.4f, %.4f", latitude, longitude))"
            },
            defaults: { values in
                var values = values
                if values["creationDate"] == nil { values["creationDate"] = Date() }  // now, to the fraction of a second
                if values["latitude"] == nil { values["latitude"] = location.0 }
                if values["longitude"] == nil { values["longitude"] = location.1 }
                return values
            })
    }

    /// Runs the app.
    public func run(output: @escaping (String) -> Void) throws {
        let parts = location.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, (-90...90).contains(parts[0]), (-180...180).contains(parts[1]) else {
            throw ValidationError("--location takes LAT,LON in degrees, as in 48.8584,2.2945; got \(location).")
        }
        try SeedSession.run(Self.spec(location: (parts[0], parts[1])), options: options, output: output)
    }
}

/// Times as `2026-11-23 14:05:09`, in UTC.
var timeFormatter: DateFormatter { utcFormatter("yyyy-MM-dd HH:mm:ss") }
