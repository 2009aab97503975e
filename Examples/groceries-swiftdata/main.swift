// `swift run groceries-swiftdata`: the groceries walk-through in SwiftData's form (see GroceriesWalkThrough).

import Foundation
import SwiftDataSeedApps

let storeURL = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
    .appendingPathComponent("groceries-swiftdata.store")
do {
    try await GroceriesWalkThrough.run(storeURL: storeURL) { print($0) }
} catch {
    print("groceries-swiftdata failed: \(error)")
    exit(1)
}
