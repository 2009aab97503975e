import Foundation

/// Every spelling that differs between SQL engines, for the predicate compiler and the store's relational core:
/// identifier quoting, placeholders, windows, the order of NULLs, and the functions and collations that implement
/// OpenCoreData's comparison rules (`PredicateSemantics` is the reference).
///
/// The compiler and the core write `?` for every parameter; `finalize` turns a finished statement into the engine's
/// spelling.
package protocol SQLDialect: Sendable {
    /// Quotes an identifier.
    func quote(_ identifier: String) -> String
    /// The literals of a true and a false condition.
    var `true`: String { get }
    var `false`: String { get }
    /// `a` equals `b`, NULL equal to NULL (never unknown).
    func isNotDistinct(_ a: String, _ b: String) -> String
    /// `a` differs from `b`, NULL equal to NULL (never unknown).
    func isDistinct(_ a: String, _ b: String) -> String
    /// A number as REAL (for decimals stored as text, and for true division).
    func castToReal(_ sql: String) -> String
    /// `PredicateSemantics.fold` applied to a string expression.
    func fold(_ sql: String, flags: Int) -> String
    /// `PredicateSemantics.stringOperator` (0 or 1) for `BEGINSWITH`, `ENDSWITH`, `CONTAINS`, `LIKE`, `MATCHES`.
    func stringOperator(_ op: String, _ value: String, _ pattern: String, flags: Int) -> String
    /// `x ** y`.
    func power(_ x: String, _ y: String) -> String
    /// `x / y` as a real division; NULL when `y` is 0.
    func divide(_ x: String, _ y: String) -> String
    /// A string expression as a sort compares it under `comparison` (`.default`: the expression itself, in binary
    /// order of its Unicode scalars).
    func sortExpression(_ sql: String, comparison: FetchSortDescriptor.Comparison) -> String
    /// Whether the engine orders strings under `comparison` exactly as `FetchSortDescriptor.compareStrings` does; where
    /// it cannot (PostgreSQL's collations are not Foundation's), the store sorts such a fetch's matches in memory.
    func ordersExactly(_ comparison: FetchSortDescriptor.Comparison) -> Bool
    /// An `ORDER BY` term: `expression` in the direction asked, NULLs first when ascending and last when descending
    /// (Core Data's order, and SQLite's).
    func orderTerm(_ expression: String, ascending: Bool) -> String
    /// The clause that keeps `limit` rows (0: all) after skipping `offset`, with a leading space; empty for neither.
    func window(limit: Int, offset: Int) -> String
    /// A statement written with `?` placeholders in the engine's spelling.
    func finalize(_ sql: String) -> String
    /// What follows a `SELECT` of one row that must stay locked until the transaction ends (with a leading space), or
    /// empty where a writing transaction already excludes every other writer.
    var lockingRead: String { get }
    /// `INSERT` of one row into the (quoted) `table`'s `columns` (one parameter each) that does nothing when a row with
    /// the same key exists, finalized.
    func insertIgnoringDuplicates(intoQuoted table: String, columns: [String]) -> String
    /// `INSERT` of any number of rows into the (quoted) `table`'s (quoted) `columns` in one execution, one parameter per
    /// column holding that column's values as an array — except the columns `literals` gives a value every row shares
    /// (SQL text, by column index), which take no parameter — finalized; nil where the engine has no such statement
    /// (rows then go a few at a time through `INSERT … VALUES (…), (…)`).
    func bulkInsert(intoQuoted table: String, columns: [String], literals: [Int: String]) -> String?
    /// A name in a statement that creates the schema: SQLite's are bare, as Core Data writes them (the statements
    /// stay in the file); others are quoted.
    func ddlName(_ name: String) -> String
    /// The column type the engine declares for a type Core Data declares (`INTEGER`, `FLOAT`, `DECIMAL`, `TIMESTAMP`,
    /// `VARCHAR`, `VARCHAR(255)`, `BLOB`).
    func columnType(_ coreDataType: String) -> String
    /// The collation an index's column names to order text by byte, with a leading space (empty: the column's own).
    var binaryIndexCollation: String { get }
    /// A temporary table of 64-bit keys (column `pk`, its primary key) that lives as long as the connection: the
    /// statement creating it when missing, and the name statements refer to it by.
    func temporaryKeyTable(_ name: String) -> (create: String, name: String)

    // Persistent history: its tables, the triggers that record changes, and the catalog reads it needs.

    /// A column declaration of a key the engine numbers itself (a temporary table's row order).
    var autoIncrementingKey: String { get }
    /// A literal of `bytes` as a blob.
    func blobLiteral(_ bytes: [UInt8]) -> String
    /// The (quoted) table of the store as the triggers of a connection refer to it (SQLite: in `main`, never a
    /// temporary table of that name).
    func storeTable(_ quoted: String) -> String
    /// The statements creating (or replacing) a history trigger named `name`: after `event` (`INSERT`, `UPDATE`,
    /// `DELETE`) on each row of the (quoted) `table` for which `condition` holds (`OLD` and `NEW` name the row), it runs
    /// `body`, statements each ending in `;`. It records only the writes of a connection that asked for history (SQLite:
    /// the trigger is temporary, the connection's own; others: the transaction sets `ocd.history`).
    func historyTrigger(name: String, event: String, table: String, condition: String?, body: String) -> [String]
    /// The expression a history tombstone column (BLOB) keeps a deleted row's `expression` as, for a column that Core
    /// Data declares `coreDataType`.
    func tombstoneValue(_ expression: String, columnType coreDataType: String) -> String
    /// A query of one row, one integer: 1 when the store's table `name` exists, else 0.
    func tableExistsQuery(_ name: String) -> String
    /// A query of the column names of the store's table `name`, one per row.
    func columnNamesQuery(_ name: String) -> String
    /// `expression IN values` with the 64-bit integers passed as one argument, or nil where the engine has no such
    /// form (the list is then written into the statement). One argument keeps the statement's text the same whatever
    /// the list, so it is prepared once and cached, where a list written out (`SELF IN %@` with a thousand objects)
    /// was parsed anew by every fetch.
    func inIntegerList(_ expression: String, _ values: [Int64]) -> (sql: String, argument: SQLArgument)?
    /// A call of one of `FetchFunction`'s scalar functions (not the statistics, not arithmetic, not `now`) giving what
    /// `FetchFunction.apply` gives; `integral[i]` tells whether argument `i` is known to be an integer.
    func call(_ function: FetchFunction, _ arguments: [String], integral: [Bool]) -> String
}

extension SQLDialect {
    /// The store's function `ocd_pow` (NULL where the evaluator's `pow` gives NaN).
    package func power(_ x: String, _ y: String) -> String { "\(SQLFunctionNames.power)(\(x), \(y))" }
    /// SQLite's division by zero is NULL already.
    package func divide(_ x: String, _ y: String) -> String { "(\(castToReal(x)) / \(y))" }

    /// The store's function `ocd_fold` (SQLite registers it on each connection, PostgreSQL's store creates it).
    package func fold(_ sql: String, flags: Int) -> String { "\(SQLFunctionNames.fold)(\(sql), \(flags))" }
    /// The store's function `ocd_strop`, under the same name in every engine.
    package func stringOperator(_ op: String, _ value: String, _ pattern: String, flags: Int) -> String {
        "\(SQLFunctionNames.stringOperator)('\(op)', \(value), \(pattern), \(flags))"
    }

    /// `insertIgnoringDuplicates(intoQuoted:columns:)` for a table of the store.
    package func insertIgnoringDuplicates(into table: String, columns: [String]) -> String {
        insertIgnoringDuplicates(intoQuoted: quote(table), columns: columns)
    }

    /// The column list and parameters of a one-row `INSERT`.
    func insertColumns(_ table: String, _ columns: [String]) -> String {
        "\(table) (\(columns.map(quote).joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
    }
}

/// SQLite, with the functions and collations `SQLiteStore` registers on every connection.
package struct SQLiteDialect: SQLDialect {
    package init() {}
    /// The list as a JSON array, read by `json_each`.
    ///
    /// (SQLite 3.38 and later build JSON in.) The search on a primary key or an index is the same as a written list's:
    /// each value looked up once.
    package func inIntegerList(_ expression: String, _ values: [Int64]) -> (sql: String, argument: SQLArgument)? {
        ("\(expression) IN (SELECT value FROM json_each(?))", .text(Self.jsonArray(values)))
    }

    /// `values` as a JSON array (`[3,1]`), its digits written into one buffer: a string per key, then joined, cost
    /// a fetch of 1,000 objects by ID 0.7M instructions.
    static func jsonArray(_ values: [Int64]) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(2 + values.count * 8)
        bytes.append(UInt8(ascii: "["))
        // The digits of one value, last first (20 bytes hold any UInt64).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            for (i, value) in values.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                if value < 0 { bytes.append(UInt8(ascii: "-")) }
                var magnitude = value.magnitude  // (Int64.min's magnitude fits a UInt64)
                var start = digits.count
                repeat {
                    start -= 1
                    digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                    magnitude /= 10
                } while magnitude > 0
                bytes.append(contentsOf: digits[start...])
            }
        }
        bytes.append(UInt8(ascii: "]"))
        return String(decoding: bytes, as: UTF8.self)
    }
    package func quote(_ identifier: String) -> String { sqlQuote(identifier) }
    package var `true`: String { "1" }
    package var `false`: String { "0" }
    package func isNotDistinct(_ a: String, _ b: String) -> String { "\(a) IS \(b)" }
    package func isDistinct(_ a: String, _ b: String) -> String { "\(a) IS NOT \(b)" }
    package func castToReal(_ sql: String) -> String { "CAST(\(sql) AS REAL)" }
    /// The store's function `ocd_function`, which runs `FetchFunction.apply`.
    package func call(_ function: FetchFunction, _ arguments: [String], integral: [Bool]) -> String {
        "\(SQLFunctionNames.function)('\(function.rawValue)', \(arguments.joined(separator: ", ")))"
    }
    /// SQLite's binary order of UTF-8 is the order of Unicode scalars; the other comparisons are collations the store
    /// registers.
    package func sortExpression(_ sql: String, comparison: FetchSortDescriptor.Comparison) -> String {
        SQLFunctionNames.collation(comparison).map { "\(sql) COLLATE \($0)" } ?? sql
    }
    /// Every comparison is a collation the store registers, which calls `FetchSortDescriptor.compareStrings`.
    package func ordersExactly(_ comparison: FetchSortDescriptor.Comparison) -> Bool { true }
    /// SQLite already orders NULLs first ascending and last descending.
    package func orderTerm(_ expression: String, ascending: Bool) -> String { expression + (ascending ? " ASC" : " DESC") }
    package func window(limit: Int, offset: Int) -> String {
        guard limit > 0 || offset > 0 else { return "" }
        return " LIMIT \(limit > 0 ? limit : -1) OFFSET \(max(0, offset))"
    }
    package func finalize(_ sql: String) -> String { sql }
    /// A writing transaction holds the database's one write lock.
    package var lockingRead: String { "" }
    package func insertIgnoringDuplicates(intoQuoted table: String, columns: [String]) -> String {
        "INSERT OR IGNORE INTO " + insertColumns(table, columns)
    }
    package func bulkInsert(intoQuoted table: String, columns: [String], literals: [Int: String]) -> String? { nil }
    package func temporaryKeyTable(_ name: String) -> (create: String, name: String) {
        ("CREATE TEMP TABLE IF NOT EXISTS \(name) (pk INTEGER PRIMARY KEY)", "temp.\(name)")
    }
    package func ddlName(_ name: String) -> String { name }
    package func columnType(_ coreDataType: String) -> String { coreDataType }
    package var binaryIndexCollation: String { " COLLATE BINARY" }
    package var autoIncrementingKey: String { "INTEGER PRIMARY KEY" }
    package func blobLiteral(_ bytes: [UInt8]) -> String { "X'" + bytes.map { String(format: "%02X", $0) }.joined() + "'" }
    package func storeTable(_ quoted: String) -> String { "main." + quoted }
    /// A temporary trigger: it exists on the connection that created it, the store's writer, and no other.
    package func historyTrigger(name: String, event: String, table: String, condition: String?, body: String) -> [String] {
        [
            "CREATE TEMP TRIGGER IF NOT EXISTS \(name) AFTER \(event) ON \(table) FOR EACH ROW\(condition.map { " WHEN " + $0 } ?? "") BEGIN\n\(body) END"
        ]
    }
    /// SQLite keeps any value in a BLOB column as it is.
    package func tombstoneValue(_ expression: String, columnType coreDataType: String) -> String { expression }
    package func tableExistsQuery(_ name: String) -> String {
        "SELECT COUNT(*) FROM main.sqlite_master WHERE type = 'table' AND name = '\(name)' COLLATE NOCASE"
    }
    package func columnNamesQuery(_ name: String) -> String { "SELECT name FROM pragma_table_info('\(name)')" }
}

/// PostgreSQL, with text columns in the `"C"` collation (byte order of UTF-8, which is the order of Unicode scalars) and
/// the functions its store creates under the names SQLite's registers.
///
/// Identifiers are quoted lower-cased (ASCII letters only, as PostgreSQL folds unquoted names), so that a fixed
/// column written bare (`Z_PK`) and the same name quoted (`"Z_PK"`) are one column.
package struct PostgreSQLDialect: SQLDialect {
    package init() {}
    /// Not yet: the list is written into the statement (`= ANY` of an array argument would do it; the server's parse
    /// of a written list costs less beside a round trip than SQLite's does in process).
    package func inIntegerList(_ expression: String, _ values: [Int64]) -> (sql: String, argument: SQLArgument)? { nil }
    package func quote(_ identifier: String) -> String { sqlQuote(storedName(identifier)) }

    /// A name as PostgreSQL keeps it once written bare: its ASCII letters lower-cased (how the catalog and the
    /// server's messages spell the store's tables, columns and indexes).
    package func storedName(_ identifier: String) -> String {
        String(decoding: identifier.utf8.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    }
    package var `true`: String { "TRUE" }
    package var `false`: String { "FALSE" }
    package func isNotDistinct(_ a: String, _ b: String) -> String { "\(a) IS NOT DISTINCT FROM \(b)" }
    package func isDistinct(_ a: String, _ b: String) -> String { "\(a) IS DISTINCT FROM \(b)" }
    /// PostgreSQL's `REAL` is single precision: every real is `double precision`.
    package func castToReal(_ sql: String) -> String { "CAST(\(sql) AS double precision)" }
    /// PostgreSQL's own functions where they give the evaluator's results, the store's (`ocd_math`, `ocd_upper`,
    /// `ocd_lower`, `ocd_length`, `ocd_shift`, `ocd_fold`) where they would not (an error for the square root of -1, case mappings
    /// by the server's locale, lengths in characters rather than UTF-16 units).
    package func call(_ function: FetchFunction, _ arguments: [String], integral: [Bool]) -> String {
        let x = arguments[0]
        func bits(_ i: Int) -> String { integral[i] ? arguments[i] : "CAST(trunc(\(castToReal(arguments[i]))) AS bigint)" }
        switch function {
        case .abs: return "abs(\(x))"
        case .floor, .ceiling, .trunc:
            return integral[0] ? x : "\(function == .floor ? "floor" : function == .ceiling ? "ceil" : "trunc")(\(castToReal(x)))"
        case .modulus: return "mod(CAST(\(x) AS numeric), NULLIF(CAST(\(arguments[1]) AS numeric), 0))"
        case .bitwiseAnd: return "(\(bits(0)) & \(bits(1)))"
        case .bitwiseOr: return "(\(bits(0)) | \(bits(1)))"
        case .bitwiseXor: return "(\(bits(0)) # \(bits(1)))"
        case .onesComplement: return "(~\(bits(0)))"
        case .leftShift, .rightShift: return "ocd_shift(\(bits(0)), \(bits(1)), \(function == .leftShift ? "TRUE" : "FALSE"))"
        case .uppercase: return "ocd_upper(\(x))"
        case .lowercase: return "ocd_lower(\(x))"
        case .length: return "ocd_length(\(x))"
        case .canonical: return fold(x, flags: 3)
        case .noindex: return x
        default: return "ocd_math('\(function.rawValue)', \(castToReal(x)))"
        }
    }
    /// PostgreSQL refuses a division by zero: it is NULL, as in SQLite and the evaluator.
    package func divide(_ x: String, _ y: String) -> String { "(\(castToReal(x)) / NULLIF(\(y), 0))" }
    /// The other comparisons sort by a key the store's function computes (PostgreSQL has no collations defined by a
    /// function).
    package func sortExpression(_ sql: String, comparison: FetchSortDescriptor.Comparison) -> String {
        SQLFunctionNames.collation(comparison).map { "\(SQLFunctionNames.sortKey)(\(sql), '\($0)')" } ?? sql
    }
    /// Binary order is the `"C"` collation's, case-insensitive order the folded text's; the localized comparisons are
    /// Foundation's (ICU through Foundation's own copy, with the process's locale), which no server collation is
    /// guaranteed to match.
    package func ordersExactly(_ comparison: FetchSortDescriptor.Comparison) -> Bool {
        comparison == .default || comparison == .caseInsensitive
    }
    /// PostgreSQL orders NULLs last ascending and first descending: the order is spelled out.
    package func orderTerm(_ expression: String, ascending: Bool) -> String {
        expression + (ascending ? " ASC NULLS FIRST" : " DESC NULLS LAST")
    }
    package func window(limit: Int, offset: Int) -> String {
        (limit > 0 ? " LIMIT \(limit)" : "") + (offset > 0 ? " OFFSET \(offset)" : "")
    }
    package var lockingRead: String { " FOR UPDATE" }
    package func insertIgnoringDuplicates(intoQuoted table: String, columns: [String]) -> String {
        finalize("INSERT INTO " + insertColumns(table, columns) + " ON CONFLICT DO NOTHING")
    }
    /// `INSERT … SELECT a1, 1, a3, … FROM unnest($1, $2, …) AS u(a1, a3, …)`: one array per column, typed by its
    /// parameter, and the literals in place.
    package func bulkInsert(intoQuoted table: String, columns: [String], literals: [Int: String]) -> String? {
        let arrays = columns.indices.filter { literals[$0] == nil }
        let selected = columns.indices.map { literals[$0] ?? "a\($0)" }
        return finalize(
            "INSERT INTO \(table) (\(columns.joined(separator: ", "))) SELECT \(selected.joined(separator: ", ")) FROM unnest(\(arrays.map { _ in "?" }.joined(separator: ", "))) AS u(\(arrays.map { "a\($0)" }.joined(separator: ", ")))"
        )
    }
    package func temporaryKeyTable(_ name: String) -> (create: String, name: String) {
        ("CREATE TEMP TABLE IF NOT EXISTS \(name) (pk bigint PRIMARY KEY)", "pg_temp.\(name)")
    }
    package func ddlName(_ name: String) -> String { quote(name) }
    /// Keys and integers are 64-bit; reals and dates (seconds since 2001) `double precision`; decimals text, kept
    /// exactly as written (compared and sorted as `double precision`, as in SQLite); text in the `"C"` collation.
    package func columnType(_ coreDataType: String) -> String {
        switch coreDataType.uppercased() {
        case "INTEGER": return "bigint"
        case "FLOAT", "REAL", "TIMESTAMP": return "double precision"
        case "BLOB": return "bytea"
        default: return #"text COLLATE "C""#  // VARCHAR, VARCHAR(255), DECIMAL, TEXT
        }
    }
    /// Text columns are in the `"C"` collation already.
    package var binaryIndexCollation: String { "" }
    package var autoIncrementingKey: String { "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY" }
    package func blobLiteral(_ bytes: [UInt8]) -> String { "'\\x" + bytes.map { String(format: "%02x", $0) }.joined() + "'::bytea" }
    package func storeTable(_ quoted: String) -> String { quoted }
    /// A trigger every session sees, whose function runs only in transactions that set `ocd.history` to `on` (the
    /// store's writes when it keeps history): other programs' SQL records nothing and pays only the `WHEN` test.
    package func historyTrigger(name: String, event: String, table: String, condition: String?, body: String) -> [String] {
        let function = quote(name + "_FN")
        let when = "current_setting('ocd.history', true) = 'on'" + (condition.map { " AND (\($0))" } ?? "")
        return [
            "CREATE OR REPLACE FUNCTION \(function)() RETURNS trigger LANGUAGE plpgsql AS $history$\nBEGIN\n\(body)\nRETURN NULL;\nEND\n$history$",
            "CREATE OR REPLACE TRIGGER \(quote(name)) AFTER \(event) ON \(table) FOR EACH ROW WHEN (\(when)) EXECUTE FUNCTION \(function)()",
        ]
    }
    /// Tombstone columns are `bytea`: a value of another type is kept as its text, in UTF-8.
    package func tombstoneValue(_ expression: String, columnType coreDataType: String) -> String {
        coreDataType.uppercased() == "BLOB" ? expression : "convert_to((\(expression))::text, 'UTF8')"
    }
    package func tableExistsQuery(_ name: String) -> String {
        "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = '\(storedName(name))'"
    }
    package func columnNamesQuery(_ name: String) -> String {
        """
        SELECT attname::text FROM pg_attribute
        WHERE attrelid = to_regclass(quote_ident(current_schema()) || '.\(storedName(name))') AND attnum > 0 AND NOT attisdropped
        ORDER BY attnum
        """
    }
    /// Numbers the placeholders `$1`, `$2`, … (a `?` inside a quoted literal or identifier is left as it is).
    package func finalize(_ sql: String) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16)
        var quote: Character?
        var number = 0
        for character in sql {
            if let open = quote {
                if character == open { quote = nil }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if character == "?" {
                number += 1
                result += "$\(number)"
                continue
            }
            result.append(character)
        }
        return result
    }
}
