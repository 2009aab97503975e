/// A context's set of objects whose membership each object also carries, as a bit of its own (`NSManagedObject.marks`).
///
/// The context's pending-changes and current-event sets are asked to insert an object on every change, and most of
/// the time it is there already: a `Set` finds that out by hashing the object and probing (about 330 instructions),
/// the mark by reading a byte. Every change of membership goes through this type, so the mark and the set agree; an
/// object is in the sets of its own context only.
struct MarkedObjects: Collection {
    typealias Index = Set<NSManagedObject>.Index

    /// The objects.
    private(set) var members: Set<NSManagedObject> = []
    /// The bit this set's members carry.
    private let mark: UInt8

    /// An empty set whose members carry `mark`.
    init(_ mark: ObjectSetMark) { self.mark = mark.rawValue }

    /// Adds `object` (nothing when it is a member).
    mutating func insert(_ object: NSManagedObject) {
        guard object.marks & mark == 0 else { return }
        object.marks |= mark
        members.insert(object)
    }

    /// Removes `object` (nothing when it is not a member).
    mutating func remove(_ object: NSManagedObject) {
        guard object.marks & mark != 0 else { return }
        object.marks &= ~mark
        members.remove(object)
    }

    /// Removes every member.
    mutating func removeAll() {
        for object in members { object.marks &= ~mark }
        members = []
    }

    var startIndex: Index { members.startIndex }
    var endIndex: Index { members.endIndex }
    subscript(position: Index) -> NSManagedObject { members[position] }
    func index(after i: Index) -> Index { members.index(after: i) }
    var isEmpty: Bool { members.isEmpty }
    var count: Int { members.count }
}

/// The bit of each of a context's marked sets (`MarkedObjects`) in `NSManagedObject.marks`.
enum ObjectSetMark: UInt8 {
    /// Pending changes of a stored object (`changedSet`).
    case changed = 1
    /// Changed during the current event (`eventObjects`).
    case event = 2
}
