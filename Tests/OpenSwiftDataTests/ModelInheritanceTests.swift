import Foundation
import GRDB
import OpenSwiftData
import Testing
import _TestSupport

/// Model subclasses: a subentity each, rows of the superclass's fetches made as subclass models.
@Suite struct ModelInheritanceTests {
    /// A superclass's `#Unique` and `#Index` (as Apple's trips sample declares them on `Trip`, with business and personal
    /// trips below it) are its entity's; the subclasses inherit them through their superentity rather than naming the
    /// superclass's key paths as their own (which threw "not a persisted property"), and an insert that repeats a stored
    /// subclass model's unique values updates it.
    @Test func aSuperclassesUniqueAndIndexCoverItsSubclasses() throws {
        let container = try ModelContainer(for: BusinessOuting.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        context.insert(BusinessOuting(name: "Expo", destination: "Faro", company: "Initech", perDiem: 10))
        try context.save()
        context.insert(BusinessOuting(name: "Expo", destination: "Faro", company: "Initrode", perDiem: 30))
        try context.save()
        let stored = try ModelContext(container).fetch(FetchDescriptor<BusinessOuting>())
        #expect(stored.map(\.company) == ["Initrode"] && stored.map(\.perDiem) == [30])
        context.insert(Outing(name: "Expo", destination: "Porto", startDate: Date(timeIntervalSinceReferenceDate: 86_400)))
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Outing>()) == 2)
    }

    @Test func subclassModelsKeepTheirOwnAndInheritedProperties() throws {
        let directory = TemporaryDirectory()
        let url = directory.url.appendingPathComponent("outings.store")
        do {
            let container = try ModelContainer(
                for: BusinessOuting.self, PersonalOuting.self, Waypoint.self, configurations: ModelConfiguration(url: url))
            let context = ModelContext(container)
            let work = BusinessOuting(name: "Summit", destination: "Porto", company: "Acme", perDiem: 80)
            // A subclass model not in a context yet reads and writes both its own and its inherited properties.
            #expect(work.perDiem == 80 && work.name == "Summit")
            work.perDiem = 95
            work.destination = "Lisbon"
            #expect(work.perDiem == 95 && work.destination == "Lisbon" && work.summary == "Summit to Lisbon")
            let home = PersonalOuting(name: "Granny", destination: "Braga", reason: .family)
            home.waypoints.append(Waypoint(place: "Coimbra"))
            context.insert(work)
            context.insert(home)
            context.insert(Outing(name: "Plain", destination: "Faro"))
            #expect(work.company == "Acme" && work.perDiem == 95)
            try context.save()
        }
        // One table for the three entities, as Core Data lays out a superentity and its subentities: the
        // subentities' columns in the root's table, each row's entity in Z_ENT.
        try storeFile(url).read { db in
            let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z%OUTING'")
            #expect(tables == ["ZOUTING"])
            let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(ZOUTING)").map { $0["name"] as String }
            #expect(Set(["ZNAME", "ZPERDIEM", "ZCOMPANY", "ZREASON"]).isSubset(of: columns), "\(columns)")
            #expect(try Int.fetchOne(db, sql: "SELECT COUNT(DISTINCT Z_ENT) FROM ZOUTING") == 3)
        }
        let container = try ModelContainer(
            for: Outing.self, BusinessOuting.self, PersonalOuting.self, Waypoint.self, configurations: ModelConfiguration(url: url))
        let context = ModelContext(container)
        let outings = try context.fetch(FetchDescriptor<Outing>(sortBy: [SortDescriptor(\.name)]))
        #expect(outings.map(\.name) == ["Granny", "Plain", "Summit"])
        let business = try #require(outings[2] as? BusinessOuting)
        #expect(business.company == "Acme" && business.perDiem == 95 && business.destination == "Lisbon")
        let personal = try #require(outings[0] as? PersonalOuting)
        #expect(personal.reason == .family)
        #expect(personal.waypoints.map(\.place) == ["Coimbra"])
        #expect(personal.waypoints.first?.outing === personal)
        #expect(type(of: outings[1]) == Outing.self)
        // A subclass's fetch: its rows only; predicates on its own and inherited properties.
        let onlyBusiness = try context.fetch(FetchDescriptor<BusinessOuting>(predicate: #Predicate { $0.perDiem > 50 && $0.name != "" }))
        #expect(onlyBusiness.map(\.company) == ["Acme"])
        #expect(try context.fetchCount(FetchDescriptor<PersonalOuting>()) == 1)
        #expect(try context.fetchCount(FetchDescriptor<Outing>(predicate: #Predicate { $0.destination == "Lisbon" })) == 1)
        // `is` in a predicate: the class's rows and its subclasses'; in SQL, and in memory for unsaved models.
        #expect(try context.fetch(FetchDescriptor<Outing>(predicate: #Predicate { $0 is BusinessOuting })).map(\.name) == ["Summit"])
        #expect(
            try context.fetchCount(FetchDescriptor<Outing>(predicate: #Predicate { $0 is PersonalOuting || $0 is BusinessOuting })) == 2)
        #expect(try context.fetchCount(FetchDescriptor<Outing>(predicate: #Predicate { !($0 is PersonalOuting) })) == 2)
        // `as?`: a subclass's property through a cast, nil for the other classes' rows.
        #expect(
            try context.fetch(FetchDescriptor<Outing>(predicate: #Predicate { ($0 as? BusinessOuting)?.perDiem ?? 0 > 50 })).map(\.name)
                == ["Summit"])
        #expect(
            try context.fetch(FetchDescriptor<Outing>(predicate: #Predicate { ($0 as? PersonalOuting)?.reason.rawValue == "family" }))
                .map(\.name) == ["Granny"])
        #expect(
            try context.fetchCount(
                FetchDescriptor<Outing>(predicate: #Predicate { !(($0 as? BusinessOuting)?.company.contains("Ac") ?? false) }))
                == 2)
        context.insert(BusinessOuting(name: "Expo", destination: "Faro", company: "Initech", perDiem: 10))
        #expect(
            try context.fetch(FetchDescriptor<Outing>(predicate: #Predicate { $0 is BusinessOuting }, sortBy: [SortDescriptor(\.name)]))
                .map(\.name) == ["Expo", "Summit"])
        #expect(
            try context.fetch(FetchDescriptor<Outing>(predicate: #Predicate { ($0 as? BusinessOuting)?.perDiem ?? 100 < 50 })).map(\.name)
                == ["Expo"])
        context.rollback()
        // Changes to a fetched subclass model are observed and saved.
        #expect(changeIsObserved(reading: { _ = business.perDiem }, after: { business.perDiem = 120 }))
        try context.save()
        let reread = try ModelContext(container).fetch(FetchDescriptor<BusinessOuting>())
        #expect(reread.map(\.perDiem) == [120])
        // Deleting a class's models with or without its subclasses'.
        try context.delete(model: Outing.self, includeSubclasses: false)
        #expect(try context.fetch(FetchDescriptor<Outing>(sortBy: [SortDescriptor(\.name)])).map(\.name) == ["Granny", "Summit"])
        try context.delete(model: Outing.self)
        #expect(try context.fetchCount(FetchDescriptor<Outing>()) == 0)
    }
}
