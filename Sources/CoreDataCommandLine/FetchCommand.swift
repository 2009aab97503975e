import ArgumentParser
import Foundation
import OpenCoreData

/// `coredata fetch`: run a fetch request against a store (never writes to it).
struct FetchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Run a fetch request and print its results as JSON or a table. Nothing is written to the store.")

    enum ResultKind: String, ExpressibleByArgument, CaseIterable {
        case objects, ids, dictionaries, count
    }

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case json, table
    }

    @OptionGroup var storeOptions: StoreOptions

    @Option(name: .long, help: "The entity to fetch.")
    var entity: String

    @Option(name: .long, help: ArgumentHelp("An NSPredicate-format filter.", valueName: "format"))
    var predicate: String?

    @Option(
        name: .long,
        help: ArgumentHelp("A sort key, repeatable: KEY[:desc][:ci|:localized|:standard].", valueName: "key"))
    var sort: [String] = []

    @Option(name: .long, parsing: .unconditional, help: "The most results to return (0 or more; 0 means no limit).")
    var limit: Int?

    @Option(name: .long, parsing: .unconditional, help: "How many results to skip (0 or more).")
    var offset: Int?

    @Option(name: .long, help: "What to return: objects, ids, dictionaries or count.")
    var result: ResultKind = .objects

    @Option(
        name: .long,
        help: ArgumentHelp(
            "For objects: the attributes and relationships to print; for dictionaries: the properties or key paths to fetch. Comma-separated.",
            valueName: "a,b"))
    var properties: String?

    @Flag(name: .long, help: "Leave out objects of subentities.")
    var noSubentities = false

    @Option(name: .long, help: "Output format: json or table.")
    var format: Format = .json

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more (0 means no limit); got \(limit).") }
        if let offset, offset < 0 { throw ValidationError("--offset must be 0 or more; got \(offset).") }
        if properties != nil, result != .dictionaries, result != .objects {
            throw ValidationError("--properties goes with --result objects or dictionaries.")
        }
        for key in sort { _ = try Self.sortDescriptor(key) }
    }

    /// Parses `KEY[:desc][:ci|:localized|:standard]`.
    static func sortDescriptor(_ text: String) throws -> FetchSortDescriptor {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard let key = parts.first, !key.isEmpty else { throw ValidationError("--sort needs a key, as in --sort name:desc.") }
        var descriptor = FetchSortDescriptor(key: key)
        for modifier in parts.dropFirst() {
            switch modifier {
            case "desc": descriptor.ascending = false
            case "asc": descriptor.ascending = true
            case "ci": descriptor.comparison = .caseInsensitive
            case "localized": descriptor.comparison = .localized
            case "standard": descriptor.comparison = .localizedStandard
            default: throw ValidationError("Unknown sort modifier '\(modifier)' in --sort \(text); use desc, ci, localized or standard.")
            }
        }
        return descriptor
    }

    func run() throws {
        let predicate = try self.predicate.map { try FetchPredicate(format: $0) }
        let (container, context) = try storeOptions.open(readOnly: true)
        _ = container
        let entity = try context.entity(named: self.entity)
        let sorts = try sort.map(Self.sortDescriptor)
        let console = ToolConsole.current
        try context.performAndWait {
            switch result {
            case .count:
                let request = makeRequest(NSNumber.self, predicate, sorts)
                let count = try context.count(for: request)
                console.out(format == .json ? String(count) : table(["count"], [[String(count)]]))
            case .ids:
                let request = makeRequest(NSManagedObjectID.self, predicate, sorts)
                request.resultType = .managedObjectIDResultType
                let ids = try context.fetch(request).map { $0.uriRepresentation().absoluteString }
                console.out(format == .json ? try JSONValues.encode(ids) : table(["id"], ids.map { [$0] }))
            case .dictionaries:
                let request = makeRequest(NSDictionary.self, predicate, sorts)
                request.resultType = .dictionaryResultType
                let keys = properties?.split(separator: ",", omittingEmptySubsequences: false).map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                if let keys, keys.contains(where: \.isEmpty) {
                    throw ValidationError("--properties needs property names separated by commas, as in --properties name,price.")
                }
                request.propertiesToFetch = keys
                let columns = keys ?? entity.allAttributes.filter { !$0.isTransient }.map(\.name)
                let rows: [[String: Any]] = try context.fetch(request).map { dict in
                    var row: [String: Any] = [:]
                    for key in columns {
                        let value = dict[key]
                        let type = attributeType(key, in: entity)
                        row[key] = JSONValues.jsonValue(value is NSNull ? nil : value, type: type)
                    }
                    return row
                }
                console.out(
                    format == .json
                        ? try JSONValues.encode(rows) : table(columns, rows.map { r in columns.map { JSONValues.cell(r[$0] ?? NSNull()) } })
                )
            case .objects:
                let request = makeRequest(NSManagedObject.self, predicate, sorts)
                let objects = try context.fetch(request)
                let properties = try objectProperties(of: entity)
                var rows: [[String: Any]] = []
                var cells: [[String]] = []
                for object in objects {
                    var row: [String: Any] = ["entity": object.entity.name, "objectID": object.objectID.uriRepresentation().absoluteString]
                    var line = [object.entity.name]
                    for name in properties {
                        // A property of a subentity: absent from the other entities' objects.
                        guard let property = object.entity.propertiesByName[name] else {
                            line.append("")
                            continue
                        }
                        if let relationship = property as? NSRelationshipDescription {
                            let destinations = try Self.destinations(of: object, relationship)
                            row[name] = relationship.isToMany ? destinations.map(Self.uri) : destinations.first.map(Self.uri) ?? NSNull()
                            line.append(
                                relationship.isToMany ? String(destinations.count) : destinations.first.map(Self.shortName) ?? "nil")
                        } else if let attribute = property as? NSAttributeDescription {
                            let value = try objectValue(object, attribute, console: console)
                            row[name] = value
                            line.append(JSONValues.cell(value))
                        }
                    }
                    rows.append(row)
                    cells.append(line)
                }
                console.out(format == .json ? try JSONValues.encode(rows) : table(["entity"] + properties, cells))
            }
        }
    }

    /// The properties `--result objects` prints: `--properties` (attributes or relationships of the entity or its
    /// subentities), else every stored attribute and relationship, in the model's order.
    private func objectProperties(of entity: NSEntityDescription) throws -> [String] {
        let family = noSubentities ? [entity] : entity.selfAndDescendants
        var names: [String] = []
        for candidate in family {
            for property in candidate.allProperties where !names.contains(property.name) {
                guard !property.isTransient, property is NSAttributeDescription || property is NSRelationshipDescription else { continue }
                names.append(property.name)
            }
        }
        guard let properties else { return names }
        let asked = properties.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        if asked.contains(where: \.isEmpty) {
            throw ValidationError("--properties needs property names separated by commas, as in --properties name,price.")
        }
        if let unknown = asked.first(where: { !names.contains($0) }) {
            throw ToolFailure(
                "\(entity.name) has no attribute or relationship '\(unknown)' (it has: \(names.joined(separator: ", "))).")
        }
        return asked
    }

    /// A relationship's destinations: an ordered to-many in its order, an unordered one by primary key, a to-one as
    /// zero or one object.
    static func destinations(of object: NSManagedObject, _ relationship: NSRelationshipDescription) throws -> [NSManagedObject] {
        switch try object.checkedValue(forKey: relationship.name) {
        case let ordered as NSOrderedSet: return ordered.array.compactMap { $0 as? NSManagedObject }
        case let set as Set<NSManagedObject>:
            return set.sorted { ($0.objectID.primaryKey, $0.entity.name) < ($1.objectID.primaryKey, $1.entity.name) }
        case let one as NSManagedObject: return [one]
        default: return []
        }
    }

    static func uri(_ object: NSManagedObject) -> String { object.objectID.uriRepresentation().absoluteString }

    /// `Entity/pN`: the destination's entity and primary key, as a table cell.
    static func shortName(_ object: NSManagedObject) -> String { "\(object.entity.name)/p\(object.objectID.primaryKey)" }

    /// An attribute's value for output; a transformable value no registered transformer reads is printed as its
    /// stored bytes in base64, with a warning.
    private func objectValue(_ object: NSManagedObject, _ attribute: NSAttributeDescription, console: ToolConsole) throws -> Any {
        do {
            return JSONValues.jsonValue(try object.checkedValue(forKey: attribute.name), type: attribute.attributeType)
        } catch let error as CoreDataError where error.code == .valueTransformation {
            guard let bytes = try object._storedTransformableData(forKey: attribute.name) else { throw error }
            console.err("coredata: warning: \(error.message) Printed as the stored bytes in base64.")
            return bytes.base64EncodedString()
        }
    }

    private func attributeType(_ keyPath: String, in entity: NSEntityDescription) -> NSAttributeType? {
        (try? entity.resolveKeyPath(keyPath))?.attribute?.attributeType
    }

    private func makeRequest<T: NSFetchRequestResult>(_: T.Type, _ predicate: FetchPredicate?, _ sorts: [FetchSortDescriptor])
        -> NSFetchRequest<T>
    {
        let request = NSFetchRequest<T>(entityName: entity)
        request.predicate = predicate
        request.sortDescriptors = sorts
        request.fetchLimit = limit ?? 0
        request.fetchOffset = offset ?? 0
        request.includesSubentities = !noSubentities
        return request
    }

    /// A plain text table with a header row.
    ///
    /// Control characters in the data are shown escaped (`\n`, `\u{1B}`), so
    /// that a stored value cannot move the cursor, change colours or otherwise drive the terminal.
    private func table(_ columns: [String], _ rawRows: [[String]]) -> String {
        let rows = rawRows.map { $0.map(Self.printable) }
        var widths = columns.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0.0.padding(toLength: $0.1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces)
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        return ([line(columns), rule] + rows.map(line)).joined(separator: "\n")
    }

    /// The text with every control character (C0, DEL, C1) and line or paragraph separator escaped.
    static func printable(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\\": result += "\\\\"
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029:
                result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
