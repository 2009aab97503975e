internal import OpenCoreData

/// A class whose instances are saved in a model container: what `@Model` makes a class.
///
/// Models compare and hash by identity, as SwiftData's do.
public protocol PersistentModel: AnyObject, Observable, Hashable, Identifiable {
    /// Where the model's values live: in the model until it is inserted into a context, then in the context.
    var persistentBackingData: ModelBackingData { get set }
    /// The model's persisted properties, in declaration order.
    static var schemaMetadata: [Schema.PropertyMetadata] { get }
    /// A model whose values are those of `backingData` (a context makes fetched models with it).
    init(backingData: ModelBackingData)
    /// Groups of properties unique together (`#Unique`); none by default.
    static var uniquenessConstraints: [[AnyKeyPath]] { get }
    /// Groups of properties the store indexes (`#Index`); none by default.
    static var indexes: [[AnyKeyPath]] { get }
}

extension PersistentModel {
    /// No groups of properties unique together.
    public static var uniquenessConstraints: [[AnyKeyPath]] { [] }
    /// No indexes.
    public static var indexes: [[AnyKeyPath]] { [] }

    /// The model's identifier: temporary until the model is saved, then the store's.
    public var persistentModelID: PersistentIdentifier {
        persistentBackingData.identifier(entityName: Schema.entityName(of: type(of: self)))
    }

    /// The model's identifier, for `Identifiable`.
    public var id: PersistentIdentifier { persistentModelID }

    /// The context the model is inserted into or was fetched by; nil before it is inserted, and once its deletion is
    /// saved (it has left the context, as in SwiftData).
    public var modelContext: ModelContext? {
        let backing = persistentBackingData
        guard let object = backing.object, object.managedObjectContext != nil else { return nil }
        return backing.context
    }

    /// Whether the model has unsaved changes in its context.
    public var hasChanges: Bool { persistentBackingData.object?.hasChanges ?? false }

    /// Whether the model has been deleted from its context (and the deletion not yet saved or undone).
    public var isDeleted: Bool { persistentBackingData.object?.isDeleted ?? false }

    /// The value of a property, as SwiftData's generated accessors read it (apps may call it too).
    public func getValue<Value>(forKey key: KeyPath<Self, Value>) -> Value { self[keyPath: key] }

    /// Sets a property, as SwiftData's generated accessors do.
    ///
    /// - Precondition: `key` names a settable property.
    public func setValue<Value>(forKey key: KeyPath<Self, Value>, to value: Value) {
        guard let writable = key as? ReferenceWritableKeyPath<Self, Value> else {
            preconditionFailure("\(key) is not a settable property of \(Self.self)")
        }
        self[keyPath: writable] = value
    }

    /// Models are equal only to themselves.
    public static func == (a: Self, b: Self) -> Bool { a === b }

    /// Hashes the model's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
