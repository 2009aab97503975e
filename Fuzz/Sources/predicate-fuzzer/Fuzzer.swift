// libFuzzer target: every input is a predicate format string. The parser must never crash; anything it accepts must
// print (`canonicalFormat`) to a format that parses back to the same predicate, printing must be stable, and its keyed
// archive must read back.
import Foundation
import FuzzDriver
import OpenCoreData

@_cdecl("predicate_fuzzer_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in
        guard let data else { return 0 }
        return fuzzOne(UnsafeBufferPointer(start: data, count: size))
    }
}

func fuzzOne(_ bytes: UnsafeBufferPointer<UInt8>) -> CInt {
    let text = String(decoding: bytes, as: UTF8.self)
    let predicate: FetchPredicate
    do {
        predicate = try FetchPredicate(format: text)
    } catch let error as CoreDataError {
        // A rejected input must say where: a syntax error's message carries the caret line.
        precondition(error.code == .predicateSyntax || error.code == .invalidFetchRequest, "unexpected error kind: \(error)")
        precondition(error.message.contains("^") || error.code != .predicateSyntax, "syntax error without a caret: \(error.message)")
        return 0
    } catch {
        preconditionFailure("parser threw a non-CoreDataError: \(error)")
    }
    let printed = predicate.canonicalFormat
    guard let reparsed = try? FetchPredicate(format: printed) else {
        preconditionFailure("printed form does not parse: \(printed) (from \(text))")
    }
    precondition(reparsed == predicate, "print → parse changed the predicate: \(printed) (from \(text))")
    precondition(reparsed.canonicalFormat == printed, "printing is not stable: \(printed)")
    // Apple's spelling (`predicateFormat`) is a description: printed for every predicate, without a crash.
    _ = predicate.predicateFormat
    // Archived as Apple's archiver writes it, a predicate reads back (or is refused by name before any byte is written).
    do {
        let data = try predicate.archivedData()
        guard (try? FetchPredicate(archivedData: data)) != nil else {
            preconditionFailure("an archived predicate does not read back: \(printed)")
        }
    } catch let error as CoreDataError {
        precondition(error.code == .valueTransformation, "archiving threw an unexpected error: \(error)")
    } catch {
        preconditionFailure("archiving threw a non-CoreDataError: \(error)")
    }
    return 0
}
