// `swift run groceries-swiftdata`: the groceries walk-through in SwiftData's form (see GroceriesWalkThrough);
// `swift run groceries-swiftdata --live`: the grocery list as a live table in the terminal, driven by a ModelQuery.
// `--store PATH` keeps the store at PATH instead of the application support folder.

import Foundation
import SwiftDataSeedApps

let arguments = Array(CommandLine.arguments.dropFirst())
var storeURL = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
    .appendingPathComponent("groceries-swiftdata.store")
if let index = arguments.firstIndex(of: "--store") {
    guard index + 1 < arguments.count, !arguments[index + 1].isEmpty else {
        print("groceries-swiftdata: --store needs the path of a store file")
        exit(2)
    }
    storeURL = URL(fileURLWithPath: arguments[index + 1])
}
do {
    if arguments.contains("--live") {
        try GroceriesLiveTable.runTerminal(storeURL: storeURL)
    } else {
        try await GroceriesWalkThrough.run(storeURL: storeURL) { print($0) }
    }
} catch {
    print("groceries-swiftdata failed: \(error)")
    exit(1)
}
