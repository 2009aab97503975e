import Foundation
import OpenCoreDataModel

// Transformable attributes: an object holds the value it was given (`.object`) until a save turns it into the bytes
// its transformer makes (`.data`), which the store keeps; reading stored bytes turns them back into a value.
extension ValueConversion {
    /// What `value(forKey:)` returns for an attribute's value: for a transformable attribute's stored bytes, the value
    /// its transformer reads from them.
    ///
    /// - Throws: `CoreDataError(.valueTransformation)` naming entity, attribute and transformer.
    static func toAny(_ value: AttributeValue, attribute: NSAttributeDescription, entityName: String) throws -> Any? {
        if attribute.attributeType == .transformableAttributeType, case .data(let bytes) = value {
            return try attribute.value(fromStoreData: bytes, entityName: entityName)
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
                    (properties[$0] as? NSAttributeDescription)?.attributeType == .transformableAttributeType && !properties[$0].isTransient
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
