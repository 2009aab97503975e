import OpenSwiftData
import Testing

/// `#Predicate`s run as SQL, checked against Foundation's own evaluation of the same predicate on every model.
@Suite struct PredicateTests {
    /// A container with journeys and legs made from `seed` (saved, so that the fetches read the store).
    func fixture(seed: UInt64) throws -> (ModelContext, [Journey], [Leg]) {
        var state = seed
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        let places = ["Porto", "Lisbon", "Faro", "Braga", "Évora", "porto", ""]
        var journeys: [Journey] = []
        for j in 0..<6 {
            let journey = Journey(title: "Journey \(j)")
            journey.cost = Decimal(next(50))
            if next(2) == 0 { journey.link = URL(string: "https://example.org/\(j)") }
            journey.legs = (0..<next(4)).map { _ in
                let leg = Leg(from: places[next(places.count)], transport: [Transport.train, .plane, .boat][next(3)])
                if next(2) == 0 { leg.backup = .boat }
                return leg
            }
            journeys.append(journey)
            context.insert(journey)
        }
        for _ in 0..<5 { context.insert(Leg(from: places[next(places.count)], transport: .train)) }
        try context.save()
        return (context, journeys, try context.fetch(FetchDescriptor<Leg>()))
    }

    func check<T: PersistentModel>(_ predicate: Predicate<T>, _ all: [T], in context: ModelContext, seed: UInt64, _ name: String) throws {
        let fetched = try context.fetch(FetchDescriptor<T>(predicate: predicate))
        let expected = try all.filter { try predicate.evaluate($0) }
        #expect(
            Set(fetched.map(ObjectIdentifier.init)) == Set(expected.map(ObjectIdentifier.init)),
            "\(name): SQL found \(fetched.count), Foundation \(expected.count) (seed \(seed))")
        #expect(try context.fetchCount(FetchDescriptor<T>(predicate: predicate)) == expected.count, "\(name) count (seed \(seed))")
    }

    @Test func localizedStandardContainsIgnoresCaseAndDiacritics() throws {
        let container = try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        for place in ["Évora", "evoramonte", "Porto", "Braga"] { context.insert(Leg(from: place, transport: .train)) }
        try context.save()
        let search = "EVO"
        let found = try context.fetch(
            FetchDescriptor<Leg>(predicate: #Predicate { $0.from.localizedStandardContains(search) }, sortBy: [SortDescriptor(\.from)]))
        #expect(found.map(\.from) == ["evoramonte", "Évora"] || found.map(\.from) == ["Évora", "evoramonte"], "\(found.map(\.from))")
    }

    /// `caseInsensitiveCompare` tests equality in a fetch; an order it would compute differently from Foundation's is
    /// refused with an error that says so.
    @Test func caseInsensitiveCompareTestsEqualityOnly() throws {
        let context = ModelContext(
            try ModelContainer(for: Journey.self, Leg.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
        for place in ["Porto", "porto", "Évora"] { context.insert(Leg(from: place, transport: .train)) }
        try context.save()
        let same = ComparisonResult.orderedSame, before = ComparisonResult.orderedAscending
        let found = try context.fetch(FetchDescriptor<Leg>(predicate: #Predicate { $0.from.caseInsensitiveCompare("PORTO") == same }))
        #expect(Set(found.map(\.from)) == ["Porto", "porto"])
        let error = #expect(throws: SwiftDataError.self) {
            try context.fetch(FetchDescriptor<Leg>(predicate: #Predicate { $0.from.caseInsensitiveCompare("PORTO") == before }))
        }
        #expect(error?.description.contains("orderedAscending") == true)
    }

    @Test(arguments: [1, 2, 3, 42, 2026] as [UInt64])
    func predicatesAgreeWithFoundationsEvaluation(seed: UInt64) throws {
        let (context, journeys, legs) = try fixture(seed: seed)
        let porto = "Porto"
        let train = Transport.train
        try check(#Predicate<Leg> { $0.from == porto }, legs, in: context, seed: seed, "equal")
        try check(#Predicate<Leg> { $0.from != "Faro" && $0.transport == train }, legs, in: context, seed: seed, "and, enum")
        try check(#Predicate<Leg> { $0.from < "F" || $0.backup == nil }, legs, in: context, seed: seed, "or, nil")
        try check(#Predicate<Leg> { !($0.from == "Lisbon") }, legs, in: context, seed: seed, "not")
        try check(#Predicate<Leg> { $0.from.contains("or") }, legs, in: context, seed: seed, "string contains")
        try check(#Predicate<Leg> { $0.from.starts(with: "Bra") }, legs, in: context, seed: seed, "starts with")
        // Parts that read no model are worked out first, as a search field's predicate needs.
        for search in ["", "or"] {
            try check(
                #Predicate<Leg> { search.isEmpty || $0.from.localizedStandardContains(search) }, legs, in: context, seed: seed,
                "empty search or contains (\(search))")
        }
        try check(#Predicate<Leg> { $0.transport.rawValue == "plane" }, legs, in: context, seed: seed, "an enum's raw value")
        let names = ["Faro", "Braga"]
        try check(#Predicate<Leg> { names.count > 1 && names.contains($0.from) }, legs, in: context, seed: seed, "a constant's count")
        // `? :` between conditions, with a test that reads the model or not.
        try check(
            #Predicate<Leg> { $0.from == "Faro" ? $0.transport == train : $0.backup == nil }, legs, in: context, seed: seed,
            "conditional")
        for onlyPorto in [true, false] {
            try check(
                #Predicate<Leg> { onlyPorto ? $0.from == porto : true }, legs, in: context, seed: seed, "constant test (\(onlyPorto))")
        }
        // `? :` between values: the condition around it splits on the test.
        try check(
            #Predicate<Leg> { ($0.transport == train ? $0.from : "none") == porto }, legs, in: context, seed: seed, "conditional value")
        try check(
            #Predicate<Leg> { ($0.backup == nil ? $0.from : $0.journey?.title ?? "") != "" && $0.from < "M" }, legs, in: context,
            seed: seed, "conditional value with ?? in a branch")
        // Case and diacritics ignored ("EVO" finds "Évora", "port" finds "Porto" and "porto"), as a search field does.
        for search in ["port", "EVO", "o", ""] {
            try check(
                #Predicate<Leg> { $0.from.localizedStandardContains(search) }, legs, in: context, seed: seed,
                "localizedStandardContains(\(search))")
        }
        // caseInsensitiveCompare against a captured result (Linux's Foundation lacks it; OpenSwiftData supplies it).
        let same = ComparisonResult.orderedSame
        try check(#Predicate<Leg> { $0.from.caseInsensitiveCompare("PORTO") == same }, legs, in: context, seed: seed, "same, ignoring case")
        try check(
            #Predicate<Leg> { same != $0.from.caseInsensitiveCompare(porto) }, legs, in: context, seed: seed, "not the same, ignoring case")
        try check(#Predicate<Leg> { ["Faro", "Braga"].contains($0.from) }, legs, in: context, seed: seed, "in a list")
        try check(#Predicate<Leg> { $0.journey?.title == "Journey 2" }, legs, in: context, seed: seed, "through a to-one")
        try check(#Predicate<Leg> { $0.journey == nil }, legs, in: context, seed: seed, "no to-one")
        try check(#Predicate<Journey> { $0.legs.count >= 2 }, journeys, in: context, seed: seed, "to-many count")
        // Integer arithmetic as Swift does it, ranges, a string's count.
        try check(#Predicate<Journey> { $0.legs.count % 2 == 1 }, journeys, in: context, seed: seed, "remainder")
        try check(#Predicate<Journey> { $0.legs.count / 2 == 1 }, journeys, in: context, seed: seed, "integer division")
        try check(#Predicate<Journey> { -$0.legs.count < -2 }, journeys, in: context, seed: seed, "unary minus")
        let (low, high) = (1, 3)
        try check(#Predicate<Journey> { (low...high).contains($0.legs.count) }, journeys, in: context, seed: seed, "closed range")
        try check(#Predicate<Journey> { (low..<high).contains($0.legs.count) }, journeys, in: context, seed: seed, "half-open range")
        let captured = 2..<4
        try check(#Predicate<Journey> { captured.contains($0.legs.count) }, journeys, in: context, seed: seed, "captured range")
        try check(#Predicate<Leg> { ("F"..."P").contains($0.from) }, legs, in: context, seed: seed, "range of strings")
        try check(#Predicate<Leg> { $0.from.count == 5 }, legs, in: context, seed: seed, "a string's count")
        try check(#Predicate<Leg> { $0.from.count > $0.from.count / 2 + 2 }, legs, in: context, seed: seed, "a string's count, twice")
        try check(#Predicate<Journey> { $0.cost > 20 && $0.link != nil }, journeys, in: context, seed: seed, "decimal, optional URL")
        try check(#Predicate<Journey> { $0.legs.contains { $0.transport == train } }, journeys, in: context, seed: seed, "contains where")
        try check(#Predicate<Journey> { $0.legs.allSatisfy { $0.from != "" } }, journeys, in: context, seed: seed, "all satisfy")
        let legID = legs[0].persistentModelID
        try check(
            #Predicate<Journey> { $0.legs.contains { $0.persistentModelID == legID } }, journeys, in: context, seed: seed,
            "a model's identifier")
        let journeyID = journeys[1].persistentModelID
        try check(#Predicate<Leg> { $0.journey?.persistentModelID == journeyID }, legs, in: context, seed: seed, "a to-one's identifier")
        // `??`, as a value and after an optional chain's condition.
        let plane = Transport.plane
        try check(#Predicate<Leg> { ($0.backup ?? plane) == plane }, legs, in: context, seed: seed, "?? as a value")
        try check(#Predicate<Leg> { ($0.backup ?? plane) != plane || $0.from == "" }, legs, in: context, seed: seed, "?? in a disjunction")
        try check(#Predicate<Leg> { $0.journey?.title.contains("1") ?? false }, legs, in: context, seed: seed, "chain ?? false")
        try check(#Predicate<Leg> { !($0.journey?.title.contains("1") ?? false) }, legs, in: context, seed: seed, "not (chain ?? false)")
        try check(#Predicate<Leg> { $0.journey?.legs.isEmpty ?? true }, legs, in: context, seed: seed, "chain ?? true")
        // `isEmpty` (of a to-many, of a string), compared with a Bool, `filter { }.count`.
        try check(#Predicate<Journey> { $0.legs.isEmpty }, journeys, in: context, seed: seed, "to-many isEmpty")
        try check(#Predicate<Journey> { $0.legs.isEmpty == false }, journeys, in: context, seed: seed, "isEmpty == false")
        try check(#Predicate<Leg> { !$0.from.isEmpty }, legs, in: context, seed: seed, "string isEmpty")
        try check(
            #Predicate<Journey> { $0.legs.filter { $0.transport == train }.count >= 1 }, journeys, in: context, seed: seed, "filter count")
    }

    @Test func anExpressionOpenSwiftDataCannotRunThrowsAnErrorNamingIt() throws {
        let (context, _, _) = try fixture(seed: 7)
        let predicate = #Predicate<Journey> { $0.legs.first?.from == "Porto" }
        #expect {
            try context.fetch(FetchDescriptor<Journey>(predicate: predicate))
        } throws: { error in
            "\(error)".contains("to-many relationship of Leg")
        }
    }

    /// Errors are of SwiftData's kinds, matched as apps match them (`catch SwiftDataError.unsupportedPredicate`),
    /// whatever their messages say.
    @Test func errorsAreOfSwiftDataKinds() throws {
        let (context, _, _) = try fixture(seed: 7)
        let before = ComparisonResult.orderedAscending
        do {
            _ = try context.fetch(FetchDescriptor<Leg>(predicate: #Predicate { $0.from.caseInsensitiveCompare("x") == before }))
            Issue.record("the fetch ran")
        } catch SwiftDataError.unsupportedPredicate {
        } catch {
            Issue.record("\(error) is not .unsupportedPredicate")
        }
        #expect(throws: SwiftDataError.unsupportedKeyPath) {
            try context.fetch(FetchDescriptor<Journey>(predicate: #Predicate { $0.legs.first?.from == "Porto" }))
        }
        #expect(throws: SwiftDataError.duplicateConfiguration) {
            try ModelContainer(
                for: Leg.self, configurations: ModelConfiguration("same", isStoredInMemoryOnly: true),
                ModelConfiguration("same", isStoredInMemoryOnly: true))
        }
        #expect(SwiftDataError.unsupportedPredicate != .unsupportedKeyPath)
        #expect(SwiftDataError.loadIssueModelContainer == .loadIssueModelContainer)
    }
}
