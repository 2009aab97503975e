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
    /// W4's batch sizes instead of the defaults (`--batches 1000`), for profiling one batch size.
    var batches: [Int] = []
    /// W6's contenders whose names contain this text only (`--contender @Model`), for profiling one under callgrind.
    var contender: String?
    /// Where the report goes: `--output DIR`; else the repository root for a whole run, and a scratch folder for a
    /// narrowed one (`--only`, `--sizes`, `--no-peers`, `--smoke`…), so that profiling never overwrites the committed
    /// figures of a whole run.
    var output = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    private var outputWasGiven = false

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
                customSizes = try Self.positiveNumbers(i < arguments.count ? arguments[i] : nil, of: "--sizes", example: "10000,1000000")
            case "--no-peers": peers = false
            case "--batches":
                i += 1
                batches = try Self.positiveNumbers(i < arguments.count ? arguments[i] : nil, of: "--batches", example: "1000")
            case "--contender":
                i += 1
                guard i < arguments.count else { throw Usage("--contender needs part of a contender's name, e.g. @Model") }
                contender = arguments[i]
            case "--output":
                i += 1
                guard i < arguments.count else { throw Usage("--output needs a folder") }
                output = URL(fileURLWithPath: arguments[i])
                outputWasGiven = true
            default: throw Usage("unknown option \(arguments[i])")
            }
            i += 1
        }
        if smoke { repetitions = 1 }
        if isNarrowed && !outputWasGiven {
            output = FileManager.default.temporaryDirectory.appendingPathComponent("ocd-benchmarks-narrowed")
        }
    }

    /// How many runs time one change of W3 (and W10's single changes): five times the repetitions.
    ///
    /// A change takes tens of microseconds, so a handful of samples is mostly the first runs' cold caches (at 10,000
    /// rows, 5 samples put the median edit at 0.157 ms, 200 at 0.055 ms); 25 cost milliseconds. The naive re-fetch,
    /// which takes up to seconds a run, keeps `repetitions`.
    var changeSamples: Int { repetitions * 5 }

    /// Whether the run leaves out part of a whole default or `--large` run.
    var isNarrowed: Bool {
        smoke || !only.isEmpty || !customSizes.isEmpty || !peers || !batches.isEmpty || contender != nil
            || repetitions != 5
    }

    /// The report's file name: a `--large` run has its own, beside the default run's.
    var reportName: String { large ? "BENCHMARKS-large.md" : "BENCHMARKS.md" }
    var resultsName: String { large ? "benchmarks-large.json" : "benchmarks.json" }

    /// The comma-separated positive numbers an option takes.
    private static func positiveNumbers(_ argument: String?, of option: String, example: String) throws -> [Int] {
        guard let argument else { throw Usage("\(option) needs numbers, e.g. \(example)") }
        return try argument.split(separator: ",").map {
            guard let n = Int($0), n > 0 else { throw Usage("\(option): bad number \($0)") }
            return n
        }
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
            + "\nusage: ocd-benchmarks [--smoke] [--large] [--repetitions N] [--only W1,W3,…] [--sizes N,…] [--batches K,…] [--no-peers] [--output DIR]"
    }
}
