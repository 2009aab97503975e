import Foundation
import OpenCoreData
import OpenCoreDataTesting
import Testing
import _TestSupport

/// A controller whose predicate, sort and sections read composite elements (`address.city`): its batches keep a table
/// in step through random edits of the composites, saved and unsaved.
@Suite struct CompositeControllerTests {
    let dir = TemporaryDirectory()

    @Test func aControllerFollowsEditsOfCompositeElements() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["OCD_SEED"] ?? "") ?? UInt64.random(in: 0..<1_000_000)
        var random = SeededGenerator(seed: seed)
        let model = try dir.loadModel(
            "Shops",
            """
                <entity name="Shop" representedClassName="Shop" syncable="YES">
                    <attribute name="name" optional="YES" attributeType="String"/>
                    <attribute name="address" optional="YES" attributeType="Composite" composite="Address"/>
                </entity>
                <composite name="Address">
                    <attribute name="city" optional="YES" attributeType="String"/>
                    <attribute name="number" optional="YES" attributeType="Integer 64" defaultValueString="0"/>
                </composite>
            """)
        let stack = try TestStack(model: model)
        let context = stack.context()
        try context.performAndWait {
            let cities = ["Lyon", "Nice", "Pau"]
            func address() -> [String: Any] {
                ["city": cities.randomElement(using: &random)!, "number": Int.random(in: 0..<20, using: &random)]
            }
            for i in 0..<6 { try context.make("Shop", ["name": "s\(i)", "address": address()]) }
            try context.save()
            let request = NSFetchRequest<NSManagedObject>(entityName: "Shop")
            request.predicate = try FetchPredicate(format: "address.number >= 5")
            request.sortDescriptors = [FetchSortDescriptor(key: "address.city"), FetchSortDescriptor(key: "address.number")]
            let frc = NSFetchedResultsController(
                fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "address.city", cacheName: nil)
            let recorder = DelegateRecorder()
            frc.delegate = recorder
            try frc.performFetch()
            let table = recorder.followedTable(of: frc, context: "seed \(seed): ")
            for step in 0..<40 {
                let shops = try context.objects("Shop")
                switch Int.random(in: 0..<4, using: &random) {
                case 0: try context.make("Shop", ["name": "n\(step)", "address": address()])
                case 1 where !shops.isEmpty: context.delete(shops.randomElement(using: &random)!)
                default:
                    if let shop = shops.randomElement(using: &random) { shop.setValue(address(), forKey: "address") }
                }
                if Bool.random(using: &random) { try context.save() } else { context.processPendingChanges() }
                let fresh = sectioned(try context.fetch(request), by: "address.city")
                #expect(frc.shownItems == fresh, "seed \(seed), step \(step)")
                #expect(table.items == frc.shownItems, "seed \(seed), step \(step)")
                if frc.shownItems != fresh || table.items != frc.shownItems { break }
            }
            #expect(!recorder.batches.isEmpty)
        }
    }
}
