import Foundation
import OpenCoreDataModel

extension NSManagedObjectContext {
    /// Before a save: each saved object's derived attributes, computed from their expressions (as Core Data computes
    /// them at save).
    ///
    /// - Throws: `CoreDataError` naming the entity, attribute and expression that cannot be computed.
    func computeDerivedAttributes(_ objects: [NSManagedObject]) throws {
        for object in objects {
            for case let attribute as NSAttributeDescription in object.entity.allProperties {
                guard let expression = attribute.derivationExpression, let index = object.entity.propertyIndex(named: attribute.name) else {
                    continue
                }
                let value = try derivedValue(expression, of: object, attribute: attribute)
                let converted = try ValueConversion.fromAny(
                    value, type: attribute.attributeType, attribute: attribute, entityName: object.entity.name)
                if case .attribute(let current) = try object.currentValue(at: index), current == converted { continue }
                try object.setAttribute(converted, at: index)
            }
        }
    }

    private func derivedValue(_ expression: String, of object: NSManagedObject, attribute: NSAttributeDescription) throws -> Any? {
        let text = expression.trimmingCharacters(in: .whitespaces)
        if text == "now()" { return Date() }
        for function in ["lowercase", "uppercase", "canonical"] where text.hasPrefix(function + ":(") && text.hasSuffix(")") {
            let keyPath = String(text.dropFirst(function.count + 2).dropLast())
            guard let string = try object.checkedValue(forKeyPath: keyPath) as? String else { return nil }
            switch function {
            case "lowercase": return string.lowercased()
            case "uppercase": return string.uppercased()
            default: return string.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil).lowercased()
            }
        }
        do {
            let value = try object.checkedValue(forKeyPath: text)
            // A key path through a to-many gives a set: derived attributes take one value.
            if value is Set<AnyHashable> {
                throw CoreDataError(.invalidModel, "it gives several values; use an aggregate such as \(text).@count")
            }
            return value
        } catch let error as CoreDataError {
            throw CoreDataError(
                .invalidModel,
                "The derived attribute '\(object.entity.name).\(attribute.name)' cannot be computed from '\(expression)': \(error.message)",
                entityName: object.entity.name, key: attribute.name)
        }
    }
}
