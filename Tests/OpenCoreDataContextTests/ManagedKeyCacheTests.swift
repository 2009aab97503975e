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

/// Explicit keys of one letter and of non-ASCII text.
final class Keyed: NSManagedObject {
    @Managed("x") var horizontal: Int64
    @Managed("größe") var size: String?
}

/// Two typed properties declared in the opposite order to the entity's attributes.
final class Labelled: NSManagedObject {
    @Managed var note: String?
    @Managed var label: String?

    static var noteStorage: AnyKeyPath { \Labelled._note }
    static var labelStorage: AnyKeyPath { \Labelled._label }
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

    /// Once a typed property is used, its entity remembers the property's index under the storage key path, and
    /// every later access (the lock-free path) reads and writes that property and no other.
    @Test func anEntityRemembersEachTypedPropertysIndex() throws {
        let model = try NSManagedObjectModel {
            Entity("Labelled", managedObjectClass: Labelled.self) {
                Attribute("label", .string)
                Attribute("note", .string)
            }
        }
        let stack = try TestStack(model: model, inMemory: true)
        let context = stack.context()
        let entity = try context.entity(named: "Labelled")
        #expect(entity._accessorIndex(for: Labelled.labelStorage) == nil)
        for i in 0..<20 {
            let object = Labelled(entity: entity, insertInto: context)
            object.label = "label \(i)"
            object.note = "note \(i)"
            #expect(object.value(forKey: "label") as? String == "label \(i)")
            #expect(object.value(forKey: "note") as? String == "note \(i)")
            #expect(object.label == "label \(i)" && object.note == "note \(i)")
        }
        #expect(entity._accessorIndex(for: Labelled.labelStorage) == entity.propertyIndex(named: "label"))
        #expect(entity._accessorIndex(for: Labelled.noteStorage) == entity.propertyIndex(named: "note"))
        try context.save()
        let fetched = try context.objects("Labelled").compactMap { $0 as? Labelled }
        #expect(Set(fetched.compactMap(\.note)) == Set((0..<20).map { "note \($0)" }))
    }

    @Test func theAccessorIndexCacheStopsAtItsLimitAndKeepsWhatItHolds() {
        let cache = _AccessorIndexCache()
        let keys = (0...(_AccessorIndexCache.limit)).map { _ in NSObject() }
        for (i, key) in keys.enumerated() {
            #expect(cache.remember(i, for: key) == (i < _AccessorIndexCache.limit), "key \(i)")
        }
        #expect(cache.count == _AccessorIndexCache.limit)
        #expect(cache.remember(99, for: keys[3]), "a key already held stays held")
        for (i, key) in keys.enumerated() {
            #expect(cache.index(for: key) == (i < _AccessorIndexCache.limit ? i : nil), "key \(i)")
        }
    }

    /// Readers take no lock while a writer publishes new tables: each lookup sees nothing or the right index.
    @Test func readersSeeNothingOrTheRightIndexWhileTheCacheGrows() async {
        let cache = _AccessorIndexCache()
        let keys = (0..<200).map { _ in NSObject() }
        let boxed = UncheckedBox(keys)
        let wrong = await withTaskGroup(of: Int.self) { group in
            group.addTask {
                for (i, key) in boxed.value.enumerated() { cache.remember(i, for: key) }
                return 0
            }
            for reader in 0..<3 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<200 {
                        for (i, key) in boxed.value.enumerated() where (i + round + reader) % 7 == 0 {
                            if let index = cache.index(for: key), index != i { wrong += 1 }
                        }
                    }
                    return wrong
                }
            }
            return await group.reduce(0, +)
        }
        #expect(wrong == 0)
        #expect(keys.indices.allSatisfy { cache.index(for: keys[$0]) == $0 })
    }

    /// An explicit key is kept as one word pointing at the literal (or holding a one-scalar literal), and reads
    /// back whole; the wrapper holds nothing to release.
    @Test func explicitKeysOfAnyTextAreFoundAndTheWrapperStaysSmall() throws {
        let model = try NSManagedObjectModel {
            Entity("Keyed", managedObjectClass: Keyed.self) {
                Attribute("x", .integer64, default: 0)
                Attribute("größe", .string)
            }
        }
        let context = try TestStack(model: model, inMemory: true).context()
        let object = Keyed(entity: try context.entity(named: "Keyed"), insertInto: context)
        object.horizontal = 42
        object.size = "XL"
        #expect(object.value(forKey: "x") as? Int64 == 42)
        #expect(object.value(forKey: "größe") as? String == "XL")
        #expect(object.horizontal == 42 && object.size == "XL")
        #expect(ManagedKeyNames.key(from: ManagedKeyNames.word(for: "größe")) == "größe")
        #expect(ManagedKeyNames.key(from: ManagedKeyNames.word(for: nil)) == nil)
        #expect(MemoryLayout<Managed<String?>>.size == 3 * MemoryLayout<UInt>.size)
        #expect(_isPOD(Managed<String?>.self), "nothing to release when an object goes")
    }
}

/// Hands non-Sendable test objects to tasks that only compare their identities.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
