import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

// Transformable attributes: an object holds the value it was given (`.object`) until a save turns it into the bytes
// its transformer makes (`.data`), which the store keeps; reading stored bytes turns them back into a value.
extension ValueConversion {
    /// What `value(forKey:)` returns for an attribute's value: for a transformable attribute's stored bytes, the value
    /// its transformer reads from them.
    ///
    /// - Throws: `CoreDataError(.valueTransformation)` naming entity, attribute and transformer.
    static func toAny(_ value: AttributeValue, attribute: NSAttributeDescription, entityName: String) throws -> Any? {
        if attribute.attributeType.isArchived, case .data(let bytes) = value {
            let read = try attribute.value(fromStoreData: bytes, entityName: entityName)
            // An archived NSPredicate, read by the transformer as its format text.
            guard let archived = read as? ArchivedPredicate else { return read }
            do {
                return try FetchPredicate(format: archived.format)
            } catch {
                throw CoreDataError(
                    .valueTransformation,
                    "\(entityName).\(attribute.name) holds an archived predicate that cannot be read back: \(archived.format)",
                    entityName: entityName, key: attribute.name)
            }
        }
        return toAny(value, type: attribute.attributeType)
    }

    /// A value given to a transformable attribute, held as it is (the save transforms it).
    static func transformable(_ value: consuming AttributeValue) -> AttributeValue {
        switch value {
        case .null, .object: return value
        case .data(let d): return .object(OpaqueValue(d))  // `.data` is the stored form: wrap the caller's bytes
        default: return .object(OpaqueValue(toAny(value, type: .stringAttributeType) as Any))
        }
    }
}

extension NSManagedObjectContext {
    /// Before a save: the pending values of stored transformable attributes, turned into the bytes the store keeps.
    ///
    /// An object whose value cannot be transformed fails the save; values already transformed stay so (they read
    /// back as equal values).
    func transformPendingValues(_ objects: [NSManagedObject]) throws {
        var indexesByEntity: [ObjectIdentifier: [Int]] = [:]
        for object in objects where !object.changes.isEmpty {
            let entity = object.entity
            let indexes: [Int]
            if let known = indexesByEntity[ObjectIdentifier(entity)] {
                indexes = known
            } else {
                let properties = entity.allProperties
                indexes = properties.indices.filter {
                    (properties[$0] as? NSAttributeDescription)?.attributeType.isArchived == true && !properties[$0].isTransient
                }
                indexesByEntity[ObjectIdentifier(entity)] = indexes
            }
            for index in indexes {
                guard case .attribute(.object(let held))? = object.changes[index] else { continue }
                let attribute = entity.allProperties[index] as! NSAttributeDescription
                object.changes[index] = .attribute(.data(try attribute.storeData(for: held.value, entityName: entity.name)))
            }
        }
    }
}

extension NSManagedObject {
    /// The bytes a transformable attribute holds as stored (nil when it holds nil or a value not yet saved), for a
    /// tool that shows them when no transformer can read them.
    package func _storedTransformableData(forKey key: String) throws -> Data? {
        try withContext {
            guard let index = entity.propertyIndex(named: key) else { throw unknownKey(key) }
            guard case .attribute(.data(let bytes)) = try currentValue(at: index) else { return nil }
            return bytes
        }
    }
}

extension ValueConversion {
    /// A value given to a composite attribute: a dictionary whose keys are among the composite's elements and whose
    /// values each element holds (nested composites as dictionaries), held as given until a save archives it.
    static func compositeValue(_ any: Any?, _ attribute: NSAttributeDescription, _ entityName: String) throws -> AttributeValue {
        guard let any, !(any is NSNull) else { return .null }
        if let held = any as? AttributeValue, case .object = held { return held }
        guard let dictionary = any as? [String: Any] else { throw wrongType(any, attribute, entityName) }
        let elements = Dictionary(uniqueKeysWithValues: attribute.elements.map { ($0.name, $0) })
        var checked: [String: Any] = [:]
        for (key, value) in dictionary {
            guard let element = elements[key] else {
                throw CoreDataError(
                    .wrongValueType,
                    "'\(entityName).\(attribute.name)' is a composite of \(attribute.elements.map(\.name).sorted().joined(separator: ", ")); it has no '\(key)'.",
                    entityName: entityName, key: attribute.name)
            }
            let converted = try fromAny(
                value, type: element.attributeType, attribute: element, entityName: "\(entityName).\(attribute.name)")
            if let plain = converted.isNull
                ? nil : (element.attributeType == .compositeAttributeType ? value : toAny(converted, type: element.attributeType))
            {
                checked[key] = plain
            }
        }
        return .object(OpaqueValue(checked))
    }
}
