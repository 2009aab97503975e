import Foundation
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
/// a change per object (`ACHANGE`, 16001) and interned strings (`ATRANSACTIONSTRING`, 16003), in the store's own tables.
///
/// Changes are recorded by triggers, so every write through this project — saves, batch inserts, updates and deletes,
/// their cascades and nullified relationships — is recorded, in the transaction that makes it (the dialect makes them
/// act only for this project's writers: SQLite's are temporary triggers of the writer connection, PostgreSQL's test a
/// setting the store's transactions make). The triggers collect a write's changes in the connection's temporary table,
/// one row per object (an insert later updated in the same write stays an insert; updates merge their properties; an
/// object inserted and deleted in one write leaves nothing); `flush` turns them into one transaction at the end of the
/// write.
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

    /// The type the store declares for `attribute`'s column.
    static func storedType(_ attribute: NSAttributeDescription, schema: RelationalSchema) -> String {
        schema.isAppleLayout
            ? RelationalSchema.appleColumnType(attribute.attributeType) : SQLStorage.columnType(for: attribute.attributeType)
    }

    /// How many tombstone columns the model needs.
    static func tombstoneCount(_ model: NSManagedObjectModel) -> Int {
        model.entities.map { tombstoneAttributes(of: $0).count }.max() ?? 0
    }

    /// Whether the connection's database holds history tables.
    static func exists(_ db: some RelationalConnection) throws -> Bool {
        try db.integer(db.dialect.tableExistsQuery("ATRANSACTION")) == 1 && db.integer(db.dialect.tableExistsQuery("ACHANGE")) == 1
    }

    /// The names of the tombstone columns of `ACHANGE`, in order (`ZTOMBSTONE0`, `ZTOMBSTONE1`, …).
    static func tombstoneColumns(_ db: some RelationalConnection) throws -> [String] {
        var names: [String] = []
        try db.forEachRow(sql: db.dialect.columnNamesQuery("ACHANGE"), arguments: []) { row in
            if case .text(let name) = row.value(0), name.uppercased().hasPrefix("ZTOMBSTONE") { names.append(name.uppercased()) }
        }
        return names.sorted { $0.count != $1.count ? $0.count < $1.count : $0 < $1 }
    }

    /// Creates the history tables, indexes and `Z_PRIMARYKEY` rows when missing, and the tombstone columns the model
    /// needs; in the caller's transaction.
    static func create(_ db: some RelationalConnection, model: NSManagedObjectModel) throws {
        let dialect = db.dialect
        func type(_ name: String) -> String { dialect.columnType(name) }
        let key = "Z_PK \(type("INTEGER")) PRIMARY KEY, Z_ENT \(type("INTEGER")), Z_OPT \(type("INTEGER"))"
        let binary = dialect.binaryIndexCollation
        let statements = [
            """
            CREATE TABLE IF NOT EXISTS ATRANSACTION ( \(key), ZAUTHORTS \(type("INTEGER")), ZBUNDLEIDTS \(type("INTEGER")), \
            ZCONTEXTNAMETS \(type("INTEGER")), ZPROCESSIDTS \(type("INTEGER")), ZTIMESTAMP \(type("FLOAT")), ZAUTHOR \(type("VARCHAR")), \
            ZBUNDLEID \(type("VARCHAR")), ZCONTEXTNAME \(type("VARCHAR")), ZPROCESSID \(type("VARCHAR")), ZQUERYGEN \(type("BLOB")) )
            """,
            "CREATE INDEX IF NOT EXISTS ATRANSACTION_ZAUTHORTS_INDEX ON ATRANSACTION (ZAUTHORTS)",
            "CREATE INDEX IF NOT EXISTS ATRANSACTION_ZBUNDLEIDTS_INDEX ON ATRANSACTION (ZBUNDLEIDTS)",
            "CREATE INDEX IF NOT EXISTS ATRANSACTION_ZCONTEXTNAMETS_INDEX ON ATRANSACTION (ZCONTEXTNAMETS)",
            "CREATE INDEX IF NOT EXISTS ATRANSACTION_ZPROCESSIDTS_INDEX ON ATRANSACTION (ZPROCESSIDTS)",
            "CREATE INDEX IF NOT EXISTS Z_TRANSACTION_TransactionAuthorIndex ON ATRANSACTION (ZAUTHOR\(binary) ASC)",
            "CREATE INDEX IF NOT EXISTS Z_TRANSACTION_TransactionTimestampIndex ON ATRANSACTION (ZTIMESTAMP\(binary) ASC)",
            """
            CREATE TABLE IF NOT EXISTS ACHANGE ( \(key), ZCHANGETYPE \(type("INTEGER")), ZENTITY \(type("INTEGER")), \
            ZENTITYPK \(type("INTEGER")), ZTRANSACTIONID \(type("INTEGER")), ZCOLUMNS \(type("BLOB")) )
            """,
            "CREATE INDEX IF NOT EXISTS ACHANGE_ZTRANSACTIONID_INDEX ON ACHANGE (ZTRANSACTIONID)",
            "CREATE TABLE IF NOT EXISTS ATRANSACTIONSTRING ( \(key), ZNAME \(type("VARCHAR")) )",
            "CREATE UNIQUE INDEX IF NOT EXISTS Z_TRANSACTIONSTRING_UNIQUE_NAME ON ATRANSACTIONSTRING (ZNAME\(binary) ASC)",
        ]
        for statement in statements { try db.run(sql: statement) }
        for (number, name) in [(changeEntity, "CHANGE"), (transactionEntity, "TRANSACTION"), (stringEntity, "TRANSACTIONSTRING")] {
            try db.run(
                sql: dialect.insertIgnoringDuplicates(into: "Z_PRIMARYKEY", columns: ["Z_ENT", "Z_NAME", "Z_SUPER", "Z_MAX"]),
                arguments: [.integer(Int64(number)), .text(name), .integer(0), .integer(0)])
        }
        let existing = Set(try tombstoneColumns(db))
        for index in 0..<tombstoneCount(model) where !existing.contains("ZTOMBSTONE\(index)") {
            try db.run(sql: "ALTER TABLE ACHANGE ADD COLUMN ZTOMBSTONE\(index) \(type("BLOB"))")
        }
    }

    let tombstoneColumns: Int

    /// Reads how many tombstone columns the store's history has.
    init(_ db: some RelationalConnection) throws {
        tombstoneColumns = try Self.tombstoneColumns(db).count
    }

    /// The statement creating the connection's table of a write's pending changes, when missing (temporary: each
    /// connection has its own, and it is empty between writes).
    func pendingTableStatement(_ dialect: any SQLDialect) -> String {
        let blob = dialect.columnType("BLOB")
        let tombstones = (0..<tombstoneColumns).map { ", t\($0) \(blob)" }.joined()
        let integer = dialect.columnType("INTEGER")
        return """
            CREATE TEMP TABLE IF NOT EXISTS \(Self.pendingTable) (seq \(dialect.autoIncrementingKey), ent \(integer) NOT NULL, \
            pk \(integer) NOT NULL, type \(integer) NOT NULL, mask \(blob)\(tombstones), UNIQUE (ent, pk))
            """
    }

    /// The statements creating the triggers that record every entity's changes into the pending table.
    func triggerStatements(schema: RelationalSchema, model: NSManagedObjectModel, dialect: any SQLDialect) -> [String] {
        let tombstones = (0..<tombstoneColumns).map { "t\($0)" }
        var statements: [String] = []
        for entity in model.entities where !entity.isAbstract {
            statements += Self.triggers(for: entity, schema: schema, tombstones: tombstones, dialect: dialect)
        }
        for entity in model.entities { statements += Self.linkTriggers(for: entity, schema: schema, dialect: dialect) }
        return statements
    }

    /// The triggers recording `entity`'s inserts, updates and deletes into the pending table.
    static func triggers(for entity: NSEntityDescription, schema: RelationalSchema, tombstones: [String], dialect: any SQLDialect)
        -> [String]
    {
        let q = dialect.quote
        let table = dialect.storeTable(q(schema.tableName(for: entity)))
        let number = entity.entityID
        let name = "Z_OCD_HISTORY_\(number)"
        var bits: [String] = ["'0'"]
        var changed: [String] = [dialect.isDistinct("OLD.Z_OPT", "NEW.Z_OPT")]
        for property in slots(of: entity) {
            let columns = schema.columnNames(for: property).map(q)
            guard !columns.isEmpty else {
                bits.append("'0'")
                continue
            }
            let test = columns.map { dialect.isDistinct("OLD.\($0)", "NEW.\($0)") }.joined(separator: " OR ")
            bits.append("CASE WHEN \(test) THEN '1' ELSE '0' END")
            changed.append(test)
        }
        let inverses = inverseChanges(of: entity, schema: schema, dialect: dialect)
        let kept = tombstoneAttributes(of: entity).map { attribute in
            dialect.tombstoneValue(
                "OLD." + q(schema.columnName(for: attribute)), columnType: storedType(attribute, schema: schema))
        }
        let tombstoneValues = (0..<tombstones.count).map { $0 < kept.count ? kept[$0] : "NULL" }
        let pending = Self.pendingTable
        return dialect.historyTrigger(
            name: name + "_INSERT", event: "INSERT", table: table, condition: "NEW.Z_ENT = \(number)",
            body: "INSERT INTO \(pending) (ent, pk, type) VALUES (\(number), NEW.Z_PK, 0) ON CONFLICT (ent, pk) DO NOTHING;")
            + dialect.historyTrigger(
                name: name + "_UPDATE", event: "UPDATE", table: table,
                condition: "NEW.Z_ENT = \(number) AND (\(changed.joined(separator: " OR ")))",
                body: """
                    INSERT INTO \(pending) (ent, pk, type, mask) VALUES (\(number), NEW.Z_PK, 1, \(Self.maskFunction)(\(bits.joined(separator: " || "))))
                    ON CONFLICT (ent, pk) DO UPDATE SET mask = \(Self.unionFunction)(\(pending).mask, excluded.mask) WHERE \(pending).type = 1;\
                    \(inverses.map { $0("OLD", "NEW") + $0("NEW", "OLD") }.joined())
                    """)
            + dialect.historyTrigger(
                name: name + "_DELETE", event: "DELETE", table: table, condition: "OLD.Z_ENT = \(number)",
                body: """
                    INSERT INTO \(pending) (ent, pk, type\(tombstones.map { ", \($0)" }.joined())) \
                    VALUES (\(number), OLD.Z_PK, 2\(tombstoneValues.map { ", \($0)" }.joined()))
                    ON CONFLICT (ent, pk) DO UPDATE SET type = CASE WHEN \(pending).type = 0 THEN -1 ELSE 2 END, mask = NULL\
                    \(tombstones.map { ", \($0) = excluded.\($0)" }.joined());\(inverses.map { $0("OLD", nil) }.joined())
                    """)
    }

    /// The `ZCOLUMNS` literal with the bit of the property named `name` in `entity`'s slots.
    static func maskLiteral(_ name: String, in entity: NSEntityDescription, dialect: any SQLDialect) -> String {
        let index = (slots(of: entity).firstIndex { $0.name == name } ?? -1) + 1
        var bytes = [UInt8](repeating: 0, count: index / 8 + 1)
        bytes[index / 8] |= 1 << UInt8(index % 8)
        return dialect.blobLiteral(bytes)
    }

    /// The mask of relationship `name` for a row of `root`'s tree whose entity number `number` gives: a literal when
    /// only one entity can hold the row, else a `CASE` over the candidates.
    static func maskExpression(_ name: String, root: NSEntityDescription, number: String, dialect: any SQLDialect) -> String {
        let candidates = RelationalSchema.treeOrder(root).filter { !$0.isAbstract }
        if candidates.count == 1 { return maskLiteral(name, in: candidates[0], dialect: dialect) }
        return "CASE \(number) "
            + candidates.map { "WHEN \($0.entityID) THEN \(maskLiteral(name, in: $0, dialect: dialect))" }.joined(separator: " ") + " END"
    }

    /// Triggers on the join tables of `entity`'s own to-many relationships kept in one (many-to-many, or without
    /// inverse): a link added or removed records an update of the source object with that relationship.
    static func linkTriggers(for entity: NSEntityDescription, schema: RelationalSchema, dialect: any SQLDialect) -> [String] {
        let q = dialect.quote
        return entity.properties.enumerated().compactMap { index, property -> [String]? in
            guard let relationship = property as? NSRelationshipDescription, relationship.isToMany, !relationship.isTransient,
                case .joinTable(let table, let source, _) = schema.toManyLink(for: relationship)
            else { return nil }
            let tree = RelationalSchema.treeOrder(entity)
            // Numbered, not named: a relationship's name may be longer than an engine keeps in a trigger's.
            let name = "Z_OCD_HISTORY_LINK_\(entity.entityID)_\(index)"
            return [("INSERT", "NEW"), ("DELETE", "OLD")].flatMap { event, side in
                let key = "\(side).\(q(source))"
                let number =
                    tree.count == 1
                    ? "\(entity.entityID)"
                    : "(SELECT Z_ENT FROM \(dialect.storeTable(q(schema.tableName(for: entity)))) WHERE Z_PK = \(key))"
                let mask = maskExpression(relationship.name, root: entity, number: number, dialect: dialect)
                return dialect.historyTrigger(
                    name: "\(name)_\(event)", event: event, table: dialect.storeTable(q(table)), condition: nil,
                    body: """
                        INSERT INTO \(pendingTable) (ent, pk, type, mask) SELECT \(number), \(key), 1, \(mask) WHERE \(number) IS NOT NULL
                        ON CONFLICT (ent, pk) DO UPDATE SET mask = \(unionFunction)(\(pendingTable).mask, excluded.mask) WHERE \(pendingTable).type = 1;
                        """)
            }
        }.flatMap { $0 }
    }

    /// Statement makers recording the inverse to-many changes of `entity`'s to-one relationships.
    ///
    /// For each to-one relationship kept in the row whose inverse is to-many: the object the row points to (in `side`,
    /// `OLD` or `NEW`) had its to-many changed when the pointer differs from the `other` side's (or always, without
    /// one: an insert or a delete), and its update records the inverse.
    static func inverseChanges(of entity: NSEntityDescription, schema: RelationalSchema, dialect: any SQLDialect)
        -> [(String, String?) -> String]
    {
        let q = dialect.quote
        return entity.allProperties.compactMap { property -> ((String, String?) -> String)? in
            guard let relationship = property as? NSRelationshipDescription, !relationship.isToMany, !relationship.isTransient,
                let inverse = relationship.inverseRelationship, inverse.isToMany, let destination = relationship.destinationEntity
            else { return nil }
            let key = q(schema.columnName(for: relationship))
            let entityColumn = schema.entityColumnName(for: relationship).map(q)
            return { side, other in
                let number = entityColumn.map { "\(side).\($0)" } ?? "\(destination.entityID)"
                let mask = maskExpression(inverse.name, root: destination, number: number, dialect: dialect)
                var condition = "\(side).\(key) IS NOT NULL AND \(number) IS NOT NULL"
                if let other {
                    condition += " AND (\(dialect.isDistinct("\(side).\(key)", "\(other).\(key)"))"
                    condition += entityColumn.map { " OR \(dialect.isDistinct("\(side).\($0)", "\(other).\($0)")))" } ?? ")"
                }
                return """

                    INSERT INTO \(pendingTable) (ent, pk, type, mask) SELECT \(number), \(side).\(key), 1, \(mask) WHERE \(condition)
                    ON CONFLICT (ent, pk) DO UPDATE SET mask = \(unionFunction)(\(pendingTable).mask, excluded.mask) WHERE \(pendingTable).type = 1;
                    """
            }
        }
    }

    /// Turns the changes the triggers collected during this write into one history transaction, in the caller's
    /// transaction.
    ///
    /// - Parameters:
    ///   - db: The connection the write ran on.
    ///   - author: Who wrote.
    ///   - key: The new transaction's `Z_PK` (by default the next after the largest).
    /// - Returns: The transaction's number; nil when the write changed no object (nothing is recorded).
    /// - Throws: What the connection throws.
    @discardableResult
    func flush<Connection: RelationalConnection>(
        _ db: Connection, author: HistoryAuthor, key: ((Connection) throws -> Int64)? = nil
    ) throws -> Int64? {
        let pending = Self.pendingTable
        defer { _ = try? db.run(sql: "DELETE FROM \(pending)") }
        var (count, firstSeq, lastSeq): (Int64, Int64, Int64) = (0, 0, 0)
        try db.forEachRow(sql: "SELECT COUNT(*), MIN(seq), MAX(seq) FROM \(pending) WHERE type >= 0", arguments: []) { row in
            (count, firstSeq, lastSeq) = (row.integer(0), row.integer(1), row.integer(2))
        }
        guard count > 0 else { return nil }
        let transaction = try key?(db) ?? Self.nextKey(db, entity: Self.transactionEntity, table: "ATRANSACTION")
        let firstChange = try Self.nextKey(db, entity: Self.changeEntity, table: "ACHANGE")
        let tombstones = (0..<tombstoneColumns)
        // The changes are numbered in the order they were made. When no object was inserted and deleted in this write
        // their `seq`s have no gap, and an offset numbers them; else a window function does (twice the cost: it
        // keeps every row before numbering, 16 of 31 ms for 50,000 inserts).
        let number = lastSeq - firstSeq + 1 == count ? "? - \(firstSeq) + seq" : "? - 1 + ROW_NUMBER() OVER (ORDER BY seq)"
        try db.execute(
            """
            INSERT INTO ACHANGE (Z_PK, Z_ENT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS\
            \(tombstones.map { ", ZTOMBSTONE\($0)" }.joined()))
            SELECT \(number), \(Self.changeEntity), type, ent, pk, ?, \
            CASE WHEN type = 1 THEN mask END\(tombstones.map { ", t\($0)" }.joined())
            FROM \(pending) WHERE type >= 0 ORDER BY seq
            """, [.integer(firstChange), .integer(transaction)])
        let lastChange = firstChange + Int64(count) - 1
        let process = ProcessInfo.processInfo.processName
        let strings = try [author.author, Bundle.main.bundleIdentifier ?? process, author.contextName, process].map { name in
            try name.map { SQLArgument.integer(try Self.internedString($0, in: db)) } ?? .null
        }
        try db.execute(
            """
            INSERT INTO ATRANSACTION (Z_PK, Z_ENT, ZAUTHORTS, ZBUNDLEIDTS, ZCONTEXTNAMETS, ZPROCESSIDTS, ZTIMESTAMP)
            VALUES (?, \(Self.transactionEntity), ?, ?, ?, ?, ?)
            """, [.integer(transaction)] + strings + [.real(Date().timeIntervalSinceReferenceDate)])
        try db.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = \(Self.transactionEntity)", [.integer(transaction)])
        try db.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = \(Self.changeEntity)", [.integer(lastChange)])
        return transaction
    }

    /// The next primary key of a history table: after both its `Z_PRIMARYKEY` maximum and its largest row, so that a
    /// key is never given twice, even after the newest rows were deleted.
    static func nextKey(_ db: some RelationalConnection, entity: Int, table: String) throws -> Int64 {
        let recorded = try db.integer("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?", [.integer(Int64(entity))]) ?? 0
        let largest = try db.integer("SELECT MAX(Z_PK) FROM \(table)") ?? 0
        return max(recorded, largest) + 1
    }

    /// The key of `name` in `ATRANSACTIONSTRING`, added when new.
    static func internedString(_ name: String, in db: some RelationalConnection) throws -> Int64 {
        if let key = try db.integer("SELECT Z_PK FROM ATRANSACTIONSTRING WHERE ZNAME = ?", [.text(name)]) { return key }
        let key = try nextKey(db, entity: stringEntity, table: "ATRANSACTIONSTRING")
        try db.execute("INSERT INTO ATRANSACTIONSTRING (Z_PK, Z_ENT, ZNAME) VALUES (?, \(stringEntity), ?)", [.integer(key), .text(name)])
        try db.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = \(stringEntity)", [.integer(key)])
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
