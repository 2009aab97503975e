import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A program a test starts, waited for by its own process ID and never for longer than a deadline.
///
/// Foundation's `Process.waitUntilExit()` can wait forever inside a Swift Testing run: with exit tests in the same
/// process, a `tmux` client a test had started was left a zombie that nothing reaped, and the whole suite hung until
/// CI's time ran out. This type starts the program with `posix_spawn` and waits with `waitpid` on that one ID, so
/// no other waiter in the process can take its exit, and every wait has a deadline after which the child is killed.
///
/// For example:
/// ```swift
/// let result = try ChildProcess.run("/usr/bin/tmux", ["capture-pane", "-t", "demo", "-p"])
/// #expect(result.status == 0 && result.output.contains("rows"))
/// ```
public final class ChildProcess: @unchecked Sendable {
    /// The child's process ID.
    public let pid: pid_t
    private let outputDescriptor: Int32?
    private var exitStatus: Int32?

    /// Starts `path` with `arguments`; its standard input and error are `/dev/null`, its standard output is
    /// captured when `captureOutput` is true (read it with `readOutput`) and `/dev/null` otherwise.
    ///
    /// - Throws: `POSIXError` when the program cannot be started.
    public init(_ path: String, _ arguments: [String], captureOutput: Bool = false) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor: Int32 in [0, 1, 2] where !(captureOutput && descriptor == 1) {
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        var ends: [Int32] = [-1, -1]
        if captureOutput {
            guard pipe(&ends) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            // Other children started meanwhile must not inherit either end (the reader would never see the end).
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, path, &actions, nil, argv, environ)
        if captureOutput { close(ends[1]) }
        guard result == 0 else {
            if captureOutput { close(ends[0]) }
            throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO)
        }
        pid = child
        outputDescriptor = captureOutput ? ends[0] : nil
    }

    deinit {
        if let outputDescriptor { close(outputDescriptor) }
        if exitStatus == nil {
            kill(pid, SIGKILL)
            _ = wait(timeout: 5)
        }
    }

    /// What the child writes to its standard output until it closes it, until `timeout` seconds pass, or (given
    /// `done`) as soon as what was read satisfies `done`; a later call goes on from there.
    public func readOutput(timeout: TimeInterval = 30, until done: ((String) -> Bool)? = nil) -> String {
        guard let descriptor = outputDescriptor else { return "" }
        let deadline = Date().addingTimeInterval(timeout)
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 || errno == EINTR else { break }
            guard poller.revents != 0 else { continue }
            let count = read(descriptor, &buffer, buffer.count)
            if count > 0 {
                bytes += buffer[0..<count]
                if let done, done(String(decoding: bytes, as: UTF8.self)) { break }
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The child's exit code (or 128 + the signal that ended it), waiting at most `timeout` seconds; nil when it
    /// is still running then.
    @discardableResult
    public func wait(timeout: TimeInterval = 60) -> Int32? {
        if let exitStatus { return exitStatus }
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                let signal = status & 0x7f
                exitStatus = signal == 0 ? (status >> 8) & 0xff : 128 + signal
                return exitStatus
            }
            if result < 0 && errno != EINTR { return nil }
            usleep(5_000)
        } while Date() < deadline
        return nil
    }

    /// Runs `path` to its end (killing it after `timeout` seconds) and returns its exit code and standard output.
    ///
    /// - Throws: `POSIXError` when the program cannot be started.
    public static func run(_ path: String, _ arguments: [String], timeout: TimeInterval = 60) throws -> (status: Int32?, output: String) {
        let child = try ChildProcess(path, arguments, captureOutput: true)
        let output = child.readOutput(timeout: timeout)
        let status = child.wait(timeout: timeout)
        if status == nil { kill(child.pid, SIGKILL) }
        return (status, output)
    }
}
