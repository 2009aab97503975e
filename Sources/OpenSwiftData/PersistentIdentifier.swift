internal import OpenCoreData

/// A model's identifier: the entity and the row of the store that holds it, or a temporary identifier for a model not
/// saved yet.
///
/// It is `Codable` (as the URI Core Data gives the row, `x-coredata://<store>/<Entity>/p<key>`) and `Sendable`: keep it to
/// find the model again later, in another context (`ModelContext.model(for:)`).
public struct PersistentIdentifier: Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    /// The URI of the row (`x-coredata://…`), or a temporary one for an unsaved model.
    let uri: URL
    /// The name of the model's entity (its class name).
    public let entityName: String
    /// The identifier of the store that holds the model, or nil before the model is saved.
    public var storeIdentifier: String? { isTemporary ? nil : uri.host }

    /// Whether the model has not been saved yet.
    var isTemporary: Bool { uri.scheme != "x-coredata" || uri.lastPathComponent.hasPrefix("t") }

    init(objectID: NSManagedObjectID) {
        uri = objectID.uriRepresentation()
        entityName = objectID.entity.name
    }

    init(temporaryFor entityName: String) {
        uri = URL(string: "x-coredata:///\(entityName)/t\(UUID().uuidString)")!
        self.entityName = entityName
    }

    /// The identifier and its URI.
    public var description: String { "PersistentIdentifier(\(uri.absoluteString))" }

    /// Orders identifiers by their URIs.
    public static func < (a: PersistentIdentifier, b: PersistentIdentifier) -> Bool { a.uri.absoluteString < b.uri.absoluteString }

    private enum CodingKeys: String, CodingKey { case uri, entityName }
}
