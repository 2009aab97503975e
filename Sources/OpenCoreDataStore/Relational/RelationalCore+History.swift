import Foundation
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
    func whereClause(column prefix: String, after: Bool) -> (sql: String, arguments: [SQLArgument]) {
        switch self {
        case .all: return ("", [])
        case .transaction(let number): return (" WHERE \(prefix)Z_PK \(after ? ">" : "<=") ?", [.integer(number)])
        case .date(let date): return (" WHERE \(prefix)ZTIMESTAMP \(after ? ">" : "<") ?", [.real(date.timeIntervalSinceReferenceDate)])
        }
    }
}

// Reading and deleting persistent history, on any SQL back end.
extension RelationalCore {
    /// The number of the newest history transaction (0 when none); nil when the store keeps no history.
    package func lastHistoryTransaction(on db: some RelationalConnection) throws -> Int64? {
        guard try PersistentHistory.exists(db) else { return nil }
        return try db.integer("SELECT MAX(Z_PK) FROM ATRANSACTION") ?? 0
    }

    /// The transactions after `bound`, oldest first, with their changes when `withChanges`; nil when the store keeps
    /// no history.
    ///
    /// A change of an entity the model no longer has (a store migrated since) is left out.
    package func historyTransactions(after bound: StoreHistoryBound, withChanges: Bool, on db: some RelationalConnection) throws
        -> [StoreHistoryTransaction]?
    {
        guard try PersistentHistory.exists(db) else { return nil }
        let (condition, arguments) = bound.whereClause(column: "t.", after: true)
        func name(_ column: String) -> String {
            "COALESCE((SELECT ZNAME FROM ATRANSACTIONSTRING WHERE Z_PK = t.Z\(column)TS), t.Z\(column))"
        }
        func text(_ value: SQLArgument) -> String? {
            if case .text(let text) = value { return text }
            return nil
        }
        var transactions: [(number: Int64, timestamp: Double, names: [String?])] = []
        try db.forEachRow(
            sql: db.dialect.finalize(
                """
                SELECT t.Z_PK, t.ZTIMESTAMP, \(name("AUTHOR")), \(name("BUNDLEID")), \(name("PROCESSID")), \(name("CONTEXTNAME"))
                FROM ATRANSACTION t\(condition) ORDER BY t.Z_PK
                """), arguments: arguments
        ) { row in
            var timestamp = 0.0
            if case .real(let value) = row.value(1) {
                timestamp = value
            } else if case .integer(let value) = row.value(1) {
                timestamp = Double(value)
            }
            transactions.append((row.integer(0), timestamp, (2...5).map { text(row.value($0)) }))
        }
        guard let first = transactions.first else { return [] }
        let changes = withChanges ? try historyChanges(from: first.number, on: db) : [:]
        return transactions.map { transaction in
            StoreHistoryTransaction(
                number: transaction.number, timestamp: Date(timeIntervalSinceReferenceDate: transaction.timestamp),
                author: transaction.names[0], bundleID: transaction.names[1], processID: transaction.names[2],
                contextName: transaction.names[3], changes: withChanges ? changes[transaction.number] ?? [] : nil)
        }
    }

    /// The changes of the transactions numbered `first` and after, by transaction.
    private func historyChanges(from first: Int64, on db: some RelationalConnection) throws -> [Int64: [StoreHistoryChange]] {
        let tombstoneColumns = try PersistentHistory.tombstoneColumns(db)
        let model = schema.model
        var slots: [Int: [NSPropertyDescription]] = [:]
        var result: [Int64: [StoreHistoryChange]] = [:]
        try db.forEachRow(
            sql: db.dialect.finalize(
                """
                SELECT Z_PK, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS\(tombstoneColumns.map { ", " + $0 }.joined())
                FROM ACHANGE WHERE ZTRANSACTIONID >= ? ORDER BY Z_PK
                """), arguments: [.integer(first)]
        ) { row in
            let number = Int(row.integer(2))
            guard let entity = model.entity(withID: number), let kind = StoreHistoryChange.Kind(rawValue: Int(row.optionalInteger(1) ?? -1))
            else { return }
            let transaction = row.integer(4)
            var updated: [NSPropertyDescription] = []
            if kind == .update, case .blob(let mask) = row.value(5) {
                let order = slots[number] ?? PersistentHistory.slots(of: entity)
                slots[number] = order
                updated = PersistentHistory.bits(of: mask).compactMap { $0 >= 1 && $0 <= order.count ? order[$0 - 1] : nil }
            }
            var tombstone: [String: AttributeValue] = [:]
            if kind == .delete {
                for (index, attribute) in PersistentHistory.tombstoneAttributes(of: entity).enumerated()
                where index < tombstoneColumns.count {
                    var stored = row.value(6 + index)
                    // A value of a type other than BLOB that the dialect kept as its text (`tombstoneValue`).
                    if case .blob(let data) = stored, PersistentHistory.storedType(attribute, schema: schema) != "BLOB",
                        let text = String(data: data, encoding: .utf8)
                    {
                        stored = .text(text)
                    }
                    if let value = SQLStorage.decode(stored, as: attribute.attributeType), value != .null {
                        tombstone[attribute.name] = value
                    }
                }
            }
            let id = NSManagedObjectID(entity: entity, storeIdentifier: identifier, primaryKey: row.integer(3))
            result[transaction, default: []].append(
                StoreHistoryChange(
                    changeID: row.integer(0), objectID: id, kind: kind, updatedProperties: updated, tombstone: tombstone,
                    transactionNumber: transaction))
        }
        return result
    }

    /// Deletes the transactions up to `bound` (a transaction and those before it, or those before a moment) and their
    /// changes; returns how many transactions went, nil when the store keeps no history.
    package func deleteHistory(through bound: StoreHistoryBound, on db: some RelationalConnection) throws -> Int? {
        guard try PersistentHistory.exists(db) else { return nil }
        let (condition, arguments) = bound.whereClause(column: "", after: false)
        try db.execute("DELETE FROM ACHANGE WHERE ZTRANSACTIONID IN (SELECT Z_PK FROM ATRANSACTION\(condition))", arguments)
        return try db.execute("DELETE FROM ATRANSACTION\(condition)", arguments)
    }
}
