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

/// Raw DEFLATE, as Core Data compresses its model cache: what zlib wrote reads back, and damaged input is an error.
@Suite struct InflateTests {
    static func bytes(_ hex: String) -> Data {
        Data(stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! })
    }

    /// Written by zlib (level 9, window bits -15): dynamic Huffman codes.
    static let dynamic = bytes(
        "6dd4396ec3301040d1abf0089c8d8b5326a52fa1c240dc48802d23c9ed13504841e1372a3e0470e641e2fbf6b8a58f655fd2b6a6eb7d7d7d5fd26dddeffb4fcae97379fe3d1fdbd7f3ed3fca88758e3aa2ccd1466c73f411758e31629f6319d1e6588f834e33b5517d8efd78f534941c4bc5a91e5bc9692e39f62aa76ae8e2042341325288462ad948231ce9a4a3197954c8471581d408481d813408480b0169c52fa711907602b24c402604644a406608644e401608648580ac22903502b24e409e09c885805cf1e732027227200f02f282405e09c81b027927a0c808144240a104144640e10414414051f0faa904148d80a2cf40bf"
    )

    @Test func readsWhatZlibWrites() throws {
        let text = "Core Data on Linux: " + (0..<60).map { "entity \($0) has \($0 * 7 % 13) rows; " }.joined()
        #expect(String(decoding: try Inflate.rawDeflate(Self.dynamic), as: UTF8.self) == text)
        // Fixed Huffman codes (zlib's Z_FIXED strategy).
        #expect(
            String(decoding: try Inflate.rawDeflate(Self.bytes("4b4c4a4e44450a19a93939f9101200")), as: UTF8.self)
                == "abcabcabcabcabcabc hello hello")
        // A stored block: final bit, type 0, length and its complement, the bytes.
        #expect(try Inflate.rawDeflate(Data([0x01, 0x03, 0x00, 0xFC, 0xFF, 7, 8, 9])) == Data([7, 8, 9]))
    }

    @Test func damagedOrOversizedInputIsAnErrorNeverACrash() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SeededGenerator(seed: seed)
        var failures = 0
        for _ in 0..<2000 {
            var bytes = [UInt8](Self.dynamic)
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            if Bool.random(using: &generator) { bytes.removeLast(Int.random(in: 0..<bytes.count, using: &generator)) }
            do { _ = try Inflate.rawDeflate(Data(bytes)) } catch is PropertyListError { failures += 1 }
        }
        print("InflateTests seed \(seed): \(failures) of 2000 damaged inputs refused")
        #expect(failures > 0, "seed \(seed)")
        #expect(throws: PropertyListError.self) { try Inflate.rawDeflate(Self.dynamic, limit: 100) }
    }
}

/// A compiled model's fetch request templates (`NSFetchRequestTemplates`) load with their entity, predicate (read back
/// into format text) and limits, as the XML model's `<fetchRequest>` elements do.
@Suite struct CompiledFetchRequestTemplateTests {
    @Test func templatesOfACompiledModelLoad() throws {
        let model = NSManagedObjectModel()
        let item = NSEntityDescription(name: "Item")
        item.addProperty(NSAttributeDescription(name: "name", type: .stringAttributeType))
        model.addEntity(item)
        guard case .dictionary(var top) = try BinaryPropertyList.read(model.compiledArchive), case .array(var objects)? = top["$objects"],
            let root = top["$top"]?.dictionary?["root"]?.uid, case .dictionary(var rootFields) = objects[root]
        else {
            Issue.record("the compiled archive has no root object")
            return
        }
        func add(_ value: PropertyListValue) -> Int {
            objects.append(value)
            return objects.count - 1
        }
        func object(_ chain: [String], _ fields: [String: PropertyListValue]) -> Int {
            let classIndex = add(
                .dictionary(["$classname": .string(chain[0]), "$classes": .array((chain + ["NSObject"]).map { .string($0) })]))
            var fields = fields
            fields["$class"] = .uid(classIndex)
            return add(.dictionary(fields))
        }
        // name BEGINSWITH $PREFIX, limit 5, batches of 20; and a second template whose entity the model lacks.
        let left = object(
            ["NSKeyPathSpecifierExpression", "NSExpression"], ["NSExpressionType": .integer(3), "NSKeyPath": .uid(add(.string("name")))])
        let right = object(
            ["NSVariableExpression", "NSExpression"], ["NSExpressionType": .integer(2), "NSVariable": .uid(add(.string("PREFIX")))])
        let op = object(["NSPredicateOperator"], ["NSOperatorType": .integer(8), "NSModifier": .integer(0), "NSOptions": .integer(1)])
        let predicate = object(
            ["NSComparisonPredicate", "NSPredicate"],
            ["NSLeftExpression": .uid(left), "NSRightExpression": .uid(right), "NSPredicateOperator": .uid(op)])
        let request = object(
            ["NSFetchRequest", "NSPersistentStoreRequest"],
            [
                "NSEntityName": .uid(add(.string("Item"))), "NSPredicate": .uid(predicate), "NSFetchLimit": .integer(5),
                "NSBatchSize": .integer(20),
            ])
        let orphan = object(["NSFetchRequest", "NSPersistentStoreRequest"], ["NSEntityName": .uid(add(.string("Gone")))])
        let templates = object(
            ["NSDictionary"],
            [
                "NS.keys": .array([.uid(add(.string("ItemsStartingWith"))), .uid(add(.string("Orphan")))]),
                "NS.objects": .array([.uid(request), .uid(orphan)]),
            ])
        rootFields["NSFetchRequestTemplates"] = .uid(templates)
        objects[root] = .dictionary(rootFields)
        top["$objects"] = .array(objects)
        let loaded = try NSManagedObjectModel(compiledModel: BinaryPropertyList.write(.dictionary(top)), source: "templates.mom")
        let template = try #require(loaded.fetchRequestTemplateDescriptions["ItemsStartingWith"])
        #expect(template.entityName == "Item" && template.predicateFormat == "name BEGINSWITH[c] $PREFIX")
        #expect(template.fetchLimit == 5 && template.fetchBatchSize == 20)
        #expect(loaded.fetchRequestTemplateDescriptions["Orphan"] == nil, "a template of an entity the model lacks is left out")
    }
}
