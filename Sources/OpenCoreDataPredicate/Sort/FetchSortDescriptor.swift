import Foundation
import OpenCoreDataModel

/// One sort key of a fetch request: a key path, a direction and a string comparison.
///
/// Foundation on Linux owns `NSSortDescriptor` and `SortDescriptor`; this is OpenCoreData's, with Core Data's
/// initialiser shape. The same order holds in SQL (the store registers collations) and in memory.
///
/// For example:
/// ```swift
/// request.sortDescriptors = [
///     FetchSortDescriptor(key: "name", ascending: true, comparison: .localizedStandard),
///     FetchSortDescriptor(key: "price", ascending: false),
/// ]
/// ```
public struct FetchSortDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// How strings compare.
    ///
    /// Non-string values always compare by value.
    ///
    /// For example:
    /// ```swift
    /// let byName = FetchSortDescriptor(key: "name", comparison: .localizedStandard)   // "file9" before "file10"
    /// ```
    public enum Comparison: String, Sendable, Hashable, CaseIterable {
        /// Unicode scalar order (`compare:`).
        case `default`
        /// Case-folded (`caseInsensitiveCompare:`).
        case caseInsensitive
        /// Locale-aware (`localizedCompare:`).
        case localized
        /// Locale-aware, case-folded (`localizedCaseInsensitiveCompare:`).
        case localizedCaseInsensitive
        /// Finder-like: locale-aware, case-folded, numbers by value, "file9" before "file10"
        /// (`localizedStandardCompare:`).
        case localizedStandard

        /// The Objective-C selector name Core Data code passes, for porting.
        public var selectorName: String {
            switch self {
            case .default: return "compare:"
            case .caseInsensitive: return "caseInsensitiveCompare:"
            case .localized: return "localizedCompare:"
            case .localizedCaseInsensitive: return "localizedCaseInsensitiveCompare:"
            case .localizedStandard: return "localizedStandardCompare:"
            }
        }
    }

    /// The key path to sort on (through to-one relationships).
    public var key: String
    /// Whether smaller values come first.
    public var ascending: Bool
    /// How strings compare.
    public var comparison: Comparison

    /// A sort on `key` (a key path through to-one relationships), ascending unless told, comparing strings as
    /// `comparison` says.
    public init(key: String, ascending: Bool = true, comparison: Comparison = .default) {
        self.key = key
        self.ascending = ascending
        self.comparison = comparison
    }

    /// Core Data's selector form: `selector` is a selector name such as `"localizedStandardCompare:"`.
    ///
    /// - Throws: `CoreDataError(.invalidFetchRequest)` for a selector with no equivalent here.
    public init(key: String, ascending: Bool, selector: String) throws {
        guard let comparison = Comparison.allCases.first(where: { $0.selectorName == selector }) else {
            throw CoreDataError(
                .invalidFetchRequest,
                "Sort selector '\(selector)' on key '\(key)' is not supported; use compare:, caseInsensitiveCompare:, localizedCompare:, localizedCaseInsensitiveCompare: or localizedStandardCompare:.",
                key: key)
        }
        self.init(key: key, ascending: ascending, comparison: comparison)
    }

    /// The descriptor with the opposite direction.
    public var reversed: FetchSortDescriptor { FetchSortDescriptor(key: key, ascending: !ascending, comparison: comparison) }

    /// The key path's components.
    public var keyPathComponents: [String] { key.split(separator: ".").map(String.init) }

    /// The key, direction and comparison, as Foundation prints a sort descriptor.
    public var description: String { "(\(key), \(ascending ? "ascending" : "descending"), \(comparison.selectorName))" }

    /// Compares two values under this descriptor's comparison (ignoring direction); `nil` sorts first.
    public func compareValues(_ a: AttributeValue, _ b: AttributeValue) -> Int {
        Self.compare(a, b, comparison)
    }

    /// The three-way comparison the store's SQL collations use too.
    public static func compare(_ a: AttributeValue, _ b: AttributeValue, _ comparison: Comparison) -> Int {
        // The common cases first, without building a tuple of both values (which copies, and retains strings).
        if case .integer(let x) = a, case .integer(let y) = b { return x == y ? 0 : (x < y ? -1 : 1) }
        if comparison == .default, case .string(let x) = a, case .string(let y) = b { return PredicateSemantics.compareStrings(x, y) }
        switch (a, b) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case (.string(let x), .string(let y)): return compareStrings(x, y, comparison)
        default:
            if let c = PredicateSemantics.compare(a, b) { return c }
            // Different kinds: order by SQLite's storage-class order (numbers < text < blob) for agreement with SQL.
            return rank(a) == rank(b) ? 0 : (rank(a) < rank(b) ? -1 : 1)
        }
    }

    private static func rank(_ v: AttributeValue) -> Int {
        switch v {
        case .null: return 0
        case .integer, .double, .decimal, .bool, .date: return 1
        case .string, .uuid, .uri: return 2
        case .data: return 3
        case .object: return 4  // a transient attribute's object: after everything a store holds
        }
    }

    /// String order for each comparison.
    public static func compareStrings(_ x: String, _ y: String, _ comparison: Comparison) -> Int {
        switch comparison {
        case .default: return PredicateSemantics.compareStrings(x, y)
        case .caseInsensitive:
            let c = PredicateSemantics.compareStrings(
                PredicateSemantics.fold(x, .caseInsensitive), PredicateSemantics.fold(y, .caseInsensitive))
            return c
        case .localized: return result(x.compare(y, options: [], range: nil, locale: Locale.current))
        case .localizedCaseInsensitive:
            return result(x.compare(y, options: [.caseInsensitive], range: nil, locale: Locale.current))
        case .localizedStandard:
            return result(
                x.compare(y, options: [.caseInsensitive, .numeric, .widthInsensitive, .forcedOrdering], range: nil, locale: Locale.current))
        }
    }

    private static func result(_ r: ComparisonResult) -> Int {
        switch r {
        case .orderedAscending: return -1
        case .orderedSame: return 0
        case .orderedDescending: return 1
        }
    }
}
