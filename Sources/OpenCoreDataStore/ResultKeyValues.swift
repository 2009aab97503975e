import OpenCoreDataModel

/// The values one row of `PersistentStore.forEachResultKey` read, in the order of its key paths, and which of them
/// the store knows to equal the previous row's.
///
/// A view of the store's own buffer, valid only during the call that hands it over: read what you need, copy what you
/// keep, never store the view itself. Reading a value does not copy the buffer, and the store refills it in place for
/// the next row (a row of a batched fetch costs no array traffic).
///
/// Public only as SPI (`@_spi(Engine) import OpenCoreDataStore`), so that its accessors are inlined into the modules
/// that read a fetch's rows: Swift 6.3 does not inline a `package` type's `@inlinable` members in another module, and
/// a call for each value of each row cost more than the value.
@_spi(Engine) public struct ResultKeyValues {
    @usableFromInline let base: UnsafePointer<AttributeValue>
    /// How many values the row has (one per key path).
    public let count: Int
    /// Bit `i` clear: value `i` is known to equal the previous row's.
    ///
    /// Values past the 63rd always count as changed.
    @usableFromInline let changedBits: UInt64

    /// A view of `count` values at `base`; `changedBits` as for `isUnchanged(_:)`.
    package init(base: UnsafePointer<AttributeValue>, count: Int, changedBits: UInt64) {
        self.base = base
        self.count = count
        self.changedBits = changedBits
    }

    /// Value `index` (`0 ..< count`).
    ///
    /// Inlinable, as `isUnchanged(_:)`: a batched fetch calls both once per row.
    @inlinable @inline(__always)
    public subscript(index: Int) -> AttributeValue {
        precondition(index >= 0 && index < count, "ResultKeyValues index \(index) out of range 0..<\(count)")
        return base[index]
    }

    /// Whether value `index` is known to equal the previous row's (the store compared the stored bytes).
    ///
    /// False says
    /// nothing: the value may still be equal. Always false for the first row.
    @inlinable @inline(__always)
    public func isUnchanged(_ index: Int) -> Bool {
        index < 64 && changedBits & (1 &<< UInt64(index)) == 0
    }

    /// The bit of `changedBits` for value `index` (none past the 63rd: those always count as changed).
    static func bit(_ index: Int) -> UInt64 { index < 64 ? 1 &<< UInt64(index) : 0 }
}
