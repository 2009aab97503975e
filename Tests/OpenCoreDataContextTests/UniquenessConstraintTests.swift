import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// Uniqueness constraints: Core Data's unique indexes, and a save that breaks one failing by name with nothing
/// written — two objects of the save (1551) or one and a stored object (133021).
@Suite struct UniquenessConstraintTests {
    let dir = TemporaryDirectory()

    func model() throws -> NSManagedObjectModel {
        try dir.loadModel(
            "Garage",
            """
                <entity name="Car" representedClassName="Car" syncable="YES">
                    <attribute name="numberPlate" optional="YES" attributeType="String"/>
                    <attribute name="model" optional="YES" attributeType="String"/>
                    <uniquenessConstraints>
                        <uniquenessConstraint>
                            <constraint value="numberPlate"/>
                        </uniquenessConstraint>
                    </uniquenessConstraints>
                </entity>
                <entity name="Person" representedClassName="Person" syncable="YES">
                    <attribute name="firstName" optional="YES" attributeType="String"/>
                    <attribute name="lastName" optional="YES" attributeType="String"/>
                    <uniquenessConstraints>
                        <uniquenessConstraint>
                            <constraint value="firstName"/>
                            <constraint value="lastName"/>
                        </uniquenessConstraint>
                    </uniquenessConstraints>
                </entity>
            """)
    }

    @Test func theStoreHasCoreDatasUniqueIndexes() throws {
        let model = try model()
        #expect(model.entitiesByName["Person"]?.uniquenessConstraints == [["firstName", "lastName"]])
        let stack = try TestStack(model: model)
        let indexes = try DatabaseQueue(path: stack.storeURL.path).read { db in
            try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND sql LIKE '%UNIQUE%' ORDER BY name")
        }
        #expect(
            indexes == [
                #"CREATE UNIQUE INDEX "Z_Car_UNIQUE_numberPlate" ON "ZCAR" ("ZNUMBERPLATE" COLLATE BINARY ASC)"#,
                #"CREATE UNIQUE INDEX "Z_Person_UNIQUE_firstName_lastName" ON "ZPERSON" ("ZFIRSTNAME" COLLATE BINARY ASC, "ZLASTNAME" COLLATE BINARY ASC)"#,
            ])
    }

    @Test func savesThatBreakAConstraintFailByNameAndWriteNothing() throws {
        let stack = try TestStack(model: model())
        let context = stack.context()
        try context.performAndWait {
            try context.make("Car", ["numberPlate": "AB-123", "model": "first"])
            try context.make("Person", ["firstName": "Ada", "lastName": "Lovelace"])
            try context.make("Car", ["model": "no plate"])
            try context.make("Car", ["model": "no plate either"])  // nil values may repeat
            try context.save()

            // Two new objects alike.
            let a = try context.make("Car", ["numberPlate": "XY-9"])
            try context.make("Car", ["numberPlate": "XY-9"])
            let twins = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(
                twins?.code == .constraintValidation && twins?.message.contains("numberPlate = XY-9") == true, "\(twins?.message ?? "")")
            a.setValue("XY-10", forKey: "numberPlate")
            try context.save()

            // A new object alike a stored one, on a constraint of two keys.
            let ada = try context.make("Person", ["firstName": "Ada", "lastName": "Lovelace"])
            let conflict = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(conflict?.code == .constraintConflict && conflict?.entityName == "Person" && conflict?.key == "firstName, lastName")
            #expect(conflict?.message.contains("stored object x-coredata://") == true, "\(conflict?.message ?? "")")
            context.delete(ada)
            // An update into a stored object's values.
            let car = try #require(try context.objects("Car", "numberPlate == 'XY-10'").first)
            car.setValue("AB-123", forKey: "numberPlate")
            let update = #expect(throws: CoreDataError.self) { try context.save() }
            #expect(update?.code == .constraintConflict && update?.message.contains("AB-123") == true)
        }
        let reader = stack.context()
        let (cars, people, renamed) = try reader.performAndWait {
            (
                try reader.count(for: NSFetchRequest<NSManagedObject>(entityName: "Car")), try reader.objects("Person").count,
                try reader.objects("Car", "numberPlate == 'XY-10'").count
            )
        }
        #expect(cars == 5 && people == 1)
        #expect(renamed == 1, "the failed update wrote nothing")
    }

    @Test func aConstraintOnAKeyTheEntityLacksIsRefused() throws {
        let error = #expect(throws: CoreDataError.self) {
            _ = try NSManagedObjectModel { Entity("Car", unique: [["plate"]]) { Attribute("numberPlate", .string) } }
        }
        #expect(error?.code == .invalidModel && error?.message.contains("'plate'") == true)
    }
}

/// Fetch indexes, compound indexes and indexed attributes become Core Data's `Z_<Entity>_<name>` indexes, and
/// fetches by them use them.
@Suite struct FetchIndexTests {
    let dir = TemporaryDirectory()

    @Test func modelIndexesBecomeStoreIndexes() throws {
        let model = try dir.loadModel(
            "Indexed",
            """
                <entity name="Event" representedClassName="Event" syncable="YES">
                    <attribute name="day" optional="YES" attributeType="Date" indexed="YES"/>
                    <attribute name="kind" optional="YES" attributeType="String"/>
                    <attribute name="score" optional="YES" attributeType="Integer 32"/>
                    <fetchIndex name="byKindScore">
                        <fetchIndexElement property="kind" type="Binary" order="ascending"/>
                        <fetchIndexElement property="score" type="Binary" order="descending"/>
                    </fetchIndex>
                    <fetchIndex name="byExpression">
                        <fetchIndexElement expression="1" expressionType="String" type="Binary" order="ascending"/>
                    </fetchIndex>
                    <compoundIndexes>
                        <compoundIndex>
                            <index value="score"/>
                            <index value="day"/>
                        </compoundIndex>
                    </compoundIndexes>
                </entity>
            """)
        #expect(model.entitiesByName["Event"]?.indexes.map(\.name).sorted() == ["byKindScore", "day", "score_day"])
        let stack = try TestStack(model: model)
        let (indexes, plan) = try DatabaseQueue(path: stack.storeURL.path).read { db in
            (
                try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND name LIKE 'Z_Event_%' ORDER BY name"),
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT Z_PK FROM ZEVENT WHERE ZKIND = 'a' ORDER BY ZSCORE DESC")
                    .map { $0["detail"] as String? ?? "" }.joined(separator: "; ")
            )
        }
        #expect(
            indexes == [
                #"CREATE INDEX "Z_Event_byKindScore" ON "ZEVENT" ("ZKIND" COLLATE BINARY ASC, "ZSCORE" COLLATE BINARY DESC)"#,
                #"CREATE INDEX "Z_Event_day" ON "ZEVENT" ("ZDAY" COLLATE BINARY ASC)"#,
                #"CREATE INDEX "Z_Event_score_day" ON "ZEVENT" ("ZSCORE" COLLATE BINARY ASC, "ZDAY" COLLATE BINARY ASC)"#,
            ])
        #expect(plan.contains("Z_Event_byKindScore"), "\(plan)")
    }
}
