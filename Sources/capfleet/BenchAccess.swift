import FleetBus
import FleetClient
import Foundation

/// Keys for the benchmarks' own fleets, made the way an install script would: on the
/// coordinator's host, from its data directory, with this same binary.
enum BenchAccess {
    private static let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()

    /// An admin credential for the fleet whose coordinator keeps its data in `dataDirectory`.
    static func credential(dataDirectory: String) throws -> OperatorCredential {
        let path = dataDirectory + "/bench.credential"
        if !FileManager.default.fileExists(atPath: path) {
            try run(["operator", "add", "bench", "--role", "admin", "--data", dataDirectory, "--out", path])
        }
        return try OperatorCredential.load(path: path)
    }

    /// A one-time enrollment token for an agent called `name`.
    static func token(dataDirectory: String, name: String) throws -> String {
        try run(["enroll", "--name", name, "--data", dataDirectory, "--quiet"]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @discardableResult
    private static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let error = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CLIFailure("capfleet \(arguments.prefix(2).joined(separator: " ")) failed: \(error)") }
        return output
    }
}
