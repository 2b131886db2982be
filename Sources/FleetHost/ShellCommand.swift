import FleetCore
import Foundation

/// Why a shell command did not succeed.
public enum ShellCommandFailure: Error, CustomStringConvertible, Sendable {
    case cannotStart(Int32)
    case exited(Int32)
    case killedAfterTimeout(Int64)
    case signalled(Int32)

    public var description: String {
        switch self {
        case let .cannotStart(code): "cannot start /bin/sh: \(String(cString: strerror(code)))"
        case let .exited(status): "exited with status \(status)"
        case let .killedAfterTimeout(ms): "still running after \(ms) ms: killed"
        case let .signalled(signal): "ended by signal \(signal)"
        }
    }
}

/// Runs an operator's configured command (alert hand-off, the agent's recording light):
/// `/bin/sh -c COMMAND` in its own process group, `input` on stdin, extra variables in its
/// environment, killed with its children after the timeout. Spawned with an empty signal
/// mask and default handlers, whatever this process blocks. Blocks the calling thread: call
/// it from a thread of your own.
public enum ShellCommand {
    public static func run(
        _ command: String, environment extra: [String: String], input: [UInt8] = [],
        timeoutMilliseconds: Int64
    ) throws(ShellCommandFailure) {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw .cannotStart(errno) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[0], 0)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[1])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        var environment = ProcessInfo.processInfo.environment
        for (key, value) in extra { environment[key] = value }
        let arguments = ["/bin/sh", "-c", command]
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp)
        close(pipeFDs[0])
        guard spawned == 0 else {
            close(pipeFDs[1])
            throw .cannotStart(spawned)
        }
        // Inputs are small (under a pipe's buffer), so this write does not wait for the reader.
        if !input.isEmpty { _ = input.withUnsafeBytes { write(pipeFDs[1], $0.baseAddress, $0.count) } }
        close(pipeFDs[1])

        let deadline = Int64(MonotonicTime.now() / 1_000_000) + timeoutMilliseconds
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Int64(MonotonicTime.now() / 1_000_000) >= deadline {
                kill(-pid, SIGKILL)
                waitpid(pid, &status, 0)
                throw .killedAfterTimeout(timeoutMilliseconds)
            }
            usleep(20_000)
        }
        let signal = status & 0x7F
        if signal != 0 { throw .signalled(signal) }
        let code = (status >> 8) & 0xFF
        if code != 0 { throw .exited(code) }
    }
}
