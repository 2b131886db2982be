import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A `capfleet` child process of a test or a benchmark: a coordinator, an agent, or any
/// command that lives and dies with its fleet.
///
/// `@unchecked Sendable`: `Process` is not Sendable, but every use here (start, signal,
/// wait, read the log) is safe from any thread, and tests hand children to async code.
public final class FleetChild: @unchecked Sendable {
    /// Where a child's output goes.
    public enum Output: Sendable {
        /// Both streams into DIRECTORY/NAME.log, kept for failure reports (tests).
        case logFile(directory: String)
        /// Standard error shared with this process, standard output discarded, so that a
        /// benchmark's own figures stay readable and a child's errors still show.
        case standardError
    }

    public let name: String
    public let process = Process()
    /// The log file, for `.logFile` output.
    public let logPath: String?

    /// Starts `binary` with `arguments`. The child gets this process's environment without
    /// CAPFLEET_COORDINATOR (a caller's fleet must not leak into the test's), plus `environment`.
    public init(name: String, binary: String, arguments: [String], environment: [String: String] = [:], output: Output) throws {
        self.name = name
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        merged.removeValue(forKey: "CAPFLEET_COORDINATOR")
        for (key, value) in environment { merged[key] = value }
        process.environment = merged
        process.standardInput = FileHandle.nullDevice
        switch output {
        case let .logFile(directory):
            let path = directory + "/\(name).log"
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw FleetTestError("cannot create the log file \(path) for \(name)")
            }
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            process.standardOutput = log
            process.standardError = log
            logPath = path
        case .standardError:
            process.standardOutput = FileHandle.nullDevice
            logPath = nil
        }
        try process.run()
    }

    public var isRunning: Bool { process.isRunning }

    public var processIdentifier: Int32 { process.processIdentifier }

    /// SIGKILL: the process gets no chance to say goodbye, as in a crash or power loss.
    public func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM and wait for a clean exit; returns the exit status.
    @discardableResult
    public func stop() -> Int32 {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    /// What the child wrote so far (empty when its output is not kept).
    public var log: String {
        guard let logPath else { return "" }
        return (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }
}

/// Why a fleet could not be started or did not become ready: what failed and how to fix it.
public struct FleetTestError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
