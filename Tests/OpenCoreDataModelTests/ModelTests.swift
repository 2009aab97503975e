import Foundation
import Testing
import _TestSupport

@testable import OpenCoreDataModel

@Suite struct ModelBuilderTests {
    @Test func builderMakesEntitiesPropertiesAndInheritance() throws {
        let model = try makeCompanyModel()
        #expect(model.isFrozen)
        let employee = try #require(model.entity(named: "Employee"))
        let manager = try #require(model.entity(named: "Manager"))
        let person = try #require(model.entity(named: "Person"))
        #expect(person.isAbstract)
        #expect(employee.superentity === person)
        #expect(manager.superentity === employee)
        #expect(person.subentities.map(\.name) == ["Employee"])
        // Inherited properties come first, in declaration order.
        #expect(manager.allProperties.prefix(3).map(\.name) == ["name", "badge", "born"])
        #expect(manager.propertiesByName["headOf"] != nil)
        #expect(manager.attributesByName["salary"]?.attributeType == .doubleAttributeType)
        #expect(manager.isKindOf(entity: person))
        #expect(!person.isKindOf(entity: manager))
        #expect(person.selfAndDescendants.map(\.name) == ["Person", "Employee", "Manager"])
        #expect(manager.rootEntity === person)
    }

    @Test func relationshipsResolveDestinationsAndInverses() throws {
        let model = try makeCompanyModel()
        let department = try #require(model.entity(named: "Department"))
        let employees = try #require(department.relationshipsByName["employees"])
        #expect(employees.isToMany)
        #expect(employees.deleteRule == .cascadeDeleteRule)
        #expect(employees.destinationEntity?.name == "Employee")
        #expect(employees.inverseRelationship?.name == "department")
        #expect(employees.inverseRelationship?.inverseRelationship === employees)
        let members = try #require(model.entity(named: "Project")?.relationshipsByName["members"])
        #expect(members.maxCount == 5)
        #expect(members.inverseRelationship?.isToMany == true)
    }

    @Test func defaultValuesAndOptionality() throws {
        let model = try makeCompanyModel()
        let employee = try #require(model.entity(named: "Employee"))
        #expect(employee.attributesByName["active"]?.defaultValue == .bool(true))
        #expect(employee.attributesByName["level"]?.defaultValue == .integer(1))
        #expect(employee.attributesByName["name"]?.isOptional == false)
        #expect(employee.attributesByName["nickname"]?.isTransient == true)
    }

    @Test func propertyIndexFindsEveryNameAndOnlyThose() throws {
        // Wide enough to make the name table probe past collisions; names share prefixes and lengths.
        let names = (0..<200).map { "p\($0)" } + ["café", "ça", "x", "xx", "longer_property_name_than_fifteen_bytes"]
        let model = try NSManagedObjectModel {
            Entity("Wide") { for name in names { Attribute(name, .integer64) } }
        }
        let entity = try #require(model.entity(named: "Wide"))
        for (i, name) in names.enumerated() {
            #expect(entity.propertyIndex(named: name) == i, "\(name)")
        }
        for missing in ["", "p200", "p-1", "P0", "xxx", "caf", "longer_property_name_than_fifteen_byte"] {
            #expect(entity.propertyIndex(named: missing) == nil, "\(missing)")
        }
        // String equality is canonical equivalence: "e" + combining acute equals the precomposed "é".
        #expect(entity.propertyIndex(named: "cafe\u{301}") == names.firstIndex(of: "café"))
        #expect(entity.propertyIndex(named: "c\u{327}a") == names.firstIndex(of: "ça"))
    }

    @Test func versionHashIsStableAndSensitiveToSchema() throws {
        let a = try makeCompanyModel()
        let b = try makeCompanyModel()
        #expect(a.versionHash == b.versionHash)
        #expect(a.versionHash.count == 32)
        let changed = try NSManagedObjectModel {
            Entity("Department") { Attribute("name", .string) }
        }
        let changedType = try NSManagedObjectModel {
            Entity("Department") { Attribute("name", .integer64) }
        }
        #expect(changed.versionHash != a.versionHash)
        #expect(changed.versionHash != changedType.versionHash)
        #expect(changed.entity(named: "Department")?.versionHash != changedType.entity(named: "Department")?.versionHash)
    }

    @Test func sha256MatchesKnownVectors() {
        func hex(_ d: Data) -> String { d.map { String(format: "%02x", $0) }.joined() }
        #expect(hex(SHA256Digest.hash(Data())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(SHA256Digest.hash(Data("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let long = Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(hex(SHA256Digest.hash(long)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    /// FIPS 180-4's vectors, and one message longer than a block (200 bytes: the padding spills into a second one).
    @Test func sha512MatchesKnownVectors() {
        func hex(_ d: Data) -> String { d.map { String(format: "%02x", $0) }.joined() }
        #expect(
            hex(SHA512Digest.hash(Data()))
                == "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"
        )
        #expect(
            hex(SHA512Digest.hash(Data("abc".utf8)))
                == "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        )
        #expect(
            hex(SHA512Digest.hash(Data(repeating: UInt8(ascii: "a"), count: 200)))
                == "4b11459c33f52a22ee8236782714c150a3b2c60994e9acee17fe68947a3e6789f31e7668394592da7bef827cddca88c4e6f86e4df7ed1ae6cba71f3e98faee9f"
        )
    }

    @Test(arguments: [
        ("unknown destination", "points to entity 'Nowhere'"),
        ("unknown parent", "inherits from 'Ghost'"),
        ("duplicate property", "two properties named 'name'"),
        ("mismatched inverse", "inverses must name each other"),
        ("duplicate entity", "two entities named 'A'"),
        ("unsupported type", "does not support yet"),
    ])
    func invalidModelsThrowNamingTheProblem(_ case_: String, _ expected: String) throws {
        let error = #expect(throws: CoreDataError.self) {
            switch case_ {
            case "unknown destination":
                _ = try NSManagedObjectModel { Entity("A") { Relationship("r", to: "Nowhere") } }
            case "unknown parent":
                _ = try NSManagedObjectModel { Entity("A", parent: "Ghost") }
            case "duplicate property":
                _ = try NSManagedObjectModel {
                    Entity("A") { Attribute("name", .string) }
                    Entity("B", parent: "A") { Attribute("name", .string) }
                }
            case "mismatched inverse":
                _ = try NSManagedObjectModel {
                    Entity("A") { Relationship("b", to: "B", inverse: "a") }
                    Entity("B") {
                        Relationship("a", to: "A", inverse: "other"); Relationship("other", to: "A")
                    }
                }
            case "duplicate entity":
                _ = try NSManagedObjectModel {
                    Entity("A")
                    Entity("A")
                }
            default:
                _ = try NSManagedObjectModel { Entity("A") { Attribute("t", .objectIDAttributeType) } }
            }
        }
        #expect(error?.code == .invalidModel)
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
    }
}

@Suite struct XcodeModelLoaderTests {
    @Test func loadsTheCurrentVersionOfABundle() throws {
        let model = try NSManagedObjectModel(contentsOf: Fixtures.url("Company.xcdatamodeld"))
        // .xccurrentversion names "Company 2", which has five entities; version 1 has only Department.
        #expect(model.entities.map(\.name).sorted() == ["Department", "Employee", "Manager", "Person", "Project"])
        let employee = try #require(model.entity(named: "Employee"))
        #expect(employee.superentity?.name == "Person")
        #expect(model.entity(named: "Person")?.isAbstract == true)
        #expect(employee.attributesByName["age"]?.attributeType == .integer16AttributeType)
        #expect(employee.attributesByName["homepage"]?.attributeType == .URIAttributeType)
        #expect(employee.attributesByName["photo"]?.attributeType == .binaryDataAttributeType)
        #expect(employee.attributesByName["badge"]?.attributeType == .UUIDAttributeType)
        #expect(employee.attributesByName["active"]?.defaultValue == .bool(true))
        #expect(employee.attributesByName["level"]?.defaultValue == .integer(1))
        #expect(employee.attributesByName["name"]?.isOptional == false)
        #expect(employee.attributesByName["salary"]?.isOptional == true)
        #expect(employee.attributesByName["nickname"]?.isTransient == true)
        let department = try #require(model.entity(named: "Department"))
        #expect(department.userInfo["table"] == "departments")
        #expect(department.attributesByName["budget"]?.defaultValue == .decimal(0))
        let employees = try #require(department.relationshipsByName["employees"])
        #expect(employees.isToMany && employees.deleteRule == .cascadeDeleteRule)
        #expect(employees.inverseRelationship?.name == "department")
        #expect(model.entity(named: "Manager")?.relationshipsByName["headOf"]?.deleteRule == .denyDeleteRule)
        #expect(model.entity(named: "Project")?.relationshipsByName["members"]?.maxCount == 5)
        #expect(employee.managedObjectClassName == "Employee")
    }

    @Test func loadsASingleModelFolderLikeSeed002() throws {
        let model = try NSManagedObjectModel(contentsOf: Fixtures.url("Groceries.xcdatamodel"))
        let favorite = try #require(model.entity(named: "FavoriteProducts"))
        #expect(favorite.superentity?.name == "Products")
        #expect(favorite.attributesByName.keys.sorted() == ["name", "price"])
        #expect(favorite.attributesByName["price"]?.defaultValue == .integer(0))
    }

    @Test func sameModelFromFileAndBuilderHasTheSameShape() throws {
        let file = try NSManagedObjectModel(contentsOf: Fixtures.url("Groceries.xcdatamodel"))
        let built = try NSManagedObjectModel {
            Entity("Products") {
                Attribute("name", .string)
                Attribute("price", .integer32, default: 0)
            }
            Entity("FavoriteProducts", parent: "Products")
        }
        #expect(file.versionHash == built.versionHash)
    }

    @Test(arguments: [
        ("Broken/BadType.xcdatamodel", "attributeType 'Money'"),
        ("Broken/BadXML.xcdatamodel", "not well-formed XML at line"),
        ("Broken/Dangling.xcdatamodel", "points to entity 'Customer'"),
        ("Broken/NoCurrent.xcdatamodeld", "no .xccurrentversion"),
        ("Broken/Empty.xcdatamodel", "has no 'contents' file"),
        ("Broken/Missing.xcdatamodeld", "no such model bundle"),
        ("Groceries.xcdatamodel/contents", "is not a Core Data model"),
    ])
    func brokenFilesThrowNamingTheElement(_ path: String, _ expected: String) throws {
        let error = #expect(throws: CoreDataError.self) {
            _ = try NSManagedObjectModel(contentsOf: Fixtures.url(path))
        }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
    }

    @Test func badTypeErrorNamesEntityAndLine() throws {
        let error = #expect(throws: CoreDataError.self) {
            _ = try NSManagedObjectModel(contentsOf: Fixtures.url("Broken/BadType.xcdatamodel"))
        }
        #expect(error?.message.contains("entity 'Wallet'") == true)
        #expect(error?.message.contains("line 4") == true, "\(error?.message ?? "")")
        #expect(error?.key == "balance")
    }
}

@Suite struct AttributeValueConversionTests {
    /// Every type `AttributeValue(any:)` reads without a cast, bare, wrapped in an optional, and as `Any` inside `Any`:
    /// each way must give the same value (the exact-type path and the cast path agree).
    @Test func eachSupportedTypeConvertsTheSameBareOrWrapped() throws {
        let date = Date(timeIntervalSinceReferenceDate: 12_345.5)
        let uuid = try #require(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        let url = try #require(URL(string: "https://example.com/a?b=1"))
        let cases: [(Any, AttributeValue)] = [
            ("héllo, a string longer than fifteen bytes", .string("héllo, a string longer than fifteen bytes")),
            ("short", .string("short")),
            (Int.max, .integer(Int64.max)), (Int.min, .integer(Int64.min)), (Int64(-7), .integer(-7)),
            (Int32.max, .integer(Int64(Int32.max))), (Int16.min, .integer(Int64(Int16.min))),
            (2.5, .double(2.5)), (Float(1.25), .double(1.25)), (true, .bool(true)), (false, .bool(false)),
            (date, .date(date)), (Data([0, 1, 255]), .data(Data([0, 1, 255]))), (Data(), .data(Data())),
            (uuid, .uuid(uuid)), (Decimal(string: "12.34")!, .decimal(Decimal(string: "12.34")!)), (url, .uri(url)),
        ]
        for (value, expected) in cases {
            #expect(AttributeValue(any: value) == expected, "bare \(type(of: value))")
            let wrapped: Any? = Optional(value)
            #expect(AttributeValue(any: wrapped) == expected, "optional \(type(of: value))")
            let nested: Any = value as Any
            #expect(AttributeValue(any: nested as Any) == expected, "nested \(type(of: value))")
        }
        let none: String? = nil, some: Int32? = 9
        #expect(AttributeValue(any: none as Any) == .null)
        #expect(AttributeValue(any: some as Any) == .integer(9))
        #expect(AttributeValue(any: nil) == .null)
        #expect(AttributeValue(any: NSNull()) == .null)
        #expect(AttributeValue(any: UInt64.max) == nil)
        #expect(AttributeValue(any: [1, 2]) == nil)
    }

    /// The conversion reads the attribute types out of the `Any?` container in place; this checks that the layout it
    /// relies on was recognized (else every value takes the copying path and the in-place reads go untested), and that
    /// values stored out of line (in a box), bridged strings and values of other types still convert by copy.
    @Test func inPlaceReadsAgreeWithTheCopyingPath() throws {
        #expect(ExistentialContainer.layoutIsKnown)
        struct Wide { var a = 1, b = 2, c = 3, d = 4 }  // 32 bytes: stored in a box
        let values: [Any?] = [
            "x", String(repeating: "é", count: 40), 0, -1, Int.max, 0.0, -Double.infinity, true, false, Int64.min, Int32(-3),
            Int16(12), Float(-0.5), Date(timeIntervalSince1970: 0), Data([1, 2, 3]), Data(repeating: 7, count: 100),
            UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)), Decimal(string: "-12.345")!,
            URL(string: "https://example.com/path?q=1")!, NSString(string: "bridged"), Substring("sub"),
            Wide(), UInt8(200), nil, Optional<Int>.none as Any,
        ]
        for value in values {
            // The reference: unwrap by copy, then classify the copy (no in-place read).
            let copied = value.map { AttributeValue.converting(wrapped: $0) } ?? .null
            #expect(AttributeValue.converting(value) == copied, "\(String(describing: value))")
            #expect(AttributeValue(any: value) == copied, "\(String(describing: value))")
        }
        #expect(AttributeValue(any: Wide()) == nil)
        #expect(AttributeValue(any: "x" as Any?) == .string("x"))
        #expect(AttributeValue(any: Int32(-3) as Any?) == .integer(-3))
        #expect(AttributeValue(any: Float(-0.5) as Any?) == .double(-0.5))
        #expect(AttributeValue(any: NSString(string: "bridged") as Any?) == .string("bridged"))
        #expect(AttributeValue(any: Substring("sub") as Any?) == .string("sub"))
        #expect(AttributeValue(any: UInt8(200) as Any?) == .integer(200))
    }
}

@Suite struct IdentityHashTests {
    /// Equal IDs must hash alike whatever instance holds them, and the mix must spread aligned addresses and
    /// consecutive keys over a table's low bits (the bits `Set` and `Dictionary` use).
    @Test func equalKeysHashAlikeAndAlignedKeysSpread() throws {
        let model = try NSManagedObjectModel { Entity("Item") { Attribute("name", .string) } }
        let entity = try #require(model.entity(named: "Item"))
        for pk in Int64(1)...200 {
            let a = NSManagedObjectID(entity: entity, storeIdentifier: "S", primaryKey: pk)
            let b = NSManagedObjectID(entity: entity, storeIdentifier: "S", primaryKey: pk)
            #expect(a == b && a !== b)
            #expect(a.hashValue == b.hashValue)
            #expect(Set([a]).contains(b))
        }
        for stride in [1, 16, 64, 4096] {
            var buckets = Set<Int>()
            for i in 0..<1024 { buckets.insert(_IdentityHash.mix(UInt64(0x7f00_0000_0000 + i * stride), seed: 0) & 1023) }
            // A random function fills about 63% of the buckets; a mix that ignored the low-order zero bits of aligned
            // addresses would fill 1024 / stride of them.
            #expect(buckets.count > 560, "stride \(stride): \(buckets.count) of 1024 buckets used")
        }
        #expect(_IdentityHash.mix(42, seed: 1) != _IdentityHash.mix(42, seed: 2))
    }
}

/// Version hash modifiers change an entity's version hash and nothing else.
@Suite struct VersionHashModifierTests {
    @Test func modifiersChangeTheHash() throws {
        let dir = TemporaryDirectory()
        func hash(_ entityModifier: String, _ attributeModifier: String) throws -> Data? {
            try dir.loadModel(
                "Hashed",
                """
                    <entity name="Item" representedClassName="Item" syncable="YES" \(entityModifier)>
                        <attribute name="name" optional="YES" attributeType="String" \(attributeModifier)/>
                    </entity>
                """
            ).entityVersionHashesByName["Item"]
        }
        let plain = try hash("", "")
        #expect(try hash("", "") == plain)
        #expect(try hash(#"versionHashModifier="2""#, "") != plain)
        #expect(try hash("", #"versionHashModifier="2""#) != plain)
        #expect(try hash(#"versionHashModifier="2""#, "") != (try hash("", #"versionHashModifier="2""#)))
    }
}
