import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Fetch requests stored in a model file (Xcode's "Fetch Requests"), made into fetch requests with their variables
/// substituted.
@Suite struct FetchRequestTemplateTests {
    let dir = TemporaryDirectory()

    func model(_ templates: String) throws -> NSManagedObjectModel {
        let folder = try dir.writeModel(
            "Shop-\(UUID().uuidString)",
            """
                <entity name="Product" representedClassName="Product" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String" syncable="YES"/>
                    <attribute name="price" optional="YES" attributeType="Double" defaultValueString="0.0" usesScalarValueType="YES" syncable="YES"/>
                </entity>
                \(templates)
                <elements>
                    <element name="Product" positionX="-63" positionY="-18" width="128" height="73"/>
                </elements>
            """)
        return try NSManagedObjectModel(contentsOf: folder)
    }

    @Test func templatesBecomeFetchRequestsWithTheirVariablesSubstituted() throws {
        let model = try model(
            """
            <fetchRequest name="CheapProducts" entity="Product" predicateString="price &lt; $PRICE" fetchLimit="2" includePropertyValues="YES"/>
            <fetchRequest name="AllProducts" entity="Product" fetchBatchSize="20" returnObjectsAsFaults="NO"/>
            """)
        #expect(model.fetchRequestTemplateDescriptions.keys.sorted() == ["AllProducts", "CheapProducts"])
        let all = try #require(model.fetchRequestTemplate(forName: "AllProducts"))
        #expect(all.entityName == "Product" && all.predicate == nil && all.fetchBatchSize == 20 && !all.returnsObjectsAsFaults)

        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            for (name, price) in [("Tea", 3.0), ("Coffee", 8.0), ("Water", 1.0), ("Juice", 4.0)] {
                try context.make("Product", ["name": name, "price": price])
            }
            try context.save()
            let cheap = try #require(model.fetchRequestFromTemplate(withName: "CheapProducts", substitutionVariables: ["PRICE": 5]))
            #expect(cheap.fetchLimit == 2)
            cheap.sortDescriptors = [FetchSortDescriptor(key: "price")]
            let names = try context.fetch(cheap).compactMap { ($0 as? NSManagedObject)?.string("name") }
            #expect(names == ["Water", "Tea"])
        }
        // Without the variable, the template cannot be made: nil from Apple's form, the reason from the checked one.
        #expect(model.fetchRequestFromTemplate(withName: "CheapProducts", substitutionVariables: [:]) == nil)
        #expect {
            _ = try model.checkedFetchRequest(fromTemplate: "CheapProducts", substitutionVariables: [:])
        } throws: { error in
            let message = (error as? CoreDataError)?.message ?? ""
            return message.contains("'CheapProducts'") && message.contains("PRICE")
        }
        #expect(model.fetchRequestTemplate(forName: "Missing") == nil)
        #expect(throws: CoreDataError.self) { _ = try model.checkedFetchRequest(fromTemplate: "Missing", substitutionVariables: nil) }
    }

    @Test func aTemplateOfAnEntityTheModelLacksIsNamed() {
        #expect {
            _ = try model(#"<fetchRequest name="Ghosts" entity="Ghost"/>"#)
        } throws: { error in
            let message = (error as? CoreDataError)?.message ?? ""
            return message.contains("'Ghosts'") && message.contains("'Ghost'") && message.contains("line")
        }
    }
}
