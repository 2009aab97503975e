import Foundation

/// An index a store keeps for an entity, to speed fetches by its properties; Core Data's class of this name.
///
/// Xcode's "Fetch Indexes", a model's older compound indexes and attributes marked indexed all become one.
///
/// For example:
/// ```swift
/// let byDate = NSFetchIndexDescription(name: "byDate", elements: [NSFetchIndexElementDescription(propertyName: "date", ascending: false)])
/// entity.indexes = [byDate]
/// ```
public final class NSFetchIndexDescription: @unchecked Sendable {
    /// The index's name (the store's index is `Z_<Entity>_<name>`).
    public var name: String
    /// The indexed properties, in order.
    public var elements: [NSFetchIndexElementDescription]

    /// An index named `name` over `elements`.
    public init(name: String, elements: [NSFetchIndexElementDescription]) {
        self.name = name
        self.elements = elements
    }
}

/// One property of a fetch index, and its direction.
///
/// For example:
/// ```swift
/// let element = NSFetchIndexElementDescription(propertyName: "name", ascending: true)
/// ```
public final class NSFetchIndexElementDescription: @unchecked Sendable {
    /// How the index orders values.
    public enum CollationType: UInt, Sendable {
        /// An ordinary B-tree index.
        case binary = 0
        /// A spatial index (not kept by OpenCoreData's store, which skips such elements).
        case rTree = 1
    }

    /// The indexed property's name.
    public var propertyName: String
    /// Whether the index orders the values ascending.
    public var isAscending: Bool
    /// The kind of index.
    public var collationType: CollationType

    /// An element indexing `propertyName`.
    public init(propertyName: String, ascending: Bool = true, collationType: CollationType = .binary) {
        self.propertyName = propertyName
        self.isAscending = ascending
        self.collationType = collationType
    }
}
