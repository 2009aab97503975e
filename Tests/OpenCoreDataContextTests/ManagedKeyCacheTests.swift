import Foundation
import OpenCoreDataModel
import Testing
import _TestSupport

@testable import OpenCoreDataContext

/// A generic subclass used only here: whether its key paths are made once or anew on each access depends on the build.
final class CountedBox<Tag>: NSManagedObject {
    @Managed var label: String?

    var labelSite: ManagedKeyNames.Site { _label.site }
}

@Suite struct ManagedKeyCacheTests {
    /// However Swift makes the property's key paths, the cache keeps at most a few identities per declaration and
    /// every access still finds the key.
    @Test func aDeclarationCachesBoundedIdentitiesAndAlwaysFindsItsKey() throws {
        let model = try NSManagedObjectModel {
            Entity("A", managedObjectClass: CountedBox<Int>.self) { Attribute("label", .string) }
            Entity("B", managedObjectClass: CountedBox<String>.self) { Attribute("label", .string) }
        }
        let stack = try TestStack(model: model, inMemory: true)
        let context = stack.context()
        var site: ManagedKeyNames.Site?
        for i in 0..<200 {
            let a = CountedBox<Int>(entity: try context.entity(named: "A"), insertInto: context)
            let b = CountedBox<String>(entity: try context.entity(named: "B"), insertInto: context)
            a.label = "a\(i)"
            b.label = "b\(i)"
            #expect(a.label == "a\(i)" && b.label == "b\(i)")
            site = a.labelSite
        }
        let identities = ManagedKeyNames.identities(at: try #require(site))
        #expect(identities >= 1 && identities <= ManagedKeyNames.identitiesPerSite, "\(identities) identities cached")
    }
}
