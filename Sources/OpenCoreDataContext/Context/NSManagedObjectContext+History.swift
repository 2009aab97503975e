import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

extension NSManagedObjectContext {
    /// Who this context's saves and batch requests are recorded as, in persistent history.
    var historyAuthor: HistoryAuthor { HistoryAuthor(author: transactionAuthor, contextName: name) }

    /// Runs a history fetch or delete against `store`.
    func executeHistory(_ request: NSPersistentHistoryChangeRequest, _ store: any HistoryStore) throws -> NSPersistentHistoryResult {
        if let token = request.token, token.storeIdentifier != store.identifier {
            throw CoreDataError(
                .persistentStoreOperation,
                "The history token \(token) belongs to the store \(token.storeIdentifier), not to this context's store \(store.identifier)."
            )
        }
        let bound: StoreHistoryBound =
            if let token = request.token { .transaction(token.transactionNumber) } else if let date = request.date { .date(date) } else {
                .all
            }
        switch request.operation {
        case .delete:
            let count = try store.deleteHistory(through: bound)
            return NSPersistentHistoryResult(request.resultType, request.resultType == .count ? count : true)
        case .fetch:
            let filtersChanges = (request.fetchRequest?.entity?.name ?? request.fetchRequest?.entityName) == "Change"
            let wantsChanges =
                filtersChanges
                || (request.resultType != .transactionsOnly && request.resultType != .count && request.resultType != .statusOnly)
            let stored = try store.historyTransactions(after: bound, withChanges: wantsChanges)
            let transactions = try request.filtered(stored.map { NSPersistentHistoryTransaction($0, storeID: store.identifier) })
            switch request.resultType {
            case .statusOnly: return NSPersistentHistoryResult(.statusOnly, true)
            case .count: return NSPersistentHistoryResult(.count, transactions.count)
            case .transactionsOnly, .transactionsAndChanges: return NSPersistentHistoryResult(request.resultType, transactions)
            case .changesOnly: return NSPersistentHistoryResult(.changesOnly, transactions.flatMap { $0.changes ?? [] })
            case .objectIDs:
                var seen: Set<NSManagedObjectID> = []
                let ids = transactions.flatMap { $0.changes ?? [] }.map(\.changedObjectID).filter { seen.insert($0).inserted }
                return NSPersistentHistoryResult(.objectIDs, ids)
            }
        }
    }

    /// Merges what the history transactions recorded, exactly.
    ///
    /// The objects they inserted, updated and deleted are read from the store as they are now, as
    /// `mergeChanges(fromRemoteContextSave:into:)` merges them. An object inserted
    /// and deleted within the transactions leaves nothing; a delete of an object this context never held is skipped.
    /// Call on the context's queue.
    package func mergeHistory(_ transactions: [StoreHistoryTransaction]) {
        var inserted: [NSManagedObjectID] = []
        var updated: [NSManagedObjectID] = []
        var deleted: [NSManagedObjectID] = []
        var state: [NSManagedObjectID: StoreHistoryChange.Kind] = [:]
        for change in transactions.flatMap({ $0.changes ?? [] }) {
            switch (state[change.objectID], change.kind) {
            case (nil, let kind): state[change.objectID] = kind
            case (.insert?, .delete): state[change.objectID] = nil
            case (.insert?, _): break
            case (_, let kind): state[change.objectID] = kind
            }
        }
        var seen: Set<NSManagedObjectID> = []
        for change in transactions.flatMap({ $0.changes ?? [] }) where seen.insert(change.objectID).inserted {
            switch state[change.objectID] {
            case .insert?: inserted.append(change.objectID)
            case .update?: updated.append(change.objectID)
            case .delete?: deleted.append(change.objectID)
            case nil: break
            }
        }
        withLock { mergeObjectIDs(inserted: inserted, updated: updated, deleted: deleted) }
    }

    /// Merges objects another writer inserted, updated or deleted, read from the store as they are now; called under
    /// the context's lock.
    ///
    /// A store that cannot be read at that moment (the connection lost, the server restarting) takes nothing for
    /// deleted that the writer did not delete: the deletes are merged, the inserted and updated objects stay as they
    /// were, and the context reads everything it holds again as soon as the store answers (`owesStoreReread`).
    func mergeObjectIDs(inserted: [NSManagedObjectID], updated: [NSManagedObjectID], deleted: [NSManagedObjectID]) {
        guard let store else { return }
        advanceQueryGeneration()
        let rows = try? store.rows(for: inserted + updated)
        // A row missing from a read that worked was deleted; nothing is missing from a read that failed.
        let gone = rows.map { rows in (inserted + updated).filter { rows[$0] == nil } } ?? []
        let payload = SavePayload(
            source: nil, coordinator: persistentStoreCoordinator, storeIdentifier: store.identifier,
            inserted: inserted.compactMap { rows?[$0] }, updated: updated.compactMap { rows?[$0] }, deleted: deleted + gone,
            linkEndpoints: [])
        merge(payload)
        if rows == nil { owesStoreReread() }
    }
}

extension NSPersistentStoreCoordinator {
    /// A token for the newest history transaction of the stores (all when nil), to fetch later history after it; nil
    /// when none of them keeps history.
    public func currentPersistentHistoryToken(fromStores stores: [Any]?) -> NSPersistentHistoryToken? {
        let candidates = storeEngines.filter { store in stores?.contains { ($0 as AnyObject) === store } ?? true }
        for case let store as any HistoryStore in candidates {
            if let number = try? store.lastHistoryTransaction() {
                return NSPersistentHistoryToken(storeIdentifier: store.identifier, transactionNumber: number)
            }
        }
        return nil
    }
}
