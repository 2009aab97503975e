import Foundation
import GRDB
import OpenCoreData
import OpenCoreDataModel
import Testing
import _TestSupport

/// Transformable attributes: a value in memory, the bytes its `ValueTransformer` makes in the store.
@Suite struct TransformableAttributeTests {
    let dir = TemporaryDirectory()

    func model(_ attributes: String) throws -> NSManagedObjectModel { try dir.noteModel(attributes) }

    /// Saves `value` in `key` of a new note, and reads it back in a fresh context.
    func roundTrip(_ value: Any, key: String, stack: TestStack) throws -> Any? {
        let context = stack.context()
        try context.performAndWait {
            let note = try context.make("Note", ["title": "t"])
            note.setValue(value, forKey: key)
            try context.save()
        }
        let reader = stack.context()
        return try reader.performAndWait {
            let notes = try reader.objects("Note", "title == 't'")
            defer { for note in notes { reader.delete(note) }; try? reader.save() }
            return try notes.first?.checkedValue(forKey: key)
        }
    }

    @Test func foundationValuesRoundTripThroughTheDefaultTransformers() throws {
        let model = try model(
            """
            <attribute name="secure" optional="YES" attributeType="Transformable" valueTransformerName="NSSecureUnarchiveFromData" customClassName="[String]"/>
            <attribute name="keyed" optional="YES" attributeType="Transformable"/>
            """)
        #expect(model.entitiesByName["Note"]?.attributesByName["secure"]?.valueTransformerName == "NSSecureUnarchiveFromData")
        #expect(model.entitiesByName["Note"]?.attributesByName["secure"]?.attributeValueClassName == "[String]")
        let stack = try TestStack(model: model)
        let date = Date(timeIntervalSinceReferenceDate: 123_456.5)
        let uuid = UUID()
        for key in ["secure", "keyed"] {
            #expect(try roundTrip(["a", "b", "ç"], key: key, stack: stack) as? [String] == ["a", "b", "ç"])
            let dictionary = try #require(
                try roundTrip(["n": 3, "d": 2.5, "t": true, "s": "x"] as [String: Any], key: key, stack: stack) as? [String: Any])
            #expect(
                dictionary["n"] as? Int == 3 && dictionary["d"] as? Double == 2.5 && dictionary["t"] as? Bool == true
                    && dictionary["s"] as? String == "x")
            #expect(try roundTrip(Set(["x", "y"]), key: key, stack: stack) as? Set<String> == ["x", "y"])
            #expect(try roundTrip(date, key: key, stack: stack) as? Date == date)
            #expect(try roundTrip(uuid, key: key, stack: stack) as? UUID == uuid)
            #expect(
                try roundTrip(URL(string: "https://example.org/a?b=1")!, key: key, stack: stack) as? URL
                    == URL(string: "https://example.org/a?b=1"))
            #expect(
                try roundTrip(Data([0, 1, 255]), key: key, stack: stack) as? Data == Data([0, 1, 255]), "Data is archived, not stored raw")
            #expect(try roundTrip(Decimal(string: "-1234.5678")!, key: key, stack: stack) as? Decimal == Decimal(string: "-1234.5678"))
            let nested = try #require(try roundTrip([["k": [1, 2]], NSNull(), "s"] as [Any], key: key, stack: stack) as? [Any])
            #expect((nested[0] as? [String: [Int]])?["k"] == [1, 2] && nested[1] is NSNull && nested[2] as? String == "s")
        }
    }

    @Test func archivesAreFoundationsKeyedArchivesBothWays() throws {
        // Ours read by Foundation's unarchiver (which follows Apple's format), and Foundation's read by ours.
        let transformer = try #require(ValueTransformer(forName: .secureUnarchiveFromDataTransformerName))
        let value: [String: Any] = ["list": ["a", "b"], "when": Date(timeIntervalSinceReferenceDate: 5), "id": UUID(), "n": 7]
        let ours = try #require(transformer.reverseTransformedValue(value) as? Data)
        let classes: [AnyClass] = [NSDictionary.self, NSArray.self, NSString.self, NSNumber.self, NSDate.self, NSUUID.self]
        let read = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClasses: classes, from: ours) as? NSDictionary)
        #expect((read["list"] as? [String]) == ["a", "b"] && (read["n"] as? Int) == 7)
        #expect((read["when"] as? Date) == Date(timeIntervalSinceReferenceDate: 5) && (read["id"] as? UUID) == value["id"] as? UUID)

        let theirs = try NSKeyedArchiver.archivedData(
            withRootObject: NSMutableArray(array: ["x", NSNumber(value: 2.5), NSDate(timeIntervalSinceReferenceDate: 9)]),
            requiringSecureCoding: true)
        let back = try #require(transformer.transformedValue(theirs) as? [Any])
        #expect(back[0] as? String == "x" && back[1] as? Double == 2.5 && back[2] as? Date == Date(timeIntervalSinceReferenceDate: 9))
    }

    /// An `NSPredicate` archived in a transformable attribute (a saved search), as Apple's archiver lays it out.
    static func archivedPredicate() -> Data {
        var encoder = KeyedArchiveEncoder()
        func object(_ chain: [String], _ fields: [String: PropertyListValue]) -> Int {
            let index = encoder.reserve()
            encoder.set(index, chain + ["NSObject"], fields)
            return index
        }
        let key = object(
            ["NSKeyPathSpecifierExpression", "NSExpression"],
            ["NSExpressionType": .integer(3), "NSKeyPath": .uid(encoder.add(.string("title")))])
        let text = object(
            ["NSConstantValueExpression", "NSExpression"],
            ["NSExpressionType": .integer(0), "NSConstantValue": .uid(encoder.add(.string("milk")))])
        let op = object(
            ["NSStringPredicateOperator", "NSPredicateOperator"],
            ["NSOperatorType": .integer(99), "NSModifier": .integer(0), "NSOptions": .integer(3)])
        let root = object(
            ["NSComparisonPredicate", "NSPredicate"],
            ["NSLeftExpression": .uid(key), "NSRightExpression": .uid(text), "NSPredicateOperator": .uid(op)])
        return encoder.finish(root: root)
    }

    /// Archived predicates read back as `FetchPredicate`s (Foundation on Linux cannot unarchive them), where the
    /// transformer allows them: the legacy keyed transformer of models without a transformer name does; the secure
    /// default refuses them by name, as Apple's does.
    @Test func archivedPredicatesReadBackWhereTheTransformerAllowsThem() throws {
        let model = try model(
            #"<attribute name="rule" optional="YES" attributeType="Transformable"/>"#
                + #"<attribute name="secureRule" optional="YES" attributeType="Transformable" valueTransformerName="NSSecureUnarchiveFromData"/>"#
        )
        let stack = try TestStack(model: model)
        let writer = stack.context()
        try writer.performAndWait {
            try writer.make("Note", ["title": "t"])
            try writer.save()
        }
        let archive = Self.archivedPredicate()
        try DatabaseQueue(path: stack.storeURL.path).write { db in
            try db.execute(sql: "UPDATE ZNOTE SET ZRULE = ?, ZSECURERULE = ?", arguments: [archive, archive])
        }
        let context = stack.context()
        try context.performAndWait {
            let note = try #require(try context.objects("Note").first)
            let rule = try #require(try note.checkedValue(forKey: "rule") as? FetchPredicate)
            #expect(rule == (try FetchPredicate(format: "title CONTAINS[cd] 'milk'")))
            #expect(try rule.evaluate(with: ["title": "Oat MILK"]))
            let error = #expect(throws: CoreDataError.self) { try note.checkedValue(forKey: "secureRule") }
            #expect(
                error?.code == .valueTransformation && error?.message.contains("not among the allowed classes") == true,
                "\(error?.message ?? "")")
            // A predicate is stored where it reads back (archived as Apple's archiver writes it) ...
            note.setValue(try FetchPredicate(format: "ANY tags.name LIKE[c] %@ AND priority >= 2", "urgent*"), forKey: "rule")
            // ... and refused by name where the transformer would not allow it back, the context keeping its changes.
            note.setValue(try FetchPredicate(format: "title == 'x'"), forKey: "secureRule")
            let refused = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(
                refused?.code == .valueTransformation && refused?.message.contains("Note.secureRule") == true
                    && refused?.message.contains("does not allow NSPredicate") == true, "\(refused?.message ?? "")")
            #expect(context.hasChanges)
            note.setValue(nil, forKey: "secureRule")
            try context.save()
        }
        let reader = stack.context()
        try reader.performAndWait {
            let note = try #require(try reader.objects("Note").first)
            let rule = try #require(try note.checkedValue(forKey: "rule") as? FetchPredicate)
            #expect(rule == (try FetchPredicate(format: "ANY tags.name LIKE[c] 'urgent*' AND priority >= 2")), "\(rule)")
        }
        // The stored bytes are an archive of Apple's predicate classes, with the string operator's options as `NSFlags`.
        let stored = try #require(
            try DatabaseQueue(path: stack.storeURL.path).read { db in try Data.fetchOne(db, sql: "SELECT ZRULE FROM ZNOTE") })
        let written = try KeyedArchive(data: stored)
        #expect(try written.classes(of: written.root) == ["NSCompoundPredicate", "NSPredicate", "NSObject"])
        let classes = try Set(written.allClassChains().map { $0[0] })
        #expect(
            classes.isSuperset(of: [
                "NSComparisonPredicate", "NSLikePredicateOperator", "NSComparisonPredicateOperator", "NSKeyPathExpression",
            ]))
    }

    @Test func aSecureTransformerRefusesClassesItDoesNotAllowWithoutStopping() throws {
        final class OnlyStrings: NSSecureUnarchiveFromDataTransformer, @unchecked Sendable {
            override class var allowedTopLevelClasses: [AnyClass] { [NSString.self] }
        }
        let array = try #require(
            ValueTransformer(forName: .secureUnarchiveFromDataTransformerName)?.reverseTransformedValue(["a"]) as? Data)
        #expect(OnlyStrings().transformedValue(array) == nil, "an NSArray is not allowed")
        #expect(OnlyStrings().transformedValue(Data("not an archive".utf8)) == nil)
        ValueTransformer.setValueTransformer(OnlyStrings(), forName: NSValueTransformerName("OnlyStringsTest"))
        defer { ValueTransformer.setValueTransformer(nil, forName: NSValueTransformerName("OnlyStringsTest")) }
        let model = try model(
            #"<attribute name="word" optional="YES" attributeType="Transformable" valueTransformerName="OnlyStringsTest"/>"#)
        let stack = try TestStack(model: model)
        #expect(try roundTrip("hello", key: "word", stack: stack) as? String == "hello")
        // An array written under another transformer's rules, read under this one's: a named error.
        let writer = stack.context()
        try writer.performAndWait {
            try writer.make("Note", ["title": "t", "word": "kept"])
            try writer.save()
        }
        try DatabaseQueue(path: stack.storeURL.path).write { db in try db.execute(sql: "UPDATE ZNOTE SET ZWORD = ?", arguments: [array]) }
        let context = stack.context()
        try context.performAndWait {
            let note = try #require(try context.objects("Note").first)
            let error = #expect(throws: CoreDataError.self) { try note.checkedValue(forKey: "word") }
            #expect(error?.code == .valueTransformation)
            #expect(error?.message.contains("Note.word") == true && error?.message.contains("OnlyStringsTest") == true)
            #expect(error?.message.contains("NSArray") == true, "\(error?.message ?? "")")
        }
    }

    final class Color: Equatable, @unchecked Sendable {
        let hex: String
        init(hex: String) { self.hex = hex }
        static func == (a: Color, b: Color) -> Bool { a.hex == b.hex }
    }

    /// A transformer as Core Data apps write one: forward to `Data`, reverse to the value.
    final class ColorTransformer: ValueTransformer, @unchecked Sendable {
        override class func transformedValueClass() -> AnyClass { NSData.self }
        override class func allowsReverseTransformation() -> Bool { true }
        override func transformedValue(_ value: Any?) -> Any? { (value as? Color).map { Data($0.hex.utf8) } }
        override func reverseTransformedValue(_ value: Any?) -> Any? {
            (value as? Data).map { Color(hex: String(decoding: $0, as: UTF8.self)) }
        }
    }

    @Test func aCustomTransformerNamedInTheModelStoresWhatItMakes() throws {
        let name = NSValueTransformerName("ColorTransformerTest")
        ValueTransformer.setValueTransformer(ColorTransformer(), forName: name)
        defer { ValueTransformer.setValueTransformer(nil, forName: name) }
        #expect(ValueTransformer.valueTransformerNames().contains(name))
        #expect(ValueTransformer(forName: name) is ColorTransformer)
        let model = try model(
            #"<attribute name="color" optional="YES" attributeType="Transformable" valueTransformerName="ColorTransformerTest" customClassName="Color"/>"#
        )
        let stack = try TestStack(model: model)
        let read = try roundTrip(Color(hex: "#ff8800"), key: "color", stack: stack) as? Color
        #expect(read == Color(hex: "#ff8800"))
        let context = stack.context()
        try context.performAndWait {
            let note = try context.make("Note", ["title": "c", "color": Color(hex: "#123456")])
            try context.save()
            let stored = try DatabaseQueue(path: stack.storeURL.path).read { db in
                try Data.fetchOne(db, sql: "SELECT ZCOLOR FROM ZNOTE WHERE ZTITLE = 'c'")
            }
            #expect(stored == Data("#123456".utf8), "the column holds exactly the transformer's bytes")
            #expect(
                try context.objects("Note", "color != nil").count == 1 && note.value(forKey: "color") as? Color == Color(hex: "#123456"))
            #expect(try context.objects("Note", "color == nil").isEmpty)
        }
    }

    @Test func anUnregisteredTransformerLetsTheStoreOpenAndFailsReadsAndSavesByName() throws {
        let name = NSValueTransformerName("LateTransformerTest")
        let model = try model(
            #"<attribute name="color" optional="YES" attributeType="Transformable" valueTransformerName="LateTransformerTest"/>"#)
        let stack = try TestStack(model: model)  // opens: the transformer is needed only for values
        let context = stack.context()
        try context.performAndWait {
            let note = try context.make("Note", ["title": "x", "color": Color(hex: "#000000")])
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.code == .valueTransformation)
            #expect(error?.message.contains("'Note.color'") == true && error?.message.contains("LateTransformerTest") == true)
            #expect(note.value(forKey: "color") as? Color == Color(hex: "#000000"), "the value stays for a later save")
            ValueTransformer.setValueTransformer(ColorTransformer(), forName: name)
            try context.save()
            ValueTransformer.setValueTransformer(nil, forName: name)
            context.refreshAllObjects()
            let readError = #expect(throws: CoreDataError.self) { try note.checkedValue(forKey: "color") }
            #expect(readError?.message.contains("LateTransformerTest") == true && readError?.message.contains("not registered") == true)
            #expect(note.string("title") == "x", "other attributes read")
        }
    }

    struct Address: Codable, Equatable {
        var street: String
        var floors: [Int]
    }

    @Test func aCodableTransformerStoresSwiftValuesAsJSON() throws {
        let name = NSValueTransformerName("AddressTransformerTest")
        CodableValueTransformer<Address>.register(as: name)
        defer { ValueTransformer.setValueTransformer(nil, forName: name) }
        let model = try model(
            #"<attribute name="address" optional="YES" attributeType="Transformable" valueTransformerName="AddressTransformerTest"/>"#)
        let stack = try TestStack(model: model)
        let address = Address(street: "Main St", floors: [1, 2])
        #expect(try roundTrip(address, key: "address", stack: stack) as? Address == address)
        let context = stack.context()
        try context.performAndWait {
            try context.make("Note", ["title": "a", "address": address])
            try context.save()
            let stored = try DatabaseQueue(path: stack.storeURL.path).read { db in try Data.fetchOne(db, sql: "SELECT ZADDRESS FROM ZNOTE")
            }
            #expect(stored.map { String(decoding: $0, as: UTF8.self) } == #"{"floors":[1,2],"street":"Main St"}"#)
            try context.make("Note", ["title": "b", "address": "not an address"])
            let error = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(error?.message.contains("String") == true && error?.message.contains("Address") == true)
        }
    }

    @Test func theBuilderDeclaresTransformableAttributes() throws {
        let model = try NSManagedObjectModel {
            Entity("Note") {
                Attribute("title", .string)
                Attribute("tags", .transformable, transformer: .secureUnarchiveFromDataTransformerName)
            }
        }
        let stack = try TestStack(model: model)
        #expect(try roundTrip(["swift", "linux"], key: "tags", stack: stack) as? [String] == ["swift", "linux"])
    }
}

/// Composite attributes as Xcode writes them (`<composite>` and `attributeType="Composite"`): a dictionary of their
/// elements, checked when set, stored and read back (the model is `CompositeColumnTests.placeModel()`).
@Suite struct CompositeAttributeTests {
    @Test func compositesHoldDictionariesOfTheirElements() throws {
        let model = try CompositeColumnTests().placeModel()
        let address = try #require(model.entitiesByName["Place"]?.attributesByName["address"])
        #expect(address.attributeType == .compositeAttributeType && address.elements.map(\.name) == ["street", "number", "geo"])
        #expect(address.elements.last?.elements.map(\.name) == ["lat", "checked"])
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            let place = try context.make("Place", ["name": "home", "address": ["street": "Main St", "number": 12, "geo": ["lat": 48.5]]])
            let wrong = #expect(throws: CoreDataError.self) { try place.setCheckedValue(["city": "Paris"], forKey: "address") }
            #expect(wrong?.message.contains("no 'city'") == true, "\(wrong?.message ?? "")")
            #expect(throws: CoreDataError.self) { try place.setCheckedValue(["number": "twelve"], forKey: "address") }
            try context.save()
        }
        let reader = stack.context()
        let read = try reader.performAndWait { try reader.objects("Place").first?.value(forKey: "address") as? [String: Any] }
        #expect(read?["street"] as? String == "Main St" && read?["number"] as? Int == 12)
        #expect((read?["geo"] as? [String: Any])?["lat"] as? Double == 48.5)
    }
}
