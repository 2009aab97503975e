import OpenCoreDataContext
import OpenCoreDataModel

/// Which object a result is, without the object: a stored row by entity and primary key, or an unsaved object
/// (held here, as the context holds its inserted objects).
enum RowKey: Hashable {
    /// A stored row: the entity's number in the engine's entity table, and the row's primary key.
    case stored(entity: Int32, primaryKey: Int64)
    /// An object inserted in the context and not saved yet.
    case unsaved(NSManagedObject)

    static func == (a: RowKey, b: RowKey) -> Bool {
        switch (a, b) {
        case (.stored(let e1, let k1), .stored(let e2, let k2)): return e1 == e2 && k1 == k2
        case (.unsaved(let o1), .unsaved(let o2)): return o1 === o2
        default: return false
        }
    }

    func hash(into hasher: inout Hasher) {
        switch self {
        case .stored(let entity, let primaryKey):
            hasher.combine(entity)
            hasher.combine(primaryKey)
        case .unsaved(let object): hasher.combine(ObjectIdentifier(object))
        }
    }

    /// What `Set` and `Dictionary` hash: one word (the primary key with the entity number in its top bits, or the
    /// object's address) mixed by `_IdentityHash`, not SipHash.
    ///
    /// The engine looks rows up by key in every batch (a bulk
    /// batch once per result), so this runs per row.
    func _rawHashValue(seed: Int) -> Int {
        switch self {
        case .stored(let entity, let primaryKey):
            return _IdentityHash.mix(UInt64(bitPattern: primaryKey) ^ (UInt64(UInt32(bitPattern: entity)) &<< 40), seed: seed)
        case .unsaved(let object): return _IdentityHash.mix(ObjectIdentifier(object), seed: seed ^ 1)
        }
    }

    /// The store's tie-break between results whose sort values are equal: stored rows by primary key, then unsaved
    /// objects in insertion order (read from the object, so a just-saved one sorts by its new primary key).
    var storeOrder: (Int8, Int64) {
        switch self {
        case .stored(_, let primaryKey): return (0, primaryKey)
        case .unsaved(let object): return object._storeOrderKey
        }
    }
}
