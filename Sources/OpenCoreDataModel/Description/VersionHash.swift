import Foundation

// Core Data's version hashes, byte for byte. Apple documents what goes into them (a property's name, optionality,
// transience and modifier; an attribute's type; a relationship's destination, inverse and counts; an entity's name,
// abstractness, superentity and properties) but not how; the layout below was recovered from the
// `NSStoreModelVersionHashes` that Apple's Core Data wrote into the stores of `../shared/corpus/apple-stores` and is
// checked against them by `AppleVersionHashTests`. All integers are little-endian; every digest is SHA-256.
//
// What is not known, and is hashed in a way of our own so that a change to it still changes the hash: the ordered
// flag of a relationship (Apple's stores with ordered relationships do not match yet), a composite attribute's
// elements and an entity's own version hash modifier (no store in the corpus has them).

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
        // A plain property: its name, whether it is optional, whether it is transient, its modifier.
        var bytes = Data(name.utf8)
        bytes.append(contentsOf: [isOptional ? 1 : 0, isTransient ? 1 : 0])
        bytes.append(contentsOf: Data((versionHashModifier ?? "").utf8))
        let base = SHA256Digest.hash(bytes)
        switch self {
        case let attribute as NSAttributeDescription: return attribute.attributeVersionHash(base: base)
        case let relationship as NSRelationshipDescription: return relationship.relationshipVersionHash(base: base)
        default: return base
        }
    }
}

extension NSAttributeDescription {
    /// The property's hash followed by the attribute type as a 32-bit number, and a 1 byte when history keeps the
    /// value of deleted objects.
    fileprivate func attributeVersionHash(base: Data) -> Data {
        var bytes = base
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: attributeType.rawValue))
        if preservesValueInHistoryOnDeletion { bytes.append(1) }
        for element in elements { bytes.append(element.versionHash) }  // ours: see the file's opening comment
        return SHA256Digest.hash(bytes)
    }
}

extension NSRelationshipDescription {
    /// The property's hash followed by the destination entity's name, the inverse's name, the maximum count (0 for
    /// no maximum) and the minimum count, each count as a 32-bit number.
    fileprivate func relationshipVersionHash(base: Data) -> Data {
        var bytes = base
        bytes.append(contentsOf: Data((destinationEntity?.name ?? destinationEntityName).utf8))
        bytes.append(contentsOf: Data((inverseRelationship?.name ?? inverseRelationshipName ?? "").utf8))
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: maxCount))
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: minCount))
        if isOrdered { bytes.append(1) }  // ours: see the file's opening comment
        return SHA256Digest.hash(bytes)
    }
}

extension NSEntityDescription {
    /// Core Data's entity hash: the name, an abstract flag byte, the superentity's hash, the hashes of every stored
    /// property (inherited ones too; transient and fetched properties left out) in name order, then each uniqueness
    /// constraint's property names joined by ".".
    func computeVersionHash() -> Data {
        var bytes = Data(name.utf8)
        bytes.append(isAbstract ? 1 : 0)
        if let superentity { bytes.append(superentity.versionHash) }
        let stored = ((superentity?.allProperties ?? []) + properties).filter { !$0.isTransient }
        for property in stored.sorted(by: { $0.name < $1.name }) { bytes.append(property.versionHash) }
        for constraint in uniquenessConstraints { bytes.append(contentsOf: Data(constraint.joined(separator: ".").utf8)) }
        if let versionHashModifier { bytes.append(contentsOf: Data(versionHashModifier.utf8)) }  // ours
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
