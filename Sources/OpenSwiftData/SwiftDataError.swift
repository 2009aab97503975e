/// An error of OpenSwiftData's own (a schema it cannot map, a fetch it cannot run), with a message naming the problem.
///
/// As in SwiftData, the kinds are static members an app can match: `catch SwiftDataError.unsupportedPredicate` catches
/// every predicate a fetch cannot run, whatever its message says. Errors are equal when they are of the same kind (an
/// error of no kind SwiftData names is equal to one with the same message).
public struct SwiftDataError: Error, CustomStringConvertible, Hashable, Sendable {
    /// What went wrong.
    public let description: String
    /// Which of SwiftData's errors this is; nil for one of OpenSwiftData's own.
    let kind: String?

    init(_ description: String, kind: Kind? = nil) {
        self.description = description
        self.kind = kind?.rawValue
    }

    /// The kinds of SwiftData's errors that OpenSwiftData throws.
    enum Kind: String {
        case unsupportedPredicate, unsupportedKeyPath, unsupportedSortDescriptor, duplicateConfiguration
    }

    private init(kind: String, _ description: String) {
        self.description = description
        self.kind = kind
    }

    /// Whether two errors are of one kind (or, of no kind SwiftData names, have one message).
    public static func == (lhs: SwiftDataError, rhs: SwiftDataError) -> Bool {
        lhs.kind == rhs.kind && (lhs.kind != nil || lhs.description == rhs.description)
    }

    /// Whether `error` is of `match`'s kind: what `catch SwiftDataError.unsupportedPredicate` asks.
    public static func ~= (match: SwiftDataError, error: any Error) -> Bool {
        (error as? SwiftDataError) == match
    }

    /// Hashes the kind (and the message of an error of no kind SwiftData names).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        if kind == nil { hasher.combine(description) }
    }

    // Fetch errors.

    /// A batched fetch that includes pending changes (OpenSwiftData runs those; SwiftData refuses them).
    public static let includePendingChangesWithBatchSize = SwiftDataError(
        kind: "includePendingChangesWithBatchSize", "A batched fetch cannot include pending changes.")
    /// A fetch of identifiers sorted with pending changes included.
    public static let sortingPendingChangesWithIdentifiers = SwiftDataError(
        kind: "sortingPendingChangesWithIdentifiers", "Identifiers cannot be sorted with pending changes included.")
    /// A key path a fetch cannot read (not a persisted property).
    public static let unsupportedKeyPath = SwiftDataError(kind: Kind.unsupportedKeyPath.rawValue, "A key path is not supported.")
    /// A predicate a fetch cannot run.
    public static let unsupportedPredicate = SwiftDataError(kind: Kind.unsupportedPredicate.rawValue, "A predicate is not supported.")
    /// A sort a fetch cannot run.
    public static let unsupportedSortDescriptor = SwiftDataError(
        kind: Kind.unsupportedSortDescriptor.rawValue, "A sort descriptor is not supported.")
    /// A history token older than the history kept.
    public static let historyTokenExpired = SwiftDataError(kind: "historyTokenExpired", "The history token has expired.")
    /// A history fetch that cannot run.
    public static let invalidTransactionFetchRequest = SwiftDataError(
        kind: "invalidTransactionFetchRequest", "The history fetch request is not valid.")

    // Container and configuration errors.

    /// A container that could not load its stores.
    public static let loadIssueModelContainer = SwiftDataError(kind: "loadIssueModelContainer", "The container could not load its stores.")
    /// Two configurations of one container with the same name.
    public static let duplicateConfiguration = SwiftDataError(
        kind: Kind.duplicateConfiguration.rawValue, "Two configurations have the same name.")
    /// A configuration's store file name that is too long.
    public static let configurationFileNameTooLong = SwiftDataError(
        kind: "configurationFileNameTooLong", "The configuration's file name is too long.")
    /// A configuration's store file name with characters a file name cannot have.
    public static let configurationFileNameContainsInvalidCharacters = SwiftDataError(
        kind: "configurationFileNameContainsInvalidCharacters", "The configuration's file name has characters a file name cannot have.")
    /// A configuration whose schema has a model the container's schema lacks.
    public static let configurationSchemaNotFoundInContainerSchema = SwiftDataError(
        kind: "configurationSchemaNotFoundInContainerSchema", "The configuration's schema is not in the container's schema.")

    // Migration and model errors.

    /// A store of a schema no migration plan knows.
    public static let unknownSchema = SwiftDataError(kind: "unknownSchema", "The store's schema is unknown.")
    /// A store of a schema the data store does not know (SwiftData's newer name for `unknownSchema`).
    public static let unknownDataStoreSchema = SwiftDataError(kind: "unknownDataStoreSchema", "The data store's schema is unknown.")
    /// A migration from a newer schema to an older one.
    public static let backwardMigration = SwiftDataError(kind: "backwardMigration", "The store's schema is newer than the model's.")
    /// A model that failed validation.
    public static let modelValidationFailure = SwiftDataError(kind: "modelValidationFailure", "A model failed validation.")
    /// A model used where it needs a context and has none.
    public static let missingModelContext = SwiftDataError(kind: "missingModelContext", "The model has no context.")
}
