import Foundation

/// The error every layer of OpenCoreData throws: a code, and a message that names the problem.
///
/// Codes reuse Core Data's `NSCocoaErrorDomain` numbers where Core Data has one (1570 for a missing mandatory
/// property, 134100 for an incompatible model, …) so that code switching on them ports. Match on `code`, show `message`.
///
/// For example:
/// ```swift
/// do { try context.save() }
/// catch let error as CoreDataError where error.code == .validationMissingMandatoryProperty {
///     print(error.message)   // "Product 'name' is required but is nil (object x-coredata:///Product/t…)"
/// }
/// ```
public struct CoreDataError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError, CustomNSError {
    /// What kind of problem this is.
    ///
    /// New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int
        public let name: String
        public init(_ rawValue: Int, _ name: String) {
            self.rawValue = rawValue
            self.name = name
        }
        public static func == (a: Code, b: Code) -> Bool { a.rawValue == b.rawValue }
        public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
        public var description: String { "\(name) (\(rawValue))" }

        // Validation, with Core Data's numbers.
        public static let managedObjectValidation = Code(1550, "managedObjectValidation")
        public static let validationMissingMandatoryProperty = Code(1570, "validationMissingMandatoryProperty")
        public static let validationRelationshipLacksMinimumCount = Code(1580, "validationRelationshipLacksMinimumCount")
        public static let validationRelationshipExceedsMaximumCount = Code(1590, "validationRelationshipExceedsMaximumCount")
        public static let validationRelationshipDeniedDelete = Code(1600, "validationRelationshipDeniedDelete")
        // Objects and contexts.
        public static let managedObjectContextLocking = Code(132000, "managedObjectContextLocking")
        public static let managedObjectReferentialIntegrity = Code(133000, "managedObjectReferentialIntegrity")
        public static let managedObjectExternalRelationship = Code(133010, "managedObjectExternalRelationship")
        public static let managedObjectMerge = Code(133020, "managedObjectMerge")
        public static let objectNotFound = Code(900_010, "objectNotFound")
        // Stores.
        public static let persistentStoreInvalidType = Code(134000, "persistentStoreInvalidType")
        public static let persistentStoreIncompatibleSchema = Code(134020, "persistentStoreIncompatibleSchema")
        public static let persistentStoreSave = Code(134030, "persistentStoreSave")
        public static let persistentStoreOperation = Code(134070, "persistentStoreOperation")
        public static let persistentStoreOpen = Code(134080, "persistentStoreOpen")
        public static let persistentStoreIncompatibleVersionHash = Code(134100, "persistentStoreIncompatibleVersionHash")
        public static let persistentStoreNotAStore = Code(259, "fileReadCorruptFile")
        // OpenCoreData's own (no Core Data number): 9xxxxx.
        public static let invalidModel = Code(900_001, "invalidModel")
        public static let unsupportedModelFile = Code(900_002, "unsupportedModelFile")
        public static let unknownEntity = Code(900_003, "unknownEntity")
        public static let unknownKey = Code(900_004, "unknownKey")
        public static let wrongValueType = Code(900_005, "wrongValueType")
        public static let predicateSyntax = Code(900_006, "predicateSyntax")
        public static let predicateEvaluation = Code(900_007, "predicateEvaluation")
        public static let invalidFetchRequest = Code(900_008, "invalidFetchRequest")
        public static let unsupported = Code(900_009, "unsupported")
        public static let objectWithoutContext = Code(900_011, "objectWithoutContext")
    }

    /// What kind of problem this is.
    public var code: Code
    /// A sentence that names the problem: the entity, key, object, file or input at fault, and why.
    public var message: String
    /// The entity involved, where there is one.
    public var entityName: String?
    /// The key (property name or key path) involved, where there is one.
    public var key: String?
    /// Further errors, when one operation found several problems (validation reports them all).
    public var underlying: [CoreDataError]
    /// SQLite's primary result code (`SQLITE_BUSY` is 5, `SQLITE_CONSTRAINT` 19, …) when SQLite refused an operation.
    public var sqliteResultCode: Int32?
    /// The SQL statement SQLite refused, when there is one (cut to its first 300 characters).
    public var sql: String?
    /// The value at fault, as text, when there is one (a value a property could not hold).
    public var value: String?
    /// The error this one wraps (a GRDB `DatabaseError`, a file-system error), for callers that need its details;
    /// `message` already says what it means.
    public var underlyingError: (any Error)?

    public init(
        _ code: Code, _ message: String, entityName: String? = nil, key: String? = nil, underlying: [CoreDataError] = [],
        sqliteResultCode: Int32? = nil, sql: String? = nil, value: String? = nil, underlyingError: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.entityName = entityName
        self.key = key
        self.underlying = underlying
        self.sqliteResultCode = sqliteResultCode
        self.sql = sql
        self.value = value
        self.underlyingError = underlyingError
    }

    /// Two errors are equal when everything but `underlyingError` (which need not be comparable) is.
    public static func == (a: CoreDataError, b: CoreDataError) -> Bool {
        a.code == b.code && a.message == b.message && a.entityName == b.entityName && a.key == b.key
            && a.underlying == b.underlying && a.sqliteResultCode == b.sqliteResultCode && a.sql == b.sql && a.value == b.value
    }

    public var description: String { message }
    public var errorDescription: String? { message }
    public static var errorDomain: String { "NSCocoaErrorDomain" }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: message]
        if let underlyingError { info[NSUnderlyingErrorKey] = underlyingError }
        // Core Data's validation keys (NSValidationKeyErrorKey, NSValidationValueErrorKey), and its list of errors
        // for several (NSDetailedErrorsKey).
        if (1550...1680).contains(code.rawValue) {
            if let key { info["NSValidationErrorKey"] = key }
            if let value { info["NSValidationErrorValue"] = value }
        }
        if !underlying.isEmpty, code.rawValue == 1560 { info["NSDetailedErrors"] = underlying }
        return info
    }
}
