import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

// MARK: Options

struct Options {
    var smoke = false
    var large = false
    var repetitions = 5
    /// Workload prefixes to run (`--only W1,W3`); empty runs them all.
    var only: [String] = []
    /// Sizes to run instead of the defaults (`--sizes 1000000`), for profiling one size.
    var customSizes: [Int] = []
    /// Skip the peers (`--no-peers`), for profiling OpenCoreData alone.
    var peers = true
    var output = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)

    init(_ arguments: [String]) throws {
        var i = 0
        while i < arguments.count {
            switch arguments[i] {
            case "--smoke": smoke = true
            case "--large": large = true
            case "--repetitions":
                i += 1
                guard i < arguments.count, let n = Int(arguments[i]), n > 0 else { throw Usage("--repetitions needs a positive number") }
                repetitions = n
            case "--only":
                i += 1
                guard i < arguments.count else { throw Usage("--only needs workloads, e.g. W1,W3") }
                only = arguments[i].split(separator: ",").map { String($0).uppercased() }
            case "--sizes":
                i += 1
                guard i < arguments.count else { throw Usage("--sizes needs sizes, e.g. 10000,1000000") }
                customSizes = try arguments[i].split(separator: ",").map {
                    guard let n = Int($0), n > 0 else { throw Usage("bad size \($0)") }
                    return n
                }
            case "--no-peers": peers = false
            case "--output":
                i += 1
                guard i < arguments.count else { throw Usage("--output needs a folder") }
                output = URL(fileURLWithPath: arguments[i])
            default: throw Usage("unknown option \(arguments[i])")
            }
            i += 1
        }
        if smoke { repetitions = 1 }
    }

    func runs(_ workload: String) -> Bool { only.isEmpty || only.contains(workload) }

    var sizes: [Int] {
        if !customSizes.isEmpty { return customSizes }
        return smoke ? [300] : (large ? [10_000, 100_000, 1_000_000] : [10_000, 100_000])
    }
}

struct Usage: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) {
        description =
            message
            + "\nusage: ocd-benchmarks [--smoke] [--large] [--repetitions N] [--only W1,W3,…] [--sizes N,…] [--no-peers] [--output DIR]"
    }
}
