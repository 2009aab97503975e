import Foundation

extension NSManagedObjectModel {
    /// Loads the model an iOS app ships: an `.xcdatamodeld` bundle (its current version, as `.xccurrentversion` names
    /// it), a single `.xcdatamodel` folder with its `contents` XML, or a compiled `.mom` / `.momd` (what a built app
    /// contains).
    ///
    /// For example:
    /// ```swift
    /// let model = try NSManagedObjectModel(contentsOf: URL(fileURLWithPath: "Groceries.xcdatamodeld"))
    /// ```
    /// - Throws: `CoreDataError` with code `.unsupportedModelFile` (wrong kind of file, unreadable or malformed XML)
    ///   or `.invalidModel` (unknown attribute type, dangling relationship, …), naming the file, line and element.
    @_disfavoredOverload  // (`OpenCoreDataCompatibility` adds Apple's failable form)
    public convenience init(contentsOf url: URL) throws {
        self.init()
        try load(contentsOf: url)
    }

    /// Fills an empty model from a model file (the body of `init(contentsOf:)`, for the compatibility module's
    /// failable form).
    package func load(contentsOf url: URL) throws {
        versionBundleURL = Self.bundle(containing: url)
        if ["mom", "momd"].contains(url.pathExtension.lowercased()) { return try load(compiled: url) }
        var loader = XcodeModelLoader()
        try loader.load(url)
        for entity in loader.entities { addEntity(entity) }
        versionIdentifiers.formUnion(loader.versionIdentifiers)
        for template in loader.fetchedPropertyRequests where entitiesByName[template.description.entityName] == nil {
            throw CoreDataError(
                .invalidModel,
                "\(template.place): the fetched property fetches entity '\(template.description.entityName)', which the model does not have.",
                entityName: template.description.entityName)
        }
        for template in loader.templates {
            guard entitiesByName[template.description.entityName] != nil else {
                throw CoreDataError(
                    .invalidModel,
                    "\(template.place): the fetch request '\(template.description.name)' fetches entity '\(template.description.entityName)', which the model does not have.",
                    entityName: template.description.entityName)
            }
            fetchRequestTemplateDescriptions[template.description.name] = template.description
        }
        for configuration in loader.configurations {
            if let missing = configuration.entities.first(where: { entitiesByName[$0] == nil }) {
                throw CoreDataError(
                    .invalidModel, "Configuration '\(configuration.name)' names entity '\(missing)', which the model does not have.",
                    entityName: missing)
            }
            setEntityNames(configuration.entities, forConfigurationName: configuration.name)
        }
        acceptsMismatchedInverses = true
        try validate()
    }
}

/// Reads Xcode model files into entity descriptions (not yet added to a model).
struct XcodeModelLoader {
    private(set) var entities: [NSEntityDescription] = []
    private(set) var versionIdentifiers: Set<String> = []
    /// The model's stored fetch requests, with where each was read (checked once the entities are known).
    private(set) var templates: [(description: FetchRequestTemplateDescription, place: String)] = []
    /// The model's composites (`<composite name=…>` and their attributes), by name.
    private var composites: [String: XMLElementNode] = [:]
    /// The model's configurations and their member entities' names.
    private(set) var configurations: [(name: String, entities: [String])] = []
    /// The fetch requests of fetched properties, with where each was read (their entities are checked as templates').
    private(set) var fetchedPropertyRequests: [(description: FetchRequestTemplateDescription, place: String)] = []

    mutating func load(_ url: URL) throws {
        let ext = url.pathExtension.lowercased()
        switch ext {
        case "xcdatamodeld": try load(xcdatamodel: try currentVersion(in: url))
        case "xcdatamodel": try load(xcdatamodel: url)
        default:
            throw CoreDataError(
                .unsupportedModelFile,
                "\(url.lastPathComponent) is not a Core Data model: expected a .xcdatamodeld bundle, a .xcdatamodel folder, or a compiled .mom or .momd."
            )
        }
    }

    private func isDirectory(_ url: URL) -> Bool {
        var isDir: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDir) && isDir.boolValue
    }

    /// The `.xcdatamodel` inside a bundle that `.xccurrentversion` names (or the only one, when there is no such file).
    func currentVersion(in bundle: URL) throws -> URL {
        guard isDirectory(bundle) else {
            throw CoreDataError(.unsupportedModelFile, "\(bundle.path): no such model bundle (expected a folder).")
        }
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: bundle.path)) ?? [])
            .filter { $0.hasSuffix(".xcdatamodel") }.sorted()
        let marker = bundle.appendingPathComponent(".xccurrentversion")
        if let data = FileManager.default.contents(atPath: marker.path) {
            let plist: Any
            do {
                plist = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
            } catch {
                throw CoreDataError(
                    .unsupportedModelFile, "\(marker.path) is not a readable property list: \(error.localizedDescription)")
            }
            guard let dict = plist as? [String: Any] else {
                throw CoreDataError(.unsupportedModelFile, "\(marker.path) is not a dictionary naming the current model version.")
            }
            guard let name = dict["_XCCurrentVersionName"] as? String else {
                // Xcode opens a bundle whose marker names no version (an empty dictionary): its first version, the
                // one the others were copied from, is the one without a suffix — the shortest name.
                guard let original = versions.min(by: { ($0.count, $0) < ($1.count, $1) }) else {
                    throw CoreDataError(.unsupportedModelFile, "\(bundle.path) contains no .xcdatamodel version.")
                }
                return bundle.appendingPathComponent(original)
            }
            guard versions.contains(name) else {
                throw CoreDataError(
                    .unsupportedModelFile,
                    "\(marker.path) names current version '\(name)', which is not in the bundle (found: \(versions.joined(separator: ", ")))."
                )
            }
            return bundle.appendingPathComponent(name)
        }
        guard versions.count == 1 else {
            throw CoreDataError(
                .unsupportedModelFile,
                versions.isEmpty
                    ? "\(bundle.path) contains no .xcdatamodel version."
                    : "\(bundle.path) has \(versions.count) versions and no .xccurrentversion file saying which is current.")
        }
        return bundle.appendingPathComponent(versions[0])
    }

    mutating func load(xcdatamodel url: URL) throws {
        let contents = url.appendingPathComponent("contents")
        guard let data = FileManager.default.contents(atPath: contents.path) else {
            throw CoreDataError(
                .unsupportedModelFile,
                isDirectory(url)
                    ? "\(url.lastPathComponent) has no 'contents' file: it was saved by Xcode 3 (the binary 'elements' format), which OpenCoreData does not read; open the model in a current Xcode and save it to convert it."
                    : "\(url.path): no such model folder.")
        }
        let root: XMLElementNode
        do {
            root = try XMLTree.parse(data)
        } catch {
            throw CoreDataError(.unsupportedModelFile, "\(contents.path) is \(error.message)")
        }
        guard root.name == "model" else {
            throw CoreDataError(
                .unsupportedModelFile, "\(contents.path): the root element is <\(root.name)>, expected <model>.")
        }
        let file = "\(url.lastPathComponent)/contents"
        if let modifier = root.attributes["versionHashModifier"] { versionIdentifiers.insert(modifier) }
        // Composites come after the entities that use them: known first.
        for composite in root.children(named: "composite") {
            if let name = composite.attributes["name"] { composites[name] = composite }
        }
        for child in root.children {
            switch child.name {
            case "composite": continue  // read where an attribute uses it
            case "entity": entities.append(try entity(child, file: file))
            case "fetchRequest": templates.append(try template(child, file: file))
            case "configuration":
                if let name = child.attributes["name"], !name.isEmpty {
                    configurations.append((name, child.children(named: "memberEntity").compactMap { $0.attributes["name"] }))
                }
            case "elements": continue  // the diagram's layout
            default:
                throw CoreDataError(
                    .unsupportedModelFile, "\(file) line \(child.line): unexpected element <\(child.name)> in <model>.")
            }
        }
    }

    /// A `<fetchRequest>` of the model: name, entity, predicate string and options as Xcode writes them.
    private func template(_ node: XMLElementNode, file: String) throws -> (description: FetchRequestTemplateDescription, place: String) {
        let place = "\(file) line \(node.line): <fetchRequest name=\"\(node.attributes["name"] ?? "")\">"
        guard let name = node.attributes["name"], !name.isEmpty else {
            throw CoreDataError(.invalidModel, "\(place): the fetch request has no name.")
        }
        guard let entity = node.attributes["entity"], !entity.isEmpty else {
            throw CoreDataError(.invalidModel, "\(place): the fetch request has no entity.")
        }
        func number(_ key: String) throws -> Int {
            guard let text = node.attributes[key] else { return 0 }
            guard let n = Int(text), n >= 0 else {
                throw CoreDataError(.invalidModel, "\(place): \(key) '\(text)' is not a non-negative integer.")
            }
            return n
        }
        let description = FetchRequestTemplateDescription(
            name: name, entityName: entity, predicateFormat: node.attributes["predicateString"], fetchLimit: try number("fetchLimit"),
            fetchBatchSize: try number("fetchBatchSize"), includesPropertyValues: node.attributes["includePropertyValues"] != "NO",
            returnsObjectsAsFaults: node.attributes["returnObjectsAsFaults"] != "NO")
        return (description, place)
    }

    private mutating func entity(_ node: XMLElementNode, file: String) throws -> NSEntityDescription {
        guard let name = node.attributes["name"], !name.isEmpty else {
            throw CoreDataError(.invalidModel, "\(file) line \(node.line): <entity> has no name attribute.")
        }
        let entity = NSEntityDescription(
            name: name, superentityName: node.attributes["parentEntity"], isAbstract: node.attributes["isAbstract"] == "YES")
        entity.managedObjectClassName = node.attributes["representedClassName"]
        entity.renamingIdentifier = node.attributes["elementID"]
        entity.versionHashModifier = node.attributes["versionHashModifier"]
        for child in node.children {
            let place = "\(file) line \(child.line): <\(child.name) name=\"\(child.attributes["name"] ?? "")\"> in entity '\(name)'"
            switch child.name {
            case "attribute":
                let attribute = try attribute(child, place: place)
                entity.addProperty(attribute)
                if child.attributes["indexed"] == "YES", !attribute.isTransient {
                    entity.indexes.append(
                        NSFetchIndexDescription(
                            name: attribute.name, elements: [NSFetchIndexElementDescription(propertyName: attribute.name)]))
                }
            case "relationship": entity.addProperty(try relationship(child, place: place))
            case "userInfo": entity.userInfo = userInfo(child)
            case "fetchedProperty": entity.addProperty(try fetchedProperty(child, place: place, file: file))
            case "uniquenessConstraints":
                entity.uniquenessConstraints = child.children(named: "uniquenessConstraint").map { constraint in
                    constraint.children(named: "constraint").compactMap { $0.attributes["value"] }
                }.filter { !$0.isEmpty }
            case "fetchIndex":
                let elements = child.children(named: "fetchIndexElement").compactMap { element -> NSFetchIndexElementDescription? in
                    // An element on an expression rather than a property is not kept.
                    guard let property = element.attributes["property"] else { return nil }
                    return NSFetchIndexElementDescription(
                        propertyName: property, ascending: element.attributes["order"] != "descending",
                        collationType: element.attributes["type"] == "RTree" ? .rTree : .binary)
                }
                if let indexName = child.attributes["name"], !elements.isEmpty {
                    entity.indexes.append(NSFetchIndexDescription(name: indexName, elements: elements))
                }
            case "compoundIndexes":
                for compound in child.children(named: "compoundIndex") {
                    let names = compound.children(named: "index").compactMap { $0.attributes["value"] }
                    guard !names.isEmpty else { continue }
                    entity.indexes.append(
                        NSFetchIndexDescription(
                            name: names.joined(separator: "_"), elements: names.map { NSFetchIndexElementDescription(propertyName: $0) }))
                }
            default:
                throw CoreDataError(.unsupportedModelFile, "\(place): unexpected element.", entityName: name)
            }
        }
        return entity
    }

    /// A `<fetchedProperty>` with its `<fetchRequest>`; its predicate is parsed when the property is first read (a
    /// model Xcode opens may hold one that does not parse).
    private mutating func fetchedProperty(_ node: XMLElementNode, place: String, file: String) throws -> NSFetchedPropertyDescription {
        guard let name = node.attributes["name"], !name.isEmpty else {
            throw CoreDataError(.invalidModel, "\(place): the fetched property has no name.")
        }
        guard let request = node.children(named: "fetchRequest").first else {
            throw CoreDataError(.invalidModel, "\(place): the fetched property has no <fetchRequest>.", key: name)
        }
        let template = try template(request, file: file)
        fetchedPropertyRequests.append(template)
        let property = NSFetchedPropertyDescription(name: name, fetchRequest: template.description)
        for child in node.children where child.name == "userInfo" { property.userInfo = userInfo(child) }
        property.renamingIdentifier = node.attributes["elementID"]
        return property
    }

    private func userInfo(_ node: XMLElementNode) -> [String: String] {
        var info: [String: String] = [:]
        for entry in node.children(named: "entry") {
            if let key = entry.attributes["key"] { info[key] = entry.attributes["value"] ?? "" }
        }
        return info
    }

    private static let typesByXcodeName: [String: NSAttributeType] = Dictionary(
        uniqueKeysWithValues: NSAttributeType.allCases.map { ($0.xcodeName, $0) })

    private func attribute(_ node: XMLElementNode, place: String, compositeDepth: Int = 0) throws -> NSAttributeDescription {
        guard let name = node.attributes["name"], !name.isEmpty else {
            throw CoreDataError(.invalidModel, "\(place): the attribute has no name.")
        }
        let transient = node.attributes["transient"] == "YES"
        // Xcode writes no attributeType for the Undefined type, which only a transient attribute may have.
        let typeName = node.attributes["attributeType"] ?? "Undefined"
        guard let type = Self.typesByXcodeName[typeName] else {
            throw CoreDataError(
                .invalidModel, "\(place): attributeType '\(typeName)' is not a Core Data attribute type.", key: name)
        }
        if type == .undefinedAttributeType, !transient {
            throw CoreDataError(
                .invalidModel, "\(place): the attribute's type is Undefined, which only a transient attribute may have (as in Xcode).",
                key: name)
        }
        guard type.isSupported || type == .undefinedAttributeType else {
            throw CoreDataError(
                .invalidModel, "\(place): attributeType '\(typeName)' is not supported by OpenCoreData yet.", key: name)
        }
        let attribute = NSAttributeDescription(name: name, type: type, isOptional: node.attributes["optional"] == "YES")
        attribute.isTransient = transient
        attribute.attributeValueClassName = node.attributes["customClassName"]
        attribute.renamingIdentifier = node.attributes["elementID"]
        attribute.versionHashModifier = node.attributes["versionHashModifier"]
        if type == .transformableAttributeType { attribute.valueTransformerName = node.attributes["valueTransformerName"] }
        if node.attributes["derived"] == "YES" { attribute.derivationExpression = node.attributes["derivationExpression"] }
        attribute.allowsExternalBinaryDataStorage = node.attributes["allowsExternalBinaryDataStorage"] == "YES"
        attribute.preservesValueInHistoryOnDeletion = node.attributes["preserveAfterDeletion"] == "YES"
        if type == .dateAttributeType, let interval = node.attributes["defaultDateTimeInterval"] {
            guard let seconds = Double(interval) else {
                throw CoreDataError(.invalidModel, "\(place): defaultDateTimeInterval '\(interval)' is not a number.", key: name)
            }
            attribute.defaultValue = .date(Date(timeIntervalSinceReferenceDate: seconds))
        } else if let text = node.attributes["defaultValueString"] {
            guard let value = Self.parseDefault(text, type: type) else {
                throw CoreDataError(
                    .invalidModel, "\(place): default value '\(text)' is not a valid \(type.xcodeName).", key: name)
            }
            attribute.defaultValue = value
        }
        for child in node.children where child.name == "userInfo" { attribute.userInfo = userInfo(child) }
        if type == .compositeAttributeType { attribute.elements = try compositeElements(node, place: place, depth: compositeDepth) }
        return attribute
    }

    /// The attributes of the composite a composite attribute names (`composite="Name"`), nested composites included.
    private func compositeElements(_ node: XMLElementNode, place: String, depth: Int) throws -> [NSAttributeDescription] {
        guard let name = node.attributes["composite"], let composite = composites[name] else {
            throw CoreDataError(
                .invalidModel,
                "\(place): the composite attribute names composite '\(node.attributes["composite"] ?? "")', which the model does not have.")
        }
        guard depth < 32 else { throw CoreDataError(.invalidModel, "\(place): composite '\(name)' contains itself.") }
        return try composite.children(named: "attribute").map { element in
            let elementPlace = "\(place) (composite '\(name)' line \(element.line))"
            let attribute = try attribute(element, place: elementPlace, compositeDepth: depth + 1)
            return attribute
        }
    }

    static func parseDefault(_ text: String, type: NSAttributeType) -> AttributeValue? {
        let t = text.trimmingCharacters(in: .whitespaces)
        switch type {
        case .integer16AttributeType: return integerDefault(t).flatMap { Int16(exactly: $0) }.map { .integer(Int64($0)) }
        case .integer32AttributeType: return integerDefault(t).flatMap { Int32(exactly: $0) }.map { .integer(Int64($0)) }
        case .integer64AttributeType: return integerDefault(t).map { .integer($0) }
        case .doubleAttributeType, .floatAttributeType: return Double(t).map { .double($0) }
        case .decimalAttributeType: return Decimal(string: t, locale: Locale(identifier: "en_US_POSIX")).map { .decimal($0) }
        case .booleanAttributeType:
            switch t.uppercased() {
            case "YES", "TRUE", "1": return .bool(true)
            case "NO", "FALSE", "0": return .bool(false)
            // Xcode's number field writes a Boolean's default as "0.0" or "1.0"; Core Data reads any number.
            default: return Double(t).flatMap { $0.isFinite ? .bool($0 != 0) : nil }
            }
        case .stringAttributeType: return .string(text)
        case .UUIDAttributeType: return UUID(uuidString: t).map { .uuid($0) }
        case .URIAttributeType: return URL(string: t).map { .uri($0) }
        case .dateAttributeType: return Double(t).map { .date(Date(timeIntervalSinceReferenceDate: $0)) }
        default: return nil
        }
    }

    /// An integer attribute's default as Xcode may write it: a number ("3", "3.0"), or YES/NO (an integer attribute
    /// that was a Boolean before, as in Wire's model), which Core Data's model compiler reads as 1/0.
    private static func integerDefault(_ t: String) -> Int64? {
        if let i = Int64(t) { return i }
        switch t.uppercased() {
        case "YES", "TRUE": return 1
        case "NO", "FALSE": return 0
        default: return Double(t).flatMap { Int64(exactly: $0) }
        }
    }

    private func relationship(_ node: XMLElementNode, place: String) throws -> NSRelationshipDescription {
        guard let name = node.attributes["name"], !name.isEmpty else {
            throw CoreDataError(.invalidModel, "\(place): the relationship has no name.")
        }
        guard let destination = node.attributes["destinationEntity"] else {
            throw CoreDataError(.invalidModel, "\(place): the relationship has no destinationEntity.", key: name)
        }
        let toMany = node.attributes["toMany"] == "YES"
        func count(_ key: String) throws -> Int? {
            guard let text = node.attributes[key] else { return nil }
            guard let n = Int(text), n >= 0 else {
                throw CoreDataError(.invalidModel, "\(place): \(key) '\(text)' is not a non-negative integer.", key: name)
            }
            return n
        }
        let rule: NSDeleteRule
        switch node.attributes["deletionRule"] ?? "Nullify" {
        case "Nullify": rule = .nullifyDeleteRule
        case "Cascade": rule = .cascadeDeleteRule
        case "Deny": rule = .denyDeleteRule
        case "No Action": rule = .noActionDeleteRule
        case let other:
            throw CoreDataError(
                .invalidModel, "\(place): deletionRule '\(other)' is not one of Nullify, Cascade, Deny, No Action.", key: name)
        }
        let relationship = NSRelationshipDescription(
            name: name, destinationEntityName: destination, inverseName: node.attributes["inverseName"], toMany: toMany,
            deleteRule: rule, isOptional: node.attributes["optional"] == "YES", minCount: try count("minCount") ?? 0,
            maxCount: toMany ? (try count("maxCount") ?? 0) : 1, isOrdered: node.attributes["ordered"] == "YES")
        relationship.isTransient = node.attributes["transient"] == "YES"
        relationship.renamingIdentifier = node.attributes["elementID"]
        relationship.versionHashModifier = node.attributes["versionHashModifier"]
        for child in node.children where child.name == "userInfo" { relationship.userInfo = userInfo(child) }
        return relationship
    }
}
