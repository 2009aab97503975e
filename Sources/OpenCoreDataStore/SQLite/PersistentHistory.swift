import Foundation
import GRDB
import OpenCoreDataModel
import OpenCoreDataPredicate

/// Who made a write, as persistent history records it with each transaction.
package struct HistoryAuthor: Sendable, Equatable {
    /// The context's `transactionAuthor`.
    package var author: String?
    /// The context's `name`.
    package var contextName: String?

    package init(author: String? = nil, contextName: String? = nil) {
        self.author = author
        self.contextName = contextName
    }
}

/// Persistent history in the layout Apple's Core Data writes: a transaction per write (`ATRANSACTION`, entity 16002),
/// a change per object (`ACHANGE`, 16001) and interned strings (`ATRANSACTIONSTRING`, 16003), in the store's own file.
///
/// Changes are recorded by temporary triggers on the writer connection, so every write through this project — saves,
/// batch inserts, updates and deletes, their cascades and nullified relationships — is recorded, in the SQLite
/// transaction that makes it. The triggers collect a write's changes in a temporary table, one row per object (an
/// insert later updated in the same write stays an insert; updates merge their properties; an object inserted and
/// deleted in one write leaves nothing); `flush` turns them into one transaction at the end of the write.
///
/// `ZCOLUMNS` of an update is a bit set over the entity's persistent properties: bit 0 unused, then the to-one
/// relationships, the attributes and the to-many relationships, each group in name order (least significant bit of
/// each byte first). That is the order that explains the updates recorded in the Apple-written stores of the corpus
/// whose model did not change since (Notes' `ICCloudState`, `ICNoteData`, `ICNote`; Screen Time's `Usage`,
/// `UsageTimedItem`); Apple does not document it. A deleted object's attributes marked
/// `preservesValueInHistoryOnDeletion` go to `ZTOMBSTONE0…`, in name order.
package struct PersistentHistory: Sendable {
    static let changeEntity = 16001
    static let transactionEntity = 16002
    static let stringEntity = 16003
    static let pendingTable = "Z_OCD_HISTORY_PENDING"
    static let maskFunction = "OCD_HISTORY_MASK"
    static let unionFunction = "OCD_HISTORY_MASK_UNION"

    /// The persistent properties whose changes an update records, in bit order (bit `i + 1` is element `i`).
    static func slots(of entity: NSEntityDescription) -> [NSPropertyDescription] {
        func group(_ property: NSPropertyDescription) -> Int {
            guard let relationship = property as? NSRelationshipDescription else { return 1 }
            return relationship.isToMany ? 2 : 0
        }
        return entity.allProperties.filter { !$0.isTransient && !($0 is NSFetchedPropertyDescription) }
            .sorted { (group($0), $0.name) < (group($1), $1.name) }
    }

    /// The attributes whose values a delete keeps (`preservesValueInHistoryOnDeletion`), in tombstone column order.
    static func tombstoneAttributes(of entity: NSEntityDescription) -> [NSAttributeDescription] {
        entity.allProperties.compactMap { $0 as? NSAttributeDescription }
            .filter { $0.preservesValueInHistoryOnDeletion && !$0.isTransient }
            .sorted { $0.name < $1.name }
    }

    /// How many tombstone columns the model needs.
    static func tombstoneCount(_ model: NSManagedObjectModel) -> Int {
        model.entities.map { tombstoneAttributes(of: $0).count }.max() ?? 0
    }

    /// Whether `db` holds history tables.
    static func exists(_ db: Database) throws -> Bool { try db.tableExists("ATRANSACTION") && db.tableExists("ACHANGE") }

    /// Creates the history tables, indexes and `Z_PRIMARYKEY` rows when missing, and the tombstone columns the model
    /// needs; in the caller's transaction.
    static func create(_ db: Database, model: NSManagedObjectModel) throws {
        let statements = [
            """
            CREATE TABLE IF NOT EXISTS ATRANSACTION ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZAUTHORTS INTEGER, \
            ZBUNDLEIDTS INTEGER, ZCONTEXTNAMETS INTEGER, ZPROCESSIDTS INTEGER, ZTIMESTAMP FLOAT, ZAUTHOR VARCHAR, ZBUNDLEID VARCHAR, \
            ZCONTEXTNAME VARCHAR, ZPROCESSID VARCHAR, ZQUERYGEN BLOB )
            """,
            "CREATE INDEX IF NOT EXISTS ATRANSACTION_ZAUTHORTS_INDEX ON ATRANSACTION (ZAUTHORTS)",
            "CREATE INDEX IF NOT EXISTS ATRANSACTION_ZBUNDLEIDTS_INDEX ON ATRANSACTION (ZBUNDLEIDTS)",
            "CREATE INDEX IF NOT EXISTS ATRANSACTION_ZCONTEXTNAMETS_INDEX ON ATRANSACTION (ZCONTEXTNAMETS)",
            "CREATE INDEX IF NOT EXISTS ATRANSACTION_ZPROCESSIDTS_INDEX ON ATRANSACTION (ZPROCESSIDTS)",
            "CREATE INDEX IF NOT EXISTS Z_TRANSACTION_TransactionAuthorIndex ON ATRANSACTION (ZAUTHOR COLLATE BINARY ASC)",
            "CREATE INDEX IF NOT EXISTS Z_TRANSACTION_TransactionTimestampIndex ON ATRANSACTION (ZTIMESTAMP COLLATE BINARY ASC)",
            """
            CREATE TABLE IF NOT EXISTS ACHANGE ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCHANGETYPE INTEGER, \
            ZENTITY INTEGER, ZENTITYPK INTEGER, ZTRANSACTIONID INTEGER, ZCOLUMNS BLOB )
            """,
            "CREATE INDEX IF NOT EXISTS ACHANGE_ZTRANSACTIONID_INDEX ON ACHANGE (ZTRANSACTIONID)",
            "CREATE TABLE IF NOT EXISTS ATRANSACTIONSTRING ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR )",
            "CREATE UNIQUE INDEX IF NOT EXISTS Z_TRANSACTIONSTRING_UNIQUE_NAME ON ATRANSACTIONSTRING (ZNAME COLLATE BINARY ASC)",
        ]
        for statement in statements { try db.execute(sql: statement) }
        for (number, name) in [(changeEntity, "CHANGE"), (transactionEntity, "TRANSACTION"), (stringEntity, "TRANSACTIONSTRING")] {
            try db.execute(
                sql: "INSERT OR IGNORE INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (?, ?, 0, 0)", arguments: [number, name])
        }
        let existing = Set(try db.columns(in: "ACHANGE").map { $0.name.uppercased() })
        for index in 0..<tombstoneCount(model) where !existing.contains("ZTOMBSTONE\(index)") {
            try db.execute(sql: "ALTER TABLE ACHANGE ADD COLUMN ZTOMBSTONE\(index) BLOB")
        }
    }

    let tombstoneColumns: Int

    /// Installs the recording triggers on the writer connection `db` (they live as long as the connection).
    init(installingIn db: Database, schema: RelationalSchema, model: NSManagedObjectModel) throws {
        tombstoneColumns = try db.columns(in: "ACHANGE").filter { $0.name.uppercased().hasPrefix("ZTOMBSTONE") }.count
        let tombstones = (0..<tombstoneColumns).map { "t\($0)" }
        try db.execute(
            sql: """
                CREATE TEMP TABLE IF NOT EXISTS \(Self.pendingTable) (seq INTEGER PRIMARY KEY, ent INTEGER NOT NULL, pk INTEGER NOT NULL, \
                type INTEGER NOT NULL, mask BLOB\(tombstones.map { ", \($0)" }.joined()), UNIQUE (ent, pk))
                """)
        for entity in model.entities where !entity.isAbstract {
            for statement in Self.triggers(for: entity, schema: schema, tombstones: tombstones) { try db.execute(sql: statement) }
        }
        for entity in model.entities {
            for statement in Self.linkTriggers(for: entity, schema: schema) { try db.execute(sql: statement) }
        }
    }

    /// The three triggers recording `entity`'s inserts, updates and deletes into the pending table.
    static func triggers(for entity: NSEntityDescription, schema: RelationalSchema, tombstones: [String]) -> [String] {
        let table = "main." + sqlQuote(schema.tableName(for: entity))
        let number = entity.entityID
        let name = "Z_OCD_HISTORY_\(number)"
        var bits: [String] = ["'0'"]
        var changed: [String] = ["OLD.Z_OPT IS NOT NEW.Z_OPT"]
        for property in slots(of: entity) {
            let columns = schema.columnNames(for: property).map(sqlQuote)
            guard !columns.isEmpty else {
                bits.append("'0'")
                continue
            }
            let test = columns.map { "OLD.\($0) IS NOT NEW.\($0)" }.joined(separator: " OR ")
            bits.append("(\(test))")
            changed.append(test)
        }
        let inverses = inverseChanges(of: entity, schema: schema)
        let kept = tombstoneAttributes(of: entity).map { "OLD." + sqlQuote(schema.columnName(for: $0)) }
        let tombstoneValues = (0..<tombstones.count).map { $0 < kept.count ? kept[$0] : "NULL" }
        let pending = Self.pendingTable
        return [
            """
            CREATE TEMP TRIGGER IF NOT EXISTS \(name)_INSERT AFTER INSERT ON \(table) FOR EACH ROW WHEN NEW.Z_ENT = \(number) BEGIN
            INSERT INTO \(pending) (ent, pk, type) VALUES (\(number), NEW.Z_PK, 0) ON CONFLICT (ent, pk) DO NOTHING; END
            """,
            """
            CREATE TEMP TRIGGER IF NOT EXISTS \(name)_UPDATE AFTER UPDATE ON \(table) FOR EACH ROW \
            WHEN NEW.Z_ENT = \(number) AND (\(changed.joined(separator: " OR "))) BEGIN
            INSERT INTO \(pending) (ent, pk, type, mask) VALUES (\(number), NEW.Z_PK, 1, \(Self.maskFunction)(\(bits.joined(separator: " || "))))
            ON CONFLICT (ent, pk) DO UPDATE SET mask = \(Self.unionFunction)(mask, excluded.mask) WHERE type = 1;\
            \(inverses.map { $0("OLD", "NEW") + $0("NEW", "OLD") }.joined()) END
            """,
            """
            CREATE TEMP TRIGGER IF NOT EXISTS \(name)_DELETE AFTER DELETE ON \(table) FOR EACH ROW WHEN OLD.Z_ENT = \(number) BEGIN
            INSERT INTO \(pending) (ent, pk, type\(tombstones.map { ", \($0)" }.joined())) \
            VALUES (\(number), OLD.Z_PK, 2\(tombstoneValues.map { ", \($0)" }.joined()))
            ON CONFLICT (ent, pk) DO UPDATE SET type = CASE WHEN type = 0 THEN -1 ELSE 2 END, mask = NULL\
            \(tombstones.map { ", \($0) = excluded.\($0)" }.joined());\(inverses.map { $0("OLD", nil) }.joined()) END
            """,
        ]
    }

    /// The `ZCOLUMNS` literal with the bit of the property named `name` in `entity`'s slots.
    static func maskLiteral(_ name: String, in entity: NSEntityDescription) -> String {
        let index = (slots(of: entity).firstIndex { $0.name == name } ?? -1) + 1
        var bytes = [UInt8](repeating: 0, count: index / 8 + 1)
        bytes[index / 8] |= 1 << UInt8(index % 8)
        return "X'" + bytes.map { String(format: "%02X", $0) }.joined() + "'"
    }

    /// The mask of relationship `name` for a row of `root`'s tree whose entity number `number` gives: a literal when
    /// only one entity can hold the row, else a `CASE` over the candidates.
    static func maskExpression(_ name: String, root: NSEntityDescription, number: String) -> String {
        let candidates = RelationalSchema.treeOrder(root).filter { !$0.isAbstract }
        if candidates.count == 1 { return maskLiteral(name, in: candidates[0]) }
        return "CASE \(number) " + candidates.map { "WHEN \($0.entityID) THEN \(maskLiteral(name, in: $0))" }.joined(separator: " ")
            + " END"
    }

    /// Triggers on the join tables of `entity`'s own to-many relationships kept in one (many-to-many, or without
    /// inverse): a link added or removed records an update of the source object with that relationship.
    static func linkTriggers(for entity: NSEntityDescription, schema: RelationalSchema) -> [String] {
        entity.properties.compactMap { property -> [String]? in
            guard let relationship = property as? NSRelationshipDescription, relationship.isToMany, !relationship.isTransient,
                case .joinTable(let table, let source, _) = schema.toManyLink(for: relationship)
            else { return nil }
            let tree = RelationalSchema.treeOrder(entity)
            let name = "Z_OCD_HISTORY_LINK_\(entity.entityID)_\(relationship.name.uppercased())"
            return [("INSERT", "NEW"), ("DELETE", "OLD")].map { event, side in
                let key = "\(side).\(sqlQuote(source))"
                let number =
                    tree.count == 1
                    ? "\(entity.entityID)"
                    : "(SELECT Z_ENT FROM main.\(sqlQuote(schema.tableName(for: entity))) WHERE Z_PK = \(key))"
                let mask = maskExpression(relationship.name, root: entity, number: number)
                return """
                    CREATE TEMP TRIGGER IF NOT EXISTS \(name)_\(event) AFTER \(event) ON main.\(sqlQuote(table)) FOR EACH ROW BEGIN
                    INSERT INTO \(pendingTable) (ent, pk, type, mask) SELECT \(number), \(key), 1, \(mask) WHERE \(number) IS NOT NULL
                    ON CONFLICT (ent, pk) DO UPDATE SET mask = \(unionFunction)(mask, excluded.mask) WHERE type = 1; END
                    """
            }
        }.flatMap { $0 }
    }

    /// Statement makers recording the inverse to-many changes of `entity`'s to-one relationships.
    ///
    /// For each to-one relationship kept in the row whose inverse is to-many: the object the row points to (in `side`,
    /// `OLD` or `NEW`) had its to-many changed when the pointer differs from the `other` side's (or always, without
    /// one: an insert or a delete), and its update records the inverse.
    static func inverseChanges(of entity: NSEntityDescription, schema: RelationalSchema) -> [(String, String?) -> String] {
        entity.allProperties.compactMap { property -> ((String, String?) -> String)? in
            guard let relationship = property as? NSRelationshipDescription, !relationship.isToMany, !relationship.isTransient,
                let inverse = relationship.inverseRelationship, inverse.isToMany, let destination = relationship.destinationEntity
            else { return nil }
            let key = sqlQuote(schema.columnName(for: relationship))
            let entityColumn = schema.entityColumnName(for: relationship).map(sqlQuote)
            return { side, other in
                let number = entityColumn.map { "\(side).\($0)" } ?? "\(destination.entityID)"
                let mask = maskExpression(inverse.name, root: destination, number: number)
                var condition = "\(side).\(key) IS NOT NULL AND \(number) IS NOT NULL"
                if let other {
                    condition += " AND (\(side).\(key) IS NOT \(other).\(key)"
                    condition += entityColumn.map { " OR \(side).\($0) IS NOT \(other).\($0))" } ?? ")"
                }
                return """

                    INSERT INTO \(pendingTable) (ent, pk, type, mask) SELECT \(number), \(side).\(key), 1, \(mask) WHERE \(condition)
                    ON CONFLICT (ent, pk) DO UPDATE SET mask = \(unionFunction)(mask, excluded.mask) WHERE type = 1;
                    """
            }
        }
    }

    /// Turns the changes the triggers collected during this write into one history transaction, in the caller's
    /// SQLite transaction; records nothing when the write changed no object.
    @discardableResult
    func flush(_ db: Database, author: HistoryAuthor) throws -> Int64? {
        let pending = Self.pendingTable
        defer { try? db.execute(sql: "DELETE FROM \(pending)") }
        guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(pending) WHERE type >= 0)") == true else { return nil }
        let transaction = try Self.nextKey(db, entity: Self.transactionEntity, table: "ATRANSACTION")
        let firstChange = try Self.nextKey(db, entity: Self.changeEntity, table: "ACHANGE")
        let tombstones = (0..<tombstoneColumns)
        try db.execute(
            sql: """
                INSERT INTO ACHANGE (Z_PK, Z_ENT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS\
                \(tombstones.map { ", ZTOMBSTONE\($0)" }.joined()))
                SELECT ? - 1 + ROW_NUMBER() OVER (ORDER BY seq), \(Self.changeEntity), type, ent, pk, ?, \
                CASE WHEN type = 1 THEN mask END\(tombstones.map { ", t\($0)" }.joined())
                FROM \(pending) WHERE type >= 0 ORDER BY seq
                """, arguments: [firstChange, transaction])
        let lastChange = firstChange + Int64(db.changesCount) - 1
        let process = ProcessInfo.processInfo.processName
        let strings = try [author.author, Bundle.main.bundleIdentifier ?? process, author.contextName, process].map { name in
            try name.map { try Self.internedString($0, in: db) }
        }
        try db.execute(
            sql: """
                INSERT INTO ATRANSACTION (Z_PK, Z_ENT, ZAUTHORTS, ZBUNDLEIDTS, ZCONTEXTNAMETS, ZPROCESSIDTS, ZTIMESTAMP)
                VALUES (?, \(Self.transactionEntity), ?, ?, ?, ?, ?)
                """,
            arguments: [transaction, strings[0], strings[1], strings[2], strings[3], Date().timeIntervalSinceReferenceDate])
        try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = \(Self.transactionEntity)", arguments: [transaction])
        try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = \(Self.changeEntity)", arguments: [lastChange])
        return transaction
    }

    /// The next primary key of a history table: after both its `Z_PRIMARYKEY` maximum and its largest row, so that a
    /// key is never given twice, even after the newest rows were deleted.
    static func nextKey(_ db: Database, entity: Int, table: String) throws -> Int64 {
        let recorded = try Int64.fetchOne(db, sql: "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?", arguments: [entity]) ?? 0
        let largest = try Int64.fetchOne(db, sql: "SELECT MAX(Z_PK) FROM \(table)") ?? 0
        return max(recorded, largest) + 1
    }

    /// The key of `name` in `ATRANSACTIONSTRING`, added when new.
    static func internedString(_ name: String, in db: Database) throws -> Int64 {
        if let key = try Int64.fetchOne(db, sql: "SELECT Z_PK FROM ATRANSACTIONSTRING WHERE ZNAME = ?", arguments: [name]) {
            return key
        }
        let key = try nextKey(db, entity: stringEntity, table: "ATRANSACTIONSTRING")
        try db.execute(
            sql: "INSERT INTO ATRANSACTIONSTRING (Z_PK, Z_ENT, ZNAME) VALUES (?, \(stringEntity), ?)", arguments: [key, name])
        try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = \(stringEntity)", arguments: [key])
        return key
    }

    /// The bit set `ZCOLUMNS` holds for a string of `0`/`1` flags (flag `i` is bit `i`).
    static func mask(fromFlags flags: String) -> Data {
        let flags = Array(flags.utf8)
        var bytes = [UInt8](repeating: 0, count: (flags.count + 7) / 8)
        for (i, flag) in flags.enumerated() where flag == UInt8(ascii: "1") { bytes[i / 8] |= 1 << UInt8(i % 8) }
        return Data(bytes)
    }

    /// The union of two `ZCOLUMNS` bit sets.
    static func union(_ a: Data, _ b: Data) -> Data {
        var bytes = [UInt8](repeating: 0, count: max(a.count, b.count))
        for (i, byte) in a.enumerated() { bytes[i] |= byte }
        for (i, byte) in b.enumerated() { bytes[i] |= byte }
        return Data(bytes)
    }

    /// The set bits of a `ZCOLUMNS` bit set.
    static func bits(of mask: Data) -> [Int] {
        var result: [Int] = []
        for (i, byte) in mask.enumerated() {
            for bit in 0..<8 where byte & (1 << UInt8(bit)) != 0 { result.append(i * 8 + bit) }
        }
        return result
    }
}

extension SQLiteStore {
    /// Records the write's history (when the store keeps it); returns the transaction's number, noted as this
    /// store's own while a remote-change watcher needs to tell them apart (`noteCommittedHistory` after the commit).
    @discardableResult
    func flushHistory(_ db: Database, author: HistoryAuthor) throws -> Int64? {
        guard let number = try history?.flush(db, author: author) else { return nil }
        // Noted before the commit: a transaction rolled back stays noted, which can only make a remote-change
        // notification ask for a spare re-read, never hide another writer's commit.
        closedLock.withLock { if historyCursor != nil { _ = _ownHistoryTransactions.insert(number) } }
        return number
    }

    /// After the commit of own transaction `number`: when it follows the cursor directly (no other writer's
    /// transaction came between), the cursor moves past it, so that own transactions never pile up while no other
    /// writer commits.
    func noteCommittedHistory(_ number: Int64?) {
        guard let number else { return }
        closedLock.withLock {
            guard let cursor = historyCursor, cursor == number - 1 else { return }
            historyCursor = number
            _ownHistoryTransactions.remove(number)
        }
    }

    /// How many own transactions wait to be told apart from other writers' by the next remote-change notification.
    package var pendingOwnHistoryTransactions: Int { closedLock.withLock { _ownHistoryTransactions.count } }

    /// Starts following other writers' history transactions from the newest one now (for remote-change
    /// notifications); nil when the store keeps no history.
    package func startFollowingHistory() throws -> Int64? {
        guard let last = try lastHistoryTransaction() else { return nil }
        closedLock.withLock { historyCursor = last }
        return last
    }

    /// Other writers' transactions since the last call (or `startFollowingHistory`), with their changes, and the
    /// newest transaction number; nil when the store is not followed.
    package func takeOthersHistory() throws -> (transactions: [StoreHistoryTransaction], last: Int64)? {
        guard let cursor = closedLock.withLock({ historyCursor }) else { return nil }
        let transactions = try historyTransactions(after: .transaction(cursor), withChanges: true)
        let last = transactions.last?.number ?? cursor
        return closedLock.withLock {
            let own = _ownHistoryTransactions.filter { $0 <= last }
            _ownHistoryTransactions.subtract(own)
            historyCursor = max(historyCursor ?? last, last)
            return (transactions.filter { !own.contains($0.number) }, last)
        }
    }

    /// Creates the history tables when asked (and the tombstone columns the model needs), and installs the triggers
    /// on the writer connection when the store keeps history.
    static func startHistory(
        writer: any DatabaseWriter, schema: RelationalSchema, model: NSManagedObjectModel, requested: Bool, readOnly: Bool, path: String?
    ) throws -> PersistentHistory? {
        let place = path ?? "the in-memory store"
        do {
            // Read-write, on the writer: a reader connection opened here would outlive the writer's checkpoint on
            // close and change when the file is written back.
            guard !readOnly, try requested || writer.writeWithoutTransaction(PersistentHistory.exists) else { return nil }
            guard schema.isAppleLayout else {
                throw CoreDataError(
                    .persistentStoreOpen,
                    "\(place) is in this project's former layout, which cannot keep persistent history; migrate it to a new store first.")
            }
            return try writer.writeWithoutTransaction { db in
                try db.inTransaction {
                    try PersistentHistory.create(db, model: model)
                    return .commit
                }
                return try PersistentHistory(installingIn: db, schema: schema, model: model)
            }
        } catch let error as CoreDataError {
            throw error
        } catch {
            throw openError(error, path: path)
        }
    }
}
