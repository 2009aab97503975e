import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

/// The store option that turns persistent history on (a `Bool`): every save and batch request is recorded as a
/// transaction in the store file, for other contexts and processes to read with `NSPersistentHistoryChangeRequest`.
///
/// A store that has history keeps recording it whatever a later open says (Core Data opens such a store read-only
/// instead; here nothing can leave a gap in the history).
public let NSPersistentHistoryTrackingKey = "NSPersistentHistoryTrackingKey"

/// The key of the history token in a `NSPersistentStoreRemoteChange` notification's `userInfo`, when the store keeps
/// history: the token of the newest transaction at the time.
public let NSPersistentHistoryTokenKey = "historyToken"

/// A bookmark in a store's persistent history: the transaction it was taken at.
///
/// Core Data's `NSPersistentHistoryToken`. Archive it with `NSKeyedArchiver` to resume from it on the next launch.
///
/// For example:
/// ```swift
/// let data = try NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)
/// let again = try NSKeyedUnarchiver.unarchivedObject(ofClass: NSPersistentHistoryToken.self, from: data)
/// ```
public final class NSPersistentHistoryToken: NSObject, NSSecureCoding, @unchecked Sendable {
    /// The UUID of the store the token belongs to.
    public let storeIdentifier: String
    /// The number of the transaction the token marks (0: before the first).
    public let transactionNumber: Int64

    package init(storeIdentifier: String, transactionNumber: Int64) {
        self.storeIdentifier = storeIdentifier
        self.transactionNumber = transactionNumber
    }

    /// True: tokens decode with `NSKeyedUnarchiver.unarchivedObject(ofClass:from:)`.
    public static var supportsSecureCoding: Bool { true }

    /// Writes the store identifier and transaction number.
    public func encode(with coder: NSCoder) {
        coder.encode(storeIdentifier as NSString, forKey: "storeIdentifier")
        coder.encode(transactionNumber, forKey: "transactionNumber")
    }

    /// Reads a token written by `encode(with:)`; nil when the archive holds none.
    public init?(coder: NSCoder) {
        guard let store = coder.decodeObject(of: NSString.self, forKey: "storeIdentifier") else { return nil }
        storeIdentifier = store as String
        transactionNumber = coder.decodeInt64(forKey: "transactionNumber")
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? NSPersistentHistoryToken else { return false }
        return other.storeIdentifier == storeIdentifier && other.transactionNumber == transactionNumber
    }

    public override var hash: Int { storeIdentifier.hashValue ^ transactionNumber.hashValue }

    public override var description: String { "<NSPersistentHistoryToken \(storeIdentifier):\(transactionNumber)>" }
}

/// What a history change did to its object.
public enum NSPersistentHistoryChangeType: Int, Sendable {
    case insert = 0
    case update = 1
    case delete = 2
}

/// One object's change in a persistent-history transaction (Core Data's `NSPersistentHistoryChange`).
public final class NSPersistentHistoryChange: @unchecked Sendable {
    /// The change's number in the store.
    public let changeID: Int64
    /// The object that changed.
    public let changedObjectID: NSManagedObjectID
    /// Whether the object was inserted, updated or deleted.
    public let changeType: NSPersistentHistoryChangeType
    /// For a delete, the values of the attributes marked `preservesValueInHistoryOnDeletion` (by name; absent ones
    /// were nil); nil for inserts and updates.
    public let tombstone: [AnyHashable: Any]?
    /// For an update, the properties it changed; nil for inserts and deletes.
    public let updatedProperties: Set<NSPropertyDescription>?
    /// The transaction it belongs to (kept alive by its changes; a transaction refers to its changes weakly, so that
    /// neither keeps the other forever).
    public let transaction: NSPersistentHistoryTransaction?

    init(_ change: StoreHistoryChange, transaction: NSPersistentHistoryTransaction) {
        changeID = change.changeID
        changedObjectID = change.objectID
        changeType = NSPersistentHistoryChangeType(rawValue: change.kind.rawValue) ?? .update
        if change.kind == .delete {
            let entity = change.objectID.entity
            var values: [AnyHashable: Any] = [:]
            for (name, value) in change.tombstone {
                guard let attribute = entity.propertiesByName[name] as? NSAttributeDescription,
                    let converted = try? ValueConversion.toAny(value, attribute: attribute, entityName: entity.name)
                else { continue }
                values[name] = converted
            }
            tombstone = values
        } else {
            tombstone = nil
        }
        updatedProperties = change.kind == .update ? Set(change.updatedProperties) : nil
        self.transaction = transaction
    }
}

/// One save or batch request as persistent history recorded it (Core Data's `NSPersistentHistoryTransaction`).
public final class NSPersistentHistoryTransaction: @unchecked Sendable {
    /// When it was committed.
    public let timestamp: Date
    /// Its changes, oldest first; nil when the request asked for transactions only.
    ///
    /// The same objects while someone holds them.
    public var changes: [NSPersistentHistoryChange]? {
        lock.withLock {
            guard let storedChanges else { return nil }
            if let live = liveChanges.map({ $0.compactMap(\.change) }), live.count == storedChanges.count { return live }
            let made = storedChanges.map { NSPersistentHistoryChange($0, transaction: self) }
            liveChanges = made.map(WeakChange.init)
            return made
        }
    }
    private let lock = NSLock()
    private var storedChanges: [StoreHistoryChange]?
    private var liveChanges: [WeakChange]?

    private struct WeakChange {
        weak var change: NSPersistentHistoryChange?
    }
    /// Its number in the store (increasing with each transaction).
    public let transactionNumber: Int64
    /// The UUID of the store it was recorded in.
    public let storeID: String
    /// The bundle identifier of the process that wrote it (its name when it has none).
    public let bundleID: String
    /// The name of the process that wrote it.
    public let processID: String
    /// The `name` of the context that saved.
    public let contextName: String?
    /// The `transactionAuthor` of the context that saved.
    public let author: String?
    /// A token marking this transaction: fetch the history after it to read what came next.
    public var token: NSPersistentHistoryToken { NSPersistentHistoryToken(storeIdentifier: storeID, transactionNumber: transactionNumber) }

    init(_ transaction: StoreHistoryTransaction, storeID: String) {
        timestamp = transaction.timestamp
        transactionNumber = transaction.number
        self.storeID = storeID
        processID = transaction.processID ?? ""
        bundleID = transaction.bundleID ?? processID
        contextName = transaction.contextName
        author = transaction.author
        storedChanges = transaction.changes
    }

    /// Keeps only `kept` of its changes (a history fetch filtered by a change request).
    func keepChanges(_ kept: [NSPersistentHistoryChange]) {
        let ids = Set(kept.map(\.changeID))
        lock.withLock {
            storedChanges = storedChanges?.filter { ids.contains($0.changeID) }
            liveChanges = kept.map(WeakChange.init)
        }
    }

    /// A notification that `mergeChanges(fromContextDidSave:)` merges into a context: the IDs of the objects this
    /// transaction inserted, updated and deleted.
    ///
    /// For example:
    /// ```swift
    /// for transaction in transactions { viewContext.mergeChanges(fromContextDidSave: transaction.objectIDNotification()) }
    /// ```
    public func objectIDNotification() -> Notification {
        var inserted: Set<NSManagedObjectID> = []
        var updated: Set<NSManagedObjectID> = []
        var deleted: Set<NSManagedObjectID> = []
        for change in changes ?? [] {
            switch change.changeType {
            case .insert: inserted.insert(change.changedObjectID)
            case .update: updated.insert(change.changedObjectID)
            case .delete: deleted.insert(change.changedObjectID)
            }
        }
        return Notification(
            name: NSManagedObjectContext.didSaveObjectIDsNotification, object: nil,
            userInfo: [
                NSInsertedObjectIDsKey: inserted, NSUpdatedObjectIDsKey: updated.subtracting(inserted), NSDeletedObjectIDsKey: deleted,
            ])
    }
}

/// What a history request returns.
public enum NSPersistentHistoryResultType: Int, Sendable {
    /// Whether it succeeded (`true`).
    case statusOnly = 0
    /// The IDs of the objects the transactions changed (`[NSManagedObjectID]`, each once, in order of first change).
    case objectIDs = 1
    /// How many transactions (a fetch) or how many were deleted (a delete).
    case count = 2
    /// The transactions, without their changes (`[NSPersistentHistoryTransaction]`).
    case transactionsOnly = 3
    /// The changes of every transaction, in order (`[NSPersistentHistoryChange]`).
    case changesOnly = 4
    /// The transactions with their changes (`[NSPersistentHistoryTransaction]`).
    case transactionsAndChanges = 5
}

/// Fetches or deletes persistent history (Core Data's `NSPersistentHistoryChangeRequest`); run it with
/// `NSManagedObjectContext.execute(_:)`.
///
/// For example:
/// ```swift
/// let request = NSPersistentHistoryChangeRequest.fetchHistory(after: lastToken)
/// let result = try context.execute(request) as? NSPersistentHistoryResult
/// for transaction in result?.result as? [NSPersistentHistoryTransaction] ?? [] { … lastToken = transaction.token }
/// try context.execute(NSPersistentHistoryChangeRequest.deleteHistory(before: lastToken))
/// ```
public final class NSPersistentHistoryChangeRequest: NSPersistentStoreRequest, @unchecked Sendable {
    enum Operation {
        case fetch
        case delete
    }

    let operation: Operation
    let date: Date?
    /// The token the request starts after (a fetch) or ends at (a delete), when it was given one.
    public let token: NSPersistentHistoryToken?
    /// What the request returns (default: transactions with their changes).
    public var resultType: NSPersistentHistoryResultType = .transactionsAndChanges
    /// A fetch request for `Transaction` or `Change` whose predicate (and limit) narrows what a fetch returns
    /// (`NSPersistentHistoryTransaction.fetchRequest`, `NSPersistentHistoryChange.fetchRequest`).
    public var fetchRequest: NSFetchRequest<any NSFetchRequestResult>?

    init(_ operation: Operation, token: NSPersistentHistoryToken?, date: Date?) {
        self.operation = operation
        self.token = token
        self.date = date
    }

    /// The transactions recorded after `date`.
    public static func fetchHistory(after date: Date) -> NSPersistentHistoryChangeRequest { .init(.fetch, token: nil, date: date) }

    /// The transactions after the one `token` marks; all of them when `token` is nil.
    public static func fetchHistory(after token: NSPersistentHistoryToken?) -> NSPersistentHistoryChangeRequest {
        .init(.fetch, token: token, date: nil)
    }

    /// The transactions after `transaction`; all of them when it is nil.
    public static func fetchHistory(after transaction: NSPersistentHistoryTransaction?) -> NSPersistentHistoryChangeRequest {
        .init(.fetch, token: transaction?.token, date: nil)
    }

    /// Deletes the transactions recorded before `date`.
    public static func deleteHistory(before date: Date) -> NSPersistentHistoryChangeRequest { .init(.delete, token: nil, date: date) }

    /// Deletes the transaction `token` marks and every one before it; all of them when `token` is nil.
    public static func deleteHistory(before token: NSPersistentHistoryToken?) -> NSPersistentHistoryChangeRequest {
        .init(.delete, token: token, date: nil)
    }

    /// Deletes `transaction` and every one before it; all of them when it is nil.
    public static func deleteHistory(before transaction: NSPersistentHistoryTransaction?) -> NSPersistentHistoryChangeRequest {
        .init(.delete, token: transaction?.token, date: nil)
    }
}

/// What a history request returned (Core Data's `NSPersistentHistoryResult`).
public final class NSPersistentHistoryResult: NSPersistentStoreResult, @unchecked Sendable {
    /// What `result` holds.
    public let resultType: NSPersistentHistoryResultType
    /// The value `resultType` describes.
    public let result: Any?

    init(_ resultType: NSPersistentHistoryResultType, _ result: Any?) {
        self.resultType = resultType
        self.result = result
    }
}
