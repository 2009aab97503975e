import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@Model`: makes a class a persistent model, as SwiftData's macro of that name does.
///
/// - Member attributes: each stored `var` that is not `@Transient` gets `@PersistedProperty`, which turns it into
///   accessors that read and write the model's backing data.
/// - Members: the backing data and its public face (`persistentBackingData`), `init(backingData:)`, the schema
///   metadata (each persisted property's name, key path, default value and `@Attribute` / `@Relationship` options), and
///   the observation registrar with the `access` / `withMutation` helpers the accessors call.
/// - Extensions: conformance to `PersistentModel` and `Observable`.
public struct ModelMacro: MemberMacro, MemberAttributeMacro, ExtensionMacro {
    /// The members: backing data, `init(backingData:)`, schema metadata, observation.
    public static func expansion(
        of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax, conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let classDecl = declaration.as(ClassDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: ModelDiagnostic.notAClass))
            return []
        }
        let typeName = classDecl.name.trimmed.text
        let isFinal = classDecl.modifiers.contains { $0.name.tokenKind == .keyword(.final) }
        let properties = PersistedProperty.all(in: classDecl)
        let markers = properties.map { "_\($0.name) = OpenSwiftData.PersistedPropertyMarker()" }
        /// The schema metadata entries, with key paths rooted at `root`.
        func list(root: String) -> String {
            let entries = properties.map { property in
                let defaultValue = property.initializer.map { $0.trimmedDescription } ?? "nil"
                let metadata = property.optionsExpression ?? "nil"
                return
                    "OpenSwiftData.Schema.PropertyMetadata(name: \(literal(property.name)), keyPath: \\\(root).\(property.name), defaultValue: \(defaultValue), metadata: \(metadata))"
            }
            return entries.isEmpty ? "[]" : "[\n" + entries.map { "    " + $0 }.joined(separator: ",\n") + "\n]"
        }
        if let superclass = modelSuperclass(of: classDecl) {
            return subclassMembers(typeName, superclass: superclass, count: properties.count, metadata: list(root: "Sub"), markers: markers)
        }
        // A class that may be subclassed: its metadata is overridable, and a subclass's metadata starts with its
        // entries rooted at the subclass (`\Truck.name`, as the subclass's predicates name them).
        let overridable: [DeclSyntax] =
            isFinal
            ? []
            : [
                """
                public class func \(raw: typeName)_$metadata<Sub: \(raw: typeName)>(_ type: Sub.Type) -> [OpenSwiftData.Schema.PropertyMetadata] {
                    \(raw: list(root: "Sub"))
                }
                """
            ]
        return [
            "private var _$backingData: OpenSwiftData.ModelBackingData = OpenSwiftData.ModelBackingData(propertyCount: \(raw: properties.count))",
            """
            public var persistentBackingData: OpenSwiftData.ModelBackingData {
                get { _$backingData }
                set { _$backingData = newValue }
            }
            """,
            """
            public \(raw: isFinal ? "static" : "class") var schemaMetadata: [OpenSwiftData.Schema.PropertyMetadata] {
                \(raw: list(root: typeName))
            }
            """,
            """
            public \(raw: isFinal ? "" : "required ")init(backingData: OpenSwiftData.ModelBackingData) {
                \(raw: (["_$backingData = backingData"] + markers).joined(separator: "\n"))
            }
            """,
            // Made on first read (see ModelObservationRegistrar); unchecked and nonisolated as the `let` it replaces
            // is: a model is used on one thread at a time, and the accessors are nonisolated.
            """
            @exclusivity(unchecked) nonisolated(unsafe) \(raw: isFinal ? "private" : "internal") var _$observationRegistrar = OpenSwiftData.ModelObservationRegistrar()
            """,
            """
            internal nonisolated func access<Member>(keyPath: KeyPath<\(raw: typeName), Member>) {
                _$observationRegistrar.access(self, keyPath: keyPath)
            }
            """,
            """
            internal nonisolated func withMutation<Member, MutationResult>(
                keyPath: KeyPath<\(raw: typeName), Member>, _ mutation: () throws -> MutationResult
            ) rethrows -> MutationResult {
                try _$observationRegistrar.withMutation(of: self, keyPath: keyPath, mutation)
            }
            """,
        ] + overridable
    }

    /// The superclass a model class inherits from, if it is a subclass: the first type it inherits, when an initializer
    /// calls `super.init` (a macro cannot tell a class from a protocol by its name; a subclass's initializer must call
    /// its superclass's, as the one `@Model` adds hides those it would inherit).
    static func modelSuperclass(of classDecl: ClassDeclSyntax) -> String? {
        guard let first = classDecl.inheritanceClause?.inheritedTypes.first?.type.trimmedDescription else { return nil }
        let callsSuper = classDecl.memberBlock.members.contains { member in
            guard let initializer = member.decl.as(InitializerDeclSyntax.self), let body = initializer.body else { return false }
            let tokens = Array(body.tokens(viewMode: .sourceAccurate))
            return tokens.indices.dropLast(2).contains { i in
                tokens[i].tokenKind == .keyword(.super) && tokens[i + 1].tokenKind == .period
                    && tokens[i + 2].tokenKind == .keyword(.`init`)
            }
        }
        return callsSuper ? first : nil
    }

    /// A subclass's members.
    ///
    /// Its own backing data until the superclass's is set (its properties are initialized before `super.init` runs),
    /// merged into the superclass's when that is first asked for; metadata that adds its properties to the
    /// superclass's; `init(backingData:)` passing the backing data up. Observation goes through the superclass's
    /// registrar.
    static func subclassMembers(_ typeName: String, superclass: String, count: Int, metadata: String, markers: [String]) -> [DeclSyntax] {
        let superName = superclass.split(separator: ".").last.map(String.init) ?? superclass
        let storage = "\(typeName)_$backingData"
        let offset = "\(typeName).\(typeName)_$offset"
        return [
            "private var \(raw: storage): OpenSwiftData.ModelBackingData = OpenSwiftData.ModelBackingData(propertyCount: \(raw: offset) + \(raw: count))",
            "private static let \(raw: typeName)_$offset: Int = \(raw: superclass).schemaMetadata.count",
            """
            public override var persistentBackingData: OpenSwiftData.ModelBackingData {
                get {
                    let base = super.persistentBackingData
                    if base !== \(raw: storage) {
                        base.adopt(\(raw: storage), from: \(raw: offset), to: \(raw: offset) + \(raw: count))
                        \(raw: storage) = base
                    }
                    return base
                }
                set {
                    super.persistentBackingData = newValue
                    \(raw: storage) = newValue
                }
            }
            """,
            """
            public class func \(raw: typeName)_$metadata<Sub: \(raw: typeName)>(_ type: Sub.Type) -> [OpenSwiftData.Schema.PropertyMetadata] {
                \(raw: superName)_$metadata(type) + \(raw: metadata)
            }
            """,
            """
            public override class var schemaMetadata: [OpenSwiftData.Schema.PropertyMetadata] {
                \(raw: typeName)_$metadata(\(raw: typeName).self)
            }
            """,
            """
            public required init(backingData: OpenSwiftData.ModelBackingData) {
                \(raw: ([storage + " = backingData"] + markers).joined(separator: "\n"))
                super.init(backingData: backingData)
            }
            """,
        ]
    }

    /// `@PersistedProperty` on each persisted stored property.
    public static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax, providingAttributesFor member: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AttributeSyntax] {
        guard let classDecl = declaration.as(ClassDeclSyntax.self), let variable = member.as(VariableDeclSyntax.self),
            let property = PersistedProperty(variable), !variable.hasAttribute("PersistedProperty"),
            let index = PersistedProperty.all(in: classDecl).firstIndex(where: { $0.name == property.name })
        else { return [] }
        // Its position among the persisted properties (its entry in `schemaMetadata`): a model not yet in a context
        // keeps its values in an array by that position. A subclass's properties come after its superclass's.
        if modelSuperclass(of: classDecl) != nil {
            return ["@PersistedProperty(\(literal: index), model: \(literal: classDecl.name.trimmed.text))"]
        }
        return ["@PersistedProperty(\(literal: index))"]
    }

    /// The conformances to `PersistentModel` and `Observable`.
    public static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax, providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        // A subclass conforms through its superclass.
        guard let classDecl = declaration.as(ClassDeclSyntax.self), modelSuperclass(of: classDecl) == nil else { return [] }
        // A class declared `nonisolated` (as models are in a target whose default isolation is the main actor) conforms
        // in nonisolated extensions: an extension there would otherwise be on the main actor, and its conformances with it.
        let isolation = classDecl.modifiers.contains { $0.name.tokenKind == .keyword(.nonisolated) } ? "nonisolated " : ""
        return [
            try ExtensionDeclSyntax("\(raw: isolation)extension \(type.trimmed): OpenSwiftData.PersistentModel {}"),
            try ExtensionDeclSyntax("\(raw: isolation)extension \(type.trimmed): Observation.Observable {}"),
        ]
    }
}

/// `@PersistedProperty` (added by `@Model`): a stored property's accessors, reading and writing the model's backing
/// data, with an `init` accessor that keeps the initial value in the backing data until the model is inserted into a
/// context (so that the class's initializer sets it without observation or the setter's work).
public struct PersistedPropertyMacro: AccessorMacro, PeerMacro {
    /// `_name`, an empty marker the `init` accessor initializes (what makes the class's initializer set the property
    /// through that accessor; the value itself goes to the backing data).
    public static func expansion(
        of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol, in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self), let property = PersistedProperty(variable)
        else { return [] }
        return ["private var _\(raw: property.name): OpenSwiftData.PersistedPropertyMarker"]
    }

    /// The `init`, `get` and `set` accessors.
    public static func expansion(
        of node: AttributeSyntax, providingAccessorsOf declaration: some DeclSyntaxProtocol, in context: some MacroExpansionContext
    ) throws -> [AccessorDeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self), let property = PersistedProperty(variable)
        else { return [] }
        let name = property.name
        // The property's position among the class's persisted properties, which `@Model` passes.
        guard case .argumentList(let arguments) = node.arguments,
            let index = arguments.first?.expression.as(IntegerLiteralExprSyntax.self).flatMap({ Int($0.literal.text) })
        else {
            context.diagnose(Diagnostic(node: node, message: ModelDiagnostic.outsideModel(name)))
            return []
        }
        // A subclass's property: its own backing data until the model's is set, its position after the superclass's
        // properties, observation through the superclass's registrar.
        if let model = arguments.dropFirst().first?.expression.as(StringLiteralExprSyntax.self)?.representedLiteralValue {
            let storage = "\(model)_$backingData"
            let position = "\(model).\(model)_$offset + \(index)"
            return [
                """
                @storageRestrictions(initializes: _\(raw: name), accesses: \(raw: storage))
                init(initialValue) {
                    \(raw: storage).setInitialValue(initialValue, forKey: \(literal: name), at: \(raw: position))
                    _\(raw: name) = OpenSwiftData.PersistedPropertyMarker()
                }
                """,
                """
                get {
                    _$observationRegistrar.access(self, keyPath: \\\(raw: model).\(raw: name))
                    return \(raw: storage).value(forKey: \(literal: name), at: \(raw: position))
                }
                """,
                """
                set {
                    _$observationRegistrar.withMutation(of: self, keyPath: \\\(raw: model).\(raw: name)) {
                        \(raw: storage).setValue(newValue, forKey: \(literal: name), at: \(raw: position))
                    }
                }
                """,
            ]
        }
        return [
            """
            @storageRestrictions(initializes: _\(raw: name), accesses: _$backingData)
            init(initialValue) {
                _$backingData.setInitialValue(initialValue, forKey: \(literal: name), at: \(literal: index))
                _\(raw: name) = OpenSwiftData.PersistedPropertyMarker()
            }
            """,
            """
            get {
                access(keyPath: \\.\(raw: name))
                return _$backingData.value(forKey: \(literal: name), at: \(literal: index))
            }
            """,
            """
            set {
                withMutation(keyPath: \\.\(raw: name)) {
                    _$backingData.setValue(newValue, forKey: \(literal: name), at: \(literal: index))
                }
            }
            """,
        ]
    }
}

/// `@Attribute`, `@Relationship`, `@Transient`: markers `@Model` reads; they add nothing themselves.
public struct MarkerMacro: PeerMacro {
    /// Nothing.
    public static func expansion(
        of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol, in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] { [] }
}

/// A stored instance `var` of a model class that is persisted: one identifier, no accessors of its own, not `static`,
/// not `@Transient` or `@ObservationIgnored`.
struct PersistedProperty {
    let name: String
    let initializer: ExprSyntax?
    /// `Schema.Attribute(…)` or `Schema.Relationship(…)` with the arguments of the property's `@Attribute` or
    /// `@Relationship`, if it has one.
    let optionsExpression: String?

    init?(_ variable: VariableDeclSyntax) {
        guard variable.bindingSpecifier.tokenKind == .keyword(.var), variable.bindings.count == 1,
            let binding = variable.bindings.first, let identifier = binding.pattern.as(IdentifierPatternSyntax.self),
            !variable.modifiers.contains(where: { [.keyword(.static), .keyword(.class), .keyword(.lazy)].contains($0.name.tokenKind) }),
            !variable.hasAttribute("Transient"),
            // `@ObservationIgnored` is Observation's accessor macro, which cannot share a property with these accessors:
            // such a property stays a plain stored one, as `@Transient` keeps it.
            !variable.hasAttribute("ObservationIgnored")
        else { return nil }
        // A property with accessors of its own is computed, unless the accessors are the ones `@PersistedProperty`
        // adds (the member attribute runs before them).
        if let accessors = binding.accessorBlock, !variable.hasAttribute("PersistedProperty") {
            if case .getter = accessors.accessors { return nil }
            if case .accessors(let list) = accessors.accessors,
                list.contains(where: {
                    [.keyword(.get), .keyword(.set), .keyword(._modify), .keyword(._read)].contains($0.accessorSpecifier.tokenKind)
                })
            {
                return nil
            }
        }
        name = identifier.identifier.trimmed.text
        initializer = binding.initializer?.value
        optionsExpression =
            variable.attribute(named: "Attribute").map { Self.call("OpenSwiftData.Schema.Attribute", $0) }
            ?? variable.attribute(named: "Relationship").map { Self.call("OpenSwiftData.Schema.Relationship", $0) }
    }

    /// The persisted properties of a class, in declaration order: the order of its `schemaMetadata`.
    static func all(in classDecl: ClassDeclSyntax) -> [PersistedProperty] {
        classDecl.memberBlock.members.compactMap { member in
            member.decl.as(VariableDeclSyntax.self).flatMap(PersistedProperty.init)
        }
    }

    private static func call(_ type: String, _ attribute: AttributeSyntax) -> String {
        guard case .argumentList(let arguments) = attribute.arguments else { return "\(type)()" }
        return "\(type)(\(arguments.trimmedDescription))"
    }
}

extension VariableDeclSyntax {
    func attribute(named name: String) -> AttributeSyntax? {
        for element in attributes {
            guard case .attribute(let attribute) = element else { continue }
            let typeName = attribute.attributeName.trimmedDescription
            if typeName == name || typeName.hasSuffix("." + name) { return attribute }
        }
        return nil
    }

    func hasAttribute(_ name: String) -> Bool { attribute(named: name) != nil }
}

/// A string literal of `text`.
func literal(_ text: String) -> String {
    var escaped = ""
    for character in text {
        if character == "\\" || character == "\"" { escaped.append("\\") }
        escaped.append(character)
    }
    return "\"" + escaped + "\""
}

enum ModelDiagnostic: DiagnosticMessage {
    case notAClass
    case notAnActor
    case missingModelType(String)
    case outsideModel(String)

    var message: String {
        switch self {
        case .notAClass: "@Model applies to classes only"
        case .notAnActor: "@ModelActor applies to actors only"
        case .missingModelType(let macro): "#\(macro) needs its model class written out: #\(macro)<Trip>([\\.name])"
        case .outsideModel(let name):
            "@PersistedProperty '\(name)' needs its position among the persisted properties, which @Model gives it"
        }
    }

    var diagnosticID: MessageID { MessageID(domain: "OpenSwiftData", id: "\(self)") }
    var severity: DiagnosticSeverity { .error }
}

/// `@ModelActor`: an actor's model container, its executor (which owns a context of the container) and an
/// initializer, and conformance to `ModelActor`.
public struct ModelActorMacro: MemberMacro, ExtensionMacro {
    /// The members.
    public static func expansion(
        of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax, conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard declaration.is(ActorDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: ModelDiagnostic.notAnActor))
            return []
        }
        return [
            "public nonisolated let modelExecutor: any OpenSwiftData.ModelExecutor",
            "public nonisolated let modelContainer: OpenSwiftData.ModelContainer",
            """
            public init(modelContainer: OpenSwiftData.ModelContainer) {
                self.modelExecutor = OpenSwiftData.DefaultSerialModelExecutor(modelContext: OpenSwiftData.ModelContext(modelContainer))
                self.modelContainer = modelContainer
            }
            """,
            """
            public nonisolated var unownedExecutor: UnownedSerialExecutor {
                (modelExecutor as! OpenSwiftData.DefaultSerialModelExecutor).asUnownedSerialExecutor()
            }
            """,
        ]
    }

    /// The conformance to `ModelActor`.
    public static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax, providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard declaration.is(ActorDeclSyntax.self) else { return [] }
        return [try ExtensionDeclSyntax("extension \(type.trimmed): OpenSwiftData.ModelActor {}")]
    }
}

/// `#Unique<T>([\.a], [\.b, \.c])` and `#Index<T>(…)` in a model class: the groups of key paths as a static property
/// the schema reads (`uniquenessConstraints`, `indexes`).
public struct KeyPathGroupsMacro: DeclarationMacro {
    /// The static property.
    public static func expansion(
        of node: some FreestandingMacroExpansionSyntax, in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        let name = node.macroName.text == "Unique" ? "uniquenessConstraints" : "indexes"
        guard let type = node.genericArgumentClause?.arguments.first?.argument else {
            context.diagnose(Diagnostic(node: node, message: ModelDiagnostic.missingModelType(node.macroName.text)))
            return []
        }
        let groups = node.arguments.map { $0.expression.trimmedDescription }.joined(separator: ", ")
        return [
            """
            public static var \(raw: name): [[AnyKeyPath]] {
                let groups: [[PartialKeyPath<\(raw: type.trimmedDescription)>]] = [\(raw: groups)]
                return groups
            }
            """
        ]
    }
}
