/// Package-internal: an implementation detail OpenCoreData's modules share, not API.
///
/// A cheap hash for keys that are already well spread machine words: object addresses, primary keys, the counter half
/// of a temporary token. Swift's `Hasher` runs SipHash over every key, which costs about a hundred instructions and
/// showed in every insert and save; these keys are not chosen by an attacker, so a 64-bit mixing function seeded with
/// the table's own seed does. Types use it through `Hashable._rawHashValue(seed:)`, the hook `Set` and `Dictionary`
/// call; `hash(into:)` stays as it was for hashing as part of a larger value.
package enum _IdentityHash {
    /// Mixes `word` with `seed` (the finalizer of MurmurHash3): every input bit affects every output bit, so the low
    /// bits a hash table uses are as good as the high ones, even for aligned addresses or consecutive keys.
    @inlinable @inline(__always)
    package static func mix(_ word: UInt64, seed: Int) -> Int {
        var k = word ^ UInt64(UInt(bitPattern: seed))
        k ^= k >> 33
        k &*= 0xff51_afd7_ed55_8ccd
        k ^= k >> 33
        k &*= 0xc4ce_b9fe_1a85_ec53
        k ^= k >> 33
        return Int(truncatingIfNeeded: k)
    }

    /// `mix` of an object's address.
    @inlinable @inline(__always)
    package static func mix(_ identifier: ObjectIdentifier, seed: Int) -> Int {
        mix(UInt64(UInt(bitPattern: identifier)), seed: seed)
    }
}

/// An object's identity as a dictionary key, hashed by `_IdentityHash` (`ObjectIdentifier` hashes with SipHash).
package struct _IdentityKey: Hashable, Sendable {
    package let identifier: ObjectIdentifier

    @inlinable
    package init(_ object: AnyObject) { identifier = ObjectIdentifier(object) }

    @inlinable
    package func _rawHashValue(seed: Int) -> Int { _IdentityHash.mix(identifier, seed: seed) }
}
