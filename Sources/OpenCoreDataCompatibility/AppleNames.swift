// Apple's spellings for the predicate and sort types that Foundation on Linux already owns, so that code written
// for Core Data on Apple platforms compiles with only `import CoreData` changed to `import OpenCoreDataCompatibility`.
//
// Swift lets a module's declarations shadow those of a module it imports: this module imports Foundation, so where
// it is imported `NSPredicate` means the alias below, not Foundation's class.
@_exported import Foundation
@_exported import OpenCoreData

/// Core Data's predicate: here the same value as `FetchPredicate`, parsed from Apple's format language.
///
/// For example:
/// ```swift
/// request.predicate = NSPredicate(format: "name CONTAINS[cd] %@ AND price < %d", "cheese", 500)
/// ```
public typealias NSPredicate = FetchPredicate

/// Core Data's AND, OR and NOT of predicates: here a `FetchPredicate` built with Apple's initializers.
///
/// For example:
/// ```swift
/// let both = NSCompoundPredicate(andPredicateWithSubpredicates: [byName, byPrice])
/// ```
public typealias NSCompoundPredicate = FetchPredicate

/// Core Data's comparison of two expressions: here a `FetchPredicate` built with Apple's initializer.
///
/// For example:
/// ```swift
/// let p = NSComparisonPredicate(
///     leftExpression: NSExpression(forKeyPath: "price"), rightExpression: NSExpression(forConstantValue: 500),
///     modifier: .direct, type: .lessThan)
/// ```
public typealias NSComparisonPredicate = FetchPredicate

/// Core Data's expression: here a `FetchExpression` (key paths, constants, the evaluated object, variables).
///
/// For example:
/// ```swift
/// let price = NSExpression(forKeyPath: "price")
/// ```
public typealias NSExpression = FetchExpression

/// Core Data's sort descriptor: here a `FetchSortDescriptor`.
///
/// For example:
/// ```swift
/// request.sortDescriptors = [NSSortDescriptor(key: "date", ascending: false)]
/// ```
public typealias NSSortDescriptor = FetchSortDescriptor
