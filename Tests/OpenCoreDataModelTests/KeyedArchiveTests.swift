import Foundation
import OpenCoreDataModel
import Testing
import _TestSupport

/// The binary property list and keyed archive reader: what Apple's writer makes reads back, and damaged bytes are an
/// error, never a crash.
@Suite struct KeyedArchiveTests {
    @Test func binaryPropertyListsRoundTripAndMatchFoundationsReader() throws {
        let value = PropertyListValue.dictionary([
            "ascii": .string("plain"), "unicode": .string("naïve ☃"), "small": .integer(7), "wide": .integer(70_000),
            "negative": .integer(-5), "big": .integer(Int64.max), "real": .real(2.5), "yes": .bool(true),
            "bytes": .data(Data(repeating: 9, count: 40)), "list": .array((0..<20).map { .integer(Int64($0)) }),
            "when": .date(Date(timeIntervalSinceReferenceDate: 1000)),
        ])
        let data = BinaryPropertyList.write(value)
        #expect(try BinaryPropertyList.read(data) == value)
        let foundation = try #require(try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
        #expect(foundation["unicode"] as? String == "naïve ☃" && foundation["big"] as? Int64 == Int64.max)
        #expect((foundation["list"] as? [Int])?.count == 20 && foundation["negative"] as? Int == -5)
        // And what Foundation writes, we read.
        let written = try PropertyListSerialization.data(fromPropertyList: ["k": [1, "two", 3.5]], format: .binary, options: 0)
        #expect(try BinaryPropertyList.read(written) == .dictionary(["k": .array([.integer(1), .string("two"), .real(3.5)])]))
    }

    @Test func damagedArchivesAreErrorsNeverCrashes() throws {
        let transformer = try #require(ValueTransformer(forName: .secureUnarchiveFromDataTransformerName))
        let archive = try #require(
            transformer.reverseTransformedValue(
                ["list": ["a", "b"], "n": 1, "d": Date(), "u": UUID(), "s": Set([1, 2])] as [String: Any]) as? Data)
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SeededGenerator(seed: seed)
        var readable = 0
        for _ in 0..<3000 {
            var bytes = [UInt8](archive)
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                bytes[at] = UInt8.random(in: 0...255, using: &generator)
            }
            if Bool.random(using: &generator) { bytes.removeLast(Int.random(in: 0..<bytes.count, using: &generator)) }
            // Any outcome but a crash: nil (damaged) or a value.
            if transformer.transformedValue(Data(bytes)) != nil { readable += 1 }
        }
        print("damagedArchives seed \(seed): \(readable) of 3000 mutations still read")
        #expect(readable < 3000, "seed \(seed): some mutations must be detected")
    }

    @Test func cyclesAndDeepNestingAreRefused() throws {
        // An array whose element is itself (object 1 refers to object 1).
        let cyclic = BinaryPropertyList.write(
            .dictionary([
                "$archiver": .string("NSKeyedArchiver"), "$version": .integer(100_000), "$top": .dictionary(["root": .uid(1)]),
                "$objects": .array([
                    .string("$null"), .dictionary(["NS.objects": .array([.uid(1)]), "$class": .uid(2)]),
                    .dictionary(["$classname": .string("NSArray"), "$classes": .array([.string("NSArray"), .string("NSObject")])]),
                ]),
            ]))
        let archive = try KeyedArchive(data: cyclic)
        #expect(throws: PropertyListError.self) { try archive.foundationValue(allowing: KeyedArchive.valueClassNames) }
        var deep: Any = "leaf"
        for _ in 0..<600 { deep = [deep] }
        #expect(throws: PropertyListError.self) { try KeyedArchive.archive(deep) }
    }

    @Test func anArchiveOfAnUnknownClassNamesIt() throws {
        let data = BinaryPropertyList.write(
            .dictionary([
                "$archiver": .string("NSKeyedArchiver"), "$version": .integer(100_000), "$top": .dictionary(["root": .uid(1)]),
                "$objects": .array([
                    .string("$null"), .dictionary(["UIRed": .real(1), "$class": .uid(2)]),
                    .dictionary(["$classname": .string("UIColor"), "$classes": .array([.string("UIColor"), .string("NSObject")])]),
                ]),
            ]))
        let transformer = try #require(
            ValueTransformer(forName: .secureUnarchiveFromDataTransformerName) as? NSSecureUnarchiveFromDataTransformer)
        #expect(transformer.transformedValue(data) == nil)
        let attribute = NSAttributeDescription(name: "tint", type: .transformableAttributeType)
        attribute.valueTransformerName = NSValueTransformerName.secureUnarchiveFromDataTransformerName.rawValue
        let error = #expect(throws: CoreDataError.self) { try attribute.value(fromStoreData: data, entityName: "Theme") }
        #expect(error?.message.contains("UIColor") == true && error?.message.contains("'Theme.tint'") == true, "\(error?.message ?? "")")
    }
}
