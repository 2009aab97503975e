import OpenCoreDataModel
import OpenCoreDataStore

/// A set of an entity's properties, by their index in `allProperties`: the keys a batch reports changed for an
/// object.
///
/// One word for the first 64 properties (no allocation for almost every entity), more words beyond. Building,
/// testing and joining these costs a few instructions, where a `Set<String>` hashed every property name it took in;
/// names are made only when someone asks for them (`ContextChange.updated`, `changedValuesForCurrentEvent()`).
package struct PropertyMask: Equatable, Sendable {
    private var low: UInt64 = 0
    /// Words for properties 64 and up; empty (no allocation) for entities of up to 64 properties.
    private var high: [UInt64] = []

    package init() {}

    /// The first `count` properties (whole words at a time).
    package init(all count: Int) {
        low = count >= 64 ? .max : (1 &<< UInt64(max(0, count))) &- 1
        guard count > 64 else { return }
        high = Array(repeating: .max, count: (count - 1) / 64)
        if count % 64 != 0 { high[high.count - 1] = (1 &<< UInt64(count % 64)) &- 1 }
    }

    /// The properties at `indices`.
    package init(_ indices: some Sequence<Int>) {
        for index in indices { insert(index) }
    }

    /// The properties of `entity` named in `names` (names it does not have are left out).
    package init(names: some Sequence<String>, in entity: NSEntityDescription) {
        for name in names {
            if let index = entity.propertyIndex(named: name) { insert(index) }
        }
    }

    /// Every property of `entity` but its to-many relationships: what a row holds.
    package static func rowProperties(of entity: NSEntityDescription) -> PropertyMask {
        var mask = PropertyMask(all: entity.allProperties.count)
        for index in entity._toManyIndexes { mask.remove(index) }
        return mask
    }

    package var isEmpty: Bool { low == 0 && high.allSatisfy { $0 == 0 } }

    package func contains(_ index: Int) -> Bool {
        if index < 64 { return low & (1 &<< UInt64(index)) != 0 }
        let word = index / 64 - 1
        return word < high.count && high[word] & (1 &<< UInt64(index % 64)) != 0
    }

    package mutating func insert(_ index: Int) {
        precondition(index >= 0, "a property index is not negative")
        if index < 64 {
            low |= 1 &<< UInt64(index)
            return
        }
        let word = index / 64 - 1
        if word >= high.count { high.append(contentsOf: repeatElement(0, count: word - high.count + 1)) }
        high[word] |= 1 &<< UInt64(index % 64)
    }

    package mutating func remove(_ index: Int) {
        if index < 64 {
            low &= ~(1 &<< UInt64(index))
        } else if index / 64 - 1 < high.count {
            high[index / 64 - 1] &= ~(1 &<< UInt64(index % 64))
        }
    }

    package mutating func formUnion(_ other: PropertyMask) {
        low |= other.low
        if other.high.count > high.count { high.append(contentsOf: repeatElement(0, count: other.high.count - high.count)) }
        for (i, word) in other.high.enumerated() { high[i] |= word }
    }

    /// The indices in the set, ascending.
    package var indices: [Int] {
        var result: [Int] = []
        func collect(_ word: UInt64, from base: Int) {
            var bits = word
            while bits != 0 {
                result.append(base + bits.trailingZeroBitCount)
                bits &= bits - 1
            }
        }
        collect(low, from: 0)
        for (i, word) in high.enumerated() { collect(word, from: (i + 1) * 64) }
        return result
    }

    /// The names of the properties in the set, as `entity` names them.
    package func names(in entity: NSEntityDescription) -> Set<String> {
        let properties = entity.allProperties
        return Set(indices.lazy.filter { $0 < properties.count }.map { properties[$0].name })
    }

    package static func == (a: PropertyMask, b: PropertyMask) -> Bool {
        guard a.low == b.low else { return false }
        let n = max(a.high.count, b.high.count)
        for i in 0..<n where (i < a.high.count ? a.high[i] : 0) != (i < b.high.count ? b.high[i] : 0) { return false }
        return true
    }
}

/// The values some properties of one object held before a batch changed them, kept as the context already had them
/// (the object's previous row, or the originals its event noted) rather than copied out into a dictionary by name:
/// observers read a few of them (a fetched results controller, the sort keys of a row it must find), most are never
/// read.
package struct ValuesBefore {
    private enum Source {
        case row([SnapshotValue])
        case event(PropertySlots<ComparableValueSlots>)
    }
    private let source: Source
    /// The properties whose earlier values these are; the others are unknown.
    private let known: PropertyMask
    private let entity: NSEntityDescription

    /// The values of `row` (an object's committed values before the change) for the properties in `known`.
    package init(row: [SnapshotValue], known: PropertyMask, entity: NSEntityDescription) {
        (source, self.known, self.entity) = (.row(row), known, entity)
    }

    /// The values an event noted before its first edit of each property, for the properties in `known`.
    init(event: PropertySlots<ComparableValueSlots>, known: PropertyMask, entity: NSEntityDescription) {
        (source, self.known, self.entity) = (.event(event), known, entity)
    }

    /// The earlier value of the attribute `name`, or nil when it is not an attribute or its earlier value is unknown.
    package func attribute(named name: String) -> AttributeValue? {
        guard let index = entity.propertyIndex(named: name), known.contains(index) else { return nil }
        switch source {
        case .row(let values):
            guard index < values.count, case .attribute(let value) = values[index] else { return nil }
            return value
        case .event(let slots):
            guard case .attribute(let value)? = slots[index] else { return nil }
            return value
        }
    }
}
