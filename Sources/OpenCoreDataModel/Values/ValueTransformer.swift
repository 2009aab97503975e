import Foundation

/// The name a value transformer is registered under, as a model's `valueTransformerName` gives it; Foundation's type
/// of the same name, which Foundation on Linux lacks.
///
/// For example:
/// ```swift
/// ValueTransformer.setValueTransformer(ColorTransformer(), forName: NSValueTransformerName("ColorTransformer"))
/// ```
public struct NSValueTransformerName: RawRepresentable, Hashable, Sendable {
    /// The name as the model file writes it.
    public let rawValue: String
    /// A name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A name.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// The default for transformable attributes: archives with `NSKeyedArchiver` and unarchives only Foundation's
    /// value classes (see `NSSecureUnarchiveFromDataTransformer`).
    public static let secureUnarchiveFromDataTransformerName = NSValueTransformerName("NSSecureUnarchiveFromData")
    /// Core Data's former default, used for a transformable attribute that names no transformer: keyed archiving
    /// without the class check.
    public static let keyedUnarchiveFromDataTransformerName = NSValueTransformerName("NSKeyedUnarchiveFromData")
    /// The transformer of `NSArchiver` data; Foundation on Linux has no `NSArchiver`, so it reads keyed archives and
    /// refuses the old format with a message.
    public static let unarchiveFromDataTransformerName = NSValueTransformerName("NSUnarchiveFromData")
    /// Turns a Boolean `NSNumber` into its negation, both ways.
    public static let negateBooleanTransformerName = NSValueTransformerName("NSNegateBoolean")
    /// Tells whether a value is nil (one way only).
    public static let isNilTransformerName = NSValueTransformerName("NSIsNil")
    /// Tells whether a value is not nil (one way only).
    public static let isNotNilTransformerName = NSValueTransformerName("NSIsNotNil")
}

/// Converts a value into another and, usually, back; Foundation's `ValueTransformer` (absent from Foundation on Linux),
/// with its registry.
///
/// A transformable attribute names a transformer; Core Data stores `transformedValue(_:)` of the attribute's value
/// (which must be `Data`) and reads it back with `reverseTransformedValue(_:)`. The unarchiving transformers
/// (`NSSecureUnarchiveFromDataTransformer` and its subclasses) go the other way round, as their names say.
///
/// For example:
/// ```swift
/// final class ColorTransformer: ValueTransformer {
///     override class func allowsReverseTransformation() -> Bool { true }
///     override func transformedValue(_ value: Any?) -> Any? { (value as? Color).map { Data($0.hex.utf8) } }
///     override func reverseTransformedValue(_ value: Any?) -> Any? { (value as? Data).flatMap { Color(hex: String(decoding: $0, as: UTF8.self)) } }
/// }
/// ValueTransformer.setValueTransformer(ColorTransformer(), forName: NSValueTransformerName("ColorTransformer"))
/// ```
open class ValueTransformer: NSObject, ValueTransformerLookup, @unchecked Sendable {
    /// A transformer.
    public override init() { super.init() }

    /// The class of the values `transformedValue(_:)` returns (`NSObject` unless a subclass says).
    open class func transformedValueClass() -> AnyClass { NSObject.self }

    /// Whether `reverseTransformedValue(_:)` undoes `transformedValue(_:)` (true unless a subclass says).
    open class func allowsReverseTransformation() -> Bool { true }

    /// The transformed value (the value itself unless a subclass says).
    open func transformedValue(_ value: Any?) -> Any? { value }

    /// The value `transformedValue(_:)` was made from; by default `transformedValue(_:)` again when reverse
    /// transformation is allowed, else nil.
    open func reverseTransformedValue(_ value: Any?) -> Any? {
        type(of: self).allowsReverseTransformation() ? transformedValue(value) : nil
    }

    /// Registers `transformer` under `name` (or removes the registration when it is nil), for every model and store
    /// of the process.
    public class func setValueTransformer(_ transformer: ValueTransformer?, forName name: NSValueTransformerName) {
        TransformerRegistry.shared.set(transformer, forName: name.rawValue)
    }

    /// The names transformers are registered under, the built-in ones included.
    public class func valueTransformerNames() -> [NSValueTransformerName] {
        TransformerRegistry.shared.names().map(NSValueTransformerName.init(rawValue:))
    }

    /// The transformer registered under `name`, or nil; the body of `ValueTransformer(forName:)`.
    package static func registered(_ name: String) -> ValueTransformer? { TransformerRegistry.shared.transformer(forName: name) }
}

/// Gives `ValueTransformer` Foundation's lookup initializer, `ValueTransformer(forName:)`, which returns the
/// registered instance (a class initializer cannot; a protocol extension's can).
///
/// For example:
/// ```swift
/// let transformer = ValueTransformer(forName: .secureUnarchiveFromDataTransformerName)
/// ```
public protocol ValueTransformerLookup {}

extension ValueTransformerLookup where Self: ValueTransformer {
    /// The transformer registered under `name`, or nil when there is none (or it is not of this class).
    public init?(forName name: NSValueTransformerName) {
        guard let transformer = ValueTransformer.registered(name.rawValue) as? Self else { return nil }
        self = transformer
    }
}

/// The process's transformers by name, with Foundation's built-in ones.
private final class TransformerRegistry: @unchecked Sendable {
    static let shared = TransformerRegistry()
    private let lock = NSLock()
    private var transformers: [String: ValueTransformer] = [
        NSValueTransformerName.secureUnarchiveFromDataTransformerName.rawValue: NSSecureUnarchiveFromDataTransformer(),
        NSValueTransformerName.keyedUnarchiveFromDataTransformerName.rawValue: KeyedUnarchiveFromDataTransformer(),
        NSValueTransformerName.unarchiveFromDataTransformerName.rawValue: KeyedUnarchiveFromDataTransformer(),
        NSValueTransformerName.negateBooleanTransformerName.rawValue: NegateBooleanTransformer(),
        NSValueTransformerName.isNilTransformerName.rawValue: IsNilTransformer(negated: false),
        NSValueTransformerName.isNotNilTransformerName.rawValue: IsNilTransformer(negated: true),
    ]

    func set(_ transformer: ValueTransformer?, forName name: String) {
        lock.withLock { transformers[name] = transformer }
    }

    func transformer(forName name: String) -> ValueTransformer? { lock.withLock { transformers[name] } }

    func names() -> [String] { lock.withLock { transformers.keys.sorted() } }
}

/// `NSNegateBoolean`.
private final class NegateBooleanTransformer: ValueTransformer, @unchecked Sendable {
    override class func transformedValueClass() -> AnyClass { NSNumber.self }
    override func transformedValue(_ value: Any?) -> Any? { NSNumber(value: !((value as? NSNumber)?.boolValue ?? false)) }
}

/// `NSIsNil` and `NSIsNotNil`.
private final class IsNilTransformer: ValueTransformer, @unchecked Sendable {
    let negated: Bool
    init(negated: Bool) {
        self.negated = negated
        super.init()
    }
    override class func transformedValueClass() -> AnyClass { NSNumber.self }
    override class func allowsReverseTransformation() -> Bool { false }
    override func transformedValue(_ value: Any?) -> Any? { NSNumber(value: (value == nil || value is NSNull) != negated) }
}
