import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The terminal in full-screen mode: raw keys, the alternate screen, a hidden cursor, and lines written only where
/// they changed since the last frame.
///
/// Whatever ends the program — a return, a thrown error, Ctrl-C (read as a key), `SIGTERM`, `SIGHUP` — the terminal
/// gets its settings and main screen back.
///
/// For example:
/// ```swift
/// let screen = try TerminalScreen()
/// defer { screen.restore() }
/// screen.draw(["title", "row 1"])
/// ```
final class TerminalScreen {
    /// The terminal's settings before raw mode, for the signal handler (which cannot reach an instance).
    nonisolated(unsafe) private static var saved = termios()
    nonisolated(unsafe) private static var isRaw = false
    private var lastFrame: [String] = []
    private var restored = false

    /// Enters raw mode and the alternate screen.
    ///
    /// - Throws: `TerminalTableError.notATerminal` when standard input or output is not a terminal.
    init() throws {
        guard isatty(STDIN_FILENO) == 1, isatty(STDOUT_FILENO) == 1 else { throw TerminalTableError.notATerminal }
        var settings = termios()
        tcgetattr(STDIN_FILENO, &settings)
        Self.saved = settings
        // No line buffering, no echo, Ctrl-C as a key (so that quitting restores the screen as any other key).
        settings.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN)
        settings.c_iflag &= ~tcflag_t(IXON | ICRNL)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &settings)
        Self.isRaw = true
        for number in [SIGTERM, SIGHUP, SIGQUIT] {
            signal(number) { number in
                TerminalScreen.restoreFromSignal()
                signal(number, SIG_DFL)
                raise(number)
            }
        }
        emit("\u{1B}[?1049h\u{1B}[?25l\u{1B}[2J")
    }

    /// The terminal's size in characters (80×24 when it cannot tell).
    var size: (columns: Int, rows: Int) {
        var window = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &window) == 0, window.ws_col > 0, window.ws_row > 0 else { return (80, 24) }
        return (Int(window.ws_col), Int(window.ws_row))
    }

    /// Shows `lines`, one per screen row from the top, writing only the rows that differ from the last frame.
    func draw(_ lines: [String]) {
        var output = ""
        let count = max(lines.count, lastFrame.count)
        for row in 0..<count {
            let line = row < lines.count ? lines[row] : ""
            guard row >= lastFrame.count || lastFrame[row] != line else { continue }
            output += "\u{1B}[\(row + 1);1H\u{1B}[2K" + line
        }
        lastFrame = lines
        if !output.isEmpty { emit(output) }
    }

    /// Forgets the last frame, so that the next `draw` writes every row (after a resize).
    func invalidate() {
        lastFrame = []
        emit("\u{1B}[2J")
    }

    /// The next key, waiting at most `timeout` seconds; nil when none came.
    func readKey(timeout: Double) -> TerminalKey? {
        var poller = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(timeout * 1000)) > 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = read(STDIN_FILENO, &bytes, bytes.count)
        guard count > 0 else { return .closed }
        return TerminalKey(Array(bytes[0..<count]))
    }

    /// Gives the terminal back: main screen, cursor, settings.
    ///
    /// Safe to call more than once.
    func restore() {
        guard !restored else { return }
        restored = true
        Self.restoreFromSignal()
    }

    private static func restoreFromSignal() {
        guard isRaw else { return }
        isRaw = false
        let reset = "\u{1B}[?25h\u{1B}[?1049l"
        writeOut(reset)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
    }

    private func emit(_ text: String) { Self.writeOut(text) }

    /// Writes `text` to standard output with the `write` system call (no buffering; safe in a signal handler).
    private static func writeOut(_ text: String) {
        _ = text.withCString { write(STDOUT_FILENO, $0, strlen($0)) }
    }
}

/// A key read from the terminal.
enum TerminalKey: Equatable {
    case up, down, pageUp, pageDown, home, end, interrupt
    /// Standard input reached its end.
    case closed
    case character(Character)
    /// Bytes that are none of the above (another escape sequence).
    case other

    init(_ bytes: [UInt8]) {
        switch bytes {
        case [0x1B, 0x5B, 0x41], [0x1B, 0x4F, 0x41]: self = .up
        case [0x1B, 0x5B, 0x42], [0x1B, 0x4F, 0x42]: self = .down
        case [0x1B, 0x5B, 0x35, 0x7E]: self = .pageUp
        case [0x1B, 0x5B, 0x36, 0x7E]: self = .pageDown
        case [0x1B, 0x5B, 0x48], [0x1B, 0x5B, 0x31, 0x7E]: self = .home
        case [0x1B, 0x5B, 0x46], [0x1B, 0x5B, 0x34, 0x7E]: self = .end
        case [0x03]: self = .interrupt
        default:
            if bytes.first != 0x1B, let text = String(bytes: bytes, encoding: .utf8), let first = text.first {
                self = .character(first)
            } else {
                self = .other
            }
        }
    }
}
