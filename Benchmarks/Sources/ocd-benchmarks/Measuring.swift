import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

#if os(Linux)
    import CHeap
#endif

// MARK: Measuring

struct Result: Codable {
    var workload: String
    var size: Int
    var contender: String
    var seconds: [Double]
    var isReference: Bool
    var note: String?

    var median: Double { seconds.isEmpty ? 0 : seconds.sorted()[seconds.count / 2] }
    var spread: (Double, Double) { (seconds.min() ?? 0, seconds.max() ?? 0) }
}

// Single-threaded runner: results are only touched from the main flow.
nonisolated(unsafe) var results: [Result] = []

func nanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Bytes the process's heap holds now: glibc's count of allocated bytes (`mallinfo2`), which, unlike resident memory,
/// does not hide allocations that reuse memory freed earlier.
///
/// Falls back to resident memory elsewhere.
func heapBytes() -> Int {
    #if os(Linux)
        let info = mallinfo2()
        return Int(info.uordblks + info.hblkhd)
    #else
        return 0
    #endif
}

/// Heap memory per row that `body`'s result holds (measured once, untimed, while the result is alive).
func bytesPerRow<T>(_ rows: Int, _ body: () throws -> T) rethrows -> String {
    let before = heapBytes()
    let result = try body()
    let after = heapBytes()
    withExtendedLifetime(result) {}
    return "memory held: \(max(0, after - before) / max(1, rows)) B/row"
}

/// Times `body` `repetitions` times, calling `prepare` untimed before each, after `warmUps` untimed runs (each
/// prepared too) that bring the contender's connection, caches and heap to the state of its later runs.
func measure(_ repetitions: Int, warmUps: Int = 0, prepare: () throws -> Void = {}, _ body: () throws -> Void) rethrows -> [Double] {
    for _ in 0..<warmUps {
        try prepare()
        try body()
    }
    var samples: [Double] = []
    for _ in 0..<repetitions {
        try prepare()
        let start = nanoseconds()
        try body()
        samples.append(Double(nanoseconds() - start) / 1e9)
    }
    return samples
}

/// One contender of an interleaved measurement: what to prepare untimed before each run, and what to time.
struct Contender {
    var prepare: () throws -> Void = {}
    let body: () throws -> Void
}

/// Times each contender `repetitions` times, round-robin (one run of each in turn), after `warmUps` untimed rounds.
///
/// This machine has slow spells lasting seconds; run one contender after another and a spell falls on whichever ran
/// during it, which skews the ratios of that run. Interleaved, a spell costs every contender alike. Each round starts
/// one contender later than the one before, so that each follows every other equally often: a contender that fills
/// the caches with its own data (GRDB's rows) slows whichever runs next.
func measureInterleaved(_ repetitions: Int, warmUps: Int = 0, _ contenders: [Contender]) throws -> [[Double]] {
    var samples = Array(repeating: [Double](), count: contenders.count)
    for round in 0..<(warmUps + repetitions) {
        for turn in contenders.indices {
            let index = (round + turn) % contenders.count
            let contender = contenders[index]
            try contender.prepare()
            let start = nanoseconds()
            try contender.body()
            let elapsed = Double(nanoseconds() - start) / 1e9
            if round >= warmUps { samples[index].append(elapsed) }
        }
    }
    return samples
}

func median(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.sorted()[values.count / 2] }

func record(_ workload: String, _ size: Int, _ contender: String, _ seconds: [Double], reference: Bool = false, note: String? = nil) {
    results.append(Result(workload: workload, size: size, contender: contender, seconds: seconds, isReference: reference, note: note))
    let r = results.last!
    // Unbuffered, so progress shows when the output is a file.
    FileHandle.standardOutput.write(
        Data(
            (String(format: "%@ n=%d %@: median %.3f ms", workload, size, contender, r.median * 1000) + (note.map { " (\($0))" } ?? "")
                + "\n").utf8))
}
