import OpenCoreDataContext

/// One result as the engine keeps it: which object, and the values of its sort keys as of the last batch reported.
///
/// No object is made until one is asked for;
/// once made (asked for, or reported to the delegate), the row keeps it, so the same row always gives the same object,
/// as Core Data's results array does.
///
/// A row is 48 bytes: the key in one word, and `RowBody` (the object slot and the sort values) in 40.
///
/// The key takes one word: a stored row's entity number and primary key packed together (16 and 48 bits). The two
/// keys that do not pack are told by the word's value and keep what they need in the slot: an unsaved object is its
/// own key, and a key too large to pack (a primary key of 2⁴⁸ or more) is boxed with the row's object.
struct ResultRow {
    /// The packed key, or `unsavedTag` / `wideTag`.
    var packedKey: UInt64
    /// The object slot and the sort values.
    var body: RowBody
    // No initializer in the type itself: an explicit one that assigns each property makes the optimizer build the
    // row, copy it and destroy the original (about 300 instructions a row in a batched fetch); the memberwise one
    // builds it in place.

    static let unsavedTag = UInt64.max
    static let wideTag = UInt64.max - 1
    static let primaryKeyBits: UInt64 = 48
    static let primaryKeyMask: UInt64 = (1 << primaryKeyBits) - 1

    /// A stored row's key in one word, or nil when it does not fit (an entity number above 65,534, a primary key
    /// outside 0..<2⁴⁸); never equal to either tag.
    @inline(__always)
    static func pack(entity: Int32, primaryKey: Int64) -> UInt64? {
        // Negative numbers become large ones here, so one comparison each checks both ends.
        let key = UInt64(bitPattern: primaryKey), number = UInt64(UInt32(bitPattern: entity))
        guard key <= primaryKeyMask, number < 0xFFFF else { return nil }
        return number << primaryKeyBits | key
    }

    /// A key too large to pack, with the row's object.
    final class WideKey {
        let key: RowKey
        let object: NSManagedObject?
        init(key: RowKey, object: NSManagedObject?) {
            self.key = key
            self.object = object
        }
    }
}

extension ResultRow {
    init(key: RowKey, values: SortValues, object: NSManagedObject? = nil) {
        switch key {
        case .stored(let entity, let primaryKey):
            if let packed = Self.pack(entity: entity, primaryKey: primaryKey) {
                self.init(packedKey: packed, body: RowBody(values, slot: object ?? RowBody.empty))
            } else {
                self.init(packedKey: Self.wideTag, body: RowBody(values, slot: WideKey(key: key, object: object)))
            }
        case .unsaved(let unsaved): self.init(packedKey: Self.unsavedTag, body: RowBody(values, slot: unsaved))
        }
    }

    /// Which object the row is.
    var key: RowKey {
        get {
            switch packedKey {
            case Self.unsavedTag: return .unsaved(unsafeDowncast(body.slot, to: NSManagedObject.self))
            case Self.wideTag: return unsafeDowncast(body.slot, to: WideKey.self).key
            default:
                return .stored(
                    entity: Int32(truncatingIfNeeded: packedKey >> Self.primaryKeyBits), primaryKey: Int64(packedKey & Self.primaryKeyMask))
            }
        }
        set { self = ResultRow(key: newValue, values: values, object: object) }
    }

    /// The row's object, once made (an unsaved row's is its key).
    var object: NSManagedObject? {
        get {
            let slot = body.slot
            if slot === RowBody.empty { return nil }
            return packedKey == Self.wideTag
                ? unsafeDowncast(slot, to: WideKey.self).object : unsafeDowncast(slot, to: NSManagedObject.self)
        }
        set {
            switch packedKey {
            case Self.unsavedTag: break  // the object is the key
            case Self.wideTag: body.slot = WideKey(key: key, object: newValue)
            default: body.slot = newValue ?? RowBody.empty
            }
        }
    }

    /// The values of the row's sort keys.
    var values: SortValues { body.values }

    /// The store's tie-break between equal sort values (`RowKey.storeOrder`), without making the key.
    @inline(__always)
    var storeOrder: (Int8, Int64) {
        packedKey < Self.wideTag ? (0, Int64(packedKey & Self.primaryKeyMask)) : key.storeOrder
    }

    /// The body of the row at `row`, where it is.
    @inline(__always)
    static func body(at row: UnsafePointer<ResultRow>) -> UnsafePointer<RowBody> {
        (UnsafeRawPointer(row) + bodyOffset).assumingMemoryBound(to: RowBody.self)
    }

    private static let bodyOffset = MemoryLayout<ResultRow>.offset(of: \.body)!

    /// `storeOrder` of the row at `row`, reading only its key word unless the key is not packed.
    @inline(__always)
    static func storeOrder(at row: UnsafePointer<ResultRow>) -> (Int8, Int64) {
        let packed = UnsafeRawPointer(row).load(fromByteOffset: keyOffset, as: UInt64.self)
        return packed < wideTag ? (0, Int64(packed & primaryKeyMask)) : unpackedStoreOrder(at: row)
    }

    /// Whether the row at `row` is an unsaved object's, reading only its key word.
    @inline(__always)
    static func isUnsaved(at row: UnsafePointer<ResultRow>) -> Bool {
        UnsafeRawPointer(row).load(fromByteOffset: keyOffset, as: UInt64.self) == unsavedTag
    }

    private static let keyOffset = MemoryLayout<ResultRow>.offset(of: \.packedKey)!

    @inline(never)
    private static func unpackedStoreOrder(at row: UnsafePointer<ResultRow>) -> (Int8, Int64) { row.pointee.storeOrder }
}

/// A one-bit-per-slot table of packed row keys that tells, for most rows of the results, that a key is certainly not
/// among a batch's touched ones — so that a pass over n rows looks the touched dictionary up for the few rows that
/// may be in it, not for every row.
///
/// A key that does not pack (an unsaved row, a wide key) is always "maybe". With eight bits a key, about one row in
/// eight of the others is a false "maybe", which the dictionary then answers.
struct PackedKeyFilter {
    private var bits: [UInt64]
    /// How far the key's multiplied hash is shifted right to give a bit number (64 minus the table's bit count's log).
    private let shift: UInt64

    init(_ keys: some Sequence<RowKey>, count: Int) {
        var width = 64
        while width < count * 8 { width <<= 1 }
        bits = Array(repeating: 0, count: width / 64)
        shift = UInt64(64 - width.trailingZeroBitCount)
        for case .stored(let entity, let primaryKey) in keys {
            guard let packed = ResultRow.pack(entity: entity, primaryKey: primaryKey) else { continue }
            let bit = slot(packed)
            bits[bit >> 6] |= 1 &<< UInt64(bit & 63)
        }
    }

    @inline(__always)
    private func slot(_ packed: UInt64) -> Int { Int(truncatingIfNeeded: (packed &* 0x9E37_79B9_7F4A_7C15) >> shift) }

    /// False only when the row whose packed key this is is certainly not one of the keys.
    @inline(__always)
    func mayContain(packedKey: UInt64) -> Bool {
        if packedKey >= ResultRow.wideTag { return true }
        let bit = slot(packedKey)
        return bits[bit >> 6] & (1 &<< UInt64(bit & 63)) != 0
    }
}
