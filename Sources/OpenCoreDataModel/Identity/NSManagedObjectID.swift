import Foundation
import Synchronization

/// A compact, thread-safe identity for a managed object: its entity, its store and its row.
///
/// An object inserted in a context gets a temporary ID; saving gives it a permanent one. IDs are `Sendable`: pass them
/// between contexts and threads, never the objects themselves. `uriRepresentation()` round-trips through
/// `NSPersistentStoreCoordinator.managedObjectID(forURIRepresentation:)`.
///
/// For example:
/// ```swift
/// let uri = product.objectID.uriRepresentation()   // x-coredata://<store>/Product/p12
/// let again = coordinator.managedObjectID(forURIRepresentation: uri)
/// ```
public final class NSManagedObjectID: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The object's entity (its concrete entity, not a parent's).
    public let entity: NSEntityDescription

    /// The identity of `entity`, read without retaining it (for the store's per-row loops).
    @usableFromInline package var _entityIdentity: ObjectIdentifier { ObjectIdentifier(entity) }
    /// The identifier of the store the row lives in, or `nil` for a temporary ID.
    public let storeIdentifier: String?
    /// The row's primary key in its store (`Z_PK`), or 0 for a temporary ID.
    public let primaryKey: Int64
    private let temporaryToken: UUID?

    /// Creates the permanent ID of a stored row.
    public init(entity: NSEntityDescription, storeIdentifier: String, primaryKey: Int64) {
        self.entity = entity
        self.storeIdentifier = storeIdentifier
        self.primaryKey = primaryKey
        self.temporaryToken = nil
    }

    /// Creates a new temporary ID for an object that has not been saved.
    public convenience init(temporaryFor entity: NSEntityDescription) {
        self.init(temporaryFor: entity, token: TemporaryTokens.next())
    }

    /// Creates the temporary ID with a given token (parsing a URI representation).
    public init(temporaryFor entity: NSEntityDescription, token: UUID) {
        self.entity = entity
        self.storeIdentifier = nil
        self.primaryKey = 0
        self.temporaryToken = token
    }

    /// Whether the ID is temporary (the object has not been saved yet).
    public var isTemporaryID: Bool { temporaryToken != nil }

    /// A URL that names the object: `x-coredata://STORE/Entity/pPK` when permanent, `x-coredata:///Entity/tUUID` when
    /// temporary.
    public func uriRepresentation() -> URL {
        let text: String
        if let token = temporaryToken {
            text = "x-coredata:///\(entity.name)/t\(token.uuidString)"
        } else {
            text = "x-coredata://\(storeIdentifier ?? "")/\(entity.name)/p\(primaryKey)"
        }
        // Entity names are identifiers and store identifiers are UUIDs, so the text is always a valid URL.
        return URL(string: text) ?? URL(fileURLWithPath: "/")
    }

    /// Parses a URI made by `uriRepresentation()` into its parts, or `nil` if it is not one.
    public static func parseURI(_ url: URL) -> (store: String?, entity: String, primaryKey: Int64?, token: UUID?)? {
        guard url.scheme == "x-coredata" else { return nil }
        let parts = url.path.split(separator: "/").map(String.init)
        guard parts.count == 2, let last = parts[1].first else { return nil }
        let store = url.host.flatMap { $0.isEmpty ? nil : $0 }
        let rest = String(parts[1].dropFirst())
        switch last {
        case "p":
            guard let pk = Int64(rest), pk > 0, store != nil else { return nil }
            return (store, parts[0], pk, nil)
        case "t":
            guard store == nil, let token = UUID(uuidString: rest) else { return nil }
            return (nil, parts[0], nil, token)
        default: return nil
        }
    }

    /// The temporary token, for the context that issued it.
    package var _temporaryToken: UUID? { temporaryToken }

    /// IDs are equal when they name the same object: same entity, store and key, or the same temporary token.
    public static func == (a: NSManagedObjectID, b: NSManagedObjectID) -> Bool {
        if a === b { return true }
        // Cheapest first (dictionary probes of the registry compare IDs of one table): the key, the entity's identity
        // (no walk up the weak superentity links once the model is frozen), a token only when there is one.
        guard a.primaryKey == b.primaryKey else { return false }
        guard a.entity === b.entity || a.entity._rootEntityIdentity == b.entity._rootEntityIdentity else { return false }
        if a.temporaryToken != nil || b.temporaryToken != nil, a.temporaryToken != b.temporaryToken { return false }
        return a.storeIdentifier == b.storeIdentifier
    }

    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) { hasher.combine(hashWord) }

    /// A temporary ID's primary key is 0; a permanent one has no token.
    ///
    /// Of a token, the second half is enough: it is
    /// the counter half of the tokens this process makes (`TemporaryTokens`), and equality still compares whole tokens.
    private var hashWord: UInt64 {
        if let temporaryToken {
            return withUnsafeBytes(of: temporaryToken.uuid) { $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self) }
        }
        return UInt64(bitPattern: primaryKey)
    }

    /// Orders permanent IDs by primary key (temporary IDs after them, by token), for deterministic output.
    public static func < (a: NSManagedObjectID, b: NSManagedObjectID) -> Bool {
        switch (a.temporaryToken, b.temporaryToken) {
        case (nil, nil): return a.primaryKey < b.primaryKey
        case (nil, _): return true
        case (_, nil): return false
        case (let x?, let y?): return Self.key(x) < Self.key(y)
        }
    }

    /// A UUID as two big-endian words: ordering them orders the UUIDs as their strings would, without formatting.
    private static func key(_ u: UUID) -> (UInt64, UInt64) {
        withUnsafeBytes(of: u.uuid) { bytes in
            var high: UInt64 = 0
            var low: UInt64 = 0
            for i in 0..<8 { high = high << 8 | UInt64(bytes[i]) }
            for i in 8..<16 { low = low << 8 | UInt64(bytes[i]) }
            return (high, low)
        }
    }

    /// The URI representation.
    public var description: String { uriRepresentation().absoluteString }
}

/// Issues the tokens of temporary IDs: a random half drawn once per process and a counter.
///
/// `UUID()` on Linux opens, reads and closes `/dev/urandom` on every call (three system calls), which cost more than
/// the rest of inserting an object. A temporary ID only has to be unique while the process lives, and the random half
/// keeps tokens of different processes apart. Tokens made later order after earlier ones.
enum TemporaryTokens {
    private static let counter = Atomic<UInt64>(0)
    private static let processHalf: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = {
        let u = UUID().uuid
        return (u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7)
    }()

    static func next() -> UUID {
        let n = counter.wrappingAdd(1, ordering: .relaxed).newValue
        let p = processHalf
        func byte(_ shift: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: n >> shift) }
        return UUID(
            uuid: (p.0, p.1, p.2, p.3, p.4, p.5, p.6, p.7, byte(56), byte(48), byte(40), byte(32), byte(24), byte(16), byte(8), byte(0)))
    }
}
