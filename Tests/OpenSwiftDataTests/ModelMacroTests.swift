import OpenSwiftDataMacros
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

/// The macros' expansions, compared text for text.
@Suite struct ModelMacroTests {
    let macros: [String: MacroSpec] = [
        "Model": MacroSpec(type: ModelMacro.self, conformances: ["PersistentModel", "Observable"]),
        "PersistedProperty": MacroSpec(type: PersistedPropertyMacro.self),
        "Attribute": MacroSpec(type: MarkerMacro.self),
        "Transient": MacroSpec(type: MarkerMacro.self),
        "ModelActor": MacroSpec(type: ModelActorMacro.self, conformances: ["ModelActor"]),
        "Unique": MacroSpec(type: KeyPathGroupsMacro.self),
        "Index": MacroSpec(type: KeyPathGroupsMacro.self),
    ]

    func expect(_ source: String, expands expected: String, diagnostics: [DiagnosticSpec] = [], line: Int = #line) {
        assertMacroExpansion(
            source, expandedSource: expected, diagnostics: diagnostics, macroSpecs: macros,
            failureHandler: { failure in
                Issue.record(
                    Comment(rawValue: failure.message),
                    sourceLocation: SourceLocation(fileID: #fileID, filePath: #filePath, line: line, column: 1))
            })
    }

    /// What `@Model` adds after the class's own members (the class closed), and its two extensions: the same for
    /// every class but for its name and its properties' metadata (the array literal, as indented in the expansion).
    func generated(_ type: String, metadata: String, markers: [String] = [], isolation: String = "") -> String {
        let count = markers.count
        let initializer = (["_$backingData = backingData"] + markers.map { "_\($0) = OpenSwiftData.PersistedPropertyMarker()" })
            .map { "        " + $0 }.joined(separator: "\n")
        return """
                private var _$backingData: OpenSwiftData.ModelBackingData = OpenSwiftData.ModelBackingData(propertyCount: \(count))

                public var persistentBackingData: OpenSwiftData.ModelBackingData {
                    get {
                        _$backingData
                    }
                    set {
                        _$backingData = newValue
                    }
                }

                public static var schemaMetadata: [OpenSwiftData.Schema.PropertyMetadata] {
            \(metadata)
                }

                public init(backingData: OpenSwiftData.ModelBackingData) {
            \(initializer)
                }

                @exclusivity(unchecked) nonisolated(unsafe) private var _$observationRegistrar = OpenSwiftData.ModelObservationRegistrar()

                internal nonisolated func access<Member>(keyPath: KeyPath<\(type), Member>) {
                    _$observationRegistrar.access(self, keyPath: keyPath)
                }

                internal nonisolated func withMutation<Member, MutationResult>(
                    keyPath: KeyPath<\(type), Member>, _ mutation: () throws -> MutationResult
                ) rethrows -> MutationResult {
                    try _$observationRegistrar.withMutation(of: self, keyPath: keyPath, mutation)
                }
            }

            \(isolation)extension \(type): OpenSwiftData.PersistentModel {
            }

            \(isolation)extension \(type): Observation.Observable {
            }
            """
    }

    @Test func aModelsStoredPropertiesBecomeAccessorsOfItsBackingData() {
        expect(
            """
            @Model final class Note {
                @Attribute(.unique) var title: String
                var count: Int = 0
                @Transient var draft = ""
                var summary: String { title }
                init(title: String) { self.title = title }
            }
            """,
            expands: """
                final class Note {
                    var title: String {
                        @storageRestrictions(initializes: _title, accesses: _$backingData)
                        init(initialValue) {
                            _$backingData.setInitialValue(initialValue, forKey: "title", at: 0)
                            _title = OpenSwiftData.PersistedPropertyMarker()
                        }
                        get {
                            access(keyPath: \\.title)
                            return _$backingData.value(forKey: "title", at: 0)
                        }
                        set {
                            withMutation(keyPath: \\.title) {
                                _$backingData.setValue(newValue, forKey: "title", at: 0)
                            }
                        }
                    }

                    private var _title: OpenSwiftData.PersistedPropertyMarker
                    var count: Int {
                        @storageRestrictions(initializes: _count, accesses: _$backingData)
                        init(initialValue) {
                            _$backingData.setInitialValue(initialValue, forKey: "count", at: 1)
                            _count = OpenSwiftData.PersistedPropertyMarker()
                        }
                        get {
                            access(keyPath: \\.count)
                            return _$backingData.value(forKey: "count", at: 1)
                        }
                        set {
                            withMutation(keyPath: \\.count) {
                                _$backingData.setValue(newValue, forKey: "count", at: 1)
                            }
                        }
                    }

                    private var _count: OpenSwiftData.PersistedPropertyMarker
                    var draft = ""
                    var summary: String { title }
                    init(title: String) { self.title = title }

                \(generated("Note", metadata: """
                            [
                            OpenSwiftData.Schema.PropertyMetadata(name: "title", keyPath: \\Note.title, defaultValue: nil, metadata: OpenSwiftData.Schema.Attribute(.unique)),
                            OpenSwiftData.Schema.PropertyMetadata(name: "count", keyPath: \\Note.count, defaultValue: 0, metadata: nil)
                            ]
                    """, markers: ["title", "count"]))
                """)
    }

    /// `@Model <modifiers> class Counter { var count = 0 }` and its expansion.
    func expectCounter(modifiers: String, isolation: String = "", line: Int = #line) {
        expect(
            """
            @Model \(modifiers) class Counter {
                var count = 0
                init() {}
            }
            """,
            expands: """
                \(modifiers) class Counter {
                    var count {
                        @storageRestrictions(initializes: _count, accesses: _$backingData)
                        init(initialValue) {
                            _$backingData.setInitialValue(initialValue, forKey: "count", at: 0)
                            _count = OpenSwiftData.PersistedPropertyMarker()
                        }
                        get {
                            access(keyPath: \\.count)
                            return _$backingData.value(forKey: "count", at: 0)
                        }
                        set {
                            withMutation(keyPath: \\.count) {
                                _$backingData.setValue(newValue, forKey: "count", at: 0)
                            }
                        }
                    }

                    private var _count: OpenSwiftData.PersistedPropertyMarker
                    init() {}

                \(generated("Counter", metadata: """
                            [
                            OpenSwiftData.Schema.PropertyMetadata(name: "count", keyPath: \\Counter.count, defaultValue: 0, metadata: nil)
                            ]
                    """, markers: ["count"], isolation: isolation))
                """, line: line)
    }

    @Test func aPropertyWhoseTypeIsInferredIsPersistedToo() {
        // As Apple's samples write a to-many: `var animals = [Animal]()`; the accessors need no written type.
        expectCounter(modifiers: "final")
    }

    /// A class declared `nonisolated` (in a target whose default isolation is the main actor) conforms in
    /// `nonisolated` extensions, which would otherwise be on the main actor with their conformances.
    @Test func aNonisolatedClassConformsInNonisolatedExtensions() {
        expectCounter(modifiers: "nonisolated final", isolation: "nonisolated ")
    }

    @Test func aSubclassKeepsItsOwnPropertiesAfterItsSuperclasses() {
        // Recognized by its `super.init` call: its values wait in its own backing data until the model's is asked for,
        // at positions after the superclass's properties; no conformances of its own (it inherits them).
        expect(
            """
            @Model final class Truck: Vehicle {
                var load: Double
                init(load: Double) {
                    self.load = load
                    super.init(name: "truck")
                }
            }
            """,
            expands: """
                final class Truck: Vehicle {
                    var load: Double {
                        @storageRestrictions(initializes: _load, accesses: Truck_$backingData)
                        init(initialValue) {
                            Truck_$backingData.setInitialValue(initialValue, forKey: "load", at: Truck.Truck_$offset + 0)
                            _load = OpenSwiftData.PersistedPropertyMarker()
                        }
                        get {
                            _$observationRegistrar.access(self, keyPath: \\Truck.load)
                            return Truck_$backingData.value(forKey: "load", at: Truck.Truck_$offset + 0)
                        }
                        set {
                            _$observationRegistrar.withMutation(of: self, keyPath: \\Truck.load) {
                                Truck_$backingData.setValue(newValue, forKey: "load", at: Truck.Truck_$offset + 0)
                            }
                        }
                    }

                    private var _load: OpenSwiftData.PersistedPropertyMarker
                    init(load: Double) {
                        self.load = load
                        super.init(name: "truck")
                    }

                    private var Truck_$backingData: OpenSwiftData.ModelBackingData = OpenSwiftData.ModelBackingData(propertyCount: Truck.Truck_$offset + 1)

                    private static let Truck_$offset: Int = Vehicle.schemaMetadata.count

                    public override var persistentBackingData: OpenSwiftData.ModelBackingData {
                        get {
                            let base = super.persistentBackingData
                            if base !== Truck_$backingData {
                                base.adopt(Truck_$backingData, from: Truck.Truck_$offset, to: Truck.Truck_$offset + 1)
                                Truck_$backingData = base
                            }
                            return base
                        }
                        set {
                            super.persistentBackingData = newValue
                            Truck_$backingData = newValue
                        }
                    }

                    public class func Truck_$metadata<Sub: Truck>(_ type: Sub.Type) -> [OpenSwiftData.Schema.PropertyMetadata] {
                        Vehicle_$metadata(type) + [
                        OpenSwiftData.Schema.PropertyMetadata(name: "load", keyPath: \\Sub.load, defaultValue: nil, metadata: nil)
                        ]
                    }

                    public override class var schemaMetadata: [OpenSwiftData.Schema.PropertyMetadata] {
                        Truck_$metadata(Truck.self)
                    }

                    public required init(backingData: OpenSwiftData.ModelBackingData) {
                        Truck_$backingData = backingData
                        _load = OpenSwiftData.PersistedPropertyMarker()
                        super.init(backingData: backingData)
                    }
                }
                """)
    }

    @Test func onlyClassesCanBeModels() {
        expect(
            "@Model struct Point { var x: Int }",
            expands: "struct Point { var x: Int \n}",
            diagnostics: [DiagnosticSpec(message: "@Model applies to classes only", line: 1, column: 1)])
    }

    @Test func aPersistedPropertyWithoutItsPositionIsAnError() {
        expect(
            "struct Point {\n    @PersistedProperty var x: Int\n}",
            expands: "struct Point {\n    var x: Int\n\n    private var _x: OpenSwiftData.PersistedPropertyMarker\n}",
            diagnostics: [
                DiagnosticSpec(
                    message: "@PersistedProperty 'x' needs its position among the persisted properties, which @Model gives it", line: 2,
                    column: 5)
            ])
    }

    @Test func uniqueAndIndexBecomeStaticKeyPathGroups() {
        expect(
            """
            #Unique<Person>([\\.email], [\\.givenName, \\.familyName])
            #Index<Person>([\\.familyName])
            """,
            expands: """
                public static var uniquenessConstraints: [[AnyKeyPath]] {
                    let groups: [[PartialKeyPath<Person>]] = [[\\.email], [\\.givenName, \\.familyName]]
                    return groups
                }
                public static var indexes: [[AnyKeyPath]] {
                    let groups: [[PartialKeyPath<Person>]] = [[\\.familyName]]
                    return groups
                }
                """)
    }

    @Test func aModelActorGetsAContainerAnExecutorAndAnInitializer() {
        expect(
            "@ModelActor actor Importer {\n}",
            expands: """
                actor Importer {

                    public nonisolated let modelExecutor: any OpenSwiftData.ModelExecutor

                    public nonisolated let modelContainer: OpenSwiftData.ModelContainer

                    public init(modelContainer: OpenSwiftData.ModelContainer) {
                        self.modelExecutor = OpenSwiftData.DefaultSerialModelExecutor(modelContext: OpenSwiftData.ModelContext(modelContainer))
                        self.modelContainer = modelContainer
                    }

                    public nonisolated var unownedExecutor: UnownedSerialExecutor {
                        (modelExecutor as! OpenSwiftData.DefaultSerialModelExecutor).asUnownedSerialExecutor()
                    }
                }

                extension Importer: OpenSwiftData.ModelActor {
                }
                """)
        expect(
            "@ModelActor class Importer {}", expands: "class Importer {}",
            diagnostics: [DiagnosticSpec(message: "@ModelActor applies to actors only", line: 1, column: 1)])
    }
}
