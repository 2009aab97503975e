import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

/// One object's change in a persistent-history transaction, as the store recorded it.
package struct StoreHistoryChange: Sendable {
    package enum Kind: Int, Sendable {
        case insert = 0
        case update = 1
        case delete = 2
    }

    /// The change's key in `ACHANGE`.
    package let changeID: Int64
    package let objectID: NSManagedObjectID
    package let kind: Kind
    /// For an update, the properties it changed.
    package let updatedProperties: [NSPropertyDescription]
    /// For a delete, the values of the attributes marked `preservesValueInHistoryOnDeletion`, by name.
    package let tombstone: [String: AttributeValue]
    /// The transaction's number.
    package let transactionNumber: Int64
}

/// One persistent-history transaction: a save or a batch request, as the store recorded it.
package struct StoreHistoryTransaction: Sendable {
    package let number: Int64
    package let timestamp: Date
    package let author: String?
    package let bundleID: String?
    package let processID: String?
    package let contextName: String?
    /// Its changes in the order they were recorded; nil when they were not asked for.
    package let changes: [StoreHistoryChange]?
}

/// Which transactions a history fetch or delete covers.
package enum StoreHistoryBound: Sendable, Equatable {
    /// Every transaction.
    case all
    /// Transactions whose number is greater (fetch) or at most (delete) this one.
    case transaction(Int64)
    /// Transactions after (fetch) or before (delete) this moment.
    case date(Date)
}

extension StoreHistoryBound {
    /// The `WHERE` clause selecting the transactions after the bound (a fetch) or up to it (a delete), on the
    /// `ATRANSACTION` columns prefixed with `prefix`.
    func whereClause(column prefix: String, after: Bool) -> (sql: String, arguments: StatementArguments) {
        switch self {
        case .all: return ("", [])
        case .transaction(let number): return (" WHERE \(prefix)Z_PK \(after ? ">" : "<=") ?", [number])
        case .date(let date): return (" WHERE \(prefix)ZTIMESTAMP \(after ? ">" : "<") ?", [date.timeIntervalSinceReferenceDate])
        }
    }
}

extension SQLiteStore {
    /// The number of the newest history transaction (0 when none); nil when the store keeps no history.
    package func lastHistoryTransaction() throws -> Int64? {
        try read { db in
            guard try PersistentHistory.exists(db) else { return nil }
            return try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM ATRANSACTION") ?? 0
        }
    }

    /// The transactions after `bound`, oldest first, with their changes when `withChanges`.
    ///
    /// A change of an entity the model no longer has (a store migrated since) is left out.
    ///
    /// - Throws: `CoreDataError(.persistentStoreOperation)` when the store keeps no history or cannot be read.
    package func historyTransactions(after bound: StoreHistoryBound, withChanges: Bool) throws -> [StoreHistoryTransaction] {
        try read { db in
            guard try PersistentHistory.exists(db) else { throw noHistory() }
            let (condition, arguments) = bound.whereClause(column: "t.", after: true)
            func name(_ column: String) -> String {
                "COALESCE((SELECT ZNAME FROM ATRANSACTIONSTRING WHERE Z_PK = t.Z\(column)TS), t.Z\(column))"
            }
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT t.Z_PK, t.ZTIMESTAMP, \(name("AUTHOR")), \(name("BUNDLEID")), \(name("PROCESSID")), \(name("CONTEXTNAME"))
                    FROM ATRANSACTION t\(condition) ORDER BY t.Z_PK
                    """, arguments: arguments)
            guard let first = rows.first else { return [] }
            let changes = withChanges ? try historyChanges(from: first[0], in: db) : [:]
            return rows.map { row in
                let number: Int64 = row[0]
                return StoreHistoryTransaction(
                    number: number, timestamp: Date(timeIntervalSinceReferenceDate: row[1] ?? 0), author: row[2], bundleID: row[3],
                    processID: row[4], contextName: row[5], changes: withChanges ? changes[number] ?? [] : nil)
            }
        }
    }

    /// The changes of the transactions numbered `first` and after, by transaction.
    private func historyChanges(from first: Int64, in db: Database) throws -> [Int64: [StoreHistoryChange]] {
        let names: [String] = try db.columns(in: "ACHANGE").map { $0.name.uppercased() }
        let tombstoneColumns = names.filter { $0.hasPrefix("ZTOMBSTONE") }.sorted { (a: String, b: String) in
            a.count != b.count ? a.count < b.count : a < b
        }
        var slots: [Int: [NSPropertyDescription]] = [:]
        var result: [Int64: [StoreHistoryChange]] = [:]
        let cursor = try Row.fetchCursor(
            db,
            sql: """
                SELECT Z_PK, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS\(tombstoneColumns.map { ", " + $0 }.joined())
                FROM ACHANGE WHERE ZTRANSACTIONID >= ? ORDER BY Z_PK
                """, arguments: [first])
        while let row = try cursor.next() {
            let number: Int = row[2] ?? 0
            guard let entity = model.entity(withID: number), let kind = StoreHistoryChange.Kind(rawValue: row[1] ?? -1) else { continue }
            let transaction: Int64 = row[4] ?? 0
            var updated: [NSPropertyDescription] = []
            if kind == .update, let mask: Data = row[5] {
                let order = slots[number] ?? PersistentHistory.slots(of: entity)
                slots[number] = order
                updated = PersistentHistory.bits(of: mask).compactMap { $0 >= 1 && $0 <= order.count ? order[$0 - 1] : nil }
            }
            var tombstone: [String: AttributeValue] = [:]
            if kind == .delete {
                for (index, attribute) in PersistentHistory.tombstoneAttributes(of: entity).enumerated()
                where index < tombstoneColumns.count {
                    let stored = SQLArgument(row[6 + index] as DatabaseValue)
                    if let value = SQLStorage.decode(stored, as: attribute.attributeType), value != .null {
                        tombstone[attribute.name] = value
                    }
                }
            }
            let id = NSManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: row[3] ?? 0)
            result[transaction, default: []].append(
                StoreHistoryChange(
                    changeID: row[0], objectID: id, kind: kind, updatedProperties: updated, tombstone: tombstone,
                    transactionNumber: transaction))
        }
        return result
    }

    /// Deletes the transactions up to `bound` (a transaction and those before it, or those before a moment) and their
    /// changes; returns how many transactions went.
    package func deleteHistory(through bound: StoreHistoryBound) throws -> Int {
        let held = try checkOpen()
        func run(_ db: Database) throws -> Int {
            guard try PersistentHistory.exists(db) else { throw noHistory() }
            let (condition, arguments) = bound.whereClause(column: "", after: false)
            try db.execute(
                sql: "DELETE FROM ACHANGE WHERE ZTRANSACTIONID IN (SELECT Z_PK FROM ATRANSACTION\(condition))", arguments: arguments)
            try db.execute(sql: "DELETE FROM ATRANSACTION\(condition)", arguments: arguments)
            return db.changesCount
        }
        do {
            if let held { return try run(held) }
            return try writer.write(run)
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw mapError(error, doing: "delete the history of")
        }
    }

    /// Whether the store has persistent history tables (false when it cannot be read).
    package var keepsHistory: Bool {
        (try? read { db in try PersistentHistory.exists(db) }) ?? false
    }

    private func noHistory() -> CoreDataError {
        CoreDataError(
            .persistentStoreOperation,
            "The store \(url?.path ?? "in memory") keeps no persistent history; add it with NSPersistentHistoryTrackingKey set to true.")
    }
}
