internal import OpenCoreData

/// A model's identifier: the entity and the row of the store that holds it, or a temporary identifier for a model not
/// saved yet.
///
/// It is `Codable` (as the URI Core Data gives the row, `x-coredata://<store>/<Entity>/p<key>`) and `Sendable`: keep it to
/// find the model again later, in another context (`ModelContext.model(for:)`).
public struct PersistentIdentifier: Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    /// The name of the model's entity (its class name).
    public let entityName: String
    /// The identifier of the store that holds the model, or nil before the model is saved.
    public let storeIdentifier: String?
    /// The row's primary key (0 for a temporary identifier).
    let primaryKey: Int64
    /// What tells a temporary identifier from the others (nil once saved).
    let token: UUID?

    /// Whether the model has not been saved yet.
    var isTemporary: Bool { token != nil }

    // The parts are kept rather than the URI: making an identifier is then a few copies (a save posts one per model
    // it saved, a live query one per changed row), and the URI is made only when it is asked for.
    init(objectID: NSManagedObjectID) {
        entityName = objectID.entity.name
        token = objectID._temporaryToken
        storeIdentifier = token == nil ? objectID.storeIdentifier : nil
        primaryKey = token == nil ? objectID.primaryKey : 0
    }

    init(temporaryFor entityName: String) {
        self.entityName = entityName
        storeIdentifier = nil
        primaryKey = 0
        token = UUID()
    }

    /// The URI of the row (`x-coredata://…`), or a temporary one for an unsaved model.
    var uriString: String {
        if let token { return "x-coredata:///\(entityName)/t\(token.uuidString)" }
        return "x-coredata://\(storeIdentifier ?? "")/\(entityName)/p\(primaryKey)"
    }

    /// `uriString` as a URL.
    var uri: URL { URL(string: uriString) ?? URL(fileURLWithPath: "/") }

    /// The identifier and its URI.
    public var description: String { "PersistentIdentifier(\(uriString))" }

    /// Orders identifiers by their URIs.
    public static func < (a: PersistentIdentifier, b: PersistentIdentifier) -> Bool { a.uriString < b.uriString }

    private enum CodingKeys: String, CodingKey { case uri, entityName }

    /// Reads the URI and entity name `encode(to:)` wrote.
    ///
    /// - Throws: `DecodingError.dataCorrupted` when the URI is not one of a model's row.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let uri = try container.decode(URL.self, forKey: .uri)
        guard let parts = NSManagedObjectID.parseURI(uri) else {
            throw DecodingError.dataCorruptedError(
                forKey: .uri, in: container, debugDescription: "\(uri.absoluteString) is not the URI of a model's row (x-coredata://…)")
        }
        entityName = try container.decodeIfPresent(String.self, forKey: .entityName) ?? parts.entity
        storeIdentifier = parts.store
        primaryKey = parts.primaryKey ?? 0
        token = parts.token
    }

    /// Writes the URI and the entity name.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(uri, forKey: .uri)
        try container.encode(entityName, forKey: .entityName)
    }
}
