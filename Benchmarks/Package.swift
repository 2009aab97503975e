// swift-tools-version:6.1
// Benchmarks live in their own package so that library users never pull their dependencies.
// Run: `swift run -c release --package-path Benchmarks ocd-benchmarks` (see the README).
import PackageDescription

let package = Package(
    name: "OpenCoreDataBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "OpenCoreData", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // W10: the PostgreSQL store's peer, postgres-nio used directly (the client the store itself uses).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        // The system SQLite C API, for the "raw SQLite" contender.
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "RawSQLite", dependencies: ["CSQLite"]),
        // glibc's heap statistics, for memory held per row.
        .systemLibrary(name: "CHeap"),
        // W6's SwiftData contender (`@Model`), importing OpenSwiftData alone.
        .target(name: "SwiftDataContenders", dependencies: [.product(name: "OpenSwiftData", package: "OpenCoreData")]),
        .executableTarget(
            name: "ocd-benchmarks",
            dependencies: [
                .product(name: "OpenCoreData", package: "OpenCoreData"), .product(name: "GRDB", package: "GRDB.swift"), "RawSQLite",
                "CHeap", "SwiftDataContenders",
                // W9: the web table, measured in headless Chromium.
                .product(name: "OpenCoreDataLiveTable", package: "OpenCoreData"),
                .product(name: "OpenCoreDataWebTable", package: "OpenCoreData"),
                .product(name: "OpenCoreDataBrowserTesting", package: "OpenCoreData"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
