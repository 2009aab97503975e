import SwiftCompilerPlugin
import SwiftSyntaxMacros

@main
struct OpenSwiftDataMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [
        ModelMacro.self, PersistedPropertyMacro.self, MarkerMacro.self, ModelActorMacro.self, KeyPathGroupsMacro.self,
    ]
}
