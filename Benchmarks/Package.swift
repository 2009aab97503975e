// swift-tools-version:6.1
// Benchmarks live in their own package so that library users never pull their dependencies.
// Run: `swift run -c release --package-path Benchmarks ocd-benchmarks` (see the README).
import PackageDescription

let package = Package(
    name: "OpenCoreDataBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "OpenCoreData", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        // The system SQLite C API, for the "raw SQLite" contender.
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "RawSQLite", dependencies: ["CSQLite"]),
        // glibc's heap statistics, for memory held per row.
        .systemLibrary(name: "CHeap"),
        .executableTarget(
            name: "ocd-benchmarks",
            dependencies: [
                .product(name: "OpenCoreData", package: "OpenCoreData"), .product(name: "GRDB", package: "GRDB.swift"), "RawSQLite",
                "CHeap",
            ]),
    ],
    swiftLanguageModes: [.v6]
)
