// OpenCoreData benchmarks: each workload measured side by side with the peers a user would pick instead, in the
// same run, reported as medians, spreads and ratios (this machine is noisy: compare ratios, not absolute times).
//
//   swift run -c release --package-path Benchmarks ocd-benchmarks [--smoke] [--large] [--repetitions N] [--only W1,W3] [--output DIR]
//
// W9 (the web table) needs Debian's chromium and chromium-driver; W10 (the PostgreSQL store) a server named by
// OCD_POSTGRES_URL. Without them each records that it was skipped.
//
// Writes BENCHMARKS.md and benchmarks.json (BENCHMARKS-large.md and benchmarks-large.json with --large) to DIR: by
// default the repository root for a whole run, a scratch folder for a narrowed one (--only, --sizes, --smoke, …).
import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

#if os(Linux)
    import CHeap
#endif

// MARK: Main

do {
    if CommandLine.arguments.dropFirst().first == "--w10-writer" {
        try w10Writer(Array(CommandLine.arguments.dropFirst(2)))
        exit(0)
    }
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    try FileManager.default.createDirectory(at: options.output, withIntermediateDirectories: true)
    for size in options.sizes where ["W1", "W2", "W3", "W4", "W5"].contains(where: options.runs) {
        print("== preparing \(size) rows")
        let fixture = try Fixture(size: size, items: makeItems(size))
        // The report is rewritten after every workload, so a long run that is stopped keeps what it measured.
        for (name, workload) in [("W1", w1), ("W2", w2), ("W3", w3), ("W4", w4), ("W5", w5)] where options.runs(name) {
            try measuringPeakMemory(name, size: size) { try workload(fixture, options) }
            try report(options)
        }
    }
    for (name, workload) in [("W6", w6), ("W7", w7), ("W8", w8), ("W9", w9), ("W10", w10)] where options.runs(name) {
        try measuringPeakMemory(name) { try workload(options) }
        try report(options)
    }
    try report(options)
    print("wrote \(options.reportName) and \(options.resultsName) to \(options.output.path)")
} catch let usage as Usage {
    FileHandle.standardError.write(Data((usage.description + "\n").utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("benchmarks failed: \(error)\n".utf8))
    exit(1)
}
