import Foundation
import OpenCoreDataModel

extension FetchPredicate {
    /// The predicate with its `$VARIABLE`s replaced by values (Core Data's `withSubstitutionVariables(_:)`).
    ///
    /// For example:
    /// ```swift
    /// let template = try FetchPredicate(format: "price < $LIMIT AND name BEGINSWITH $PREFIX")
    /// let cheap = try template.withSubstitutionVariables(["LIMIT": 500, "PREFIX": "Ch"])
    /// ```
    /// Variables bound by a `SUBQUERY` are left alone.
    ///
    /// - Throws: `CoreDataError(.invalidFetchRequest)` naming a variable with no value, or a value of an unsupported
    ///   type.
    public func withSubstitutionVariables(_ variables: [String: Any?]) throws -> FetchPredicate {
        try withSubstitutionVariables(variables, keyPaths: nil)
    }

    /// `withSubstitutionVariables(_:)`, where `$NAME.key.path` reads a key path of a substituted value.
    ///
    /// `keyPaths` gives the value of the key path (as `value(forKeyPath:)` would) for a variable it knows, or
    /// throws. Core Data's fetched properties use it for `$FETCH_SOURCE.price`.
    ///
    /// For example:
    /// ```swift
    /// let resolved = try predicate.withSubstitutionVariables(["FETCH_SOURCE": product]) { _, path in try product.checkedValue(forKeyPath: path.joined(separator: ".")) }
    /// ```
    /// - Throws: the errors of `withSubstitutionVariables(_:)`, and those `keyPaths` throws.
    public func withSubstitutionVariables(
        _ variables: [String: Any?], keyPaths: ((_ variable: String, _ path: [String]) throws -> Any?)?
    ) throws -> FetchPredicate {
        var constants: [String: PredicateConstant] = [:]
        for (name, value) in variables {
            guard let constant = PredicateConstant(argument: value) else {
                throw CoreDataError(
                    .invalidFetchRequest, "The value for $\(name) is of an unsupported type: \(value.map { "\(type(of: $0))" } ?? "nil").")
            }
            constants[name] = constant
        }
        return try substitute(Substitution(values: constants, keyPaths: keyPaths), bound: [])
    }

    /// The names of the variables a substitution must provide (those no SUBQUERY binds).
    public var freeVariables: Set<String> {
        var names: Set<String> = []
        func visit(_ e: FetchExpression, _ bound: Set<String>) {
            switch e {
            case .variable(let n): if !bound.contains(n) { names.insert(n) }
            case .keyPath(let base, _): visit(base, bound)
            case .aggregate(let items): items.forEach { visit($0, bound) }
            case .arithmetic(_, let a, let b): visit(a, bound); visit(b, bound)
            case .negate(let a): visit(a, bound)
            case .function(_, let arguments): arguments.forEach { visit($0, bound) }
            case .subquery(let c, let v, let p):
                visit(c, bound)
                walk(p, bound.union([v]))
            case .conditional(let p, let a, let b):
                walk(p, bound)
                visit(a, bound)
                visit(b, bound)
            case .constant, .evaluatedObject: break
            }
        }
        func walk(_ p: FetchPredicate, _ bound: Set<String>) {
            switch p {
            case .and(let ps), .or(let ps): ps.forEach { walk($0, bound) }
            case .not(let q): walk(q, bound)
            case .comparison(let c): visit(c.left, bound); visit(c.right, bound)
            case .truePredicate, .falsePredicate: break
            }
        }
        walk(self, [])
        return names
    }

    private func substitute(_ values: Substitution, bound: Set<String>) throws -> FetchPredicate {
        switch self {
        case .truePredicate, .falsePredicate: return self
        case .and(let ps): return .and(try ps.map { try $0.substitute(values, bound: bound) })
        case .or(let ps): return .or(try ps.map { try $0.substitute(values, bound: bound) })
        case .not(let q): return .not(try q.substitute(values, bound: bound))
        case .comparison(var c):
            c.left = try c.left.substitute(values, bound: bound)
            c.right = try c.right.substitute(values, bound: bound)
            return .comparison(c)
        }
    }
}

extension FetchExpression {
    fileprivate func substitute(_ values: Substitution, bound: Set<String>) throws -> FetchExpression {
        switch self {
        case .variable(let name):
            if bound.contains(name) { return self }
            guard let value = values.values[name] else {
                throw CoreDataError(
                    .invalidFetchRequest,
                    "No value was given for $\(name) (given: \(values.values.keys.sorted().map { "$" + $0 }.joined(separator: ", "))).")
            }
            return .constant(value)
        case .keyPath(.variable(let name), let components) where !bound.contains(name):
            if let resolve = values.keyPaths, values.values[name] != nil {
                let value = try resolve(name, components)
                guard let constant = PredicateConstant(argument: value) else {
                    throw CoreDataError(
                        .invalidFetchRequest,
                        "$\(name).\(components.joined(separator: ".")) is of an unsupported type: \(value.map { "\(type(of: $0))" } ?? "nil")."
                    )
                }
                return .constant(constant)
            }
            throw CoreDataError(
                .invalidFetchRequest,
                "$\(name).\(components.joined(separator: ".")) reads a key from a substituted value, which is not supported; substitute the key path's value instead."
            )
        case .keyPath(let base, let components):
            return .keyPath(try base.substitute(values, bound: bound), components)
        case .aggregate(let items): return .aggregate(try items.map { try $0.substitute(values, bound: bound) })
        case .arithmetic(let op, let a, let b):
            return .arithmetic(op, try a.substitute(values, bound: bound), try b.substitute(values, bound: bound))
        case .negate(let a): return .negate(try a.substitute(values, bound: bound))
        case .function(let name, let arguments):
            return .function(name, try arguments.map { try $0.substitute(values, bound: bound) })
        case .subquery(let collection, let variable, let predicate):
            return .subquery(
                try collection.substitute(values, bound: bound), variable,
                try predicate.substituteVariables(values, bound: bound.union([variable])))
        case .conditional(let condition, let a, let b):
            return .conditional(
                try condition.substituteVariables(values, bound: bound), try a.substitute(values, bound: bound),
                try b.substitute(values, bound: bound))
        case .constant, .evaluatedObject: return self
        }
    }
}

extension FetchPredicate {
    fileprivate func substituteVariables(_ values: Substitution, bound: Set<String>) throws -> FetchPredicate {
        try substitute(values, bound: bound)
    }
}

/// What a substitution replaces: variables by value, and (when given) `$NAME.key.path` by what `keyPaths` reads.
private struct Substitution {
    let values: [String: PredicateConstant]
    let keyPaths: ((String, [String]) throws -> Any?)?
}

extension FetchPredicate {
    /// The predicate with the variable `name` replaced by `expression` (an expression, where
    /// `withSubstitutionVariables(_:)` puts constants).
    package func replacingVariable(_ name: String, with expression: FetchExpression) -> FetchPredicate {
        switch self {
        case .truePredicate, .falsePredicate: return self
        case .and(let parts): return .and(parts.map { $0.replacingVariable(name, with: expression) })
        case .or(let parts): return .or(parts.map { $0.replacingVariable(name, with: expression) })
        case .not(let part): return .not(part.replacingVariable(name, with: expression))
        case .comparison(var comparison):
            comparison.left = comparison.left.replacingVariable(name, with: expression)
            comparison.right = comparison.right.replacingVariable(name, with: expression)
            return .comparison(comparison)
        }
    }
}

extension FetchExpression {
    /// The expression with the variable `name` replaced by `expression`.
    package func replacingVariable(_ name: String, with expression: FetchExpression) -> FetchExpression {
        switch self {
        case .variable(name): expression
        case .constant, .evaluatedObject, .variable: self
        case .keyPath(let base, let keys): .keyPath(base.replacingVariable(name, with: expression), keys)
        case .aggregate(let items): .aggregate(items.map { $0.replacingVariable(name, with: expression) })
        case .arithmetic(let op, let a, let b):
            .arithmetic(op, a.replacingVariable(name, with: expression), b.replacingVariable(name, with: expression))
        case .negate(let a): .negate(a.replacingVariable(name, with: expression))
        case .function(let function, let arguments): .function(function, arguments.map { $0.replacingVariable(name, with: expression) })
        case .subquery(let collection, let variable, let condition):
            // A SUBQUERY binding the same name hides it in its condition.
            .subquery(
                collection.replacingVariable(name, with: expression), variable,
                variable == name ? condition : condition.replacingVariable(name, with: expression))
        case .conditional(let condition, let a, let b):
            .conditional(
                condition.replacingVariable(name, with: expression), a.replacingVariable(name, with: expression),
                b.replacingVariable(name, with: expression))
        }
    }
}
