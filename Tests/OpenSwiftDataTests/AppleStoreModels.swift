// `@Model` classes for stores Apple's Core Data wrote (in `../shared/corpus/apple-stores`), each class written from
// the Xcode model beside its store as SwiftData maps a Swift class to an entity: the class's name is the entity's, each
// stored property an attribute of the same name (optional when its type is), a to-many array a relationship.
// SwiftData's own stores use this same layout (a SwiftData app adopting a Core Data store declares such classes), so
// these are the nearest public stand-ins for stores SwiftData wrote on iOS.
import Foundation
import OpenSwiftData

/// CoreDataPlus's `SampleModel3` (version 1): `User`, a name and an optional pet's name.
@Model
final class User {
    var name: String
    var petName: String?

    init(name: String, petName: String? = nil) {
        self.name = name
        self.petName = petName
    }
}

/// Big Nerd Ranch's `TestModel`: authors and books, many to many.
@Model
final class Author {
    var firstName: String?
    var lastName: String?
    @Relationship(inverse: \Book.authors) var books: [Book] = []

    init(firstName: String?, lastName: String?) {
        self.firstName = firstName
        self.lastName = lastName
    }
}

@Model
final class Book {
    var title: String?
    var authors: [Author] = []

    init(title: String?) { self.title = title }
}

/// jeffreybergier's migration example, version 2.0.0: the attribute renamed from `v1_2_0_name`.
@Model
final class BasicEntity {
    @Attribute(originalName: "v1_2_0_name") var v2_0_0_name: String?

    init(name: String?) { v2_0_0_name = name }
}

/// DuckDuckGo's `SyncMetadata` (version 3): settings and features, each unique by its key, with a fetch index on it.
@Model
final class SyncableSettingsMetadata {
    #Unique<SyncableSettingsMetadata>([\.key])
    #Index<SyncableSettingsMetadata>([\.key])

    var key: String
    var lastModified: Date?

    init(key: String, lastModified: Date? = nil) {
        self.key = key
        self.lastModified = lastModified
    }
}

@Model
final class SyncFeatureEntity {
    #Unique<SyncFeatureEntity>([\.name])
    #Index<SyncFeatureEntity>([\.name])

    var lastModified: String?
    var name: String
    var state: String?

    init(name: String, state: String? = nil, lastModified: String? = nil) {
        self.name = name
        self.state = state
        self.lastModified = lastModified
    }
}
