import Foundation

// Core Data's version hashes, byte for byte. Apple documents what goes into them (a property's name, optionality,
// transience and modifier; an attribute's type; a relationship's destination, inverse and counts; an entity's name,
// abstractness, superentity and properties) but not how. The layout was first recovered from the
// `NSStoreModelVersionHashes` that Apple's Core Data wrote into the stores of `../shared/corpus/apple-stores`; what
// those could not settle (ordered relationships, the external-storage flag, derived and composite attributes) follows
// the published disassembly of Core Data's `_versionHash:inStyle:` methods, and every store of the corpus now agrees
// (`AppleVersionHashTests`). All integers are little-endian; every digest is SHA-256.
//
// Not settled: composite attributes have no Apple-written store to check against.

extension NSPropertyDescription {
    /// The property's version hash, computed as Core Data computes it: it changes when the property changes in a way
    /// that affects how its values are stored (name, optionality, transience, type, destination, inverse, counts,
    /// `versionHashModifier`).
    ///
    /// For example:
    /// ```swift
    /// let before = attribute.versionHash
    /// attribute.versionHashModifier = "2"   // the store must now be migrated
    /// assert(attribute.versionHash != before)
    /// ```
    public var versionHash: Data {
        let base = baseVersionHash
        switch self {
        case let attribute as NSAttributeDescription where attribute.derivationExpression != nil:
            return attribute.derivedVersionHash()
        case let attribute as NSAttributeDescription where attribute.attributeType == .compositeAttributeType:
            return attribute.compositeVersionHash()
        case let attribute as NSAttributeDescription: return attribute.attributeVersionHash(base: base)
        case let relationship as NSRelationshipDescription: return relationship.relationshipVersionHash(base: base)
        default: return base
        }
    }
}

extension NSPropertyDescription {
    /// A plain property's hash: its name, whether it is optional, whether it is transient, its modifier.
    fileprivate var baseVersionHash: Data {
        var bytes = Data(name.utf8)
        bytes.append(contentsOf: [isOptional ? 1 : 0, isTransient ? 1 : 0])
        bytes.append(contentsOf: Data((versionHashModifier ?? "").utf8))
        return SHA256Digest.hash(bytes)
    }
}

extension NSAttributeDescription {
    /// The property's hash followed by the attribute type as a 32-bit number, a 1 byte when the value may be kept
    /// outside the row, and a 1 byte when history keeps the value of deleted objects.
    fileprivate func attributeVersionHash(base: Data) -> Data {
        var bytes = base
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: attributeType.rawValue))
        if allowsExternalBinaryDataStorage { bytes.append(1) }
        if preservesValueInHistoryOnDeletion { bytes.append(1) }
        return SHA256Digest.hash(bytes)
    }
}

extension NSRelationshipDescription {
    /// The property's hash followed by the destination entity's name, the inverse's name, the maximum count (0 for
    /// no maximum) and the minimum count, each count as a 32-bit number.
    fileprivate func relationshipVersionHash(base: Data) -> Data {
        var bytes = base
        bytes.append(contentsOf: Data((destinationEntity?.name ?? destinationEntityName).utf8))
        // A relationship that is its own inverse does not name it.
        if inverseRelationship !== self {
            bytes.append(contentsOf: Data((inverseRelationship?.name ?? inverseRelationshipName ?? "").utf8))
        }
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: maxCount))
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: minCount))
        if isOrdered { bytes.append(contentsOf: [1, 0]) }  // a 16-bit 1
        return SHA256Digest.hash(bytes)
    }
}

extension NSAttributeDescription {
    /// A derived attribute's hash: the derivation expression's text alone (Core Data hashes neither the name nor the
    /// type of a derived attribute; renaming one does not change its entity's hash).
    fileprivate func derivedVersionHash() -> Data {
        SHA256Digest.hash(Data(Self.compiledExpressionFormat(derivationExpression ?? "").utf8))
    }

    /// A composite attribute's hash: its elements' hashes in name order (a nested composite's elements in their own
    /// name order, in its place); like a derived attribute's, it leaves out the composite's own name and flags.
    fileprivate func compositeVersionHash() -> Data {
        var bytes = Data()
        func add(_ elements: [NSAttributeDescription]) {
            for element in elements.sorted(by: { $0.name < $1.name }) where !element.isTransient {
                if element.attributeType == .compositeAttributeType {
                    add(element.elements)
                } else {
                    bytes.append(element.versionHash)
                }
            }
        }
        add(elements)
        return SHA256Digest.hash(bytes)
    }

    /// The text Core Data gives a derivation expression once the model is compiled: aggregates of a to-many
    /// (`items.@count`) become function calls (`count:(items)`), as Xcode's model compiler writes them.
    static func compiledExpressionFormat(_ expression: String) -> String {
        let text = expression.trimmingCharacters(in: .whitespaces)
        let aggregates = ["@count": "count:", "@sum": "sum:", "@avg": "average:", "@min": "min:", "@max": "max:"]
        for (suffix, function) in aggregates where text.hasSuffix("." + suffix) {
            return "\(function)(\(text.dropLast(suffix.count + 1)))"
        }
        return text
    }
}

extension NSEntityDescription {
    /// Core Data's entity hash: the name, an abstract flag byte, the superentity's hash, the hashes of every stored
    /// property (inherited ones too; transient and fetched properties left out) in name order, the entity's version
    /// hash modifier, then each uniqueness constraint's property names joined by ".", in ascending order.
    func computeVersionHash() -> Data { entityHash(superentity: { $0.versionHash }, property: { $0.versionHash }, format4: false) }

    /// The entity hash with the given hashes of the superentity and the properties.
    fileprivate func entityHash(
        superentity hashOf: (NSEntityDescription) -> Data, property hash: (NSPropertyDescription) -> Data, format4: Bool
    ) -> Data {
        var bytes = Data(name.utf8)
        bytes.append(isAbstract ? 1 : 0)
        if let superentity { bytes.append(hashOf(superentity)) }
        let stored = ((superentity?.allProperties ?? []) + properties).filter { !$0.isTransient }
        for property in stored.sorted(by: { $0.name < $1.name }) { bytes.append(hash(property)) }
        let constraints = uniquenessConstraints.map { $0.joined(separator: ".") }
        if format4 {
            for constraint in constraints { bytes.append(contentsOf: Data(constraint.utf8)) }
            if let versionHashModifier { bytes.append(contentsOf: Data(versionHashModifier.utf8)) }
        } else {
            // Core Data's: the modifier, then the constraints in ascending order.
            if let versionHashModifier { bytes.append(contentsOf: Data(versionHashModifier.utf8)) }
            for constraint in constraints.sorted() where !constraint.isEmpty { bytes.append(contentsOf: Data(constraint.utf8)) }
        }
        return SHA256Digest.hash(bytes)
    }

    /// The hash earlier OpenCoreData versions (store formats 1 and 2) recorded, so that their stores still open.
    func legacyVersionHash() -> Data {
        var fields = ["entity", name, isAbstract ? "abstract" : "", superentityName ?? ""]
        if let versionHashModifier { fields.append("modifier:" + versionHashModifier) }
        for property in properties.sorted(by: { $0.name < $1.name }) where !property.isTransient {
            fields.append("|")
            fields += [property.name, property.isOptional ? "O" : "R", property.isTransient ? "T" : "P"]
            if let modifier = property.versionHashModifier { fields.append("modifier:" + modifier) }
            if let attribute = property as? NSAttributeDescription {
                fields += ["A", String(attribute.attributeType.rawValue)]
            } else if let relationship = property as? NSRelationshipDescription {
                fields += [
                    "R", relationship.destinationEntityName, relationship.inverseRelationshipName ?? "",
                    relationship.isToMany ? "M" : "1", relationship.isOrdered ? "ord" : "",
                ]
            }
        }
        return SHA256Digest.hash(Data(fields.joined(separator: "\u{1F}").utf8))
    }
}

extension NSManagedObjectModel {
    /// Whether a store with `metadata` (from `metadataForPersistentStore(ofType:at:options:)`) holds exactly the
    /// entities of configuration `name` (nil: the whole model) with their current version hashes, as Core Data
    /// decides it: a store that is not compatible needs migration.
    ///
    /// For example:
    /// ```swift
    /// let metadata = try NSPersistentStoreCoordinator.metadataForPersistentStore(ofType: NSSQLiteStoreType, at: url)
    /// if !model.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata) { print("needs migration") }
    /// ```
    public func isConfiguration(withName name: String?, compatibleWithStoreMetadata metadata: [String: Any]) -> Bool {
        guard let stored = metadata["NSStoreModelVersionHashes"] as? [String: Data],
            let entities = entities(forConfigurationName: name)
        else { return false }
        let current = Dictionary(entities.map { ($0.name, $0.versionHash) }, uniquingKeysWith: { a, _ in a })
        return stored == current
    }

    /// Core Data's digest of the entity hashes (`NSStoreModelVersionHashesDigest` in a store's metadata): SHA-512 of
    /// each entity's name and hash, in name order, base64-encoded.
    package var versionHashesDigest: String {
        var bytes = Data()
        for (name, hash) in entityVersionHashesByName.sorted(by: { $0.key < $1.key }) {
            bytes.append(contentsOf: Data(name.utf8))
            bytes.append(hash)
        }
        return SHA512Digest.hash(bytes).base64EncodedString()
    }

    /// The model's version checksum, as Core Data computes it (`NSManagedObjectModel.versionChecksum`, recorded in a
    /// store's metadata as `NSStoreModelVersionChecksumKey`); staged migrations name model versions by it.
    ///
    /// For example:
    /// ```swift
    /// let stage = NSLightweightMigrationStage([version1.versionChecksum, version2.versionChecksum])
    /// ```
    public var versionChecksum: String { versionHashesChecksum }

    /// Core Data's checksum of the entity hashes (`NSStoreModelVersionChecksumKey`): SHA-256 of the hashes in entity
    /// name order, base64-encoded.
    package var versionHashesChecksum: String {
        SHA256Digest.hash(Data(entityVersionHashesByName.sorted(by: { $0.key < $1.key }).flatMap(\.value))).base64EncodedString()
    }

    /// The model hash earlier OpenCoreData versions recorded in their stores (formats 1 and 2), as lowercase hex.
    package var legacyVersionHashString: String {
        let joined = entities.map(\.name).sorted().map { name in
            name + ":" + (entity(named: name)?.legacyVersionHash().hexString ?? "")
        }.joined(separator: ";")
        return SHA256Digest.hash(Data(joined.utf8)).hexString
    }

    /// The entity hashes earlier OpenCoreData versions recorded, by entity name, as lowercase hex.
    package var legacyEntityVersionHashes: [String: String] {
        Dictionary(entities.map { ($0.name, $0.legacyVersionHash().hexString) }, uniquingKeysWith: { a, _ in a })
    }
}

extension Data {
    fileprivate mutating func appendLittleEndian(_ value: UInt32) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// The bytes as lowercase hexadecimal.
    package var hexString: String { map { String(format: "%02x", $0) }.joined() }
}

// The hashes stores of this project's format 4 (Core Data's layout, written before the hashes of ordered
// relationships, derived and composite attributes and the external-storage flag were Core Data's) recorded, so that
// such a store is recognised and has its hashes rewritten instead of being taken for another model's.
extension NSPropertyDescription {
    fileprivate var format4VersionHash: Data {
        var hashed = baseVersionHash
        if let attribute = self as? NSAttributeDescription {
            hashed.appendLittleEndian(UInt32(truncatingIfNeeded: attribute.attributeType.rawValue))
            if attribute.preservesValueInHistoryOnDeletion { hashed.append(1) }
            for element in attribute.elements { hashed.append(element.format4VersionHash) }
        } else if let relationship = self as? NSRelationshipDescription {
            hashed.append(contentsOf: Data((relationship.destinationEntity?.name ?? relationship.destinationEntityName).utf8))
            hashed.append(contentsOf: Data((relationship.inverseRelationship?.name ?? relationship.inverseRelationshipName ?? "").utf8))
            hashed.appendLittleEndian(UInt32(truncatingIfNeeded: relationship.maxCount))
            hashed.appendLittleEndian(UInt32(truncatingIfNeeded: relationship.minCount))
            if relationship.isOrdered { hashed.append(1) }
        } else {
            return hashed
        }
        return SHA256Digest.hash(hashed)
    }
}

extension NSEntityDescription {
    fileprivate var format4VersionHash: Data {
        entityHash(superentity: { $0.format4VersionHash }, property: { $0.format4VersionHash }, format4: true)
    }
}

extension NSManagedObjectModel {
    /// The entity hashes a store of this project's format 4 recorded for this model, by entity name.
    package var format4EntityVersionHashesByName: [String: Data] {
        Dictionary(entities.map { ($0.name, $0.format4VersionHash) }, uniquingKeysWith: { a, _ in a })
    }
}
