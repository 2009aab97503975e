import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore
import Synchronization

// Key-value coding: Apple's non-throwing accessors, the checked variants, key paths and collection operators.
extension NSManagedObject {
    // MARK: Key-value coding

    /// The value of a property: an attribute value (`NSNumber`, `String`, `Date`, …), the destination of a to-one
    /// relationship, or a `Set<NSManagedObject>` for a to-many; Core Data's signature.
    ///
    /// For example:
    /// ```swift
    /// let name = product.value(forKey: "name") as? String
    /// ```
    /// A key that is not a property goes to `value(forUndefinedKey:)`, which stops the program by default (an
    /// unknown key is a programming error, as on Apple platforms). A fault whose row was deleted from the store
    /// reads nil, as Core Data's faults do with `shouldDeleteInaccessibleFaults`. Use `checkedValue(forKey:)` for keys
    /// that come from input.
    public func value(forKey key: String) -> Any? {
        guard let index = entity.propertyIndex(named: key) else { return value(forUndefinedKey: key) }
        return readable { try value(at: index) }
    }

    /// The value of a property, or a thrown error for a key the entity does not have.
    ///
    /// For example:
    /// ```swift
    /// let value = try object.checkedValue(forKey: keyTypedByTheUser)
    /// ```
    /// - Throws: `CoreDataError(.unknownKey)` if the entity has no such property (and the class computes no value
    ///   for it in `value(forUndefinedKey:)`), `.objectNotFound` if the object's row was deleted from the store
    ///   before its values were loaded.
    public func checkedValue(forKey key: String) throws -> Any? {
        guard let index = entity.propertyIndex(named: key) else {
            let probe = UndefinedKeyProbe()
            let value = Self.$undefinedKeyProbe.withValue(probe) { self.value(forUndefinedKey: key) }
            if probe.missedKey { throw unknownKey(key) }
            return value
        }
        return try value(at: index)
    }

    /// Reads through `body`: a row deleted from the store reads nil; any other failure (the object's context is
    /// gone, the store cannot be read) stops the program with its message, as an unfulfillable fault does in Core
    /// Data.
    ///
    /// The checked variants throw those errors instead.
    func readable<Value>(_ body: () throws -> Value?) -> Value? {
        do {
            return try body()
        } catch let error as CoreDataError where error.code == .objectNotFound {
            // Core Data marks such a fault deleted when its context says so (`shouldDeleteInaccessibleFaults`).
            if managedObjectContext?.shouldDeleteInaccessibleFaults == true { withContext { isInaccessible = true } }
            return nil
        } catch {
            preconditionFailure("\(error) (checkedValue(forKey:) and checkedValue(forKeyPath:) throw this instead)")
        }
    }

    /// Set while `checkedValue(forKey:)` asks `value(forUndefinedKey:)`: the default implementation then reports the
    /// unknown key to the probe instead of stopping the program.
    final class UndefinedKeyProbe: @unchecked Sendable {
        var missedKey = false
    }

    @TaskLocal static var undefinedKeyProbe: UndefinedKeyProbe?

    /// Sets a property; Core Data's signature.
    ///
    /// Relationship values are an object (or nil) for a to-one and a `Set`
    /// or array of objects for a to-many; inverse relationships are updated at once.
    ///
    /// For example:
    /// ```swift
    /// product.setValue(185, forKey: "price")
    /// ```
    /// An unknown key stops the program with a precondition failure naming the entity and the key. A value the
    /// property cannot hold (a string for an integer, an object of another entity) leaves the property as it was and
    /// makes the next `save()` fail with a validation error naming the entity, key and value, until the property is
    /// set to a value it can hold or the context rolls back. Use `setCheckedValue(_:forKey:)` to get the error at
    /// once.
    public func setValue(_ value: Any?, forKey key: String) {
        do {
            try setCheckedValue(value, forKey: key)
        } catch {
            reject(error, key: key, value: value, alternative: "setCheckedValue(_:forKey:)")
        }
    }

    /// What a non-throwing setter does with a failure: an unknown key or a lost context stops the program (a
    /// programming error); any other (a value the property cannot hold) is remembered for the next save to report.
    final func reject(_ error: any Error, key: String, value: Any?, alternative: String) {
        guard let error = error as? CoreDataError, error.code != .unknownKey, error.code != .objectWithoutContext,
            let context = managedObjectContext, let index = entity.propertyIndex(named: key)
        else {
            preconditionFailure("\(error) (\(alternative) throws this instead)")
        }
        context.rejectValue(of: self, at: index, error, value: value.map { String(describing: $0) } ?? "nil")
    }

    /// Sets a property, or throws when the key is unknown or the value does not fit.
    ///
    /// For example:
    /// ```swift
    /// try object.setCheckedValue(valueFromJSON, forKey: keyFromJSON)
    /// ```
    /// - Throws: `CoreDataError(.unknownKey)` for an unknown key, `.wrongValueType` for a value the property
    ///   cannot hold (with the entity, key and value in the message), `.managedObjectReferentialIntegrity` for a
    ///   deleted object.
    public func setCheckedValue(_ value: Any?, forKey key: String) throws {
        try setCheckedValue(value, forKey: key, maintainingInverse: true)
    }

    /// Sets a property without keeping its inverse relationship in step; Core Data's signature.
    ///
    /// As on Apple platforms, a primitive setter is for code that keeps the object graph consistent itself (custom
    /// accessors, importers): the change is saved like any other, but the objects on the other side of a relationship
    /// are not told, so they read their old value until refreshed or saved and fetched again. When the store keeps a
    /// one-to-many relationship in the row of the "one" side, setting the to-one primitively costs nothing on the other
    /// side, however many objects its to-many holds (the regular setter loads that to-many to add to it).
    ///
    /// For example:
    /// ```swift
    /// employee.setPrimitiveValue(department, forKey: "department")   // department.employees is not loaded
    /// ```
    /// Errors behave as in `setValue(_:forKey:)`.
    ///
    /// - Complexity: O(1) for a to-one relationship or an attribute.
    public func setPrimitiveValue(_ value: Any?, forKey key: String) {
        do {
            try setCheckedValue(value, forKey: key, maintainingInverse: false)
        } catch {
            reject(error, key: key, value: value, alternative: "setCheckedPrimitiveValue(_:forKey:)")
        }
    }

    /// The value of a property, read as `value(forKey:)` reads it; Core Data's signature.
    ///
    /// For example:
    /// ```swift
    /// let stored = object.primitiveValue(forKey: "name") as? String
    /// ```
    public func primitiveValue(forKey key: String) -> Any? { value(forKey: key) }

    /// `setPrimitiveValue(_:forKey:)`, throwing what it would report at the next save.
    ///
    /// For example:
    /// ```swift
    /// try employee.setCheckedPrimitiveValue(department, forKey: "department")
    /// ```
    /// - Throws: the errors of `setCheckedValue(_:forKey:)`.
    public func setCheckedPrimitiveValue(_ value: Any?, forKey key: String) throws {
        try setCheckedValue(value, forKey: key, maintainingInverse: false)
    }

    private func setCheckedValue(_ value: Any?, forKey key: String, maintainingInverse: Bool) throws {
        try withContext {
            guard let index = entity.propertyIndex(named: key) else { throw unknownKey(key) }
            if let type = entity._attributeType(at: index) {
                let v = try ValueConversion.fromAny(
                    value, type: type, attribute: entity.allProperties[index] as! NSAttributeDescription, entityName: entity.name)
                try setAttribute(consume v, at: index)
            } else if entity.allProperties[index] is NSFetchedPropertyDescription {
                throw CoreDataError(
                    .wrongValueType,
                    "'\(entity.name).\(key)' is a fetched property: it is read-only (its value is the result of its fetch).",
                    entityName: entity.name, key: key)
            } else if let relationship = entity.allProperties[index] as? NSRelationshipDescription {
                let checked = try relationshipValue(value, relationship)
                if relationship.isOrdered, case .toMany(let members) = checked {
                    // The order given, or (for a Set) the members already there in their order, then the new ones.
                    let kept = try orderedMembers(at: index).filter(members.contains)
                    let order = orderedValue(value) ?? (kept + members.subtracting(kept).sorted { $0.objectID < $1.objectID })
                    try setOrderedMembers(order, at: index, maintainingInverse: maintainingInverse)
                } else {
                    try setPropertyValue(checked, at: index, maintainingInverse: maintainingInverse)
                }
            }
            if hasRejectedValue { managedObjectContext?.clearRejectedValue(of: self, at: index) }
        }
    }

    /// A typed setter's path: `value` is already an attribute value (no `Any` to cast) and `index` is its property's
    /// position in the object's entity.
    ///
    /// Anything this path does not take — a relationship, a value the attribute
    /// cannot hold — goes through `setValue(original(), forKey:)`, which converts it or throws the error a key-value
    /// caller would get.
    @usableFromInline
    package final func setAttributeValue(_ value: consuming AttributeValue, at index: Int, original: () -> Any?) throws {
        let handled = try withContext { () throws -> Bool in
            guard let type = entity._attributeType(at: index) else { return false }
            // Moved out (a captured value cannot be consumed): a string or data set costs no reference count here.
            var taken = AttributeValue.null
            swap(&taken, &value)
            guard let converted = ValueConversion.coerced(consume taken, to: type) else { return false }
            try setAttribute(consume converted, at: index)
            if hasRejectedValue { managedObjectContext?.clearRejectedValue(of: self, at: index) }
            return true
        }
        if !handled { try setCheckedValue(original(), forKey: entity.allProperties[index].name) }
    }

    /// A typed accessor's set (`@Managed`, `@Model`): `setAttributeValue(_:at:original:)`, with a failure handled as
    /// `setValue(_:forKey:)` handles it — a value the attribute cannot hold (NaN, an integer out of its range) fails the
    /// next save; a deleted object's change or a lost context stops the program with the error.
    package final func setAttributeValueAsAccessor(_ value: consuming AttributeValue, at index: Int, original: () -> Any?) {
        do {
            try setAttributeValue(consume value, at: index, original: original)
        } catch {
            reject(error, key: entity.allProperties[index].name, value: original(), alternative: "setCheckedValue(_:forKey:)")
        }
    }

    /// A typed accessor's read of the property at `index`, as `value(forKey:)` reads it (a row deleted from the store
    /// reads nil).
    @usableFromInline
    package final func valueAsAccessor(at index: Int) -> Any? { readable { try value(at: index) } }

    /// A typed accessor's read of a plain attribute at `index` as the attribute value it holds, with no `Any` made.
    ///
    /// Plain: a string, number, boolean, date, UUID or URI. Nil for any other property, which the caller reads through
    /// `valueAsAccessor(at:)`. A row deleted from the store reads `.null`, as `value(forKey:)` reads it nil.
    @usableFromInline
    package final func attributeValueAsAccessor(at index: Int) -> AttributeValue? {
        switch entity._attributeType(at: index) {
        case .stringAttributeType, .integer16AttributeType, .integer32AttributeType, .integer64AttributeType, .doubleAttributeType,
            .floatAttributeType, .booleanAttributeType, .dateAttributeType, .decimalAttributeType, .UUIDAttributeType, .URIAttributeType:
            break
        default:
            return nil
        }
        let read = readable { () throws -> AttributeValue? in
            try withContext { () throws -> AttributeValue in
                if snapshot == nil, let value = partiallyFetchedValue(at: index) { return value }
                guard case .attribute(let value) = try currentValue(at: index) else { return .null }
                return value
            }
        }
        return read ?? .null
    }

    /// A new object's first value for the attribute at `index`.
    ///
    /// `ModelContext.insert` hands over the values a model kept before it had a row with this: converted and recorded
    /// as the object's change, without what a set on an object observers may already know needs (the lock, event
    /// originals, committed values, rejected values). Only for an object made in the caller's `performAndWait` whose
    /// insertion is not reported yet; anything else — or a value the attribute cannot hold — returns false, and the
    /// caller sets the value by key.
    ///
    /// Half of the cost of `setAttributeValue(_:at:original:)` for such an object (W6's `@Model` contender, callgrind).
    package final func setInitialAttributeValue(_ value: borrowing AttributeValue, at index: Int) -> Bool {
        guard state == .inserted, !insertionReported, !hasRejectedValue, let type = entity._attributeType(at: index),
            let converted = ValueConversion.coerced(copy value, to: type)
        else { return false }
        changes[index] = .attribute(consume converted)
        return true
    }

    /// A typed getter's path: the value of the property at `index` in the object's entity, as `value(forKey:)`
    /// gives it.
    @usableFromInline
    final func value(at index: Int) throws -> Any? {
        try withContext {
            let property = entity.allProperties[index]
            if let attribute = property as? NSAttributeDescription {
                // An attribute (the usual key): one cast, not one for each other kind of property.
                let value: AttributeValue
                if snapshot == nil, let partial = partiallyFetchedValue(at: index) {
                    value = partial
                } else {
                    guard case .attribute(let current) = try currentValue(at: index) else { return nil }
                    value = current
                }
                return try ValueConversion.toAny(value, attribute: attribute, entityName: entity.name)
            }
            if snapshot == nil, let value = partiallyFetchedValue(at: index) { return try anyValue(.attribute(value), property: property) }
            if (property as? NSRelationshipDescription)?.isOrdered == true { return NSOrderedSet(array: try orderedMembers(at: index)) }
            if let fetched = property as? NSFetchedPropertyDescription { return try fetchedValue(at: index, fetched) }
            return try anyValue(try currentValue(at: index), property: property)
        }
    }

    /// The property index a typed accessor's storage key path stands for in the object's entity, once remembered
    /// (see `ManagedKeyNames`).
    @usableFromInline
    final func accessorIndex(_ storage: AnyKeyPath) -> Int? { entity._accessorIndex(for: storage) }

    /// The value at a key path through to-one relationships (a single value) or to-many ones (a set of values,
    /// or a number for `@count`, `@sum`, `@avg`, `@min`, `@max`); Core Data's signature.
    ///
    /// For example:
    /// ```swift
    /// let department = employee.value(forKeyPath: "department.name") as? String
    /// ```
    /// A key path that names no property stops the program with a precondition failure naming it; use
    /// `checkedValue(forKeyPath:)` for key paths that come from input.
    public func value(forKeyPath keyPath: String) -> Any? {
        do {
            return try checkedValue(forKeyPath: keyPath)
        } catch let error as CoreDataError where error.code == .unknownKey {
            preconditionFailure(error.message + " (checkedValue(forKeyPath:) throws this instead)")
        } catch {
            return readable { throw error }
        }
    }

    /// The value at a key path, or a thrown error for a key path the model does not have.
    ///
    /// For example:
    /// ```swift
    /// let total = try department.checkedValue(forKeyPath: "employees.@sum.salary")
    /// ```
    /// - Throws: `CoreDataError(.unknownKey)` naming the first component the model lacks or an unknown collection
    ///   operator; the errors of `checkedValue(forKey:)`.
    public func checkedValue(forKeyPath keyPath: String) throws -> Any? {
        try withContext {
            let components = keyPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            // A single key the entity does not have may be a computed one (`value(forUndefinedKey:)`).
            if components.count == 1, entity.propertiesByName[keyPath] == nil { return try checkedValue(forKey: keyPath) }
            try validateKeyPath(components, keyPath: keyPath)
            var objects: [NSManagedObject] = [self]
            var isCollection = false
            for (i, key) in components.enumerated() {
                if key.hasPrefix("@") {
                    let rest = components[(i + 1)...].joined(separator: ".")
                    return try collectionOperator(key, rest: rest, objects: objects, keyPath: keyPath)
                }
                if i == components.count - 1 {
                    guard isCollection else { return try objects.first?.checkedValue(forKey: key) }
                    var values: Set<AnyHashable> = []
                    for object in objects {
                        let value = try object.checkedValue(forKey: key)
                        if let set = value as? Set<NSManagedObject> {
                            values.formUnion(set.map { AnyHashable($0) })
                        } else if let hashable = value as? AnyHashable {
                            values.insert(hashable)
                        }
                    }
                    return values
                }
                if objects.first?.entity.propertiesByName[key]?.isComposite == true {
                    // Into a composite's value: the element at the rest of the path (`address.street`).
                    let values = try objects.map { try $0.compositeElement(named: key, at: components[(i + 1)...]) }
                    guard isCollection else { return values.first ?? nil }
                    return Set(values.compactMap { $0 as? AnyHashable })
                }
                var next: [NSManagedObject] = []
                for object in objects {
                    guard let index = object.entity.propertyIndex(named: key) else { throw object.unknownKey(key, in: keyPath) }
                    switch try object.currentValue(at: index) {
                    case .toOne(let o): if let o { next.append(o) }
                    case .toMany(let set):
                        isCollection = true
                        next.append(contentsOf: set.sorted { $0.objectID < $1.objectID })
                    case .attribute: break
                    }
                }
                if next.isEmpty, !isCollection { return nil }
                objects = next
            }
            return nil
        }
    }

    /// The element at `path` inside the value of the composite attribute `key` (a nested composite as its
    /// dictionary; the whole composite for an empty path), or nil.
    func compositeElement(named key: String, at path: ArraySlice<String>) throws -> Any? {
        var element = try checkedValue(forKey: key)
        for name in path { element = (element as? [String: Any])?[name] }
        return element
    }

    /// Checks every component of a key path against the model, so that an unknown key is an error even when a
    /// relationship on the way is nil.
    ///
    /// After an object operator (`@unionOfObjects`, …) the rest of the path is checked against the entity of the
    /// objects before it.
    func validateKeyPath(_ components: [String], keyPath: String) throws {
        guard let index = components.firstIndex(where: Self.objectOperators.contains) else {
            _ = try entity.resolveKeyPath(keyPath)
            return
        }
        let before = components[..<index].joined(separator: ".")
        let relationship = before.isEmpty ? nil : try entity.resolveKeyPath(before).property as? NSRelationshipDescription
        guard let relationship, relationship.isToMany, let destination = relationship.destinationEntity else {
            throw CoreDataError(
                .unknownKey,
                "Key path '\(keyPath)': \(components[index]) takes the objects of a to-many relationship, and '\(before)' is not one.",
                entityName: entity.name, key: keyPath)
        }
        let rest = components[(index + 1)...].joined(separator: ".")
        guard !rest.isEmpty else {
            throw CoreDataError(
                .unknownKey, "Key path '\(keyPath)': \(components[index]) needs a key path after it.",
                entityName: entity.name, key: keyPath)
        }
        if !Self.objectOperators.contains(components[index + 1]) { _ = try destination.resolveKeyPath(rest) }
    }

    /// Key-value coding's object and collection operators: the values of the key path after them for each object of
    /// the collection before them, as an array (`@unionOfObjects`, `@unionOfArrays`), without repeats
    /// (`@distinctUnionOfObjects`, `@distinctUnionOfArrays`) or as a set (`@unionOfSets`, `@distinctUnionOfSets`);
    /// the `…Arrays` and `…Sets` forms flatten values that are collections themselves.
    static let objectOperators: Set<String> = [
        "@unionOfObjects", "@distinctUnionOfObjects", "@unionOfArrays", "@distinctUnionOfArrays", "@unionOfSets",
        "@distinctUnionOfSets",
    ]

    /// An object operator's result over `objects` (see `objectOperators`): nil values are left out.
    func objectOperator(_ op: String, rest: String, objects: [NSManagedObject]) throws -> Any {
        var values: [Any] = []
        for object in objects {
            guard let value = try object.checkedValue(forKeyPath: rest), !(value is NSNull) else { continue }
            if op == "@unionOfObjects" || op == "@distinctUnionOfObjects" {
                values.append(value)
            } else if let set = value as? Set<AnyHashable> {
                values.append(contentsOf: set.map { $0.base })
            } else if let ordered = value as? NSOrderedSet {
                values.append(contentsOf: ordered.array)
            } else if let array = value as? [Any] {
                values.append(contentsOf: array)
            } else {
                values.append(value)
            }
        }
        switch op {
        case "@unionOfObjects", "@unionOfArrays": return values
        case "@unionOfSets", "@distinctUnionOfSets": return Set(values.compactMap { $0 as? AnyHashable })
        default:
            // Without repeats, in first-seen order (Apple's order is unspecified).
            var seen: Set<AnyHashable> = []
            return values.filter { value in (value as? AnyHashable).map { seen.insert($0).inserted } ?? true }
        }
    }

    func collectionOperator(_ op: String, rest: String, objects: [NSManagedObject], keyPath: String) throws -> Any? {
        if Self.objectOperators.contains(op) { return try objectOperator(op, rest: rest, objects: objects) }
        if op == "@count" { return NSNumber(value: objects.count) }
        var values: [AttributeValue] = []
        for object in objects {
            let v = rest.isEmpty ? nil : try object.checkedValue(forKeyPath: rest)
            if let value = AttributeValue(any: v), !value.isNull { values.append(value) }
        }
        do {
            let result = try PredicateSemantics.aggregate(op, values)
            switch result {
            case .null: return nil
            case .integer(let i): return NSNumber(value: i)
            case .double(let d): return NSNumber(value: d)
            default: return ValueConversion.toAny(result, type: .stringAttributeType) ?? nil
            }
        } catch {
            throw CoreDataError(.unknownKey, "Key path '\(keyPath)': \(error)", entityName: entity.name, key: keyPath)
        }
    }

    func unknownKey(_ key: String, in path: String? = nil) -> CoreDataError {
        CoreDataError(
            .unknownKey,
            "Entity '\(entity.name)' has no property '\(key)'\(path.map { " (in key path '\($0)')" } ?? "").",
            entityName: entity.name, key: path ?? key)
    }

    func anyValue(_ value: PropertyValue, property: NSPropertyDescription) throws -> Any? {
        switch value {
        case .attribute(let v):
            // A fetched property holds no value here (`value(at:)` fetches it).
            guard let attribute = property as? NSAttributeDescription else { return nil }
            return try ValueConversion.toAny(v, attribute: attribute, entityName: entity.name)
        case .toOne(let o): return o
        case .toMany(let s): return s
        }
    }

    func relationshipValue(_ value: Any?, _ relationship: NSRelationshipDescription) throws -> PropertyValue {
        let where_ = "'\(entity.name).\(relationship.name)'"
        func check(_ object: NSManagedObject) throws -> NSManagedObject {
            guard let destination = relationship.destinationEntity, object.entity.isKindOf(entity: destination) else {
                throw CoreDataError(
                    .wrongValueType,
                    "\(where_) holds \(relationship.destinationEntityName) objects; it cannot hold a \(object.entity.name).",
                    entityName: entity.name, key: relationship.name)
            }
            if let mine = managedObjectContext, let theirs = object.managedObjectContext, mine !== theirs {
                throw CoreDataError(
                    .managedObjectExternalRelationship,
                    "\(where_) cannot point to an object of another context (\(object.objectID)); fetch it in this context with existingObject(with:).",
                    entityName: entity.name, key: relationship.name)
            }
            return object
        }
        if !relationship.isToMany {
            if value == nil || value is NSNull { return .toOne(nil) }
            if let optional = value as? any _OptionalProtocol, optional._wrapped == nil { return .toOne(nil) }
            guard let object = (value as? NSManagedObject) ?? ((value as? any _OptionalProtocol)?._wrapped as? NSManagedObject) else {
                throw CoreDataError(
                    .wrongValueType, "\(where_) is a to-one relationship; it needs a managed object or nil, not \(type(of: value!)).",
                    entityName: entity.name, key: relationship.name)
            }
            return .toOne(try check(object))
        }
        if value == nil || value is NSNull { return .toMany([]) }
        var set: Set<NSManagedObject> = []
        if let sequence = value as? any Sequence {
            for element in sequence {
                guard let object = element as? NSManagedObject else {
                    throw CoreDataError(
                        .wrongValueType,
                        "\(where_) is a to-many relationship; its elements must be managed objects, not \(type(of: element)).",
                        entityName: entity.name, key: relationship.name)
                }
                set.insert(try check(object))
            }
            return .toMany(set)
        }
        throw CoreDataError(
            .wrongValueType, "\(where_) is a to-many relationship; it needs a Set or array of managed objects, not \(type(of: value!)).",
            entityName: entity.name, key: relationship.name)
    }
}
