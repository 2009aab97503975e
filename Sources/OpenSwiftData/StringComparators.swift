import Foundation

// `SortDescriptor(\.name, comparator: .localizedStandard)`, the string sort SwiftData apps write: Foundation on Apple's
// systems declares `.localizedStandard` and `.localized`; Linux's declares only `.lexical` (swift-foundation issue 284),
// so such a line would not compile there. OpenSwiftData supplies the two comparators under the same names.

extension String.StandardComparator {
    /// Compares strings as the Finder does: case-folded, numbers by value ("file9" before "file10").
    ///
    /// In a fetch, `localizedStandardCompare:`.
    public static let localizedStandard = StandardComparatorLayout.make(
        options: [.numeric, .caseInsensitive, .widthInsensitive, .forcedOrdering], localized: true)

    /// Compares strings in the current locale's order.
    ///
    /// In a fetch, `localizedCompare:`.
    public static let localized = StandardComparatorLayout.make(options: [], localized: true)
}

/// The stored properties of `String.StandardComparator`, in its order: Linux's Foundation makes its comparators with a
/// private initializer and refuses to decode any but `.lexical`, so the two it lacks are laid out here and checked.
private struct StandardComparatorLayout {
    var options: String.CompareOptions
    var isLocalized: Bool
    var order: SortOrder

    /// A comparator with these options, or `.lexical` if the type's layout is not the one expected (checked field by
    /// field through its mirror).
    static func make(options: String.CompareOptions, localized: Bool) -> String.StandardComparator {
        let layout = StandardComparatorLayout(options: options, isLocalized: localized, order: .forward)
        guard MemoryLayout<StandardComparatorLayout>.size == MemoryLayout<String.StandardComparator>.size,
            MemoryLayout<StandardComparatorLayout>.alignment == MemoryLayout<String.StandardComparator>.alignment
        else { return .lexical }
        let made = unsafeBitCast(layout, to: String.StandardComparator.self)
        let fields = Dictionary(
            Mirror(reflecting: made).children.compactMap { child in child.label.map { ($0, child.value) } }, uniquingKeysWith: { a, _ in a }
        )
        guard (fields["options"] as? String.CompareOptions) == options, (fields["isLocalized"] as? Bool) == localized,
            (fields["order"] as? SortOrder) == .forward, fields.count == 3
        else { return .lexical }
        return made
    }
}
