// swift-tools-version:6.1
// The predicate parser's fuzz target, kept out of the main package: it only links with `-sanitize=fuzzer`.
// Run it with `Fuzz/run.sh [seconds]`.
import PackageDescription

let package = Package(
    name: "OpenCoreDataFuzz",
    dependencies: [.package(name: "OpenCoreData", path: "..")],
    targets: [
        .executableTarget(
            name: "predicate-fuzzer",
            dependencies: [.product(name: "OpenCoreData", package: "OpenCoreData")],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])])
    ],
    swiftLanguageModes: [.v6]
)
