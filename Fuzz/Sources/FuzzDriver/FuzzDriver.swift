// What every fuzz target shares: libFuzzer's driver for programs that keep their own `main`.

/// libFuzzer's driver (SwiftPM names an executable's entry point `<target>_main`, so libFuzzer's own `main` cannot
/// be used).
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// Runs libFuzzer with the program's arguments, calling `body` with each input.
///
/// For example:
/// ```swift
/// @_cdecl("my_fuzzer_main")
/// func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
///     runFuzzer(argc, argv, fuzzOne)
/// }
/// ```
public func runFuzzer(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ body: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, body)
}
