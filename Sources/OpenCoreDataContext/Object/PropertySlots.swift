/// Values kept by property index (the position in `entity.allProperties`) for some of an object's properties.
///
/// It stands in for `[Int: Value]` on the path every `setValue(_:forKey:)` takes: a slot array indexed directly costs
/// no hashing, and grows to the entity's width once instead of rehashing as a dictionary fills. Iteration visits the
/// set slots in property order, so whatever is built from it (save statements, changed-key lists) is deterministic.
struct PropertySlots<Value>: Sequence, ExpressibleByDictionaryLiteral {
    private var slots: [Value?] = []
    /// The number of properties that have a value.
    private(set) var count = 0

    init() {}

    init(dictionaryLiteral elements: (Int, Value)...) {
        for (index, value) in elements { self[index] = value }
    }

    var isEmpty: Bool { count == 0 }

    /// Makes room for indexes below `width` (an entity's property count) in one allocation of that size, when
    /// there is none yet: a new object's values fill most of its entity at once.
    mutating func reserveWidth(_ width: Int) {
        if slots.isEmpty { grow(to: width) }
    }

    /// Adds empty slots up to `width`, in one allocation when there are none yet.
    private mutating func grow(to width: Int) {
        guard width > slots.count else { return }
        if slots.isEmpty {
            // Not `Array(repeating:count:)`, whose element loop is not specialized for `Value` (170 of the 970
            // instructions a new object's slots cost; the allocation itself, about 660, goes through the runtime's
            // generic path either way).
            slots = [Value?](unsafeUninitializedCapacity: width) { buffer, initialized in
                buffer.initialize(repeating: nil)
                initialized = width
            }
        } else {
            slots.append(contentsOf: Array(repeating: nil, count: width - slots.count))
        }
    }

    /// The indexes that have a value, in ascending order.
    var keys: [Int] { map(\.key) }

    subscript(index: Int) -> Value? {
        get { index < slots.count ? slots[index] : nil }
        set {
            if index >= slots.count {
                guard newValue != nil else { return }
                // Entities are narrow: grow once to a width that holds most of them.
                grow(to: Swift.max(index + 1, 2 * slots.count, 16))
            }
            // Swapped in, so the old value is moved out (to be counted and destroyed) rather than copied.
            var value = newValue
            let isSet = value != nil
            swap(&slots[index], &value)
            count += (isSet ? 1 : 0) - (value != nil ? 1 : 0)
        }
    }

    /// Empties every slot.
    ///
    /// The slots are popped one by one, so each value is destroyed here in code specialized for `Value`, and the
    /// array's buffer goes empty. Letting the buffer go with values (even nils) inside has the runtime destroy each
    /// through generic value witnesses, which costs several times as much; a save clears the changes of every object
    /// it writes. (`removeAll(keepingCapacity: true)` first, then dropping the buffer, measured slower.)
    mutating func removeAll() {
        while slots.popLast() != nil {}
        slots = []
        count = 0
    }

    /// Removes the value at `index` and returns it, moved out of its slot (not copied).
    @discardableResult
    mutating func removeValue(forKey index: Int) -> Value? {
        guard index < slots.count else { return nil }
        var value: Value? = nil
        swap(&slots[index], &value)
        if value != nil { count -= 1 }
        return value
    }

    struct Iterator: IteratorProtocol {
        fileprivate let slots: [Value?]
        fileprivate var position = 0

        mutating func next() -> (key: Int, value: Value)? {
            while position < slots.count {
                defer { position += 1 }
                if let value = slots[position] { return (position, value) }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(slots: slots) }

    var underestimatedCount: Int { count }
}
