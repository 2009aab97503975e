import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

/// The entities history fetch requests name: `Transaction` (its `author`, `bundleID`, `contextName`, `processID`,
/// `storeID`, `timestamp`, `transactionNumber`) and `Change` (its `changeID`, `changeType`, `changedEntity` — the
/// entity's name — and `transaction`).
enum HistoryEntities {
    static let model: NSManagedObjectModel? = try? NSManagedObjectModel {
        Entity("Transaction") {
            Attribute("author", .string)
            Attribute("bundleID", .string)
            Attribute("contextName", .string)
            Attribute("processID", .string)
            Attribute("storeID", .string)
            Attribute("timestamp", .date)
            Attribute("transactionNumber", .integer64)
            Relationship("changes", to: "Change", toMany: true, inverse: "transaction")
        }
        Entity("Change") {
            Attribute("changeID", .integer64)
            Attribute("changeType", .integer16)
            Attribute("changedEntity", .string)
            Relationship("transaction", to: "Transaction", inverse: "changes")
        }
    }
    static var transaction: NSEntityDescription? { model?.entitiesByName["Transaction"] }
    static var change: NSEntityDescription? { model?.entitiesByName["Change"] }

    /// A fetch request naming `entity`.
    static func fetchRequest(_ entity: NSEntityDescription?) -> NSFetchRequest<any NSFetchRequestResult>? {
        entity.map { entity in
            let request = NSFetchRequest<any NSFetchRequestResult>(entityName: entity.name)
            request.entity = entity
            return request
        }
    }
}

extension NSPersistentHistoryTransaction: PredicateSubject, NSFetchRequestResult {
    /// The entity a fetch request for transactions names (Core Data's `NSPersistentHistoryTransaction.entityDescription`).
    public static var entityDescription: NSEntityDescription? { HistoryEntities.transaction }

    /// A fetch request for transactions, whose predicate filters a history fetch (`fetchHistory(withFetch:)`, or
    /// `NSPersistentHistoryChangeRequest.fetchRequest`).
    ///
    /// For example:
    /// ```swift
    /// let others = NSPersistentHistoryTransaction.fetchRequest!
    /// others.predicate = try FetchPredicate(format: "author != %@", "importer")
    /// let request = NSPersistentHistoryChangeRequest.fetchHistory(after: token)
    /// request.fetchRequest = others
    /// ```
    public static var fetchRequest: NSFetchRequest<any NSFetchRequestResult>? { HistoryEntities.fetchRequest(entityDescription) }

    /// The identity predicates compare it by (in the history entities' namespace).
    public var predicateObjectID: NSManagedObjectID {
        NSManagedObjectID(entity: HistoryEntities.transaction!, storeIdentifier: storeID, primaryKey: transactionNumber)
    }

    /// The value of one of the keys its entity lists, for predicates of history fetch requests.
    public func predicateValue(forKey key: String) throws -> PredicateKeyValue {
        func text(_ value: String?) -> PredicateKeyValue { .value(value.map(AttributeValue.string) ?? .null) }
        switch key {
        case "author": return text(author)
        case "bundleID": return text(bundleID)
        case "contextName": return text(contextName)
        case "processID": return text(processID)
        case "storeID": return text(storeID)
        case "timestamp": return .value(.date(timestamp))
        case "transactionNumber": return .value(.integer(transactionNumber))
        case "changes": return .objects(changes ?? [])
        default: throw CoreDataError(.unknownKey, "A history transaction has no key '\(key)'.", entityName: "Transaction", key: key)
        }
    }
}

extension NSPersistentHistoryChange: PredicateSubject, NSFetchRequestResult {
    /// The entity a fetch request for changes names (Core Data's `NSPersistentHistoryChange.entityDescription`).
    public static var entityDescription: NSEntityDescription? { HistoryEntities.change }

    /// A fetch request for changes, whose predicate keeps only the matching changes of each transaction.
    public static var fetchRequest: NSFetchRequest<any NSFetchRequestResult>? { HistoryEntities.fetchRequest(entityDescription) }

    /// The identity predicates compare it by (in the history entities' namespace).
    public var predicateObjectID: NSManagedObjectID {
        NSManagedObjectID(entity: HistoryEntities.change!, storeIdentifier: changedObjectID.storeIdentifier ?? "", primaryKey: changeID)
    }

    /// The value of one of the keys its entity lists, for predicates of history fetch requests.
    public func predicateValue(forKey key: String) throws -> PredicateKeyValue {
        switch key {
        case "changeID": return .value(.integer(changeID))
        case "changeType": return .value(.integer(Int64(changeType.rawValue)))
        case "changedEntity": return .value(.string(changedObjectID.entity.name))
        case "transaction": return .object(transaction)
        default: throw CoreDataError(.unknownKey, "A history change has no key '\(key)'.", entityName: "Change", key: key)
        }
    }
}

extension NSPersistentHistoryChangeRequest {
    /// The history a fetch request selects: transactions whose predicate matches (a `Transaction` request), or each
    /// transaction's matching changes (a `Change` request; transactions left without one are dropped).
    public static func fetchHistory(withFetch fetchRequest: NSFetchRequest<any NSFetchRequestResult>) -> NSPersistentHistoryChangeRequest {
        let request = NSPersistentHistoryChangeRequest(.fetch, token: nil, date: nil)
        request.fetchRequest = fetchRequest
        return request
    }

    /// Keeps what `fetchRequest` selects of `transactions`, up to its `fetchLimit` transactions.
    func filtered(_ transactions: [NSPersistentHistoryTransaction]) throws -> [NSPersistentHistoryTransaction] {
        guard let fetchRequest else { return transactions }
        let name = fetchRequest.entity?.name ?? fetchRequest.entityName ?? ""
        var kept: [NSPersistentHistoryTransaction]
        switch name {
        case "Transaction":
            kept = try transactions.filter { try fetchRequest.predicate?.evaluate(with: $0) ?? true }
        case "Change":
            kept = []
            for transaction in transactions {
                let changes = try (transaction.changes ?? []).filter { try fetchRequest.predicate?.evaluate(with: $0) ?? true }
                guard !changes.isEmpty else { continue }
                transaction.keepChanges(changes)
                kept.append(transaction)
            }
        default:
            throw CoreDataError(
                .unsupported,
                "A history fetch request must name Transaction or Change (NSPersistentHistoryTransaction.fetchRequest), not '\(name)'.")
        }
        if fetchRequest.fetchLimit > 0, kept.count > fetchRequest.fetchLimit { kept = Array(kept.prefix(fetchRequest.fetchLimit)) }
        return kept
    }
}
