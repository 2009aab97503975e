import Foundation
import OpenCoreDataModel

extension NSManagedObject {
    /// A mutable view of an unordered to-many relationship: changes through it change the relationship (and its
    /// inverses) at once; Core Data's `mutableSetValue(forKey:)`.
    ///
    /// For example:
    /// ```swift
    /// let members = team.mutableSetValue(forKey: "members")
    /// members.add(person)
    /// members.remove(former)
    /// ```
    /// A key that is not an unordered to-many relationship stops the program, as an unknown key does (use
    /// `mutableOrderedSetValue(forKey:)` for an ordered one).
    public func mutableSetValue(forKey key: String) -> ManagedSet {
        guard let index = entity.propertyIndex(named: key), let relationship = entity.allProperties[index] as? NSRelationshipDescription,
            relationship.isToMany, !relationship.isOrdered
        else {
            preconditionFailure(
                "'\(entity.name).\(key)' is not an unordered to-many relationship; mutableSetValue(forKey:) needs one (mutableOrderedSetValue(forKey:) takes an ordered one)."
            )
        }
        return ManagedSet(object: self, key: key)
    }
}

/// The live view `mutableSetValue(forKey:)` returns, with `NSMutableSet`'s methods: reading it reads the relationship,
/// and each change sets it (inverses kept in step, as `setValue(_:forKey:)` keeps them).
///
/// For example:
/// ```swift
/// let tags = note.mutableSetValue(forKey: "tags")
/// tags.addObjects(from: [work, urgent])
/// if tags.contains(urgent) { tags.remove(urgent) }
/// ```
/// A change the relationship cannot take (an object of another entity or context, a deleted source) stops the
/// program with the error, as Core Data's does; `setCheckedValue(_:forKey:)` with a `Set` throws it instead.
public final class ManagedSet: Sequence {
    private let object: NSManagedObject
    private let key: String

    init(object: NSManagedObject, key: String) {
        self.object = object
        self.key = key
    }

    /// The destinations.
    public var allObjects: Set<NSManagedObject> { object.value(forKey: key) as? Set<NSManagedObject> ?? [] }
    /// How many destinations there are.
    public var count: Int { allObjects.count }
    /// Whether `member` is a destination.
    public func contains(_ member: NSManagedObject) -> Bool { allObjects.contains(member) }
    /// The destinations, in no particular order.
    public func makeIterator() -> Set<NSManagedObject>.Iterator { allObjects.makeIterator() }

    private func change(_ body: (inout Set<NSManagedObject>) -> Void) {
        var members = allObjects
        let before = members
        body(&members)
        guard members != before else { return }
        do {
            try object.setCheckedValue(members, forKey: key)
        } catch {
            preconditionFailure("\(error) (setCheckedValue(_:forKey:) with a Set throws this instead)")
        }
    }

    /// Adds `member` (nothing if it is there already).
    public func add(_ member: NSManagedObject) { change { $0.insert(member) } }
    /// Adds every object of `members`.
    public func addObjects(from members: some Sequence<NSManagedObject>) { change { $0.formUnion(members) } }
    /// Removes `member` (nothing if it is not there).
    public func remove(_ member: NSManagedObject) { change { $0.remove(member) } }
    /// Removes every object of `members`.
    public func minus(_ members: some Sequence<NSManagedObject>) { change { $0.subtract(members) } }
    /// Keeps only the objects that are also in `members`.
    public func intersect(_ members: some Sequence<NSManagedObject>) { change { $0.formIntersection(members) } }
    /// Makes the destinations exactly `members`.
    public func setSet(_ members: some Sequence<NSManagedObject>) { change { $0 = Set(members) } }
    /// Removes every destination.
    public func removeAllObjects() { change { $0.removeAll() } }
}
