import ArgumentParser
import Foundation
import OpenCoreData

/// The options of a command that runs a fetched results controller (`track`, `watch`): what it fetches and how
/// objects are named in its output.
struct ControllerOptions: ParsableArguments {
    @Option(name: .long, help: "The entity the controller fetches.")
    var entity: String

    @Option(name: .customLong("ref-key"), help: "The attribute whose value names an object in the output (and a script).")
    var refKey: String

    @Option(name: .long, help: ArgumentHelp("An NSPredicate-format filter.", valueName: "format"))
    var predicate: String?

    @Option(name: .long, help: ArgumentHelp("A sort key, repeatable: KEY[:desc][:ci|:localized|:standard].", valueName: "key"))
    var sort: [String] = []

    @Option(name: .customLong("section-key"), help: "The section key path.")
    var sectionKey: String?

    @Option(name: .long, parsing: .unconditional, help: "The fetch limit (0 or more; 0 means none).")
    var limit: Int?

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more (0 means no limit); got \(limit).") }
        if sort.isEmpty { throw ValidationError("A fetched results controller sorts its results: give at least one --sort key.") }
        for key in sort { _ = try FetchCommand.sortDescriptor(key) }
    }

    /// The controller's fetch request.
    func request() throws -> NSFetchRequest<NSManagedObject> {
        let request = NSFetchRequest<NSManagedObject>(entityName: entity)
        request.predicate = try predicate.map { try FetchPredicate(format: $0) }
        request.sortDescriptors = try sort.map(FetchCommand.sortDescriptor)
        request.fetchLimit = limit ?? 0
        return request
    }
}
