internal import OpenCoreData

// `#Predicate` nodes that read through optionals (`a?.b`, `a ?? b`, `a!`, `nil`) and through model subclasses (`is`,
// `as?`), converted as `PredicateConversion.swift` converts the others.

extension PredicateExpressions.TypeCheck: FetchConvertible {
    /// `$0 is BusinessTrip`: the row's entity is the class's or one of its subclasses'.
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        try converter.typeCheck(input, Desired.self)
    }
}

extension PredicateConverter {
    /// `input is desired`: the row's entity is the class's or one of its subclasses'.
    mutating func typeCheck(_ input: Any, _ desired: Any.Type) throws -> FetchNode {
        guard let model = desired as? any PersistentModel.Type else {
            throw SwiftDataError("A predicate's `is \(desired)` or `as? \(desired)` must name a model class.", kind: .unsupportedPredicate)
        }
        guard case .evaluatedObject = try expression(input) else {
            throw SwiftDataError(
                "A predicate's `is \(desired)` or `as? \(desired)` can test the model fetched only.", kind: .unsupportedPredicate)
        }
        let names = schema.types.filter { Schema.isSubclass($0, of: model) }.map {
            PredicateConstant.value(.string(Schema.entityName(of: $0)))
        }
        return compare(.keyPath(.evaluatedObject, ["entity"]), .in, .constant(.array(names)))
    }
}

extension PredicateExpressions.ConditionalCast: FetchConvertible, CastNode {
    /// `$0 as? BusinessTrip`: the model itself, whose subclass properties read nil in other entities' rows; a chain
    /// through it (`($0 as? BusinessTrip)?.perDiem ?? 0`) is nil when the row is not the class's.
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        _ = try typeTest(&converter)
        return .expression(try converter.expression(input))
    }

    func typeTest(_ converter: inout PredicateConverter) throws -> FetchPredicate {
        guard case .predicate(let test) = try converter.typeCheck(input, Desired.self) else {
            throw SwiftDataError("A predicate's `as? \(Desired.self)` must name a model class.", kind: .unsupportedPredicate)
        }
        return test
    }
}

/// A conditional cast (`$0 as? BusinessTrip`): its test that the value is of the type.
protocol CastNode {
    func typeTest(_ converter: inout PredicateConverter) throws -> FetchPredicate
}

extension PredicateExpressions.OptionalFlatMap: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        // `a?.b`: the transform reads through the wrapped key path (a nil to-one makes the key path nil in SQL).
        let base = try converter.expression(wrapped)
        return try converter.binding(variable.key, to: base) { try $0.convert(transform) }
    }
}

extension PredicateExpressions.NilCoalesce: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode {
        switch try converter.convert(lhs) {
        case .expression(let value):
            // A value (`($0.nickname ?? "") == x`, `$0.isDone ?? false`): the enclosing condition is split on it.
            return .expression(converter.coalescing(value, try converter.expression(rhs)))
        case .predicate(let condition):
            // A condition read through an optional (`$0.folder?.name.contains(x) ?? false`): it holds when the optional
            // is there; the fallback decides when it is nil.
            guard let chain = lhs as? any OptionalChain else {
                throw SwiftDataError(
                    "'??' in a predicate needs a value or an optional chain on its left (\(LHS.self)).", kind: .unsupportedPredicate)
            }
            let isNil = try chain.nilTest(&converter)
            switch (rhs as? PredicateExpressions.Value<Bool>)?.value {
            case false?: return .predicate(.and([.not(isNil), condition]))
            case true?: return .predicate(.or([isNil, condition]))
            case nil:
                return .predicate(.or([.and([.not(isNil), condition]), .and([isNil, try converter.predicate(rhs)])]))
            }
        }
    }
}

/// An optional chain (`a?.b`), nil when its wrapped value is.
protocol OptionalChain {
    /// The condition that the chain's wrapped value is nil.
    func nilTest(_ converter: inout PredicateConverter) throws -> FetchPredicate
}

extension PredicateExpressions.OptionalFlatMap: OptionalChain {
    func nilTest(_ converter: inout PredicateConverter) throws -> FetchPredicate {
        // An optional to-many (`[Note]?`, as CloudKit-style models declare them) is an empty set in the store, never nil.
        if Schema.unwrapped(Wrapped.self).0 is any ModelArray.Type { return .falsePredicate }
        if let cast = wrapped as? any CastNode { return .not(try cast.typeTest(&converter)) }
        return .comparison(PredicateComparison(try converter.expression(wrapped), .equal, .constant(.value(.null))))
    }
}

extension PredicateExpressions.ForcedUnwrap: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode { try converter.convert(inner) }
}

extension PredicateExpressions.NilLiteral: FetchConvertible {
    func fetchNode(_ converter: inout PredicateConverter) throws -> FetchNode { .expression(.constant(.value(.null))) }
}
