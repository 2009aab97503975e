/// Values kept by property index (the position in `entity.allProperties`) for some of an object's properties.
///
/// It stands in for `[Int: Value]` on the path every `setValue(_:forKey:)` takes: a slot array indexed directly costs
/// no hashing, and grows to the entity's width once instead of rehashing as a dictionary fills. Iteration visits the
/// set slots in property order, so whatever is built from it (save statements, changed-key lists) is deterministic.
///
/// The slots live in a storage class of their own (`Storage`, one non-generic class per value type) rather than an
/// `Array`: a new object's array of slots cost about 800 instructions to allocate (the standard library looks up
/// `_ContiguousArrayStorage<Value?>`'s metadata at run time on every allocation) and hundreds more to destroy (each
/// element through generic value witnesses). A non-generic class has static metadata, and its `deinit` destroys the
/// values in code compiled for their type (a generic class's `deinit` would not be specialized). Copies share the
/// storage until one of them changes (copy on write, as an array).
struct PropertySlots<Storage: SlotStorage>: Sequence, ExpressibleByDictionaryLiteral {
    typealias Value = Storage.Value
    private var storage: Storage?
    /// The number of properties that have a value.
    private(set) var count = 0

    init() {}

    init(dictionaryLiteral elements: (Int, Value)...) {
        for (index, value) in elements { self[index] = value }
    }

    var isEmpty: Bool { count == 0 }

    /// The number of slots (set or not).
    private var width: Int { storage?.width ?? 0 }

    /// Makes room for indexes below `width` (an entity's property count) in one allocation of that size, when
    /// there is none yet: a new object's values fill most of its entity at once.
    mutating func reserveWidth(_ width: Int) {
        if storage == nil { grow(to: width) }
    }

    /// Adds empty slots up to `width`: the values move into a new storage, or are copied when another value shares
    /// this one.
    private mutating func grow(to width: Int) {
        guard width > self.width else { return }
        let unique = isKnownUniquelyReferenced(&storage)
        storage = Storage.make(width: width, from: storage, moving: unique)
    }

    /// Makes the storage this value's own before a change (copy on write).
    private mutating func makeUnique() {
        // Checked before binding the storage to a name, which would hold a second reference.
        if !isKnownUniquelyReferenced(&storage), let shared = storage {
            storage = shared.copy()
        }
    }

    /// The storage's identity (for tests: a change to slots nothing shares keeps it).
    var storageIdentity: ObjectIdentifier? { storage.map(ObjectIdentifier.init) }

    /// The indexes that have a value, in ascending order.
    var keys: [Int] { map(\.key) }

    subscript(index: Int) -> Value? {
        get {
            guard let storage, index < storage.width else { return nil }
            return storage.withSlots { $0[index] }
        }
        set {
            if index >= width {
                guard newValue != nil else { return }
                // Entities are narrow: grow once to a width that holds most of them.
                grow(to: Swift.max(index + 1, 2 * width, 16))
            } else {
                makeUnique()
            }
            // Swapped in, so the old value is moved out (to be counted and destroyed) rather than copied.
            var value = newValue
            let isSet = value != nil
            storage!.withSlots { swap(&$0[index], &value) }
            count += (isSet ? 1 : 0) - (value != nil ? 1 : 0)
        }
    }

    /// Empties every slot, and lets the storage go.
    mutating func removeAll() {
        storage = nil
        count = 0
    }

    /// Removes the value at `index` and returns it, moved out of its slot (not copied).
    @discardableResult
    mutating func removeValue(forKey index: Int) -> Value? {
        guard index < width else { return nil }
        makeUnique()
        var value: Value? = nil
        storage!.withSlots { swap(&$0[index], &value) }
        if value != nil { count -= 1 }
        return value
    }

    struct Iterator: IteratorProtocol {
        fileprivate let storage: Storage?
        fileprivate var position = 0

        mutating func next() -> (key: Int, value: Value)? {
            guard let storage else { return nil }
            let width = storage.width
            while position < width {
                defer { position += 1 }
                if let value = storage.withSlots({ $0[position] }) { return (position, value) }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(storage: storage) }

    var underestimatedCount: Int { count }
}

/// The slots of a `PropertySlots`: a `ManagedBuffer` whose header is the width, then that many optional values.
///
/// Each value type has its own final class (`PropertyValueSlots`, `ComparableValueSlots`), which gives it static
/// metadata and a `deinit` specialized for its values; the protocol's extension holds what they share.
protocol SlotStorage: ManagedBuffer<Int, Self.Value?> {
    associatedtype Value
}

// Read through pointers, never as `header`: a class's stored property is checked for exclusive access at run time
// (`swift_beginAccess`, about 75 instructions), which doubled the cost of setting a slot.
extension SlotStorage {
    /// The number of slots.
    @inline(__always)
    var width: Int {
        get { withUnsafeMutablePointerToHeader { $0.pointee } }
        set { withUnsafeMutablePointerToHeader { $0.pointee = newValue } }
    }

    @inline(__always)
    func withSlots<R>(_ body: (UnsafeMutablePointer<Value?>) throws -> R) rethrows -> R {
        try withUnsafeMutablePointerToElements(body)
    }

    /// Storage for `width` slots (at least `old`'s), empty or holding `old`'s values: moved out of it when
    /// `moving` (it is left empty), copied otherwise.
    static func make(width: Int, from old: Self?, moving: Bool) -> Self {
        let made = unsafeDowncast(create(minimumCapacity: width) { _ in width }, to: Self.self)
        made.withSlots { slots in
            var filled = 0
            if let old {
                filled = old.width
                precondition(filled <= width, "PropertySlots cannot shrink")
                if moving {
                    old.withSlots { slots.moveInitialize(from: $0, count: filled) }
                    old.width = 0
                } else {
                    old.withSlots { slots.initialize(from: $0, count: filled) }
                }
            }
            (slots + filled).initialize(repeating: nil, count: width - filled)
        }
        return made
    }

    /// A storage of the same width holding copies of these values.
    func copy() -> Self { Self.make(width: width, from: self, moving: false) }

    /// Destroys the values (from `deinit`, where the value type is concrete).
    ///
    /// Each value is moved out and dropped: `deinitialize(count:)` calls the runtime's `swift_arrayDestroy`, and even
    /// one at a time it goes through `Optional`'s generic value witness (66 and 76 instructions a slot here); a
    /// moved-out value is destroyed by code compiled for its type (about 10 for nil).
    func destroySlots() {
        withUnsafeMutablePointers { width, slots in
            for index in 0..<width.pointee { _ = (slots + index).move() }
        }
    }
}

/// The slots of an object's pending changes.
final class PropertyValueSlots: ManagedBuffer<Int, PropertyValue?>, SlotStorage {
    typealias Value = PropertyValue
    deinit { destroySlots() }
}

/// The slots of an object's values at the start of an event.
final class ComparableValueSlots: ManagedBuffer<Int, ComparableValue?>, SlotStorage {
    typealias Value = ComparableValue
    deinit { destroySlots() }
}
