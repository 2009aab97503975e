import Foundation
import OpenCoreDataModel

// Ordered to-many relationships: membership is the to-many's set, as for any to-many; the order is the committed
// order (from the store) or, once changed, `pendingOrder`, reconciled with the members on every read.
extension NSManagedObject {
    /// The destinations of the ordered to-many at `index`, in order: the pending order (or the committed one) kept to
    /// the current members, then any member it lacks, by object ID.
    func orderedMembers(at index: Int) throws -> [NSManagedObject] {
        guard case .toMany(let members) = try currentValue(at: index) else { return [] }
        var order: [NSManagedObject]
        if changes[index] != nil, let pending = pendingOrder[index] {
            order = pending
        } else if let context = managedObjectContext {
            order = try committedToMany(at: index).map { context.object(with: $0) }
        } else {
            order = []
        }
        var seen: Set<ObjectIdentifier> = []
        order = order.filter { members.contains($0) && seen.insert(ObjectIdentifier($0)).inserted }
        if order.count < members.count {
            order += members.filter { !seen.contains(ObjectIdentifier($0)) }.sorted { $0.objectID < $1.objectID }
        }
        return order
    }

    /// Sets the ordered to-many at `index` to `order` (members and order), keeping inverses in step unless
    /// `maintainingInverse` is false.
    func setOrderedMembers(_ order: [NSManagedObject], at index: Int, maintainingInverse: Bool = true) throws {
        journalBeforeChange(at: index)
        var seen: Set<ObjectIdentifier> = []
        let unique = order.filter { seen.insert(ObjectIdentifier($0)).inserted }
        pendingOrder[index] = unique
        try setPropertyValue(.toMany(Set(unique)), at: index, maintainingInverse: maintainingInverse)
        // `recordChange` drops a change whose members equal the committed ones: a new order alone is still a change.
        if changes[index] == nil, try unique.map(\.objectID) != committedToMany(at: index) {
            try recordChange(.toMany(Set(unique)), at: index, keepingOrder: true)
        }
    }

    /// The destinations of an ordered to-many as a caller gave them: an `NSOrderedSet`, an array (or any sequence in
    /// order), or a `Set` (its members after those already there, by object ID).
    func orderedValue(_ value: Any?) -> [NSManagedObject]? {
        switch value {
        case let ordered as NSOrderedSet: return ordered.array.compactMap { $0 as? NSManagedObject }
        case let array as [NSManagedObject]: return array
        case is Set<NSManagedObject>: return nil
        case let sequence as any Sequence:
            let objects = sequence.compactMap { $0 as? NSManagedObject }
            return objects.isEmpty ? nil : objects
        default: return nil
        }
    }

    /// A mutable view of an ordered to-many relationship: changes through it change the relationship (and its
    /// inverses) at once; Core Data's `mutableOrderedSetValue(forKey:)`.
    ///
    /// For example:
    /// ```swift
    /// let children = folder.mutableOrderedSetValue(forKey: "children")
    /// children.insert(bookmark, at: 0)
    /// children.moveObjects(at: IndexSet(integer: 3), to: 1)
    /// ```
    /// A key that is not an ordered to-many relationship stops the program, as an unknown key does.
    public func mutableOrderedSetValue(forKey key: String) -> ManagedOrderedSet {
        guard let index = entity.propertyIndex(named: key), (entity.allProperties[index] as? NSRelationshipDescription)?.isOrdered == true
        else {
            preconditionFailure(
                "'\(entity.name).\(key)' is not an ordered to-many relationship; mutableOrderedSetValue(forKey:) needs one.")
        }
        return ManagedOrderedSet(object: self, index: index)
    }
}

/// The live view `mutableOrderedSetValue(forKey:)` returns, with `NSMutableOrderedSet`'s methods: reading it reads the
/// relationship, and each change sets it (inverses kept in step, as `setValue(_:forKey:)` keeps them).
///
/// For example:
/// ```swift
/// let items = order.mutableOrderedSetValue(forKey: "items")
/// items.add(line)
/// let first = items.object(at: 0) as? NSManagedObject
/// ```
/// A change the relationship cannot take (an object of another entity or context, a deleted source) stops the
/// program with the error, as Core Data's does; `setCheckedValue(_:forKey:)` with an `NSOrderedSet` throws it instead.
public final class ManagedOrderedSet: Sequence {
    private let object: NSManagedObject
    private let index: Int

    init(object: NSManagedObject, index: Int) {
        self.object = object
        self.index = index
    }

    /// The destinations, in order.
    public var array: [NSManagedObject] {
        object.readable { try object.withContext { try object.orderedMembers(at: index) } } ?? []
    }

    /// How many destinations there are.
    public var count: Int { array.count }
    /// The destination at `position`.
    public func object(at position: Int) -> NSManagedObject { array[position] }
    /// The position of `member`, or `NSNotFound`.
    public func index(of member: NSManagedObject) -> Int { array.firstIndex { $0 === member } ?? NSNotFound }
    /// Whether `member` is a destination.
    public func contains(_ member: NSManagedObject) -> Bool { array.contains { $0 === member } }
    /// The destinations, in order.
    public func makeIterator() -> IndexingIterator<[NSManagedObject]> { array.makeIterator() }

    private func change(_ body: (inout [NSManagedObject]) -> Void) {
        var members = array
        body(&members)
        do {
            try object.withContext { try object.setOrderedMembers(members, at: index) }
        } catch {
            preconditionFailure("\(error) (setCheckedValue(_:forKey:) with an NSOrderedSet throws this instead)")
        }
    }

    /// Appends `member` (nothing if it is there already).
    public func add(_ member: NSManagedObject) { change { if !$0.contains(where: { $0 === member }) { $0.append(member) } } }
    /// Inserts `member` at `position` (moving it there if it is a destination already).
    public func insert(_ member: NSManagedObject, at position: Int) {
        change { members in
            members.removeAll { $0 === member }
            members.insert(member, at: Swift.min(position, members.count))
        }
    }
    /// Removes `member`.
    public func remove(_ member: NSManagedObject) { change { $0.removeAll { $0 === member } } }
    /// Removes the destination at `position`.
    public func removeObject(at position: Int) { change { _ = $0.remove(at: position) } }
    /// Replaces the destination at `position` with `member`.
    public func replaceObject(at position: Int, with member: NSManagedObject) {
        change { members in
            members[position] = member
            var seen: Set<ObjectIdentifier> = []
            members = members.filter { seen.insert(ObjectIdentifier($0)).inserted }
        }
    }
    /// Moves the destinations at `positions` so that the first of them lands at `destination` (in the order left once
    /// they are taken out), keeping their relative order.
    public func moveObjects(at positions: IndexSet, to destination: Int) {
        change { members in
            let moving = positions.map { members[$0] }
            for position in positions.reversed() { members.remove(at: position) }
            members.insert(contentsOf: moving, at: Swift.min(destination, members.count))
        }
    }
    /// Removes every destination.
    public func removeAllObjects() { change { $0.removeAll() } }
}
