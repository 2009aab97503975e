import Foundation
import OpenCoreDataContext
import OpenCoreDataModel
import Testing
import _TestSupport

/// Every plain attribute type through a typed property, optional and not, and Swift types that differ from the
/// attribute's (a `Bool` on an integer, a `Float` on a double, an `Int` on a boolean).
final class TypedReading: NSManagedObject {
    @Managed var text: String?
    @Managed var plainText: String
    @Managed var short: Int16
    @Managed var medium: Int32
    @Managed var long: Int64
    @Managed var whole: Int
    @Managed var real: Double
    @Managed var single: Float
    @Managed var flag: Bool
    @Managed var date: Date?
    @Managed var plainDate: Date
    @Managed var decimal: Decimal?
    @Managed var uuid: UUID?
    @Managed var url: URL?
    @Managed var bytes: Data?
    @Managed var flagAsInt: Int  // a boolean attribute
    @Managed var countAsBool: Bool  // an integer 32 attribute
    @Managed var wholeAsDouble: Double  // an integer 64 attribute
    @Managed var optionalShort: Int16?

    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("TypedReading", managedObjectClass: TypedReading.self) {
                Attribute("text", .string)
                Attribute("plainText", .string)
                Attribute("short", .integer16)
                Attribute("medium", .integer32)
                Attribute("long", .integer64)
                Attribute("whole", .integer64)
                Attribute("real", .double)
                Attribute("single", .float)
                Attribute("flag", .boolean)
                Attribute("date", .date)
                Attribute("plainDate", .date)
                Attribute("decimal", .decimal)
                Attribute("uuid", .uuid)
                Attribute("url", .uri)
                Attribute("bytes", .binaryData)
                Attribute("flagAsInt", .boolean)
                Attribute("countAsBool", .integer32)
                Attribute("wholeAsDouble", .integer64)
                Attribute("optionalShort", .integer16)
            }
        }
    }

    /// Each typed property next to the same type made from `value(forKey:)`, as text (equal when they agree).
    func typedAndKeyed() -> [(key: String, typed: String, keyed: String)] {
        func pair<T: ManagedPropertyValue>(_ key: String, _ typed: T) -> (String, String, String) {
            (key, String(describing: typed), String(describing: T.fromManaged(value(forKey: key))))
        }
        return [
            pair("text", text), pair("plainText", plainText), pair("short", short), pair("medium", medium), pair("long", long),
            pair("whole", whole), pair("real", real), pair("single", single), pair("flag", flag), pair("date", date),
            pair("plainDate", plainDate), pair("decimal", decimal), pair("uuid", uuid), pair("url", url), pair("bytes", bytes),
            pair("flagAsInt", flagAsInt), pair("countAsBool", countAsBool), pair("wholeAsDouble", wholeAsDouble),
            pair("optionalShort", optionalShort),
        ].map { (key: $0.0, typed: $0.1, keyed: $0.2) }
    }
}

/// Typed getters read plain attributes as attribute values, without an `Any` (`attributeValueAsAccessor(at:)` and
/// `fromManagedAttribute`): what they read must be what `fromManaged(value(forKey:))` reads, whatever the object's state.
@Suite struct TypedReadTests {
    /// Random values for every attribute (nil for about a third of them), set by key.
    static func fill(_ object: TypedReading, _ random: inout SeededGenerator) {
        func maybe<T>(_ value: T) -> T? { Int.random(in: 0..<3, using: &random) == 0 ? nil : value }
        let values: [String: Any?] = [
            "text": maybe("t\(Int.random(in: 0..<1000, using: &random))"),
            "plainText": maybe("p\(Int.random(in: 0..<1000, using: &random))"),
            "short": maybe(Int16.random(in: .min ... .max, using: &random)),
            "medium": maybe(Int32.random(in: .min ... .max, using: &random)),
            "long": maybe(Int64.random(in: .min ... .max, using: &random)),
            "whole": maybe(Int64.random(in: -1_000_000...1_000_000, using: &random)),
            "real": maybe(Double.random(in: -1e6...1e6, using: &random)),
            "single": maybe(Float.random(in: -1e3...1e3, using: &random)),
            "flag": maybe(Bool.random(using: &random)),
            "date": maybe(Date(timeIntervalSinceReferenceDate: Double.random(in: -1e9...1e9, using: &random))),
            "plainDate": maybe(Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0..<1_000_000, using: &random)))),
            "decimal": maybe(Decimal(Int.random(in: -10_000...10_000, using: &random)) / 100),
            "uuid": maybe(UUID()),
            "url": maybe(URL(string: "https://example.com/\(Int.random(in: 0..<100, using: &random))")!),
            "bytes": maybe(Data((0..<Int.random(in: 0..<8, using: &random)).map { UInt8($0) })),
            "flagAsInt": maybe(Bool.random(using: &random)),
            "countAsBool": maybe(Int32.random(in: -3...3, using: &random)),
            "wholeAsDouble": maybe(Int64.random(in: -1_000_000...1_000_000, using: &random)),
            "optionalShort": maybe(Int16.random(in: -5...5, using: &random)),
        ]
        for (key, value) in values { object.setValue(value, forKey: key) }
    }

    static func expectAgreement(_ objects: [TypedReading], _ state: String, seed: UInt64) {
        for object in objects {
            for (key, typed, keyed) in object.typedAndKeyed() {
                #expect(typed == keyed, "\(state), \(key): typed \(typed), by key \(keyed) (seed \(seed))")
            }
        }
    }

    @Test func typedGettersReadWhatValueForKeyReadsInEveryState() throws {
        let seed = UInt64.random(in: 0..<UInt64.max)
        var random = SeededGenerator(seed: seed)
        let stack = try TestStack(model: try TypedReading.model())
        let writer = stack.context()
        let made = try writer.performAndWait {
            let objects = (0..<40).map { _ in TypedReading(context: writer) }
            for object in objects { Self.fill(object, &random) }
            Self.expectAgreement(objects, "inserted", seed: seed)
            try writer.save()
            Self.expectAgreement(objects, "saved", seed: seed)
            return objects.map(\.objectID)
        }
        // Read again in a new context: stored rows, read from the store.
        let reader = stack.context()
        try reader.performAndWait {
            let objects = try made.map { try reader.existingObject(with: $0) as! TypedReading }
            Self.expectAgreement(objects, "fetched", seed: seed)
            // Changed, not saved: pending values over stored ones.
            for object in objects.prefix(20) { Self.fill(object, &random) }
            Self.expectAgreement(objects, "changed", seed: seed)
        }
    }

    /// The values typed getters read are the values set, for a few exact ones (so that agreement above is not two
    /// paths agreeing on something wrong).
    @Test func typedGettersReadTheValuesSet() throws {
        let stack = try TestStack(model: try TypedReading.model())
        let context = stack.context()
        let id = try context.performAndWait {
            let object = TypedReading(context: context)
            (object.text, object.short, object.medium, object.long, object.real) = ("a", -7, 1 << 30, -(1 << 40), 2.5)
            (object.single, object.flag, object.flagAsInt, object.countAsBool) = (0.25, true, 1, true)
            object.setValue(Int64(12), forKey: "wholeAsDouble")  // a Double property reads an integer attribute
            object.decimal = Decimal(string: "12.34")
            try context.save()
            return object.objectID
        }
        let reader = stack.context()
        try reader.performAndWait {
            let object = try reader.existingObject(with: id) as! TypedReading
            #expect(object.text == "a")
            #expect(object.plainText == "", "a nil string reads as empty through a non-optional property")
            #expect(object.short == -7)
            #expect(object.medium == 1 << 30)
            #expect(object.long == -(1 << 40))
            #expect(object.real == 2.5)
            #expect(object.single == 0.25)
            #expect(object.flag)
            #expect(object.flagAsInt == 1)
            #expect(object.countAsBool)
            #expect(object.wholeAsDouble == 12)
            #expect(object.decimal == Decimal(string: "12.34"))
            #expect(object.date == nil)
            #expect(object.plainDate == Date(timeIntervalSinceReferenceDate: 0))
            #expect(object.optionalShort == nil)
            #expect(object.whole == 0)
        }
    }

    /// A fault whose row another context deleted reads nil (and zero) through typed getters, as `value(forKey:)` reads it.
    @Test func aFaultWhoseRowIsGoneReadsNil() throws {
        let stack = try TestStack(model: try TypedReading.model())
        let writer = stack.context()
        let id = try writer.performAndWait {
            let object = TypedReading(context: writer)
            (object.text, object.short) = ("gone", 3)
            try writer.save()
            return object.objectID
        }
        let reader = stack.context()
        let fault = reader.performAndWait { reader.object(with: id) as! TypedReading }
        try writer.performAndWait {
            writer.delete(try writer.existingObject(with: id))
            try writer.save()
        }
        reader.performAndWait {
            #expect(fault.text == nil)
            #expect(fault.short == 0)
            #expect(fault.value(forKey: "text") == nil)
        }
    }
}
