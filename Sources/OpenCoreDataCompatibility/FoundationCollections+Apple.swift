import Foundation
import OpenCoreData

// Foundation's collection methods that take a predicate or sort descriptors (`NSArray.filtered(using:)`,
// `sortedArray(using:)`, …), for OpenCoreData's `NSPredicate` and `NSSortDescriptor`: Foundation's own take its
// classes, which are not these. In-memory filtering and sorting of fetched objects ports unchanged.

extension FetchSortDescriptor {
    /// How two objects order under this descriptor (its key's values, compared as a fetch compares them, in its
    /// direction), as Apple's `NSSortDescriptor.compare(_:to:)`.
    ///
    /// A key the objects do not have is a programming error, as on Apple platforms (where it raises).
    public func compare(_ object1: Any, to object2: Any) -> ComparisonResult {
        let order = compareValues(sortValue(of: object1), sortValue(of: object2)) * (ascending ? 1 : -1)
        return order < 0 ? .orderedAscending : order > 0 ? .orderedDescending : .orderedSame
    }

    /// The descriptor with the opposite direction, as Apple's `reversedSortDescriptor`.
    public var reversedSortDescriptor: FetchSortDescriptor { reversed }

    private func sortValue(of object: Any) -> AttributeValue {
        // `self` (any case) is the object itself: sorting strings or numbers by `NSSortDescriptor(key: "self", …)`.
        var path = key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if path.first?.uppercased() == "SELF" { path.removeFirst() }
        let value = (path.isEmpty ? FetchExpression.evaluatedObject : .keyPath(.evaluatedObject, path)).expressionValue(
            with: object, context: nil)
        return AttributeValue.converting(value) ?? .null
    }

    /// How two objects order under a list of descriptors: the first that tells them apart decides.
    static func compare(_ a: Any, _ b: Any, by descriptors: [FetchSortDescriptor]) -> ComparisonResult {
        for descriptor in descriptors {
            let order = descriptor.compare(a, to: b)
            if order != .orderedSame { return order }
        }
        return .orderedSame
    }
}

extension NSArray {
    /// The elements the predicate holds for, in order, as Apple's `filtered(using:)`.
    public func filtered(using predicate: NSPredicate) -> [Any] {
        (self as? [Any] ?? []).filter { predicate.evaluate(with: $0) }
    }

    /// The elements sorted by the descriptors (stable: equal elements keep their order), as Apple's
    /// `sortedArray(using:)`.
    public func sortedArray(using sortDescriptors: [NSSortDescriptor]) -> [Any] {
        Self.sorted(self as? [Any] ?? [], by: sortDescriptors)
    }

    static func sorted(_ elements: [Any], by descriptors: [NSSortDescriptor]) -> [Any] {
        // A stable sort: the element's position breaks ties.
        elements.enumerated().sorted { a, b in
            switch FetchSortDescriptor.compare(a.element, b.element, by: descriptors) {
            case .orderedAscending: return true
            case .orderedDescending: return false
            case .orderedSame: return a.offset < b.offset
            }
        }.map(\.element)
    }
}

extension NSMutableArray {
    /// Keeps the elements the predicate holds for, as Apple's `filter(using:)`.
    public func filter(using predicate: NSPredicate) {
        setArray(filtered(using: predicate))
    }

    /// Sorts the array by the descriptors, as Apple's `sort(using:)`.
    public func sort(using sortDescriptors: [NSSortDescriptor]) {
        setArray(sortedArray(using: sortDescriptors))
    }
}

extension NSSet {
    /// The members the predicate holds for, as Apple's `filtered(using:)`.
    public func filtered(using predicate: NSPredicate) -> Set<AnyHashable> {
        Set(allObjects.filter { predicate.evaluate(with: $0) }.compactMap { $0 as? AnyHashable })
    }

    /// The members sorted by the descriptors, as Apple's `sortedArray(using:)`.
    public func sortedArray(using sortDescriptors: [NSSortDescriptor]) -> [Any] {
        NSArray.sorted(allObjects, by: sortDescriptors)
    }
}

extension NSMutableSet {
    /// Keeps the members the predicate holds for, as Apple's `filter(using:)`.
    public func filter(using predicate: NSPredicate) {
        for member in allObjects where !predicate.evaluate(with: member) { remove(member) }
    }
}

extension NSOrderedSet {
    /// The members the predicate holds for, in order, as Apple's `filtered(using:)`.
    public func filtered(using predicate: NSPredicate) -> NSOrderedSet {
        NSOrderedSet(array: array.filter { predicate.evaluate(with: $0) })
    }

    /// The members sorted by the descriptors, as Apple's `sortedArray(using:)`.
    public func sortedArray(using sortDescriptors: [NSSortDescriptor]) -> [Any] {
        NSArray.sorted(array, by: sortDescriptors)
    }
}

extension NSMutableOrderedSet {
    /// Keeps the members the predicate holds for, as Apple's `filter(using:)`.
    public func filter(using predicate: NSPredicate) {
        let kept = array.filter { predicate.evaluate(with: $0) }
        removeAllObjects()
        addObjects(from: kept)
    }

    /// Sorts the members by the descriptors, as Apple's `sort(using:)`.
    public func sort(using sortDescriptors: [NSSortDescriptor]) {
        let sorted = sortedArray(using: sortDescriptors)
        removeAllObjects()
        addObjects(from: sorted)
    }
}
