import Foundation

extension NSManagedObjectModel {
    /// The model in Core Data's compiled form: an `NSKeyedArchiver` archive of `NSManagedObjectModel`,
    /// `NSEntityDescription`, `NSAttributeDescription` and `NSRelationshipDescription` objects with the keys Core Data's
    /// own archives use (what a `.mom` file holds, and a store's model cache inflated).
    ///
    /// `NSManagedObjectModel(compiledModel:source:)` reads it back; a composite attribute is an
    /// `NSCompositeAttributeDescription` whose `NSCompositeElements` array holds its elements, as Core Data archives
    /// it. Fetched properties, fetch request templates and derivation expressions are left out: Core Data archives
    /// their predicates and expressions as objects, which `compiledArchive(predicates:)` writes.
    package var compiledArchive: Data { CompiledModelWriter(model: self, predicates: nil).archive() }

    /// The compiled form with fetched properties, fetch request templates and derived attributes.
    ///
    /// Their predicates and expressions are written by `predicates` (the predicate module's archiver: this module cannot
    /// parse format text). One whose format does not parse is left out (a derived attribute is then written as a plain
    /// one).
    package func compiledArchive(predicates: any PredicateArchiveWriting) -> Data {
        CompiledModelWriter(model: self, predicates: predicates).archive()
    }
}

/// Writes predicates and expressions given as format text as Apple's archiver writes `NSPredicate` and `NSExpression`
/// objects, returning the index of the object written.
package protocol PredicateArchiveWriting {
    func writePredicate(format: String, into encoder: inout KeyedArchiveEncoder) throws -> Int
    func writeExpression(format: String, into encoder: inout KeyedArchiveEncoder) throws -> Int
}

/// Writes a model as Core Data's compiled archive (the reverse of `CompiledModelReader`).
struct CompiledModelWriter {
    let model: NSManagedObjectModel
    /// Writes predicates and expressions (nil: fetched properties, templates and derivations are left out).
    let predicates: (any PredicateArchiveWriting)?
    private var encoder = KeyedArchiveEncoder()
    private var entityIndexes: [ObjectIdentifier: Int] = [:]
    private var propertyIndexes: [ObjectIdentifier: Int] = [:]

    init(model: NSManagedObjectModel, predicates: (any PredicateArchiveWriting)?) {
        self.model = model
        self.predicates = predicates
    }

    func archive() -> Data {
        var writer = self
        let root = writer.writeModel()
        return writer.encoder.finish(root: root)
    }

    private mutating func reserve() -> Int { encoder.reserve() }
    private mutating func add(_ value: PropertyListValue) -> Int { encoder.add(value) }
    private mutating func set(_ index: Int, _ chain: [String], _ fields: [String: PropertyListValue]) {
        encoder.set(index, chain + ["NSObject"], fields)
    }

    private mutating func string(_ text: String?) -> PropertyListValue { .uid(text.map { add(.string($0)) } ?? 0) }

    private mutating func collection(_ chain: [String], _ members: [Int]) -> PropertyListValue {
        let index = reserve()
        set(index, chain, ["NS.objects": .array(members.map { .uid($0) })])
        return .uid(index)
    }

    private mutating func dictionary(_ pairs: [(key: String, value: Int)]) -> PropertyListValue {
        let index = reserve()
        let keys = pairs.map { add(.string($0.key)) }
        set(index, ["NSDictionary"], ["NS.keys": .array(keys.map { .uid($0) }), "NS.objects": .array(pairs.map { .uid($0.value) })])
        return .uid(index)
    }

    private mutating func strings(_ dictionary: [String: String]) -> PropertyListValue {
        let pairs = dictionary.keys.sorted().map { key in (key: key, value: add(.string(dictionary[key]!))) }
        return self.dictionary(pairs)
    }

    private mutating func writeModel() -> Int {
        let root = reserve()
        let entities = model.entities.sorted { $0.entityID < $1.entityID }
        for entity in entities { entityIndexes[ObjectIdentifier(entity)] = reserve() }
        for entity in entities {
            for property in entity.properties {
                // A fetched property goes in only where its request can be written (its predicate parses).
                if let fetched = property as? NSFetchedPropertyDescription, !canWrite(fetched.fetchRequestTemplate) { continue }
                propertyIndexes[ObjectIdentifier(property)] = reserve()
            }
        }
        for entity in entities { writeEntity(entity, root: root) }
        var templates: [(key: String, value: Int)] = []
        for template in model.fetchRequestTemplateDescriptions.values.sorted(by: { $0.name < $1.name }) {
            if let request = writeRequest(template) { templates.append((template.name, request)) }
        }
        let byName = dictionary(entities.map { (key: $0.name, value: entityIndexes[ObjectIdentifier($0)]!) })
        let identifiers = collection(["NSSet"], model.versionIdentifiers.sorted().map { add(.string($0)) })
        let configurations = dictionary(
            model.configurations.map { name in
                let members = (model.entities(forConfigurationName: name) ?? []).compactMap { entityIndexes[ObjectIdentifier($0)] }
                guard case .uid(let set) = collection(["NSSet"], members) else { return (key: name, value: 0) }
                return (key: name, value: set)
            })
        var fields = ["NSEntities": byName, "NSVersionIdentifiers": identifiers, "NSConfigurations": configurations]
        if !templates.isEmpty { fields["NSFetchRequestTemplates"] = dictionary(templates) }
        set(root, ["NSManagedObjectModel"], fields)
        return root
    }

    /// Whether `writeRequest` writes the request (tried on an encoder of its own).
    private func canWrite(_ template: FetchRequestTemplateDescription) -> Bool {
        guard let predicates, model.entitiesByName[template.entityName] != nil else { return false }
        guard let format = template.predicateFormat else { return true }
        var scratch = KeyedArchiveEncoder()
        return (try? predicates.writePredicate(format: format, into: &scratch)) != nil
    }

    /// An `NSFetchRequest` object of a template or fetched property: its entity (by reference and name), predicate,
    /// limit and batch size; nil when its entity is not in the model or its predicate does not parse.
    private mutating func writeRequest(_ template: FetchRequestTemplateDescription) -> Int? {
        guard let predicates, let entity = model.entitiesByName[template.entityName].flatMap({ entityIndexes[ObjectIdentifier($0)] })
        else { return nil }
        var fields: [String: PropertyListValue] = [:]
        if let format = template.predicateFormat {
            guard let predicate = try? predicates.writePredicate(format: format, into: &encoder) else { return nil }
            fields["NSPredicate"] = .uid(predicate)
        }
        let index = reserve()
        fields["NSEntity"] = .uid(entity)
        fields["NSEntityName"] = string(template.entityName)
        fields["NSFetchLimit"] = .integer(Int64(template.fetchLimit))
        fields["NSBatchSize"] = .integer(Int64(template.fetchBatchSize))
        set(index, ["NSFetchRequest", "NSPersistentStoreRequest"], fields)
        return index
    }

    private mutating func writeEntity(_ entity: NSEntityDescription, root: Int) {
        let index = entityIndexes[ObjectIdentifier(entity)]!
        var properties: [(key: String, value: Int)] = []
        for property in entity.properties {
            guard let slot = propertyIndexes[ObjectIdentifier(property)] else { continue }
            writeProperty(property, at: slot, entity: index)
            properties.append((property.name, slot))
        }
        let subentities = dictionary(entity.subentities.map { (key: $0.name, value: entityIndexes[ObjectIdentifier($0)]!) })
        let unique = collection(
            ["NSArray"],
            entity.uniquenessConstraints.map { tuple in
                guard case .uid(let i) = collection(["NSArray"], tuple.map { add(.string($0)) }) else { return 0 }
                return i
            })
        let indexes = collection(["NSArray"], entity.indexes.map { writeIndex($0, entity: index) })
        var fields: [String: PropertyListValue] = [
            "NSEntityName": string(entity.name), "NSClassNameForEntity": string(entity.managedObjectClassName ?? entity.name),
            "NSManagedObjectModel": .uid(root), "NSProperties": dictionary(properties), "NSSubentities": subentities,
            "NSSuperentity": .uid(entity.superentity.map { entityIndexes[ObjectIdentifier($0)]! } ?? 0),
            "NSUserInfo": strings(entity.userInfo),
            "NSUniqueTuples": unique, "NSFetchIndexDescriptions": indexes,
            "NSRenamingIdentifier": string(entity.renamingIdentifier ?? entity.name),
            "NSVersionHashModifier": string(entity.versionHashModifier),
        ]
        if entity.isAbstract { fields["NSIsAbstract"] = .bool(true) }
        set(index, ["NSEntityDescription"], fields)
    }

    private mutating func writeIndex(_ description: NSFetchIndexDescription, entity: Int) -> Int {
        let index = reserve()
        let elements = description.elements.map { element -> Int in
            let slot = reserve()
            set(
                slot, ["NSFetchIndexElementDescription"],
                [
                    "NSPropertyName": string(element.propertyName), "NSAscending": .bool(element.isAscending),
                    "NSFetchIndexElementType": .integer(Int64(element.collationType.rawValue)), "NSFetchIndexDescription": .uid(index),
                ])
            return slot
        }
        set(
            index, ["NSFetchIndexDescription"],
            ["NSIndexName": string(description.name), "NSIndexElements": collection(["NSArray"], elements), "NSEntity": .uid(entity)])
        return index
    }

    private mutating func writeProperty(_ property: NSPropertyDescription, at index: Int, entity: Int) {
        var fields: [String: PropertyListValue] = [
            "NSPropertyName": string(property.name), "NSEntity": .uid(entity), "NSUserInfo": strings(property.userInfo),
            "NSRenamingIdentifier": string(property.renamingIdentifier ?? property.name),
            "NSVersionHashModifier": string(property.versionHashModifier),
        ]
        if property.isOptional { fields["NSIsOptional"] = .bool(true) }
        if property.isTransient { fields["NSIsTransient"] = .bool(true) }
        if let fetched = property as? NSFetchedPropertyDescription {
            fields["NSFetchRequest"] = .uid(writeRequest(fetched.fetchRequestTemplate) ?? 0)  // (`canWrite` said it is written)
            fields["_NSFetchRequestEntityName"] = string(fetched.fetchRequestTemplate.entityName)
            return set(index, ["NSFetchedPropertyDescription", "NSPropertyDescription"], fields)
        }
        if let attribute = property as? NSAttributeDescription {
            fields["NSAttributeType"] = .integer(Int64(attribute.attributeType.rawValue))
            fields["NSValueTransformerName"] = string(attribute.valueTransformerName)
            fields["NSAttributeValueClassName"] = string(attribute.attributeValueClassName)
            fields["NSDefaultValue"] = .uid(defaultValue(attribute.defaultValue))
            fields["NSFlagsKey"] = .integer(attribute.preservesValueInHistoryOnDeletion ? CompiledModelReader.preservesValueFlag : 0)
            if let format = attribute.derivationExpression, let predicates,
                let expression = try? predicates.writeExpression(format: format, into: &encoder)
            {
                fields["NSDerivationExpression"] = .uid(expression)
                return set(index, ["NSDerivedAttributeDescription", "NSAttributeDescription", "NSPropertyDescription"], fields)
            }
            guard attribute.attributeType == .compositeAttributeType else {
                return set(index, ["NSAttributeDescription", "NSPropertyDescription"], fields)
            }
            let elements = attribute.elements.map { element -> Int in
                let slot = reserve()
                writeProperty(element, at: slot, entity: entity)
                return slot
            }
            fields["NSCompositeElements"] = collection(["NSArray"], elements)
            set(index, ["NSCompositeAttributeDescription", "NSAttributeDescription", "NSPropertyDescription"], fields)
        } else if let relationship = property as? NSRelationshipDescription {
            fields["NSDestinationEntity"] = .uid(relationship.destinationEntity.flatMap { entityIndexes[ObjectIdentifier($0)] } ?? 0)
            fields["_NSDestinationEntityName"] = string(relationship.destinationEntityName)
            fields["NSInverseRelationship"] = .uid(relationship.inverseRelationship.flatMap { propertyIndexes[ObjectIdentifier($0)] } ?? 0)
            fields["_NSInverseRelationshipName"] = string(relationship.inverseRelationshipName)
            fields["NSDeleteRule"] = .integer(Int64(relationship.deleteRule.rawValue))
            fields["NSMinCount"] = .integer(Int64(relationship.minCount))
            fields["NSMaxCount"] = .integer(Int64(relationship.maxCount))
            if relationship.isOrdered { fields["NSIsOrdered"] = .bool(true) }
            set(index, ["NSRelationshipDescription", "NSPropertyDescription"], fields)
        }
    }

    /// A default value as an archived Foundation value (a decimal as `NSDecimalNumber`), or `$null`.
    private mutating func defaultValue(_ value: AttributeValue) -> Int {
        if case .object = value { return 0 }
        return (try? encoder.reference(value, depth: 0)) ?? 0
    }
}

extension Inflate {
    /// `data` as raw DEFLATE made of stored (uncompressed) blocks: what any inflater, Core Data's included, reads.
    package static func storedDeflate(_ data: Data) -> Data {
        var out: [UInt8] = []
        let bytes = [UInt8](data)
        var start = 0
        repeat {
            let length = min(65_535, bytes.count - start)
            let last: UInt8 = start + length >= bytes.count ? 1 : 0
            out += [last, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)]
            out += bytes[start..<start + length]
            start += length
        } while start < bytes.count
        return Data(out)
    }
}
