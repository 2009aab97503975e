import Foundation

/// A transformer that says why it failed: the store path uses these methods instead of the nil-returning pair.
package protocol StoreDataTransformer {
    /// The bytes stored for `value`.
    func storeData(for value: Any) throws -> Data
    /// The value the stored bytes stand for.
    func value(fromStoreData data: Data) throws -> Any?
}

/// Unarchives data with `NSKeyedUnarchiver`'s secure rules, allowing only `allowedTopLevelClasses`, and archives
/// values in reverse; the default transformer of a transformable attribute, and Foundation's class of the same name.
///
/// Archives are byte-compatible with Apple's `NSKeyedArchiver`: Foundation's value classes (`NSArray`,
/// `NSDictionary`, `NSSet`, `NSOrderedSet`, `NSString`, `NSNumber`, `NSDecimalNumber`, `NSDate`, `NSData`, `NSURL`,
/// `NSUUID`, `NSNull`, and their mutable forms) written on either platform read on the other. Values read back as
/// Swift values (`[Any]`, `[String: Any]`, `Set<AnyHashable>`, `String`, `NSNumber`, `Date`, …), so `as? [String]`
/// works as it does on Apple platforms. A subclass can allow its own `NSSecureCoding` classes.
///
/// For example:
/// ```swift
/// final class TagsTransformer: NSSecureUnarchiveFromDataTransformer {
///     override class var allowedTopLevelClasses: [AnyClass] { [NSArray.self, NSString.self] }
/// }
/// ValueTransformer.setValueTransformer(TagsTransformer(), forName: NSValueTransformerName("TagsTransformer"))
/// ```
open class NSSecureUnarchiveFromDataTransformer: ValueTransformer, StoreDataTransformer, @unchecked Sendable {
    /// The classes an archive's objects may have: Foundation's value classes unless a subclass says otherwise.
    open class var allowedTopLevelClasses: [AnyClass] {
        [
            NSArray.self, NSDictionary.self, NSSet.self, NSString.self, NSNumber.self, NSDate.self, NSData.self, NSURL.self, NSUUID.self,
            NSNull.self,
        ]
    }

    /// Whether only `allowedTopLevelClasses` may be unarchived (false for the keyed transformer Core Data used before).
    var requiresSecureCoding: Bool { true }

    /// `NSObject`: the values this transformer makes from data.
    open override class func transformedValueClass() -> AnyClass { NSObject.self }

    /// Reverse transformation archives.
    open override class func allowsReverseTransformation() -> Bool { true }

    /// The value archived in `value` (`Data`), or nil when it is not an archive of allowed classes.
    open override func transformedValue(_ value: Any?) -> Any? {
        guard let data = value as? Data else { return nil }
        return try? self.value(fromStoreData: data)
    }

    /// `value` archived as `Data`, or nil when it cannot be archived.
    open override func reverseTransformedValue(_ value: Any?) -> Any? {
        guard let value else { return nil }
        return try? storeData(for: value)
    }

    /// The class names an archive may use: the allowed classes' names, with their mutable and decimal forms.
    private var allowedClassNames: Set<String> {
        var names = Set(type(of: self).allowedTopLevelClasses.map { NSStringFromClass($0) })
        if names.contains("NSNumber") { names.insert("NSDecimalNumber") }
        return names
    }

    /// `value` archived; `package` for the store's error messages.
    package func storeData(for value: Any) throws -> Data {
        // A predicate is written only where it would read back: Apple's secure unarchiver refuses a class the
        // transformer does not allow, and so does `value(fromStoreData:)`.
        if let writable = value as? any KeyedArchiveWritable, requiresSecureCoding, !allowedClassNames.contains(writable.archivedClassName)
        {
            throw PropertyListError(
                "\(type(of: self)) does not allow \(writable.archivedClassName) (its allowedTopLevelClasses are \(allowedClassNames.sorted().joined(separator: ", "))), so the value would not read back; name a transformer that lists \(writable.archivedClassName)"
            )
        }
        do {
            return try KeyedArchive.archive(value)
        } catch let error as PropertyListError {
            // Not a Foundation value: an `NSCoding` object Foundation's archiver writes.
            guard let object = value as? any NSObject & NSCoding else { throw error }
            do {
                return try NSKeyedArchiver.archivedData(withRootObject: object, requiringSecureCoding: requiresSecureCoding)
            } catch {
                throw PropertyListError("\(type(of: value)) could not be archived: \(error.localizedDescription)")
            }
        }
    }

    /// The value archived in `data`; `package` for the store's error messages.
    package func value(fromStoreData data: Data) throws -> Any? {
        if data.starts(with: [0x04, 0x0B] + Array("streamtyped".utf8)) {
            throw PropertyListError("the value was written by NSArchiver (the typedstream format), which Foundation on Linux cannot read")
        }
        let archive = try KeyedArchive(data: data)
        let allowed = requiresSecureCoding ? allowedClassNames : KeyedArchive.valueClassNames
        let chains = try archive.allClassChains()
        if chains.allSatisfy({ $0.contains(where: KeyedArchive.valueClassNames.contains) }) {
            return try archive.foundationValue(allowing: allowed.union(requiresSecureCoding ? [] : KeyedArchive.valueClassNames))
        }
        // An archived predicate, where the transformer allows one: read here (Foundation's unarchiver on Linux answers
        // "Class NSComparisonPredicate is not decodable").
        if try archive.classes(of: archive.root)?.contains("NSPredicate") == true,
            !requiresSecureCoding || allowedClassNames.contains("NSPredicate")
        {
            return ArchivedPredicate(format: try ArchivedPredicateReader.predicateFormat(of: archive))
        }
        // Classes of the app's own: Foundation's unarchiver, once every class is known to be allowed (it stops the
        // program on one that is not).
        let classes = type(of: self).allowedTopLevelClasses
        let known = Set(classes.map { NSStringFromClass($0) }).union(KeyedArchive.valueClassNames)
        for chain in chains where !chain.contains(where: known.contains) {
            throw PropertyListError(
                "the archive holds an object of class \(chain[0]), which is not among the allowed classes (\(known.sorted().joined(separator: ", ")))"
            )
        }
        do {
            return try NSKeyedUnarchiver.unarchivedObject(ofClasses: classes, from: data)
        } catch {
            throw PropertyListError("the archive could not be read: \(error.localizedDescription)")
        }
    }
}

/// `NSKeyedUnarchiveFromData` (and `NSUnarchiveFromData`): keyed archives without the secure class check.
final class KeyedUnarchiveFromDataTransformer: NSSecureUnarchiveFromDataTransformer, @unchecked Sendable {
    override var requiresSecureCoding: Bool { false }
}

/// Stores a `Codable` Swift value as JSON: the transformer for a transformable attribute whose values are Swift
/// types rather than `NSSecureCoding` classes.
///
/// For example:
/// ```swift
/// struct Address: Codable { var street: String; var city: String }
/// CodableValueTransformer<Address>.register(as: NSValueTransformerName("AddressTransformer"))
/// person.setValue(Address(street: "1 Infinite Loop", city: "Cupertino"), forKey: "address")
/// ```
open class CodableValueTransformer<Value: Codable>: ValueTransformer, StoreDataTransformer, @unchecked Sendable {
    /// A transformer for `Value`.
    public override init() { super.init() }

    /// Registers a transformer for `Value` under `name`.
    public static func register(as name: NSValueTransformerName) {
        ValueTransformer.setValueTransformer(CodableValueTransformer<Value>(), forName: name)
    }

    /// `NSData`: the JSON this transformer makes.
    open override class func transformedValueClass() -> AnyClass { NSData.self }

    /// JSON decodes back.
    open override class func allowsReverseTransformation() -> Bool { true }

    /// `value` (a `Value`) as JSON, or nil.
    open override func transformedValue(_ value: Any?) -> Any? { value.flatMap { try? storeData(for: $0) } }

    /// The `Value` in `value` (JSON `Data`), or nil.
    open override func reverseTransformedValue(_ value: Any?) -> Any? { (value as? Data).flatMap { try? self.value(fromStoreData: $0) } }

    /// `value` as JSON (keys sorted, so equal values store equal bytes).
    package func storeData(for value: Any) throws -> Data {
        guard let typed = value as? Value else { throw PropertyListError("the value is a \(type(of: value)), not a \(Value.self)") }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(typed)
    }

    /// The `Value` the JSON in `data` holds.
    package func value(fromStoreData data: Data) throws -> Any? {
        do {
            return try JSONDecoder().decode(Value.self, from: data)
        } catch {
            throw PropertyListError("the stored bytes are not a JSON \(Value.self): \(error)")
        }
    }
}

extension NSAttributeDescription {
    /// The transformer a transformable attribute uses: the one it names, else Core Data's keyed default.
    package var effectiveValueTransformerName: String {
        guard let name = valueTransformerName, !name.isEmpty else {
            return NSValueTransformerName.keyedUnarchiveFromDataTransformerName.rawValue
        }
        return name
    }

    /// A composite's dictionary is kept as a keyed archive of Foundation values.
    private static let compositeArchiver = KeyedUnarchiveFromDataTransformer()

    /// The transformer that turns this attribute's values into stored bytes, and its name for messages.
    private func storeTransformer(entityName: String) throws -> (ValueTransformer, String) {
        if attributeType == .compositeAttributeType { return (Self.compositeArchiver, "the composite's keyed archive") }
        return (try transformer(entityName: entityName), effectiveValueTransformerName)
    }

    private func transformer(entityName: String) throws -> ValueTransformer {
        guard let transformer = ValueTransformer.registered(effectiveValueTransformerName) else {
            throw CoreDataError(
                .valueTransformation,
                "'\(entityName).\(name)' is transformed by '\(effectiveValueTransformerName)', which is not registered: call ValueTransformer.setValueTransformer(_:forName:) with it before reading or saving this attribute.",
                entityName: entityName, key: name)
        }
        return transformer
    }

    private func failure(_ what: String, _ transformerName: String, entityName: String) -> CoreDataError {
        CoreDataError(
            .valueTransformation, "'\(entityName).\(name)' (transformer '\(transformerName)'): \(what).", entityName: entityName, key: name)
    }

    /// The bytes a transformable attribute's value is stored as.
    ///
    /// - Throws: `CoreDataError(.valueTransformation)` naming entity, attribute and transformer when the transformer is
    ///   not registered or cannot transform the value.
    package func storeData(for value: Any, entityName: String) throws -> Data {
        let (transformer, name) = try storeTransformer(entityName: entityName)
        if let explaining = transformer as? any StoreDataTransformer {
            do {
                return try explaining.storeData(for: value)
            } catch {
                throw failure("cannot store a \(type(of: value)): \(error)", name, entityName: entityName)
            }
        }
        guard let data = transformer.transformedValue(value) else {
            throw failure("the transformer turned a \(type(of: value)) into nil", name, entityName: entityName)
        }
        guard let bytes = data as? Data else {
            throw failure("the transformer turned a \(type(of: value)) into a \(type(of: data)), not Data", name, entityName: entityName)
        }
        return bytes
    }

    /// The value a transformable attribute's stored bytes stand for.
    ///
    /// - Throws: `CoreDataError(.valueTransformation)` naming entity, attribute and transformer when the transformer is
    ///   not registered or cannot read the bytes.
    package func value(fromStoreData data: Data, entityName: String) throws -> Any? {
        let (transformer, name) = try storeTransformer(entityName: entityName)
        if let explaining = transformer as? any StoreDataTransformer {
            do {
                return try explaining.value(fromStoreData: data)
            } catch {
                throw failure("cannot read the stored \(data.count) bytes: \(error)", name, entityName: entityName)
            }
        }
        guard type(of: transformer).allowsReverseTransformation() else {
            throw failure(
                "the transformer does not allow reverse transformation, so stored values cannot be read", name, entityName: entityName)
        }
        guard let value = transformer.reverseTransformedValue(data) else {
            throw failure("the transformer could not turn the stored \(data.count) bytes back into a value", name, entityName: entityName)
        }
        return value
    }
}
