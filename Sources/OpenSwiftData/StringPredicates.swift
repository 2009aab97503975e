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

// `caseInsensitiveCompare` in a `#Predicate` (`$0.name.caseInsensitiveCompare(name) == same`, with `same` a captured
// `ComparisonResult.orderedSame`): Apple's Foundation has this expression, Linux's does not.

extension PredicateExpressions {
    /// How a string orders against another, ignoring case (as `caseInsensitiveCompare` does).
    ///
    /// A fetch runs it compared with `.orderedSame` (`==[c]`, or `!=[c]`); not the order (Foundation orders "É" next
    /// to "E", and SQL's case-folded strings by their code points, so the two would disagree).
    public struct StringCaseInsensitiveCompare<Root: PredicateExpression, Other: PredicateExpression>: PredicateExpression
    where Root.Output: StringProtocol, Other.Output: StringProtocol {
        /// The string compared.
        public let root: Root
        /// The string it is compared with.
        public let other: Other

        /// An expression that compares `root` with `other`, ignoring case.
        public init(root: Root, other: Other) {
            self.root = root
            self.other = other
        }

        /// How `root`'s value orders against `other`'s, ignoring case.
        public func evaluate(_ bindings: PredicateBindings) throws -> ComparisonResult {
            String(try root.evaluate(bindings)).caseInsensitiveCompare(String(try other.evaluate(bindings)))
        }
    }

    /// The expression `#Predicate` builds for `caseInsensitiveCompare`.
    public static func build_caseInsensitiveCompare<Root, Other>(_ root: Root, _ other: Other)
        -> StringCaseInsensitiveCompare<Root, Other>
    {
        StringCaseInsensitiveCompare(root: root, other: other)
    }
}

extension PredicateExpressions.StringCaseInsensitiveCompare: Codable where Root: Codable, Other: Codable {}
extension PredicateExpressions.StringCaseInsensitiveCompare: Sendable where Root: Sendable, Other: Sendable {}
extension PredicateExpressions.StringCaseInsensitiveCompare: StandardPredicateExpression
where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}

/// An expression whose value is a `ComparisonResult` a fetch can test (`StringCaseInsensitiveCompare`).
protocol OrderingComparison {
    /// The condition that the comparison's result is (or, when `equal` is false, is not) `result`.
    func condition(_ result: ComparisonResult, equal: Bool, _ converter: inout PredicateConverter) throws -> FetchNode
}

extension PredicateExpressions.StringCaseInsensitiveCompare: OrderingComparison, FetchConvertible {
    func condition(_ result: ComparisonResult, equal: Bool, _ converter: inout PredicateConverter) throws -> FetchNode {
        guard result == .orderedSame else {
            throw SwiftDataError(
                "caseInsensitiveCompare runs in a fetch compared with .orderedSame only, not .\(result == .orderedAscending ? "orderedAscending" : "orderedDescending") (the store orders case-folded strings by their code points, Foundation by its own rules).",
                kind: .unsupportedPredicate)
        }
        let op: PredicateComparison.Operator = equal ? .equal : .notEqual
        return .predicate(
            .comparison(
                PredicateComparison(try converter.expression(root), op, try converter.expression(other), options: [.caseInsensitive])))
    }

    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        throw SwiftDataError(
            "caseInsensitiveCompare runs in a fetch only compared (== or !=) with .orderedSame, held in a constant.",
            kind: .unsupportedPredicate)
    }
}
