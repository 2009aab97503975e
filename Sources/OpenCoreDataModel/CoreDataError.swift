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
    ///
    /// For example:
    /// ```swift
    /// if error.code == .validationMissingMandatoryProperty { highlight(error.key) }
    /// ```
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The number: Core Data's `NSCocoaErrorDomain` code where it has one, 9xxxxx for OpenCoreData's own.
        public let rawValue: Int
        /// The code's name, as Swift spells it (`validationMissingMandatoryProperty`).
        public let name: String
        /// A code with a number and a name; the predefined codes below cover what OpenCoreData throws.
        public init(_ rawValue: Int, _ name: String) {
            self.rawValue = rawValue
            self.name = name
        }
        /// Codes are equal when their numbers are.
        public static func == (a: Code, b: Code) -> Bool { a.rawValue == b.rawValue }
        /// Hashes the number.
        public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
        /// The name and number, as in `unknownKey (900004)`.
        public var description: String { "\(name) (\(rawValue))" }

        // Validation, with Core Data's numbers.
        /// A value a property cannot hold (Core Data's `NSManagedObjectValidationError`, 1550).
        public static let managedObjectValidation = Code(1550, "managedObjectValidation")
        /// A required property is nil (`NSValidationMissingMandatoryPropertyError`, 1570).
        public static let validationMissingMandatoryProperty = Code(1570, "validationMissingMandatoryProperty")
        /// A to-many relationship holds fewer objects than its minimum count (1580).
        public static let validationRelationshipLacksMinimumCount = Code(1580, "validationRelationshipLacksMinimumCount")
        /// A to-many relationship holds more objects than its maximum count (1590).
        public static let validationRelationshipExceedsMaximumCount = Code(1590, "validationRelationshipExceedsMaximumCount")
        /// A delete refused by a relationship's deny rule (1600).
        public static let validationRelationshipDeniedDelete = Code(1600, "validationRelationshipDeniedDelete")
        // Objects and contexts.
        /// A context used in a way its concurrency type does not allow (132000).
        public static let managedObjectContextLocking = Code(132000, "managedObjectContextLocking")
        /// A change to a deleted object, or a relationship set before the object is in a context (133000).
        public static let managedObjectReferentialIntegrity = Code(133000, "managedObjectReferentialIntegrity")
        /// A relationship to an object of another context (133010).
        public static let managedObjectExternalRelationship = Code(133010, "managedObjectExternalRelationship")
        /// Two objects of one save that break a uniqueness constraint (`NSManagedObjectConstraintValidationError`, 1551).
        public static let constraintValidation = Code(1551, "managedObjectConstraintValidation")
        /// A save whose object breaks a uniqueness constraint with a stored object (`NSManagedObjectConstraintMergeError`,
        /// 133021).
        public static let constraintConflict = Code(133021, "managedObjectConstraintMerge")
        /// A save that conflicts with a change another context saved first (`NSManagedObjectMergeError`, 133020).
        public static let managedObjectMerge = Code(133020, "managedObjectMerge")
        /// An object whose row is no longer in the store (deleted elsewhere) when its values are loaded.
        public static let objectNotFound = Code(900_010, "objectNotFound")
        // Stores.
        /// A store type the coordinator does not know (134000).
        public static let persistentStoreInvalidType = Code(134000, "persistentStoreInvalidType")
        /// A store whose tables do not match the model (134020).
        public static let persistentStoreIncompatibleSchema = Code(134020, "persistentStoreIncompatibleSchema")
        /// A save the store could not write (134030).
        public static let persistentStoreSave = Code(134030, "persistentStoreSave")
        /// A store operation that failed: a read, a write, a file that is locked or gone (134070).
        public static let persistentStoreOperation = Code(134070, "persistentStoreOperation")
        /// A store that could not be opened (134080).
        public static let persistentStoreOpen = Code(134080, "persistentStoreOpen")
        /// A store written for another version of the model (134100).
        public static let persistentStoreIncompatibleVersionHash = Code(134100, "persistentStoreIncompatibleVersionHash")
        /// A migration failed: its result would break the destination model (a required value missing), or the store
        /// could not be written; the store is left as it was (Core Data's `NSMigrationError`).
        public static let migration = Code(134110, "migration")
        /// No model version that wrote the store was found, so it cannot be migrated (`NSMigrationMissingSourceModelError`).
        public static let migrationMissingSourceModel = Code(134130, "migrationMissingSourceModel")
        /// Lightweight migration cannot infer how a change maps (`NSInferredMappingModelError`).
        public static let inferredMappingModel = Code(134190, "inferredMappingModel")
        /// A file that is not a store, or a damaged one (Foundation's `NSFileReadCorruptFileError`, 259).
        public static let persistentStoreNotAStore = Code(259, "fileReadCorruptFile")
        // OpenCoreData's own (no Core Data number): 9xxxxx.
        /// A model that is not consistent (an inverse that does not point back, a duplicate name, …).
        public static let invalidModel = Code(900_001, "invalidModel")
        /// A model file the loader cannot read.
        public static let unsupportedModelFile = Code(900_002, "unsupportedModelFile")
        /// An entity name the model does not have.
        public static let unknownEntity = Code(900_003, "unknownEntity")
        /// A key or key path the entity does not have.
        public static let unknownKey = Code(900_004, "unknownKey")
        /// A value of a type the property, or the predicate's operator, cannot take.
        public static let wrongValueType = Code(900_005, "wrongValueType")
        /// A predicate format string that does not parse (the message points at the offset).
        public static let predicateSyntax = Code(900_006, "predicateSyntax")
        /// A predicate that cannot be evaluated against the objects it is given.
        public static let predicateEvaluation = Code(900_007, "predicateEvaluation")
        /// A fetch request that cannot run (a negative limit, a to-many key path where one value is needed, …).
        public static let invalidFetchRequest = Code(900_008, "invalidFetchRequest")
        /// Something valid in Core Data that OpenCoreData does not do yet (the message names it).
        public static let unsupported = Code(900_009, "unsupported")
        /// An object read after its context was released.
        public static let objectWithoutContext = Code(900_011, "objectWithoutContext")
        /// A transformable attribute's value that its transformer cannot store or read back, or a transformer that is
        /// not registered (the message names entity, attribute and transformer).
        public static let valueTransformation = Code(900_012, "valueTransformation")
        /// An operation cancelled by its caller (Foundation's `NSUserCancelledError`): an asynchronous fetch's `cancel()`.
        public static let userCancelled = Code(3072, "userCancelled")
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
    /// Further entries of the error's `userInfo`, under Core Data's keys: `conflictList` (the `NSMergeConflict` or
    /// `NSConstraintConflict` objects of a failed save).
    public var userInfo: [String: any Sendable] = [:]
    /// The objects a conflict involves, for the context that resolves it: for a uniqueness-constraint conflict, the
    /// saved object and the stored one it collides with.
    package var conflictingObjectIDs: [NSManagedObjectID] = []

    /// An error with a code and a message that names the problem; the other fields say what it involves.
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

    /// The message.
    public var description: String { message }
    /// The message, for `LocalizedError`.
    public var errorDescription: String? { message }
    /// `NSCocoaErrorDomain`, Core Data's domain, so that bridged errors compare as on Apple platforms.
    public static var errorDomain: String { "NSCocoaErrorDomain" }
    /// The code's number.
    public var errorCode: Int { code.rawValue }
    /// The message under `NSLocalizedDescriptionKey`, the wrapped error under `NSUnderlyingErrorKey`, and Core Data's
    /// validation keys (`NSValidationErrorKey`, `NSValidationErrorValue`, `NSDetailedErrors`) where they apply.
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
        for (key, value) in userInfo { info[key] = value }
        return info
    }
}
