internal import OpenCoreData

// `localizedStandardContains` in a `#Predicate`, the search SwiftData apps write most
// (`$0.name.localizedStandardContains(searchText)`): Foundation on Apple's systems has this expression; Linux's does
// not, so a predicate using it would not compile there. OpenSwiftData supplies it under the same names.

extension PredicateExpressions {
    /// Whether a string contains another, ignoring case and diacritics (as `localizedStandardContains` does; in a fetch,
    /// `CONTAINS[cd]`).
    public struct StringLocalizedStandardContains<Root: PredicateExpression, Other: PredicateExpression>: PredicateExpression
    where Root.Output: StringProtocol, Other.Output: StringProtocol {
        /// The string searched.
        public let root: Root
        /// The string searched for.
        public let other: Other

        /// An expression that searches `root` for `other`.
        public init(root: Root, other: Other) {
            self.root = root
            self.other = other
        }

        /// Whether `root`'s value contains `other`'s, ignoring case and diacritics.
        ///
        /// Every string contains the empty string, as in a fetch (`CONTAINS[cd] ''` is true for every row), so that a
        /// predicate answers the same in memory and in the store (Foundation's `range(of:)` finds no empty string).
        public func evaluate(_ bindings: PredicateBindings) throws -> Bool {
            let text = String(try root.evaluate(bindings))
            let search = String(try other.evaluate(bindings))
            return search.isEmpty || text.range(of: search, options: [.caseInsensitive, .diacriticInsensitive]) != nil
        }
    }

    /// The expression `#Predicate` builds for `localizedStandardContains`.
    public static func build_localizedStandardContains<Root, Other>(_ root: Root, _ other: Other)
        -> StringLocalizedStandardContains<Root, Other>
    {
        StringLocalizedStandardContains(root: root, other: other)
    }
}

extension PredicateExpressions.StringLocalizedStandardContains: Codable where Root: Codable, Other: Codable {}
extension PredicateExpressions.StringLocalizedStandardContains: Sendable where Root: Sendable, Other: Sendable {}
extension PredicateExpressions.StringLocalizedStandardContains: StandardPredicateExpression
where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}

extension PredicateExpressions.StringLocalizedStandardContains: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        .predicate(
            .comparison(
                PredicateComparison(
                    try converter.expression(root), .contains, try converter.expression(other),
                    options: [.caseInsensitive, .diacriticInsensitive])))
    }
}
