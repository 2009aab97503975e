import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Typed subclasses, next to key-value access on the same model.
final class Team: NSManagedObject {
    @Managed var name: String?
    @Managed var size: Int16
    @Managed var founded: Date?
    @Managed var score: Double
    @Managed var open: Bool
    @Managed("motto") var slogan: String?
    @Managed var players: Set<Player>
}

final class Player: NSManagedObject {
    @Managed var name: String?
    @Managed var team: Team?
}

/// Two properties declared on one line, and a subclass adding one: each `@Managed` property finds its own key.
class Pair: NSManagedObject {
    // swift-format-ignore
    @Managed var left: Int32;    @Managed var right: Int32
}

final class LabelledPair: Pair {
    @Managed var label: String?
}

/// Swift types that differ from their attributes' types: the typed setter's direct path must convert them as
/// `setValue(_:forKey:)` does.
final class Gauge: NSManagedObject {
    @Managed var flag: Int  // a boolean attribute
    @Managed var count: Bool  // an integer 32 attribute
    @Managed var ratio: Float  // a double attribute
    @Managed var small: Int  // an integer 16 attribute
    @Managed var note: String?

    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Gauge", managedObjectClass: Gauge.self) {
                Attribute("flag", .boolean)
                Attribute("count", .integer32)
                Attribute("ratio", .double)
                Attribute("small", .integer16)
                Attribute("note", .string)
            }
        }
    }
}

/// A class two entities share.
final class SharedLabel: NSManagedObject {
    @Managed var label: String?
}

/// A generic subclass: each specialization has its own storage key paths.
final class Box<Tag>: NSManagedObject {
    @Managed var label: String?
}

@Suite struct TypedSubclassTests {
    @Test func typedSettersConvertAndCheckValuesAsSetValueDoes() throws {
        let context = try TestStack(model: try Gauge.model()).context()
        let typed = Gauge(context: context)
        (typed.flag, typed.count, typed.ratio, typed.small, typed.note) = (1, true, 0.1, -300, "n")
        let keyed = try context.make("Gauge", ["flag": 1, "count": true, "ratio": Float(0.1), "small": -300, "note": "n"])
        for key in ["flag", "count", "ratio", "small", "note"] {
            let a = typed.value(forKey: key) as? NSObject
            let b = keyed.value(forKey: key) as? NSObject
            #expect(a == b, "\(key): typed \(String(describing: a)), setValue \(String(describing: b))")
        }
        #expect(typed.value(forKey: "flag") as? Bool == true)
        #expect(typed.value(forKey: "ratio") as? Double == Double(Float(0.1)))
        typed.note = nil
        #expect(typed.value(forKey: "note") == nil)
        #expect(typed.changedValues()["note"] is NSNull)
    }

    /// A typed accessor cannot throw: a value its attribute cannot hold stops the process, as documented on `@Managed`,
    /// rather than being stored (the direct path still checks the attribute's range).
    @Test func aTypedValueOutOfItsAttributesRangeStops() async {
        await #expect(processExitsWith: .failure) {
            let stack = try TestStack(model: try Gauge.model(), inMemory: true)
            let gauge = Gauge(context: stack.context())
            gauge.small = 70_000
        }
    }

    @Test func anOptionalRelationshipSetToNilThroughATypedPropertyClearsBothSides() throws {
        let context = try TestStack(model: try model()).context()
        let team = Team(context: context)
        let player = Player(context: context)
        player.team = team
        #expect(team.players == [player])
        player.team = nil
        #expect(player.team == nil)
        #expect(team.players.isEmpty)
    }

    /// One class for two entities whose property lists differ: a typed property lands on its own key in each,
    /// whichever entity the previous object had.
    @Test func aClassSharedByTwoEntitiesSetsEachEntitysOwnProperty() throws {
        let model = try NSManagedObjectModel {
            Entity("Plain", managedObjectClass: SharedLabel.self) { Attribute("label", .string) }
            Entity("Wide", managedObjectClass: SharedLabel.self) {
                Attribute("extra", .string)
                Attribute("label", .string)
            }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        for i in 0..<4 {
            let plain = SharedLabel(entity: try context.entity(named: "Plain"), insertInto: context)
            let wide = SharedLabel(entity: try context.entity(named: "Wide"), insertInto: context)
            plain.label = "plain \(i)"
            wide.label = "wide \(i)"
            #expect(plain.value(forKey: "label") as? String == "plain \(i)")
            #expect(wide.value(forKey: "label") as? String == "wide \(i)")
            #expect(wide.value(forKey: "extra") == nil, "the wide entity's first property is untouched")
        }
    }

    @Test func specializationsOfAGenericSubclassEachFindTheirKey() throws {
        let model = try NSManagedObjectModel {
            Entity("IntBox", managedObjectClass: Box<Int>.self) { Attribute("label", .string) }
            Entity("TextBox", managedObjectClass: Box<String>.self) { Attribute("label", .string) }
        }
        let stack = try TestStack(model: model)
        let context = stack.context()
        for i in 0..<50 {
            let a = Box<Int>(entity: try context.entity(named: "IntBox"), insertInto: context)
            let b = Box<String>(entity: try context.entity(named: "TextBox"), insertInto: context)
            a.label = "int \(i)"
            b.label = "text \(i)"
            #expect(a.value(forKey: "label") as? String == "int \(i)")
            #expect(b.label == "text \(i)")
        }
        try context.save()
        #expect(try context.objects("TextBox").count == 50)
    }

    @Test func propertiesDeclaredOnOneLineAndInSubclassesFindTheirKeys() throws {
        let model = try NSManagedObjectModel {
            Entity("Pair", managedObjectClass: LabelledPair.self) {
                Attribute("left", .integer32, default: 0)
                Attribute("right", .integer32, default: 0)
                Attribute("label", .string)
            }
        }
        let context = try TestStack(model: model).context()
        for i in 0..<3 {
            let pair = LabelledPair(context: context)
            (pair.left, pair.right, pair.label) = (Int32(i), Int32(10 + i), "p\(i)")
            #expect(pair.value(forKey: "left") as? Int32 == Int32(i))
            #expect(pair.value(forKey: "right") as? Int32 == Int32(10 + i))
            #expect(pair.value(forKey: "label") as? String == "p\(i)")
            #expect((pair.left, pair.right, pair.label) == (Int32(i), Int32(10 + i), "p\(i)"))
        }
    }

    func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Team", managedObjectClass: Team.self) {
                Attribute("name", .string)
                Attribute("size", .integer16, default: 11)
                Attribute("founded", .date)
                Attribute("score", .double)
                Attribute("open", .boolean)
                Attribute("motto", .string)
                Relationship("players", to: "Player", toMany: true, inverse: "team")
            }
            Entity("Player", managedObjectClass: Player.self) {
                Attribute("name", .string)
                Relationship("team", to: "Team", inverse: "players")
            }
            Entity("Referee") { Attribute("name", .string) }
        }
    }

    @Test func typedPropertiesReadAndWriteManagedValues() throws {
        let stack = try TestStack(model: try model())
        let context = stack.context()
        let team = Team(context: context)
        #expect(team.size == 11, "default value through a typed property")
        team.name = "Lions"
        team.slogan = "Roar"
        team.open = true
        team.score = 2.5
        let player = Player(context: context)
        player.name = "Zed"
        player.team = team
        #expect(team.players == [player])
        // The untyped API sees the same values; a plain entity lives in the same model.
        #expect(team.value(forKey: "motto") as? String == "Roar")
        let referee = try context.make("Referee", ["name": "Ref"])
        #expect(type(of: referee) == NSManagedObject.self)
        try context.save()

        let fresh = stack.context()
        let teams = try fresh.fetch(Team.fetchRequest())
        let loaded = try #require(teams.first)
        #expect(loaded.name == "Lions" && loaded.slogan == "Roar" && loaded.open && loaded.score == 2.5)
        #expect(loaded.players.map(\.name) == ["Zed"])
        let players = try fresh.fetch(NSFetchRequest<Player>(entityName: "Player"))
        #expect(players.first?.team === loaded)
    }

    @Test func aRequestTypedForTheWrongClassThrows() throws {
        let stack = try TestStack(model: try model(), inMemory: true)
        let context = stack.context()
        _ = Team(context: context)
        let wrong = NSFetchRequest<Player>(entityName: "Team")
        let error = #expect(throws: CoreDataError.self) { _ = try context.fetch(wrong) }
        #expect(error?.code == .invalidFetchRequest)
    }
}

@Suite struct PortingConvenienceTests {
    @Test func entityLookupAndInsertNewObjectAsInSeedCode() throws {
        let stack = try TestStack(model: try TypedSubclassTests().model(), inMemory: true)
        let context = stack.context()
        #expect(NSEntityDescription.entity(forEntityName: "Team", in: context)?.name == "Team")
        #expect(NSEntityDescription.entity(forEntityName: "Nope", in: context) == nil)
        let team = NSEntityDescription.insertNewObject(forEntityName: "Team", into: context)
        #expect(team is Team, "the entity's class is used")
        #expect(team.isInserted)
        #expect(context.registeredObject(for: team.objectID) === team)
        #expect(throws: CoreDataError.self) { _ = try NSEntityDescription.checkedInsertNewObject(forEntityName: "Nope", into: context) }
    }
}

/// `mutableSetValue(forKey:)`: a live view of an unordered to-many whose changes set the relationship and its inverses.
@Suite struct MutableSetTests {
    @Test func changesThroughTheViewSetTheRelationshipAndItsInverses() throws {
        let stack = try TestStack(
            model: try NSManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("members", to: "Person", toMany: true, inverse: "teams")
                }
                Entity("Person") {
                    Attribute("name", .string)
                    Relationship("teams", to: "Team", toMany: true, inverse: "members")
                }
            })
        let context = stack.context()
        try context.performAndWait {
            let team = try context.make("Team", ["name": "red"])
            let (ada, bob, cy) = (
                try context.make("Person", ["name": "ada"]), try context.make("Person", ["name": "bob"]),
                try context.make("Person", ["name": "cy"])
            )
            let members = team.mutableSetValue(forKey: "members")
            members.add(ada)
            members.addObjects(from: [bob, cy])
            #expect(members.count == 3 && members.contains(bob))
            #expect((bob.value(forKey: "teams") as? Set<NSManagedObject>) == [team], "the inverse follows")
            members.remove(bob)
            #expect((bob.value(forKey: "teams") as? Set<NSManagedObject>)?.isEmpty == true)
            members.intersect([ada, bob])
            #expect(Set(members.compactMap { $0.string("name") }) == ["ada"])
            try context.save()
            // A view taken earlier reads the relationship as it is now.
            team.setValue(Set([cy]), forKey: "members")
            #expect(members.allObjects == [cy])
            members.removeAllObjects()
            #expect(team.hasChanges && (cy.value(forKey: "teams") as? Set<NSManagedObject>)?.isEmpty == true)
            try context.save()
        }
        let fresh = stack.context()
        #expect(try fresh.performAndWait { try fresh.objects("Team")[0].mutableSetValue(forKey: "members").count } == 0)
    }
}
