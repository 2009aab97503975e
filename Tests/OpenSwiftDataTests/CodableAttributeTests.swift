import GRDB
import OpenSwiftData
import Testing
import _TestSupport

struct GeoPoint: Codable, Equatable {
    var latitude: Double
    var longitude: Double
}

enum Climate: String, Codable {
    case temperate, tropical, polar
}

struct Address: Codable, Equatable {
    var street: String
    var city: String
    var postcode: String?
    var floor: Int
    var climate: Climate
    var location: GeoPoint
    var since: Date
}

struct Stop: Codable, Equatable {
    var name: String
    var minutes: Int
}

/// Stores its list as a comma-separated string (a transformer a SwiftData app registers itself).
final class CommaListTransformer: ValueTransformer, @unchecked Sendable {
    override class func allowsReverseTransformation() -> Bool { true }
    override func transformedValue(_ value: Any?) -> Any? {
        (value as? [String]).map { Data($0.joined(separator: ",").utf8) }
    }
    override func reverseTransformedValue(_ value: Any?) -> Any? {
        (value as? Data).map { String(decoding: $0, as: UTF8.self).split(separator: ",").map(String.init) }
    }
}

@Model final class Office {
    var name: String
    var address: Address
    var secondAddress: Address?
    var tags: [String] = []
    var stops: [Stop] = []
    var hours: [String: Int] = [:]
    @Attribute(.transformable(by: "CommaListTransformer")) var aliases: [String] = []
    @Attribute(.externalStorage) var floorPlan: Data?
    @Attribute(.preserveValueOnDeletion, hashModifier: "v2") var code: String = ""

    init(name: String, address: Address) {
        self.name = name
        self.address = address
    }
}

@Model final class Badge {
    @Attribute(.transformable(by: "NoSuchTransformer")) var colors: [String] = []
    init() {}
}

@Suite(.serialized) struct CodableAttributeTests {
    static let address = Address(
        street: "Rua Augusta 1", city: "Lisboa", postcode: nil, floor: 3, climate: .temperate,
        location: GeoPoint(latitude: 38.71, longitude: -9.14), since: Date(timeIntervalSinceReferenceDate: 86_400))

    init() {
        ValueTransformer.setValueTransformer(CommaListTransformer(), forName: NSValueTransformerName("CommaListTransformer"))
    }

    @Test func codableValuesRoundTripThroughAStoreFile() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("offices.store")
        do {
            let container = try ModelContainer(for: Office.self, configurations: ModelConfiguration(url: url))
            let context = ModelContext(container)
            let office = Office(name: "Baixa", address: Self.address)
            office.tags = ["north", "river"]
            office.stops = [Stop(name: "Rossio", minutes: 4), Stop(name: "Chiado", minutes: 7)]
            office.hours = ["mon": 9, "sat": 10]
            office.aliases = ["HQ", "Main"]
            context.insert(office)
            // Set after the insert too: through the managed object.
            var moved = Self.address
            moved.postcode = "1100-053"
            moved.location.latitude = 38.72
            office.secondAddress = moved
            #expect(office.address == Self.address)
            #expect(office.secondAddress == moved)
            try context.save()
        }
        // A new container on the file: every value reads back as it was.
        let container = try ModelContainer(for: Office.self, configurations: ModelConfiguration(url: url))
        let office = try #require(try ModelContext(container).fetch(FetchDescriptor<Office>()).first)
        #expect(office.address == Self.address)
        #expect(office.secondAddress?.postcode == "1100-053")
        #expect(office.secondAddress?.location.latitude == 38.72)
        #expect(office.tags == ["north", "river"])
        #expect(office.stops == [Stop(name: "Rossio", minutes: 4), Stop(name: "Chiado", minutes: 7)])
        #expect(office.hours == ["mon": 9, "sat": 10])
        #expect(office.aliases == ["HQ", "Main"])
        // The composite's fields are columns of the model's table (as SwiftData lays a Codable struct out); the
        // transformed list is the transformer's bytes.
        let (columns, aliases) = try storeFile(url).read { db in
            (
                try db.columns(in: "ZOFFICE").map(\.name),
                try Data.fetchOne(db, sql: "SELECT ZALIASES FROM ZOFFICE")
            )
        }
        for column in ["ZSTREET", "ZCITY", "ZPOSTCODE", "ZFLOOR", "ZCLIMATE", "ZLATITUDE", "ZLONGITUDE", "ZSINCE", "ZTAGS", "ZSTOPS"] {
            #expect(columns.contains(column), "\(column) in \(columns)")
        }
        #expect(!columns.contains("ZADDRESS"), "\(columns)")
        #expect(aliases.map { String(decoding: $0, as: UTF8.self) } == "HQ,Main")
        let city = try storeFile(url).read { db in try String.fetchOne(db, sql: "SELECT ZCITY FROM ZOFFICE") }
        #expect(city == "Lisboa")
    }

    @Test func anArrayArchivedByCoreDatasDefaultTransformerReadsBack() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("offices.store")
        do {
            let container = try ModelContainer(for: Office.self, configurations: ModelConfiguration(url: url))
            let context = ModelContext(container)
            context.insert(Office(name: "Baixa", address: Self.address))
            try context.save()
        }
        // The tags as a store written elsewhere may hold them: a keyed archive of an array of strings.
        let archive = try #require(NSSecureUnarchiveFromDataTransformer().reverseTransformedValue(["north", "river"]) as? Data)
        try storeFile(url).write { db in try db.execute(sql: "UPDATE ZOFFICE SET ZTAGS = ?", arguments: [archive]) }
        let container = try ModelContainer(for: Office.self, configurations: ModelConfiguration(url: url))
        let office = try #require(try ModelContext(container).fetch(FetchDescriptor<Office>()).first)
        #expect(office.tags == ["north", "river"])
    }

    @Test func predicatesAndSortsReachIntoACompositesFields() throws {
        let container = try ModelContainer(for: Office.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        var offices: [Office] = []
        for (name, city, floor, latitude, climate) in [
            ("Baixa", "Lisboa", 3, 38.71, Climate.temperate), ("Ribeira", "Porto", 1, 41.14, .temperate),
            ("Sé", "Funchal", 2, 32.65, .tropical), ("Graça", "Lisboa", 5, 38.72, .temperate),
        ] {
            var address = Self.address
            address.city = city
            address.floor = floor
            address.location.latitude = latitude
            address.climate = climate
            let office = Office(name: name, address: address)
            offices.append(office)
            context.insert(office)
        }
        offices[1].secondAddress = Self.address
        try context.save()
        func check(_ predicate: Predicate<Office>, _ name: String) throws {
            let fetched = try context.fetch(FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\.name)])).map(\.name)
            let expected = try offices.filter { try predicate.evaluate($0) }.map(\.name).sorted()
            #expect(fetched == expected, "\(name)")
            #expect(!expected.isEmpty, "\(name) matches some")
        }
        try check(#Predicate { $0.address.city == "Lisboa" }, "a field")
        try check(#Predicate { $0.address.floor > 1 && $0.address.city != "Porto" }, "two fields")
        try check(#Predicate { $0.address.location.latitude < 39 }, "a nested struct's field")
        let tropical = Climate.tropical
        try check(#Predicate { $0.address.climate == tropical }, "an enum field")
        try check(#Predicate { $0.secondAddress?.city == "Lisboa" }, "an optional composite's field")
        // A field as a sort key: by floor, highest first; by city, then name.
        let byFloor = try context.fetch(FetchDescriptor<Office>(sortBy: [SortDescriptor(\.address.floor, order: .reverse)]))
        #expect(byFloor.map(\.name) == ["Graça", "Baixa", "Sé", "Ribeira"])
        let byCity = try context.fetch(FetchDescriptor<Office>(sortBy: [SortDescriptor(\.address.city), SortDescriptor(\.name)]))
        #expect(byCity.map(\.name) == ["Sé", "Baixa", "Graça", "Ribeira"])
        // A nested struct's field: by latitude, southernmost first.
        let byLatitude = try context.fetch(FetchDescriptor<Office>(sortBy: [SortDescriptor(\.address.location.latitude)]))
        #expect(byLatitude.map(\.name) == ["Sé", "Baixa", "Graça", "Ribeira"])
        // A key path through a composite that names no field of it is an error naming the model.
        let error = #expect(throws: SwiftDataError.self) {
            try context.fetch(FetchDescriptor<Office>(sortBy: [SortDescriptor(\.address.city.count)]))
        }
        #expect(error?.description.contains("Office") == true)
    }

    @Test func anUnregisteredTransformerIsNamedInTheError() throws {
        let error = #expect(throws: SwiftDataError.self) {
            try ModelContainer(for: Badge.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        }
        #expect(error?.description.contains("NoSuchTransformer") == true, "\(error.map { "\($0)" } ?? "")")
    }
}
