import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

/// The functions the predicate compiler calls in PostgreSQL, under the names SQLite's connections register:
/// `ocd_fold`, `ocd_strop` and `ocd_sort_key`.
///
/// SQLite runs the evaluator's Swift code; PostgreSQL cannot, so folding (`[c]`, `[d]`, `[cd]`) is tabulated from it:
/// when a store is created, every character of the Basic Multilingual Plane is folded by `PredicateSemantics.fold`,
/// and those that change become `translate` tables (one character to one, or to none) and `replace` calls (one to
/// several, as `ß` → `ss`); combining marks the evaluator drops after a letter are deleted. A folded string is then
/// the evaluator's fold of each of its characters, which is what the evaluator gives (checked across scripts by
/// `PostgreSQLStoreTests.foldingAgreesWithTheEvaluatorAcrossScripts`).
enum PostgreSQLFunctions {
    /// The statements creating the functions (run when a store is created; the fold tables are computed once a
    /// process).
    static let creationStatements: [String] =
        [
            foldFunction(), likePatternFunction, stringOperatorFunction, sortKeyFunction, powerFunction,
        ] + functionStatements

    /// The functions `FetchFunction`'s calls need (`PostgreSQLDialect.call`); a store made before they existed gets
    /// them when it is opened.
    static let functionStatements: [String] = [
        mathFunction, lengthFunction, shiftFunction, caseFunction("ocd_upper", upper: true), caseFunction("ocd_lower", upper: false),
    ]
    /// The function whose presence tells that a store has `functionStatements`.
    static let lastAddedFunction = "ocd_shift"

    /// `translate` tables and `replace` pairs that fold text as `PredicateSemantics.fold` with `options` does.
    struct FoldTable {
        var from = ""
        var to = ""
        /// Characters folded to nothing (a combining accent under `[d]`), deleted by `translate` after the others.
        var deleted = ""
        var replacements: [(String, String)] = []

        init(_ options: PredicateComparison.Options) {
            self.init { PredicateSemantics.fold($0, options) }
        }

        /// The table of `map` applied to each character of the Basic Multilingual Plane.
        init(mapping map: (String) -> String) {
            for value in UInt32(0)...0xFFFF {
                guard let scalar = Unicode.Scalar(value), value >= 0x20 else { continue }
                let character = String(scalar)
                let folded = map(character)
                guard folded != character else {
                    // A combining mark alone is kept, but after a letter the evaluator drops it (`[d]`: "é" written
                    // e + U+0301 folds to "e"): such marks are deleted.
                    if scalar.properties.generalCategory == .nonspacingMark, map("a" + character) == map("a") {
                        deleted.unicodeScalars.append(scalar)
                    }
                    continue
                }
                switch folded.unicodeScalars.count {
                case 0: deleted.unicodeScalars.append(scalar)
                case 1:
                    from.unicodeScalars.append(scalar)
                    to += folded
                default: replacements.append((character, folded))
                }
            }
        }

        /// `expression` folded, in SQL.
        func apply(to expression: String) -> String {
            var sql = "translate(\(expression), \(literal(from + deleted)), \(literal(to)))"
            for (character, folded) in replacements { sql = "replace(\(sql), \(literal(character)), \(literal(folded)))" }
            return sql
        }

        private func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
    }

    /// `ocd_fold(text, flags)`, with flags 1 `[c]`, 2 `[d]`, 3 `[cd]` (4, `[n]`, changes nothing).
    ///
    /// ASCII text (as many bytes as characters) takes a short way: `lower` in the `"C"` collation, which folds A–Z only, as the evaluator
    /// does there.
    static func foldFunction() -> String {
        let c = FoldTable(.caseInsensitive).apply(to: "t")
        let d = FoldTable(.diacriticInsensitive).apply(to: "t")
        let cd = FoldTable([.caseInsensitive, .diacriticInsensitive]).apply(to: "t")
        return """
            CREATE OR REPLACE FUNCTION ocd_fold(t text, flags integer) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fold$
            SELECT CASE WHEN flags & 3 = 0 THEN t
                WHEN octet_length(t) = length(t) THEN CASE WHEN flags & 1 = 1 THEN lower(t COLLATE "C") ELSE t END
                WHEN flags & 3 = 1 THEN \(c) WHEN flags & 3 = 2 THEN \(d) ELSE \(cd) END
            $fold$
            """
    }

    /// `ocd_like_pattern(pattern)`: a `LIKE` pattern of the predicate language (`*`, `?`, `\` before a literal
    /// character) as SQL's (`%`, `_`, escape `\`); NULL for a pattern ending in a lone `\`, which matches nothing.
    static let likePatternFunction = """
        CREATE OR REPLACE FUNCTION ocd_like_pattern(p text) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $like$
        DECLARE
            result text := '';
            i integer := 1;
            c text;
        BEGIN
            WHILE i <= length(p) LOOP
                c := substr(p, i, 1);
                IF c = '\\' THEN
                    IF i = length(p) THEN RETURN NULL; END IF;
                    result := result || '\\' || substr(p, i + 1, 1);
                    i := i + 2;
                    CONTINUE;
                ELSIF c = '*' THEN result := result || '%';
                ELSIF c = '?' THEN result := result || '_';
                ELSIF c = '%' OR c = '_' THEN result := result || '\\' || c;
                ELSE result := result || c;
                END IF;
                i := i + 1;
            END LOOP;
            RETURN result;
        END
        $like$
        """

    /// `ocd_strop(op, value, pattern, flags)`: `PredicateSemantics.stringOperator`, false for a NULL side.
    static let stringOperatorFunction = """
        CREATE OR REPLACE FUNCTION ocd_strop(op text, v text, p text, flags integer) RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $strop$
        DECLARE
            fv text;
            fp text;
            pattern text;
        BEGIN
            IF v IS NULL OR p IS NULL THEN RETURN false; END IF;
            fv := ocd_fold(v, flags);
            fp := ocd_fold(p, flags);
            CASE op
                WHEN 'BEGINSWITH' THEN RETURN left(fv, length(fp)) = fp;
                WHEN 'ENDSWITH' THEN RETURN length(fv) >= length(fp) AND right(fv, length(fp)) = fp;
                WHEN 'CONTAINS', 'IN' THEN RETURN fp = '' OR strpos(fv, fp) > 0;
                WHEN 'LIKE' THEN
                    pattern := ocd_like_pattern(fp);
                    RETURN pattern IS NOT NULL AND fv LIKE pattern ESCAPE '\\';
                WHEN 'MATCHES' THEN
                    -- As ICU with Apple's options: ^ and $ also at line breaks, . across them ("w"); the whole
                    -- string between \\A and \\Z. Options written first ("(?i)…") join ours: PostgreSQL takes them only
                    -- at the start, the later letter winning.
                    pattern := substring(fp from '^\\(\\?([bceimnpqstwx]+)\\)');
                    IF pattern IS NOT NULL THEN
                        RETURN fv ~ ('(?w' || pattern || ')\\A(?:' || substr(fp, length(pattern) + 4) || ')\\Z');
                    END IF;
                    RETURN fv ~ ('(?w)\\A(?:' || fp || ')\\Z');
                ELSE RETURN false;
            END CASE;
        END
        $strop$
        """

    /// The channel commits are announced on (`LISTEN`/`NOTIFY` are per database, so one name serves every store).
    static let commitChannel = "ocd_commits"

    /// The commit counter (`z_ocd_commits`) and the statement triggers on each of the store's tables that advance it.
    ///
    /// Every writing transaction advances it once — this project's saves and batch requests, and any other program's
    /// SQL — and announces it with `NOTIFY` (payload: the writer's origin, empty for other programs). The value it set
    /// stays in the transaction's setting `ocd.counted`; the lock on the counter's row, held to the commit, makes the
    /// values follow commit order. Idempotent.
    static func commitCounterStatements(for schema: RelationalSchema, dialect: any SQLDialect) -> [String] {
        var statements = [
            "CREATE TABLE IF NOT EXISTS z_ocd_commits (id integer PRIMARY KEY, n bigint NOT NULL)",
            "INSERT INTO z_ocd_commits (id, n) VALUES (1, 0) ON CONFLICT DO NOTHING",
            """
            CREATE OR REPLACE FUNCTION ocd_count_commit() RETURNS trigger LANGUAGE plpgsql AS $count$
            DECLARE
                value bigint;
            BEGIN
                IF coalesce(current_setting('ocd.counted', true), '') = '' THEN
                    UPDATE z_ocd_commits SET n = n + 1 WHERE id = 1 RETURNING n INTO value;
                    PERFORM set_config('ocd.counted', value::text, true);
                    PERFORM pg_notify('\(commitChannel)', coalesce(current_setting('ocd.origin', true), ''));
                END IF;
                RETURN NULL;
            END
            $count$
            """,
        ]
        for table in schema.tables.map(\.name) + schema.joinTableList.map(\.name) {
            statements.append(
                "CREATE OR REPLACE TRIGGER \(dialect.quote(table + "_OCD_COMMIT")) AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON \(dialect.quote(table)) FOR EACH STATEMENT EXECUTE FUNCTION ocd_count_commit()"
            )
        }
        return statements
    }

    /// Persistent history's functions: the `ZCOLUMNS` bit sets its triggers build (`ocd_history_mask` from a string of
    /// `0`/`1` flags, `ocd_history_mask_union` of two), and `ocd_history_key()`, the number of the history transaction a
    /// write records: the commit counter's value this transaction set, advanced once more for each further history
    /// transaction in the same database transaction (saves inside `performAsOneTransaction`), so that every value of
    /// the counter stands for one commit or one history transaction, never both twice.
    static let historyFunctions = [
        """
        CREATE OR REPLACE FUNCTION ocd_history_mask(flags text) RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $mask$
        DECLARE
            result bytea := decode(repeat('00', (length(flags) + 7) / 8), 'hex');
        BEGIN
            FOR i IN 0 .. length(flags) - 1 LOOP
                IF substr(flags, i + 1, 1) = '1' THEN
                    result := set_byte(result, i / 8, get_byte(result, i / 8) | (1 << (i % 8)));
                END IF;
            END LOOP;
            RETURN result;
        END
        $mask$
        """,
        """
        CREATE OR REPLACE FUNCTION ocd_history_mask_union(a bytea, b bytea) RETURNS bytea LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $union$
        DECLARE
            result bytea;
            other bytea;
        BEGIN
            IF a IS NULL THEN RETURN b; END IF;
            IF b IS NULL THEN RETURN a; END IF;
            IF length(a) >= length(b) THEN result := a; other := b; ELSE result := b; other := a; END IF;
            FOR i IN 0 .. length(other) - 1 LOOP
                result := set_byte(result, i, get_byte(result, i) | get_byte(other, i));
            END LOOP;
            RETURN result;
        END
        $union$
        """,
        """
        CREATE OR REPLACE FUNCTION ocd_history_key() RETURNS bigint LANGUAGE plpgsql AS $key$
        DECLARE
            value bigint;
        BEGIN
            SELECT n INTO value FROM z_ocd_commits WHERE id = 1 FOR UPDATE;
            IF coalesce(current_setting('ocd.counted', true), '') = '' THEN
                UPDATE z_ocd_commits SET n = n + 1 WHERE id = 1 RETURNING n INTO value;
                PERFORM set_config('ocd.counted', value::text, true);
                PERFORM pg_notify('\(commitChannel)', coalesce(current_setting('ocd.origin', true), ''));
            ELSIF current_setting('ocd.history_key', true) = value::text THEN
                UPDATE z_ocd_commits SET n = n + 1 WHERE id = 1 RETURNING n INTO value;
            END IF;
            PERFORM set_config('ocd.history_key', value::text, true);
            RETURN value;
        END
        $key$
        """,
        // A store whose history is older than its counter, or the reverse: the counter never gives a number twice.
        "UPDATE z_ocd_commits SET n = GREATEST(n, (SELECT COALESCE(MAX(Z_PK), 0) FROM ATRANSACTION)) WHERE id = 1",
    ]

    /// `ocd_pow(x, y)`: `pow` as the evaluator computes it — NULL where it gives NaN (a negative number to a fraction),
    /// infinity where it overflows — where PostgreSQL's `power` would raise an error.
    static let powerFunction = """
        CREATE OR REPLACE FUNCTION ocd_pow(x double precision, y double precision) RETURNS double precision LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $pow$
        BEGIN
            IF x < 0 AND y <> trunc(y) THEN RETURN NULL; END IF;
            RETURN power(x, y);
        EXCEPTION
            WHEN numeric_value_out_of_range THEN
                IF (abs(x) < 1) = (y > 0) THEN RETURN 0; END IF;
                IF x < 0 AND mod(y::numeric, 2) = 1 THEN RETURN '-Infinity'; END IF;
                RETURN 'Infinity';
            WHEN division_by_zero THEN RETURN 'Infinity';
        END
        $pow$
        """

    /// `ocd_upper(text)` and `ocd_lower(text)`: `uppercase:` and `lowercase:` as Swift's `uppercased()` and
    /// `lowercased()` map each character (tabulated as the fold is; `lower` and `upper` follow the server's locale).
    static func caseFunction(_ name: String, upper: Bool) -> String {
        let table = FoldTable { upper ? $0.uppercased() : $0.lowercased() }
        return """
            CREATE OR REPLACE FUNCTION \(name)(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $case$
            SELECT CASE WHEN octet_length(t) = length(t) THEN \(upper ? "upper" : "lower")(t COLLATE "C") ELSE \(table.apply(to: "t")) END
            $case$
            """
    }

    /// `ocd_length(text)`: `length:`, the string's length in UTF-16 code units (NSString's), which counts a character
    /// beyond the Basic Multilingual Plane twice.
    static let lengthFunction = #"""
        CREATE OR REPLACE FUNCTION ocd_length(t text) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $length$
        SELECT char_length(t) + char_length(regexp_replace(t, '[^\U00010000-\U0010FFFF]', '', 'g'))
        $length$
        """#

    /// `ocd_shift(x, y, leftward)`: `leftshift:by:` and `rightshift:by:` as Swift shifts — a negative count shifts the
    /// other way, 64 or more leaves 0 (or -1, shifting a negative number right) — where PostgreSQL counts modulo 64.
    static let shiftFunction = """
        CREATE OR REPLACE FUNCTION ocd_shift(x bigint, y bigint, leftward boolean) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $shift$
        SELECT CASE
            WHEN (leftward AND y >= 64) OR (NOT leftward AND y <= -64) THEN 0
            WHEN (leftward AND y <= -64) OR (NOT leftward AND y >= 64) THEN CASE WHEN x < 0 THEN -1 ELSE 0 END
            WHEN (y >= 0) = leftward THEN x << abs(y)::integer
            ELSE x >> abs(y)::integer END
        $shift$
        """

    /// `ocd_math(function, x)`: `sqrt:`, `log:`, `ln:` and `exp:` as the evaluator computes them — NULL for no number
    /// (the square root of -1), infinities where PostgreSQL raises an error.
    static let mathFunction = """
        CREATE OR REPLACE FUNCTION ocd_math(f text, x double precision) RETURNS double precision LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $math$
        BEGIN
            IF x = 'NaN' THEN RETURN NULL; END IF;
            IF f = 'exp:' THEN
                IF x > 709.78 THEN RETURN 'Infinity'; END IF;
                IF x < -745.2 THEN RETURN 0; END IF;
                RETURN exp(x);
            END IF;
            IF x < 0 THEN RETURN NULL; END IF;
            IF f = 'sqrt:' THEN RETURN sqrt(x); END IF;
            IF x = 0 THEN RETURN '-Infinity'; END IF;
            IF f = 'log:' THEN RETURN log(x); END IF;
            RETURN ln(x);
        END
        $math$
        """

    /// `ocd_sort_key(text, collation)`: what a case-insensitive sort orders by.
    ///
    /// `OCD_CI` gives the case-folded text, in the column's `"C"` order. Localized sorts never reach the server's `ORDER BY`: the store orders them in memory with
    /// Foundation's comparison (`SQLDialect.ordersExactly`); any other collation name gives the text itself.
    static let sortKeyFunction = """
        CREATE OR REPLACE FUNCTION ocd_sort_key(t text, kind text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $key$
        SELECT CASE kind WHEN 'OCD_CI' THEN ocd_fold(t, 1) ELSE t END
        $key$
        """
}
