// libFuzzer target: every input is the JSON file of a `coredata import` into a new store, run in-process as the
// command line runs it. The import must never crash; it either succeeds (exit 0) or fails with a message (exit 1)
// and then leaves no store behind.
import CoreDataCommandLine
import Foundation
import FuzzDriver
import OpenCoreData

@_cdecl("json_import_fuzzer_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in
        guard let data else { return 0 }
        return fuzzOne(Data(UnsafeBufferPointer(start: data, count: size)))
    }
}

/// The company model of the test suite: every attribute type, inheritance, relationships of each kind.
let model = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
    "../../../Tests/_TestSupport/Fixtures/Company.xcdatamodeld"
).standardizedFileURL.path
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ocd-json-fuzz-\(getpid())")

func fuzzOne(_ input: Data) -> CInt {
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let file = folder.appendingPathComponent("input.json")
    let store = folder.appendingPathComponent("new/store.sqlite").path
    guard (try? input.write(to: file)) != nil else { preconditionFailure("cannot write \(file.path)") }
    // With --entity the file must be an array of employees; without, an object keyed by entity names (a file that
    // holds an array without --entity is a usage error, exit 2, so the array case always gets --entity).
    let body = input.starts(with: [0xEF, 0xBB, 0xBF]) ? input.dropFirst(3) : input[...]  // a byte order mark is skipped
    let first = body.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
    let entity = first == UInt8(ascii: "[") ? ["--entity", "Employee"] : []
    let console = ToolConsole(echo: false)
    // Batches of 2, so that inputs of a few records already save several batches inside the one transaction.
    let arguments = ["import", "--model", model, "--store", store, "--batch-size", "2"] + entity + [file.path]
    let code = CoreDataTool.run(arguments, console: console)
    precondition(code == 0 || code == 1, "exit code \(code): \(console.errorOutput)")
    if code == 1 {
        precondition(!console.errorOutput.isEmpty, "a failure without a message")
        precondition(!FileManager.default.fileExists(atPath: store), "a failed import left a store: \(console.errorOutput)")
    }
    try? FileManager.default.removeItem(at: folder.appendingPathComponent("new"))
    return 0
}
