import Foundation
import OpenCoreDataModel

/// One element of a composite attribute as Core Data's layout stores it: in a column of its own.
///
/// Core Data flattens a composite (nested composites included) into its elements and gives each a column named, as
/// any attribute's, `Z` and the element's own name in capitals (`ZSTREET` for `address.street`), made unique among the
/// table's columns by a number. The composite itself has no column.
package struct CompositeLeaf {
    /// The element's key path inside the composite's value (`["street"]`, or `["geo", "latitude"]` when nested).
    package let path: [String]
    package let element: NSAttributeDescription
    package let column: String
}

extension NSAttributeDescription {
    /// A composite's elements, flattened as Core Data flattens them: in order, each nested composite replaced by its
    /// own elements; with the key path of each inside the composite's value.
    package var flattenedCompositeElements: [(path: [String], element: NSAttributeDescription)] {
        elements.flatMap { element -> [(path: [String], element: NSAttributeDescription)] in
            guard element.attributeType == .compositeAttributeType else { return [([element.name], element)] }
            return element.flattenedCompositeElements.map { ([element.name] + $0.path, $0.element) }
        }
    }
}

/// Turns a composite's value (the keyed archive of its dictionary, as contexts hand it over) into one value per
/// element column and back.
enum CompositeValues {
    /// The value of each leaf, in order: all null for a null composite.
    static func columnValues(_ value: AttributeValue, of attribute: NSAttributeDescription, leaves: [CompositeLeaf], entityName: String)
        throws -> [AttributeValue]
    {
        let dictionary: [String: Any]?
        switch value {
        case .null: dictionary = nil
        case .object(let held): dictionary = held.value as? [String: Any]
        case .data(let bytes): dictionary = try attribute.value(fromStoreData: bytes, entityName: entityName) as? [String: Any]
        default: dictionary = nil
        }
        guard let dictionary else { return leaves.map { _ in .null } }
        return leaves.map { leaf in
            var level: Any? = dictionary
            for key in leaf.path { level = (level as? [String: Any])?[key] }
            return storedValue(level, type: leaf.element.attributeType)
        }
    }

    /// The composite's value from its leaves' values: null when every leaf is null, else the keyed archive of the
    /// dictionary they make (a nested composite whose leaves are all null is left out).
    static func compositeValue(
        _ values: [AttributeValue], of attribute: NSAttributeDescription, leaves: [CompositeLeaf], entityName: String
    )
        throws -> AttributeValue
    {
        guard values.contains(where: { !$0.isNull }) else { return .null }
        var dictionary: [String: Any] = [:]
        for (leaf, value) in zip(leaves, values) {
            guard let plain = plainValue(value, type: leaf.element.attributeType) else { continue }
            insert(plain, at: leaf.path[...], into: &dictionary)
        }
        return .data(try attribute.storeData(for: dictionary, entityName: entityName))
    }

    private static func insert(_ value: Any, at path: ArraySlice<String>, into dictionary: inout [String: Any]) {
        guard let key = path.first else { return }
        if path.count == 1 {
            dictionary[key] = value
            return
        }
        var nested = dictionary[key] as? [String: Any] ?? [:]
        insert(value, at: path.dropFirst(), into: &nested)
        dictionary[key] = nested
    }

    /// An element's value from the composite's dictionary, as its column keeps it.
    static func storedValue(_ any: Any?, type: NSAttributeType) -> AttributeValue {
        guard let any, !(any is NSNull) else { return .null }
        switch type {
        case .stringAttributeType: return (any as? String).map(AttributeValue.string) ?? .null
        case .integer16AttributeType, .integer32AttributeType, .integer64AttributeType:
            if let number = any as? NSNumber { return .integer(number.int64Value) }
            return (any as? Int).map { .integer(Int64($0)) } ?? .null
        case .booleanAttributeType:
            if let flag = any as? Bool { return .bool(flag) }
            return (any as? NSNumber).map { .bool($0.boolValue) } ?? .null
        case .doubleAttributeType, .floatAttributeType:
            if let number = any as? NSNumber { return .double(number.doubleValue) }
            return (any as? Double).map(AttributeValue.double) ?? .null
        case .decimalAttributeType:
            if let decimal = any as? Decimal { return .decimal(decimal) }
            return (any as? NSNumber).map { .decimal($0.decimalValue) } ?? .null
        case .dateAttributeType: return (any as? Date).map(AttributeValue.date) ?? .null
        case .binaryDataAttributeType: return (any as? Data).map(AttributeValue.data) ?? .null
        case .UUIDAttributeType: return (any as? UUID).map(AttributeValue.uuid) ?? .null
        case .URIAttributeType: return (any as? URL).map(AttributeValue.uri) ?? .null
        default: return .null
        }
    }

    /// A column's value as the composite's dictionary holds it (Foundation values: numbers as `NSNumber`).
    static func plainValue(_ value: AttributeValue, type: NSAttributeType) -> Any? {
        if case .object = value { return nil }
        return value.foundationValue(as: type)
    }
}
