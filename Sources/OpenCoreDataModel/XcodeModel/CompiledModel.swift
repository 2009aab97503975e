import Foundation

extension NSManagedObjectModel {
    /// A model from its compiled form: the `NSKeyedArchiver` archive Xcode's model compiler writes (`.mom`) and Core
    /// Data caches in a store (`Z_MODELCACHE`, after inflating).
    ///
    /// - Throws: `CoreDataError(.unsupportedModelFile)` naming what is damaged or missing, `.invalidModel` for a
    ///   model that does not hold together.
    package convenience init(compiledModel data: Data, source: String) throws {
        self.init()
        try fill(compiled: data, source: source)
    }

    /// Adds the compiled model's entities to this empty model, and validates it.
    private func fill(compiled data: Data, source: String) throws {
        do {
            let reader = try CompiledModelReader(archive: KeyedArchive(data: data), source: source)
            for entity in try reader.entities() { addEntity(entity) }
            versionIdentifiers = try reader.versionIdentifiers()
            for template in try reader.fetchRequestTemplates() where entitiesByName[template.entityName] != nil {
                fetchRequestTemplateDescriptions[template.name] = template
            }
            for (name, members) in try reader.configurations() { setEntityNames(members, forConfigurationName: name) }
        } catch let error as PropertyListError {
            throw CoreDataError(.unsupportedModelFile, "\(source) is not a compiled Core Data model that can be read: \(error).")
        }
        acceptsMismatchedInverses = true
        try validate()
    }

    /// Loads a compiled model file: a `.mom`, or the current version of a `.momd` folder (its `VersionInfo.plist`
    /// names it).
    package func load(compiled url: URL) throws {
        var file = url
        if url.pathExtension.lowercased() == "momd" {
            let info = url.appendingPathComponent("VersionInfo.plist")
            var name: String?
            if let data = FileManager.default.contents(atPath: info.path),
                let plist = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any]
            {
                name = plist["NSManagedObjectModel_CurrentVersionName"] as? String
            }
            let moms = ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).filter { $0.hasSuffix(".mom") }.sorted()
            if let name, moms.contains(name + ".mom") {
                file = url.appendingPathComponent(name + ".mom")
            } else if moms.count == 1 {
                file = url.appendingPathComponent(moms[0])
            } else {
                throw CoreDataError(
                    .unsupportedModelFile,
                    "\(url.path) holds \(moms.count) compiled versions and its VersionInfo.plist names no current one.")
            }
        }
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw CoreDataError(.unsupportedModelFile, "\(file.path): no such compiled model file.")
        }
        try fill(compiled: data, source: file.lastPathComponent)
    }
}

/// Reads entity and property descriptions out of a compiled model's archive.
struct CompiledModelReader {
    let archive: KeyedArchive
    let source: String
    /// The bit of an attribute's `NSFlagsKey` that says "preserve after deletion".
    static let preservesValueFlag: Int64 = 0x10

    init(archive: KeyedArchive, source: String) throws {
        self.init(anyRoot: archive, source: source)
        guard try archive.classes(of: archive.root)?.first == "NSManagedObjectModel" else {
            throw PropertyListError("its root object is not an NSManagedObjectModel")
        }
    }

    /// A reader of an archive whose root may be any object (an archived predicate on its own).
    init(anyRoot archive: KeyedArchive, source: String) {
        self.archive = archive
        self.source = source
    }

    func fields(_ index: Int) throws -> [String: PropertyListValue] {
        guard let fields = try archive.object(index).dictionary else {
            throw PropertyListError("object \(index) is not an archived object")
        }
        return fields
    }

    /// The object a field refers to, or nil for none (`$null`).
    func reference(_ fields: [String: PropertyListValue], _ key: String) -> Int? {
        guard let uid = fields[key]?.uid, uid != 0 else { return nil }
        return uid
    }

    /// A string field (inline, or an `NSString` object).
    func string(_ fields: [String: PropertyListValue], _ key: String) throws -> String? {
        if let inline = fields[key]?.string { return inline }
        guard let ref = reference(fields, key) else { return nil }
        return try archive.foundationValue(at: ref, allowing: KeyedArchive.valueClassNames) as? String
    }

    func integer(_ fields: [String: PropertyListValue], _ key: String) throws -> Int? {
        switch fields[key] {
        case .integer(let i)?: return Int(exactly: i)
        case .bool(let b)?: return b ? 1 : 0
        case .uid?: return (try string(fields, key)).flatMap { Int($0) }
        default: return nil
        }
    }

    func bool(_ fields: [String: PropertyListValue], _ key: String) throws -> Bool { try integer(fields, key).map { $0 != 0 } ?? false }

    /// The object indexes of a collection (an `NSArray`, `NSSet` or a mutable one).
    func elements(_ index: Int?) throws -> [Int] {
        guard let index else { return [] }
        guard case .array(let refs)? = try fields(index)["NS.objects"] else { return [] }
        return refs.compactMap(\.uid).filter { $0 != 0 }
    }

    /// The (key, value) object indexes of a dictionary: `NSDictionary` and its mutable form, or Core Data's
    /// `NSKnownKeysDictionary1` (values in the order of its mapping strategy's keys).
    func entries(_ index: Int?) throws -> [(key: Int, value: Int)] {
        guard let index else { return [] }
        let dictionary = try fields(index)
        if case .array(let keys)? = dictionary["NS.keys"], case .array(let values)? = dictionary["NS.objects"] {
            return zip(keys, values).compactMap { k, v in (k.uid ?? 0) == 0 || (v.uid ?? 0) == 0 ? nil : (k.uid!, v.uid!) }
        }
        guard let mapping = reference(dictionary, "searchMapping"), let keys = reference(try fields(mapping), "keys") else { return [] }
        return zip(try elements(keys), try elements(reference(dictionary, "values"))).map { ($0, $1) }
    }

    func versionIdentifiers() throws -> Set<String> {
        let model = try fields(archive.root)
        return Set(
            try elements(reference(model, "NSVersionIdentifiers")).compactMap {
                try archive.foundationValue(at: $0, allowing: KeyedArchive.valueClassNames) as? String
            })
    }

    /// The configurations (`NSConfigurations`): names and their entities' names.
    func configurations() throws -> [(String, [String])] {
        let model = try fields(archive.root)
        return try entries(reference(model, "NSConfigurations")).compactMap { key, value in
            guard let name = try archive.foundationValue(at: key, allowing: KeyedArchive.valueClassNames) as? String else { return nil }
            let members = try elements(value).compactMap { try string(try fields($0), "NSEntityName") }
            return (name, members.sorted())
        }
    }

    /// Every entity, with its own properties (a compiled entity lists its inherited ones too, or proxies for them).
    func entities() throws -> [NSEntityDescription] {
        let model = try fields(archive.root)
        var described: [(index: Int, fields: [String: PropertyListValue])] = []
        for (_, entity) in try entries(reference(model, "NSEntities")) { described.append((entity, try fields(entity))) }
        guard !described.isEmpty else { throw PropertyListError("the model has no entities") }
        var names: [Int: String] = [:]
        for (index, entity) in described {
            guard let name = try string(entity, "NSEntityName") else { throw PropertyListError("entity \(index) has no name") }
            names[index] = name
        }
        var result: [NSEntityDescription] = []
        for (index, entity) in described {
            let parent = reference(entity, "NSSuperentity").flatMap { names[$0] }
            let description = NSEntityDescription(
                name: names[index]!, superentityName: parent, isAbstract: try bool(entity, "NSIsAbstract"))
            description.managedObjectClassName = try string(entity, "NSClassNameForEntity")
            description.userInfo = try userInfo(reference(entity, "NSUserInfo"))
            description.renamingIdentifier = try renaming(entity, name: names[index]!)
            description.versionHashModifier = try string(entity, "NSVersionHashModifier")
            description.uniquenessConstraints = try uniqueTuples(reference(entity, "NSUniqueTuples"))
            description.indexes = try fetchIndexes(reference(entity, "NSFetchIndexDescriptions"))
            let inherited = try inheritedNames(reference(entity, "NSSuperentity"))
            for (_, property) in try entries(reference(entity, "NSProperties")) {
                if let made = try self.property(property, entityNames: names), !inherited.contains(made.name) {
                    description.addProperty(made)
                }
            }
            result.append(description)
        }
        return result
    }

    /// The property names an entity's ancestors have.
    func inheritedNames(_ parent: Int?) throws -> Set<String> {
        guard let parent else { return [] }
        var names: Set<String> = []
        for (key, _) in try entries(reference(try fields(parent), "NSProperties")) {
            if let name = try archive.foundationValue(at: key, allowing: KeyedArchive.valueClassNames) as? String { names.insert(name) }
        }
        return names
    }

    /// An entity's uniqueness constraints (`NSUniqueTuples`): lists of property names (or of properties).
    func uniqueTuples(_ index: Int?) throws -> [[String]] {
        try elements(index).map { tuple in
            try elements(tuple).compactMap { element in
                if let name = try archive.foundationValue(at: element, allowing: KeyedArchive.valueClassNames) as? String { return name }
                return try? string(try fields(element), "NSPropertyName")
            }
        }.filter { !$0.isEmpty }
    }

    /// An entity's fetch indexes (`NSFetchIndexDescriptions`), keeping the elements on properties.
    func fetchIndexes(_ index: Int?) throws -> [NSFetchIndexDescription] {
        try elements(index).compactMap { ref -> NSFetchIndexDescription? in
            let fields = try self.fields(ref)
            guard let name = try string(fields, "NSIndexName") else { return nil }
            let parts = try elements(reference(fields, "NSIndexElements")).compactMap { element -> NSFetchIndexElementDescription? in
                let part = try self.fields(element)
                guard let property = try string(part, "NSPropertyName") else { return nil }
                let type = try integer(part, "NSFetchIndexElementType") ?? 0
                return NSFetchIndexElementDescription(
                    propertyName: property, ascending: (try? bool(part, "NSAscending")) ?? true, collationType: type == 1 ? .rTree : .binary
                )
            }
            return parts.isEmpty ? nil : NSFetchIndexDescription(name: name, elements: parts)
        }
    }

    /// A default value as its attribute's type holds it (a decimal may be archived as text or a double).
    static func defaultValue(_ value: AttributeValue, type: NSAttributeType) -> AttributeValue {
        guard type == .decimalAttributeType else { return value }
        switch value {
        case .string(let s): return Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")).map { .decimal($0) } ?? .null
        case .double(let d): return .decimal(Decimal(d))
        case .integer(let i): return .decimal(Decimal(i))
        default: return value
        }
    }

    /// The model's fetch request templates (`NSFetchRequestTemplates`: names and archived `NSFetchRequest`s), their
    /// predicates read back into format text as fetched properties' are; a template without an entity is left out.
    func fetchRequestTemplates() throws -> [FetchRequestTemplateDescription] {
        var templates: [FetchRequestTemplateDescription] = []
        for (key, value) in try entries(reference(try fields(archive.root), "NSFetchRequestTemplates")) {
            guard let name = try archive.foundationValue(at: key, allowing: KeyedArchive.valueClassNames) as? String else { continue }
            let request = try fields(value)
            let (entity, format) = try self.request(request)
            guard let entity else { continue }
            templates.append(
                FetchRequestTemplateDescription(
                    name: name, entityName: entity, predicateFormat: format, fetchLimit: max(0, try integer(request, "NSFetchLimit") ?? 0),
                    fetchBatchSize: max(0, try integer(request, "NSBatchSize") ?? 0)))
        }
        return templates.sorted { $0.name < $1.name }
    }

    /// An archived `NSFetchRequest`'s entity name and predicate as format text (text that does not parse, saying why,
    /// when the archive holds a predicate this project cannot read: the request then fails when used).
    func request(_ fields: [String: PropertyListValue]) throws -> (entity: String?, predicateFormat: String?) {
        var entity = try string(fields, "NSEntityName")
        if entity == nil, let ref = reference(fields, "NSEntity") { entity = try string(try self.fields(ref), "NSEntityName") }
        guard let predicate = reference(fields, "NSPredicate") else { return (entity, nil) }
        var decoder = ArchivedPredicateReader(reader: self)
        do {
            return (entity, try decoder.predicate(predicate))
        } catch let error as PropertyListError {
            return (entity, "<the compiled model's predicate cannot be read: \(error)>")
        }
    }

    /// A fetched property: its request's entity, and its predicate read back into format text (text that does not
    /// parse, saying why, when the archive holds something this project cannot read: the property then fails when read).
    func fetchedProperty(_ fields: [String: PropertyListValue], name: String) throws -> NSFetchedPropertyDescription {
        var entity = try string(fields, "_NSFetchRequestEntityName")
        var format: String?
        if let request = reference(fields, "NSFetchRequest") {
            let read = try self.request(try self.fields(request))
            entity = entity ?? read.entity
            format = read.predicateFormat
        }
        guard let entity else { throw PropertyListError("fetched property '\(name)' has no entity") }
        return NSFetchedPropertyDescription(
            name: name, fetchRequest: FetchRequestTemplateDescription(name: name, entityName: entity, predicateFormat: format))
    }

    /// The renaming identifier, when it is not the name itself (the compiler writes the name when none was set).
    func renaming(_ fields: [String: PropertyListValue], name: String) throws -> String? {
        guard let identifier = try string(fields, "NSRenamingIdentifier"), identifier != name else { return nil }
        return identifier
    }

    func userInfo(_ index: Int?) throws -> [String: String] {
        var info: [String: String] = [:]
        for (key, value) in try entries(index) {
            let k = try archive.foundationValue(at: key, allowing: KeyedArchive.valueClassNames)
            let v = try archive.foundationValue(at: value, allowing: KeyedArchive.valueClassNames)
            if let k = k as? String { info[k] = v.map { "\($0)" } ?? "" }
        }
        return info
    }

    /// An attribute or relationship (a fetched property or a proxy for an inherited property gives nil).
    func property(_ index: Int, entityNames: [Int: String]) throws -> NSPropertyDescription? {
        let kind = try archive.classes(of: index)?.first ?? ""
        let fields = try self.fields(index)
        guard let name = try string(fields, "NSPropertyName") else { return nil }
        let made: NSPropertyDescription
        switch kind {
        case "NSFetchedPropertyDescription":
            made = try fetchedProperty(fields, name: name)
        case "NSAttributeDescription", "NSDerivedAttributeDescription", "NSCompositeAttributeDescription":
            guard let raw = try integer(fields, "NSAttributeType"), let type = NSAttributeType(rawValue: UInt(max(0, raw))) else {
                throw PropertyListError("attribute '\(name)' has an unknown type")
            }
            let attribute = NSAttributeDescription(name: name, type: type)
            if let value = reference(fields, "NSDefaultValue"),
                let any = try? archive.foundationValue(at: value, allowing: KeyedArchive.valueClassNames)
            {
                attribute.defaultValue = Self.defaultValue(AttributeValue(any: any) ?? .null, type: type)
            }
            attribute.valueTransformerName = try string(fields, "NSValueTransformerName")
            attribute.attributeValueClassName = try string(fields, "NSAttributeValueClassName")
            attribute.preservesValueInHistoryOnDeletion = (try integer(fields, "NSFlagsKey") ?? 0) & Int(Self.preservesValueFlag) != 0
            if let expression = reference(fields, "NSDerivationExpression") {
                var decoder = ArchivedPredicateReader(reader: self)
                attribute.derivationExpression = (try? decoder.expression(expression)) ?? "<unreadable compiled expression>"
            }
            if let elements = reference(fields, "NSCompositeElements") {
                // A composite's elements: attributes, or composites of their own.
                attribute.elements = try self.elements(elements).compactMap {
                    try property($0, entityNames: entityNames) as? NSAttributeDescription
                }
            }
            made = attribute
        case "NSRelationshipDescription":
            let destination =
                try string(fields, "_NSDestinationEntityName") ?? reference(fields, "NSDestinationEntity").flatMap { entityNames[$0] }
            guard let destination else { throw PropertyListError("relationship '\(name)' has no destination") }
            var inverse = try string(fields, "_NSInverseRelationshipName")
            if inverse == nil, let ref = reference(fields, "NSInverseRelationship") {
                inverse = try string(try self.fields(ref), "NSPropertyName")
            }
            // A to-many's maximum is 0 or -1 (no limit) in compiled models; kept as it is, since the version hash
            // reads it (as 0xFFFFFFFF for -1).
            let maxCount = max(-1, try integer(fields, "NSMaxCount") ?? 1)
            made = NSRelationshipDescription(
                name: name, destinationEntityName: destination, inverseName: inverse, toMany: maxCount != 1,
                deleteRule: NSDeleteRule(rawValue: UInt(max(0, try integer(fields, "NSDeleteRule") ?? 1))) ?? .nullifyDeleteRule,
                minCount: try integer(fields, "NSMinCount") ?? 0, maxCount: maxCount, isOrdered: try bool(fields, "NSIsOrdered"))
        default: return nil
        }
        made.isOptional = try bool(fields, "NSIsOptional")
        made.isTransient = try bool(fields, "NSIsTransient")
        made.userInfo = try userInfo(reference(fields, "NSUserInfo"))
        made.renamingIdentifier = try renaming(fields, name: name)
        made.versionHashModifier = try string(fields, "NSVersionHashModifier")
        return made
    }
}
