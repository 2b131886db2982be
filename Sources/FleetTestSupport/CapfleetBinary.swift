import FleetSystem
import Foundation
import Synchronization

/// The `capfleet` binary a test or a benchmark runs, and one-off commands with it.
///
/// `swift build` puts every executable and the test bundle in one directory, so the binary is
/// looked for beside whatever is running now (the test bundle, `capfleet-bench`), unless
/// CAPFLEET_BINARY names another.
public enum CapfleetBinary {
    public static let environmentVariable = "CAPFLEET_BINARY"

    public static var path: String {
        if let override = ProcessInfo.processInfo.environment[environmentVariable], !override.isEmpty { return override }
        return sibling(named: "capfleet")
    }

    /// An executable built beside the one running now.
    public static func sibling(named name: String) -> String {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// `path`, once it is known to be there.
    public static func checked() throws -> String {
        let binary = path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw FleetTestError(
                "no capfleet binary at \(binary): build it first (`swift build`, or `swift build -c release --product capfleet` for the benchmarks), or set \(environmentVariable)"
            )
        }
        return binary
    }

    /// What a command printed, and how it ended.
    public struct Result: Sendable {
        public var status: Int32
        public var output: String
        public var error: String
    }

    /// Runs `binary` with `arguments` as they are and waits for it; `environment` is added to
    /// this process's.
    public static func run(_ arguments: [String], environment: [String: String] = [:], binary: String = path) throws -> Result {
        let process = Process()
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Both pipes at once: a command that fills one while this waits on the other would hang.
        let errors = ErrorReader(err.fileHandleForReading)
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let error = errors.finish()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, output: String(decoding: output, as: UTF8.self),
            error: String(decoding: error, as: UTF8.self))
    }

    /// Reads a pipe to its end on a thread of its own.
    private final class ErrorReader: Sendable {
        private let data = Mutex(Data())
        private let thread = OwnedThread(name: "cf-read-stderr")

        init(_ handle: FileHandle) {
            thread.start { [self] in
                let read = handle.readDataToEndOfFile()
                data.withLock { $0 = read }
            }
        }

        func finish() -> Data {
            thread.joinBlocking()
            return data.withLock { $0 }
        }
    }
}
