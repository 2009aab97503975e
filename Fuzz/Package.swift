// swift-tools-version:6.1
// Fuzz targets, kept out of the main package: they only link with `-sanitize=fuzzer`.
// Run them with `Fuzz/run.sh [seconds per target] [target…]`.
import PackageDescription

let fuzzTarget: (String, [Target.Dependency]) -> Target = { name, dependencies in
    .executableTarget(
        name: name, dependencies: ["FuzzDriver", .product(name: "OpenCoreData", package: "OpenCoreData")] + dependencies,
        swiftSettings: [.unsafeFlags(["-parse-as-library"])])
}

let package = Package(
    name: "OpenCoreDataFuzz",
    dependencies: [.package(name: "OpenCoreData", path: "..")],
    targets: [
        .target(name: "FuzzDriver"),
        // The predicate parser and printer: no crash, and what parses prints to a format that parses back the same.
        fuzzTarget("predicate-fuzzer", []),
        // The JSON import of the `coredata` tool, end to end: no crash, and a failed import leaves no store.
        fuzzTarget("json-import-fuzzer", [.product(name: "CoreDataCommandLine", package: "OpenCoreData")]),
        // The SQL compiler: every predicate that parses compiles to SQL that SQLite accepts, or to a named error.
        fuzzTarget("sql-compiler-fuzzer", []),
    ],
    swiftLanguageModes: [.v6]
)
