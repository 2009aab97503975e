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

// MARK: Peak memory

/// The process's resident memory around one workload: at its start, and its peak while it ran.
///
/// The peak is Linux's `VmHWM`, reset before the workload by writing 5 to `/proc/self/clear_refs` (after
/// `malloc_trim` has given freed memory back). Fixtures built before the workload are in both figures.
struct MemoryPeak: Codable {
    let workload: String
    let size: Int?
    let startKilobytes: Int
    let peakKilobytes: Int
    /// Whether the peak was reset at the start (if not, it is the process's peak so far).
    let wasReset: Bool
}

nonisolated(unsafe) var memoryPeaks: [MemoryPeak] = []

/// Runs one workload and records the process's resident memory at its start and at its peak.
func measuringPeakMemory(_ workload: String, size: Int? = nil, _ body: () throws -> Void) rethrows {
    #if os(Linux)
        // Freed memory the allocator still holds goes back to the system first, so that the peak is this workload's
        // and not what an earlier one left resident.
        malloc_trim(0)
    #endif
    let wasReset = (try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)) != nil
    let start = processStatus("VmRSS")
    try body()
    let peak = processStatus("VmHWM")
    memoryPeaks.append(MemoryPeak(workload: workload, size: size, startKilobytes: start, peakKilobytes: peak, wasReset: wasReset))
    print(
        "\(workload)\(size.map { " n=\($0)" } ?? ""): peak RSS \(peak / 1024) MB (\(start / 1024) MB at the start)"
            + (wasReset ? "" : " — the peak could not be reset: the process's peak so far"))
}

/// A `kB` line of `/proc/self/status` (0 where there is none).
private func processStatus(_ key: String) -> Int {
    // (Read with `read(2)` until it returns 0: /proc files report a size of 0, which Foundation's readers trust.)
    let descriptor = open("/proc/self/status", O_RDONLY)
    guard descriptor >= 0 else { return 0 }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { break }
        bytes += buffer[..<count]
    }
    let status = String(decoding: bytes, as: UTF8.self)
    for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
        return Int(line.dropFirst(key.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? 0
    }
    return 0
}
