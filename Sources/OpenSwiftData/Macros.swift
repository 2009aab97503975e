@_exported import Foundation
@_exported import Observation
// Foundation's `UndoManager`, which Foundation on Linux lacks (`ModelContext.undoManager` hands one out).
@_exported public import class OpenCoreDataContext.UndoManager

/// Makes a class a persistent model: its stored properties are saved, fetched and observed, as SwiftData's `@Model`
/// does.
///
/// For example:
/// ```swift
/// @Model final class Trip {
///     var name: String
///     var startDate: Date
///     @Attribute(.unique) var code: String
///     @Transient var isSelected = false
///
///     init(name: String, startDate: Date, code: String) {
///         self.name = name
///         self.startDate = startDate
///         self.code = code
///     }
/// }
/// ```
/// Each stored `var` (its type written or inferred from its initial value) is persisted unless it is `@Transient`
/// (which needs an initial value, kept after a fetch); the class needs an initializer of its own, as with SwiftData.
///
/// A model class may subclass another (`@Model class BusinessTrip: Trip`, as SwiftData allows from iOS 26): its entity
/// is a subentity of the superclass's, and a fetch of the superclass returns subclass models for their rows. The
/// subclass is recognized by its initializer's `super.init` call.
// Fixed names (with `arbitrary`, the compiler expands the macro for every name it looks up in the class, and then
// finds the class's own operators twice: a model declaring `Comparable` failed to conform). A subclass's members are
// named after the class (`Truck_$backingData`), as a suffix.
@attached(
    member,
    names: named(_$backingData), named(persistentBackingData), named(schemaMetadata), named(init), named(_$observationRegistrar),
    named(access), named(withMutation), suffixed(_$metadata), suffixed(_$backingData), suffixed(_$offset))
@attached(memberAttribute)
@attached(extension, conformances: PersistentModel, Observable)
public macro Model() = #externalMacro(module: "OpenSwiftDataMacros", type: "ModelMacro")

/// The accessors of a persisted property (`@Model` adds it to each one, with the property's position among the
/// persisted properties; you do not write it).
@attached(accessor, names: named(init), named(get), named(set))
@attached(peer, names: prefixed(_))
public macro PersistedProperty(_ index: Int) = #externalMacro(module: "OpenSwiftDataMacros", type: "PersistedPropertyMacro")

/// The accessors of a persisted property a model subclass declares (`@Model` adds it, with the property's position
/// among the subclass's own persisted properties and the subclass's name; you do not write it).
@attached(accessor, names: named(init), named(get), named(set))
@attached(peer, names: prefixed(_))
public macro PersistedProperty(_ index: Int, model: String) =
    #externalMacro(module: "OpenSwiftDataMacros", type: "PersistedPropertyMacro")

/// Options of a persisted attribute: `.unique` (inserting a model whose value equals a stored one's updates that one),
/// `originalName:` (the name it had in the previous version of the schema), and the others SwiftData names.
///
/// For example:
/// ```swift
/// @Attribute(.unique) var code: String
/// @Attribute(originalName: "start_date") var startDate: Date
/// ```
@attached(peer)
public macro Attribute(_ options: Schema.Attribute.Option..., originalName: String? = nil, hashModifier: String? = nil) =
    #externalMacro(module: "OpenSwiftDataMacros", type: "MarkerMacro")

/// Options of a relationship: its delete rule, the counts it allows, its inverse, its previous name.
///
/// For example:
/// ```swift
/// @Relationship(deleteRule: .cascade, inverse: \Stop.trip) var stops: [Stop] = []
/// ```
@attached(peer)
public macro Relationship(
    _ options: Schema.Relationship.Option..., deleteRule: Schema.Relationship.DeleteRule = .nullify, minimumModelCount: Int? = 0,
    maximumModelCount: Int? = 0, originalName: String? = nil, inverse: AnyKeyPath? = nil, hashModifier: String? = nil
) = #externalMacro(module: "OpenSwiftDataMacros", type: "MarkerMacro")

/// A stored property that is not persisted: it keeps its initial value in a model made by a fetch.
@attached(peer)
public macro Transient() = #externalMacro(module: "OpenSwiftDataMacros", type: "MarkerMacro")

/// Groups of properties whose values together are unique among a model's rows (inside the model class): inserting a
/// model whose values equal a stored row's updates that row, as with `@Attribute(.unique)`.
///
/// For example:
/// ```swift
/// @Model final class Person {
///     #Unique<Person>([\.email], [\.givenName, \.familyName])
///     …
/// }
/// ```
@freestanding(declaration, names: named(uniquenessConstraints))
public macro Unique<T>(_ constraints: [PartialKeyPath<T>]...) = #externalMacro(module: "OpenSwiftDataMacros", type: "KeyPathGroupsMacro")

/// Groups of properties the store keeps an index on (inside the model class), for fetches that filter or sort by them.
///
/// For example:
/// ```swift
/// @Model final class Person {
///     #Index<Person>([\.familyName], [\.familyName, \.givenName])
///     …
/// }
/// ```
@freestanding(declaration, names: named(indexes))
public macro Index<T>(_ indices: [PartialKeyPath<T>]...) = #externalMacro(module: "OpenSwiftDataMacros", type: "KeyPathGroupsMacro")

/// The empty stand-in `@Model` declares beside each persisted property (`_name`): initializing it is how the class's
/// initializer knows the property was set, while the value itself lives in the model's backing data.
public struct PersistedPropertyMarker: Sendable {
    /// The marker.
    public init() {}
}
