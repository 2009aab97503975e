import Foundation

/// What differs between SQL engines for the predicate compiler: identifier quoting, and the functions and
/// collations that implement OpenCoreData's comparison rules.
///
/// SQLite is the one implemented; another engine plugs in
/// by providing the same functions (`PredicateSemantics` is the reference).
package protocol SQLDialect: Sendable {
    /// Quotes an identifier.
    func quote(_ identifier: String) -> String
    /// A number as REAL (for decimals stored as text, and for true division).
    func castToReal(_ sql: String) -> String
    /// `PredicateSemantics.fold` applied to a string expression.
    func fold(_ sql: String, flags: Int) -> String
    /// `PredicateSemantics.stringOperator` (0 or 1) for `BEGINSWITH`, `ENDSWITH`, `CONTAINS`, `LIKE`, `MATCHES`.
    func stringOperator(_ op: String, _ value: String, _ pattern: String, flags: Int) -> String
    /// `x ** y`.
    func power(_ x: String, _ y: String) -> String
    /// The collation implementing a sort comparison, or nil for the engine's binary order.
    func collation(for comparison: FetchSortDescriptor.Comparison) -> String?
}

/// SQLite, with the functions and collations `SQLiteStore` registers on every connection.
package struct SQLiteDialect: SQLDialect {
    package init() {}
    package func quote(_ identifier: String) -> String { sqlQuote(identifier) }
    package func castToReal(_ sql: String) -> String { "CAST(\(sql) AS REAL)" }
    package func fold(_ sql: String, flags: Int) -> String { "\(SQLFunctionNames.fold)(\(sql), \(flags))" }
    package func stringOperator(_ op: String, _ value: String, _ pattern: String, flags: Int) -> String {
        "\(SQLFunctionNames.stringOperator)('\(op)', \(value), \(pattern), \(flags))"
    }
    package func power(_ x: String, _ y: String) -> String { "\(SQLFunctionNames.power)(\(x), \(y))" }
    package func collation(for comparison: FetchSortDescriptor.Comparison) -> String? { SQLFunctionNames.collation(comparison) }
}
