// swift-tools-version:6.1
import CompilerPluginSupport
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "OpenCoreData",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "OpenCoreData", targets: ["OpenCoreData"]),
        // For your test targets: a table-view model that checks a controller's batches as UIKit would.
        .library(name: "OpenCoreDataTesting", targets: ["OpenCoreDataTesting"]),
        // Opt-in: Apple's spellings (NSPredicate, NSSortDescriptor, …) so that Core Data code compiles with only its
        // `import CoreData` changed to `import OpenCoreDataCompatibility`.
        .library(name: "OpenCoreDataCompatibility", targets: ["OpenCoreDataCompatibility"]),
        // A fetched results controller as a live table (sections, rows on demand, each batch as one update, scripted
        // sessions): the contract the terminal and web front ends draw from.
        .library(name: "OpenCoreDataLiveTable", targets: ["OpenCoreDataLiveTable"]),
        // The live table full-screen in a terminal.
        .library(name: "OpenCoreDataTerminalTable", targets: ["OpenCoreDataTerminalTable"]),
        // The live table in the browser (Hummingbird): only a package that uses this product builds the web server.
        .library(name: "OpenCoreDataWebTable", targets: ["OpenCoreDataWebTable"]),
        // For tests and benchmarks of what runs beside the library: programs waited for with a deadline, and a
        // headless Chromium driven through WebDriver.
        .library(name: "OpenCoreDataBrowserTesting", targets: ["OpenCoreDataBrowserTesting"]),
        .executable(name: "groceries", targets: ["groceries"]),
        .executable(name: "oil-changes", targets: ["oil-changes"]),
        .executable(name: "locations", targets: ["locations"]),
        .executable(name: "rss-reader", targets: ["rss-reader"]),
        .executable(name: "coredata", targets: ["coredata"]),
        .executable(name: "groceries-swiftdata", targets: ["groceries-swiftdata"]),
        // The tool's commands, to run them in-process (tests, the fuzz targets).
        .library(name: "CoreDataCommandLine", targets: ["CoreDataCommandLine"]),
        // Opt-in: SwiftData's API (`@Model`, `ModelContainer`, `ModelContext`, `FetchDescriptor`) on the same engine, so
        // that a file compiles with only its `import SwiftData` changed to `import OpenSwiftData`.
        .library(name: "OpenSwiftData", targets: ["OpenSwiftData"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // `swift package generate-documentation` (CI builds the DocC catalog with warnings as errors).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // The web table's HTTP server and its WebSocket (/changes).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        // The PostgreSQL store's client (the wire protocol in Swift on NIO, TLS through swift-nio-ssl), and NIO's event
        // loops its connections run on.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // OpenSwiftData's macros (`@Model` and its companions): the version that matches Swift 6.3.
        .package(url: "https://github.com/swiftlang/swift-syntax", from: "603.0.1"),
    ],
    targets: [
        // Layers, imports flowing one way: Model <- Predicate <- Store <- Context <- FetchedResults (+ Changes) <- OpenCoreData.
        .target(name: "OpenCoreDataModel", swiftSettings: strict),
        .target(name: "OpenCoreDataPredicate", dependencies: ["OpenCoreDataModel"], swiftSettings: strict),
        .target(
            name: "OpenCoreDataStore",
            dependencies: [
                "OpenCoreDataModel", "OpenCoreDataPredicate", .product(name: "GRDB", package: "GRDB.swift"),
                // GRDB's own SQLite module, for the C column functions on a statement GRDB prepared and steps.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        // The Swift runtime's `swift_tryRetain`, declared for C's calling convention (the registry's unretained entries).
        .target(name: "OpenCoreDataRuntimeShims"),
        .target(name: "OpenCoreDataContext", dependencies: ["OpenCoreDataStore", "OpenCoreDataRuntimeShims"], swiftSettings: strict),
        .target(name: "OpenCoreDataChanges", swiftSettings: strict),
        .target(
            name: "OpenCoreDataFetchedResults",
            dependencies: ["OpenCoreDataContext", "OpenCoreDataChanges", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict),
        .target(name: "OpenCoreData", dependencies: ["OpenCoreDataContext", "OpenCoreDataFetchedResults"], swiftSettings: strict),
        .target(name: "OpenCoreDataCompatibility", dependencies: ["OpenCoreData"], swiftSettings: strict),
        .target(name: "OpenCoreDataTesting", dependencies: ["OpenCoreDataChanges"], swiftSettings: strict),
        .macro(
            name: "OpenSwiftDataMacros",
            dependencies: [
                .product(name: "SwiftSyntax", package: "swift-syntax"), .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftSyntaxBuilder", package: "swift-syntax"), .product(name: "SwiftDiagnostics", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ],
            swiftSettings: strict),
        .target(
            name: "OpenSwiftData",
            dependencies: [
                "OpenCoreData", "OpenCoreDataRuntimeShims", "OpenSwiftDataMacros", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        .target(name: "OpenCoreDataBrowserTesting", swiftSettings: strict),

        // The `coredata` command-line tool: its commands live in a library so that tests can run them in-process.
        .target(
            name: "CoreDataCommandLine",
            dependencies: [
                "OpenCoreData", "OpenCoreDataLiveTable", "OpenCoreDataWebTable",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
        .executableTarget(name: "coredata", dependencies: ["CoreDataCommandLine"], path: "Tools/coredata", swiftSettings: strict),

        .executableTarget(
            name: "groceries", dependencies: ["OpenCoreData", "SeedApps"], path: "Examples/groceries", swiftSettings: strict),
        .target(name: "OpenCoreDataLiveTable", dependencies: ["OpenCoreData"], swiftSettings: strict),
        .target(name: "OpenCoreDataTerminalTable", dependencies: ["OpenCoreDataLiveTable"], swiftSettings: strict),
        .target(
            name: "OpenCoreDataWebTable",
            dependencies: [
                "OpenCoreDataLiveTable", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        // The seed apps, as a library so that tests run them in-process, and one executable each.
        .target(
            name: "SeedApps",
            dependencies: [
                "OpenCoreDataLiveTable", "OpenCoreDataTerminalTable", "OpenCoreDataWebTable",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/SeedApps", swiftSettings: strict),
        // The groceries walk-through in SwiftData's form, beside its Core Data form (`groceries`).
        .target(
            name: "SwiftDataSeedApps",
            dependencies: ["OpenSwiftData", "SeedApps", "OpenCoreDataLiveTable", "OpenCoreDataTerminalTable"],
            path: "Examples/SwiftDataSeedApps",
            swiftSettings: strict),
        .executableTarget(
            name: "groceries-swiftdata", dependencies: ["SwiftDataSeedApps"], path: "Examples/groceries-swiftdata", swiftSettings: strict),
        .executableTarget(name: "oil-changes", dependencies: ["SeedApps"], path: "Examples/oil-changes", swiftSettings: strict),
        .executableTarget(name: "locations", dependencies: ["SeedApps"], path: "Examples/locations", swiftSettings: strict),
        .executableTarget(name: "rss-reader", dependencies: ["SeedApps"], path: "Examples/rss-reader", swiftSettings: strict),

        .target(
            name: "_TestSupport", dependencies: ["OpenCoreData", "OpenCoreDataBrowserTesting"], path: "Tests/_TestSupport",
            resources: [.copy("Fixtures")], swiftSettings: strict),
        .testTarget(name: "OpenCoreDataModelTests", dependencies: ["OpenCoreDataModel", "_TestSupport"], swiftSettings: strict),
        .testTarget(name: "OpenCoreDataPredicateTests", dependencies: ["OpenCoreDataPredicate", "_TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "OpenCoreDataContextTests",
            dependencies: ["OpenCoreData", "_TestSupport", .product(name: "GRDB", package: "GRDB.swift")], swiftSettings: strict),
        .testTarget(name: "OpenCoreDataTests", dependencies: ["OpenCoreData", "_TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "OpenSwiftDataTests",
            dependencies: [
                "OpenSwiftData", "OpenSwiftDataMacros", "OpenCoreDataTesting", "SwiftDataSeedApps", "_TestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "SwiftSyntaxMacrosGenericTestSupport", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacroExpansion", package: "swift-syntax"),
            ],
            swiftSettings: strict),
        // Models declared as in an app target whose default isolation is the main actor (Xcode 26's default for new
        // apps): `nonisolated` model classes, a model actor, the main context.
        .testTarget(
            name: "OpenSwiftDataMainActorTests", dependencies: ["OpenSwiftData"],
            swiftSettings: strict + [.unsafeFlags(["-default-isolation", "MainActor"])]),
        // What every SQL back end must agree on: the SQL the relational core writes per dialect, word for word.
        .testTarget(
            name: "OpenCoreDataStoreConformanceTests",
            dependencies: ["OpenCoreData", "_TestSupport", .product(name: "GRDB", package: "GRDB.swift")], swiftSettings: strict),
        .testTarget(name: "OpenCoreDataChangesTests", dependencies: ["OpenCoreDataChanges", "OpenCoreDataTesting"], swiftSettings: strict),
        .testTarget(
            name: "OpenCoreDataFetchedResultsTests",
            dependencies: [
                "OpenCoreData", "_TestSupport", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        // The seeds' Core Data code as written for Apple platforms, compiled with only its import changed (and without
        // the project's stricter settings: user code need not write `any` before protocol types).
        .testTarget(
            name: "OpenCoreDataCompatibilityTests", dependencies: ["OpenCoreDataCompatibility", "_TestSupport"],
            resources: [.copy("Models")]),
        // Contexts on many queues at once; `.ci/run` also runs it under ThreadSanitizer (see the end of this file).
        .testTarget(name: "ConcurrencyStressTests", dependencies: ["OpenCoreData", "_TestSupport"], swiftSettings: strict),
        .testTarget(name: "CoreDataCommandLineTests", dependencies: ["CoreDataCommandLine", "_TestSupport"], swiftSettings: strict),
        .testTarget(name: "SeedAppsTests", dependencies: ["SeedApps", "OpenCoreDataLiveTable", "_TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "WebTableTests",
            dependencies: [
                "OpenCoreDataWebTable", "_TestSupport", .product(name: "Logging", package: "swift-log"),
                // A second server, of another origin, for the test that a foreign page is refused.
                .product(name: "Hummingbird", package: "hummingbird"),
            ], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)

// CI's ThreadSanitizer step sets OCD_STRESS_ONLY: the package is then the stress test and the layers under it, so that
// step does not build swift-syntax, the web server, the seed apps and every other test target a second time, with the
// sanitizer (`swift build --build-tests` builds every product and test target the manifest declares).
if Context.environment["OCD_STRESS_ONLY"] != nil {
    let needed: Set<String> = [
        "OpenCoreDataModel", "OpenCoreDataPredicate", "OpenCoreDataStore", "OpenCoreDataRuntimeShims", "OpenCoreDataContext",
        "OpenCoreDataChanges",
        "OpenCoreDataFetchedResults", "OpenCoreData", "OpenCoreDataBrowserTesting", "_TestSupport", "ConcurrencyStressTests",
    ]
    package.targets.removeAll { !needed.contains($0.name) }
    package.products.removeAll()
}
