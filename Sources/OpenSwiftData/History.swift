internal import OpenCoreData

// SwiftData's history API (iOS 18) over the store's persistent history: each save is a transaction, each model it
// inserted, updated or deleted a change.

/// A bookmark in a store's history.
public protocol HistoryToken: Codable, Comparable, Hashable, Sendable {}

/// A bookmark in a store's history: the transaction it was taken at.
///
/// Tokens of one store compare by their order in it.
public struct DefaultHistoryToken: HistoryToken {
    /// The store the token belongs to.
    public let storeIdentifier: String
    /// The number of the transaction it marks.
    let transactionNumber: Int64

    /// Orders tokens of one store by transaction (tokens of different stores by store identifier first).
    public static func < (a: DefaultHistoryToken, b: DefaultHistoryToken) -> Bool {
        (a.storeIdentifier, a.transactionNumber) < (b.storeIdentifier, b.transactionNumber)
    }
}

/// One save as the history recorded it.
public protocol HistoryTransaction<TokenType>: Hashable, Identifiable, Sendable {
    /// The token type of its store.
    associatedtype TokenType: HistoryToken
    /// The token marking this transaction.
    var token: TokenType { get }
    /// What it changed, in order.
    var changes: [HistoryChange] { get }
    /// The author the saving context had (`ModelContext.author`).
    var author: String? { get }
    /// When it was saved.
    var timestamp: Date { get }
}

/// One save as the store's history recorded it.
public struct DefaultHistoryTransaction: HistoryTransaction {
    /// The token marking this transaction.
    public let token: DefaultHistoryToken
    /// What it inserted, updated and deleted, in order.
    public let changes: [HistoryChange]
    /// The author the saving context had.
    public let author: String?
    /// When it was saved.
    public let timestamp: Date
    /// The transaction's number in its store.
    public let transactionIdentifier: Int64
    /// The bundle identifier (or the name) of the process that saved.
    public let bundleIdentifier: String
    /// The process that saved.
    public let processIdentifier: String
    /// The store it was recorded in.
    public let storeIdentifier: String

    /// The transaction's number in its store.
    public var id: Int64 { transactionIdentifier }

    /// Transactions are equal when they are the same transaction of the same store.
    public static func == (a: Self, b: Self) -> Bool { a.token == b.token }
    /// Hashes the token.
    public func hash(into hasher: inout Hasher) { hasher.combine(token) }
}

/// What one change of a transaction did.
public enum HistoryChange: Sendable {
    /// A model was inserted.
    case insert(any HistoryInsert)
    /// A model was updated.
    case update(any HistoryUpdate)
    /// A model was deleted.
    case delete(any HistoryDelete)
}

extension HistoryChange {
    /// The identifier of the model the change inserted, updated or deleted.
    public var changedPersistentIdentifier: PersistentIdentifier {
        switch self {
        case .insert(let insert): insert.changedPersistentIdentifier
        case .update(let update): update.changedPersistentIdentifier
        case .delete(let delete): delete.changedPersistentIdentifier
        }
    }

    /// The change's number in the store.
    public var changeIdentifier: Int64 {
        switch self {
        case .insert(let insert): insert.changeIdentifier
        case .update(let update): update.changeIdentifier
        case .delete(let delete): delete.changeIdentifier
        }
    }
}

/// A model's insertion in the history.
public protocol HistoryInsert<Model>: Sendable {
    /// The model's class.
    associatedtype Model: PersistentModel
    /// The inserted model's identifier.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The change's number in the store.
    var changeIdentifier: Int64 { get }
}

/// A model's update in the history.
public protocol HistoryUpdate<Model>: Sendable {
    /// The model's class.
    associatedtype Model: PersistentModel
    /// The updated model's identifier.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The change's number in the store.
    var changeIdentifier: Int64 { get }
    /// The persisted properties the update changed.
    var updatedAttributes: [PartialKeyPath<Model>] { get }
}

/// A model's deletion in the history.
public protocol HistoryDelete<Model>: Sendable {
    /// The model's class.
    associatedtype Model: PersistentModel
    /// The deleted model's identifier.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The change's number in the store.
    var changeIdentifier: Int64 { get }
    /// The values of its attributes marked `.preserveValueOnDeletion`.
    var tombstone: HistoryTombstone<Model> { get }
}

/// An insertion of a `Model`.
public struct DefaultHistoryInsert<Model: PersistentModel>: HistoryInsert {
    /// The inserted model's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The change's number in the store.
    public let changeIdentifier: Int64
}

/// An update of a `Model`.
public struct DefaultHistoryUpdate<Model: PersistentModel>: HistoryUpdate, @unchecked Sendable {
    /// The updated model's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The change's number in the store.
    public let changeIdentifier: Int64
    /// The persisted properties the update changed.
    public let updatedAttributes: [PartialKeyPath<Model>]
}

/// A deletion of a `Model`.
public struct DefaultHistoryDelete<Model: PersistentModel>: HistoryDelete {
    /// The deleted model's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The change's number in the store.
    public let changeIdentifier: Int64
    /// The values of its attributes marked `.preserveValueOnDeletion`.
    public let tombstone: HistoryTombstone<Model>
}

/// The values a deleted model's `.preserveValueOnDeletion` attributes had.
///
/// For example:
/// ```swift
/// if case .delete(let deletion as DefaultHistoryDelete<Trip>) = change { print(deletion.tombstone[\.name] ?? "?") }
/// ```
public struct HistoryTombstone<Model: PersistentModel>: @unchecked Sendable {
    let values: [String: Any]

    /// The value the property had, or nil when it is not preserved (or was nil).
    public subscript<Value>(_ keyPath: KeyPath<Model, Value>) -> Value? {
        guard let property = Model.schemaMetadata.first(where: { $0.keyPath == keyPath }), let stored = values[property.name] else {
            return nil
        }
        return ModelValues.decode(stored, as: Value?.self, context: nil)
    }
}

/// Which transactions to fetch or delete: a predicate over them (evaluated on each transaction), their order, and
/// how many.
///
/// For example:
/// ```swift
/// var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
/// if let lastToken { descriptor.predicate = #Predicate { $0.token > lastToken } }
/// let transactions = try context.fetchHistory(descriptor)
/// ```
public struct HistoryDescriptor<T: HistoryTransaction>: @unchecked Sendable {
    /// The transactions to include (all when nil).
    public var predicate: Predicate<T>?
    /// Their order (the store's, oldest first, when empty).
    public var sortBy: [SortDescriptor<T>]
    /// At most this many (all when nil).
    public var fetchLimit: Int?

    /// A descriptor of the transactions `predicate` accepts.
    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}

extension ModelContext {
    /// The transactions of the store's history the descriptor selects, with their changes.
    ///
    /// - Throws: `SwiftDataError` for a transaction type other than `DefaultHistoryTransaction`, or the store's error.
    public func fetchHistory<T: HistoryTransaction>(_ descriptor: HistoryDescriptor<T>) throws -> [T] {
        guard T.self == DefaultHistoryTransaction.self else {
            throw SwiftDataError("fetchHistory reads DefaultHistoryTransaction, not \(T.self).")
        }
        var transactions = try historyTransactions().map { $0 as! T }
        if let predicate = descriptor.predicate { transactions = try transactions.filter { try predicate.evaluate($0) } }
        if !descriptor.sortBy.isEmpty { transactions.sort(using: descriptor.sortBy) }
        if let limit = descriptor.fetchLimit { transactions = Array(transactions.prefix(max(0, limit))) }
        return transactions
    }

    /// Deletes the transactions the descriptor selects from the store's history.
    ///
    /// A history is deleted from its oldest transaction on: the selected transactions must be the oldest ones (all of
    /// them up to the newest selected).
    ///
    /// - Throws: `SwiftDataError` when an older transaction the descriptor does not select would have to go too.
    public func deleteHistory<T: HistoryTransaction>(_ descriptor: HistoryDescriptor<T>) throws {
        guard T.self == DefaultHistoryTransaction.self else {
            throw SwiftDataError("deleteHistory deletes DefaultHistoryTransaction, not \(T.self).")
        }
        let all = try historyTransactions()
        var selected = Set(try all.filter { try descriptor.predicate?.evaluate($0 as! T) ?? true }.map(\.transactionIdentifier))
        if let limit = descriptor.fetchLimit {
            selected = Set(all.map(\.transactionIdentifier).filter(selected.contains).prefix(max(0, limit)))
        }
        guard let newest = all.last(where: { selected.contains($0.transactionIdentifier) }) else { return }
        let kept = all.filter { $0.transactionIdentifier < newest.transactionIdentifier && !selected.contains($0.transactionIdentifier) }
        if let first = kept.first {
            throw SwiftDataError(
                "The history is deleted from its oldest transaction on; transaction \(first.transactionIdentifier), which the descriptor does not select, comes before transaction \(newest.transactionIdentifier), which it does."
            )
        }
        let token = NSPersistentHistoryToken(storeIdentifier: newest.storeIdentifier, transactionNumber: newest.transactionIdentifier)
        try context.performAndWait { _ = try context.execute(NSPersistentHistoryChangeRequest.deleteHistory(before: token)) }
    }

    /// The author recorded with this context's saves in the history.
    public var author: String? {
        get { context.performAndWait { context.transactionAuthor } }
        set { context.performAndWait { context.transactionAuthor = newValue } }
    }

    /// Every transaction of the store's history, oldest first, as SwiftData's values.
    private func historyTransactions() throws -> [DefaultHistoryTransaction] {
        let types = Dictionary(container.schema.types.map { (Schema.entityName(of: $0), $0) }, uniquingKeysWith: { a, _ in a })
        return try context.performAndWait {
            let result = try context.execute(NSPersistentHistoryChangeRequest.fetchHistory(after: nil as NSPersistentHistoryToken?))
            let transactions = (result as? NSPersistentHistoryResult)?.result as? [NSPersistentHistoryTransaction] ?? []
            return transactions.map { transaction in
                DefaultHistoryTransaction(
                    token: DefaultHistoryToken(storeIdentifier: transaction.storeID, transactionNumber: transaction.transactionNumber),
                    changes: (transaction.changes ?? []).compactMap { change in
                        types[change.changedObjectID.entity.name].map { Self.historyChange(change, of: $0) }
                    },
                    author: transaction.author, timestamp: transaction.timestamp, transactionIdentifier: transaction.transactionNumber,
                    bundleIdentifier: transaction.bundleID, processIdentifier: transaction.processID, storeIdentifier: transaction.storeID)
            }
        }
    }

    private static func historyChange<M: PersistentModel>(_ change: NSPersistentHistoryChange, of type: M.Type) -> HistoryChange {
        let identifier = PersistentIdentifier(objectID: change.changedObjectID)
        switch change.changeType {
        case .insert:
            return .insert(DefaultHistoryInsert<M>(changedPersistentIdentifier: identifier, changeIdentifier: change.changeID))
        case .update:
            let names = Set((change.updatedProperties ?? []).map(\.name))
            let keyPaths = M.schemaMetadata.filter { names.contains($0.name) }.compactMap { $0.keyPath as? PartialKeyPath<M> }
            return .update(
                DefaultHistoryUpdate<M>(
                    changedPersistentIdentifier: identifier, changeIdentifier: change.changeID, updatedAttributes: keyPaths))
        case .delete:
            var values: [String: Any] = [:]
            for (key, value) in change.tombstone ?? [:] {
                if let name = key.base as? String { values[name] = value }
            }
            return .delete(
                DefaultHistoryDelete<M>(
                    changedPersistentIdentifier: identifier, changeIdentifier: change.changeID, tombstone: HistoryTombstone(values: values))
            )
        }
    }
}
