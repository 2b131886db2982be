import FleetBus
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `capfleet` child process, with its output kept in a log file for failure reports.
final class FleetProcess: @unchecked Sendable {
    let name: String
    let process = Process()
    let logPath: String

    init(name: String, arguments: [String], environment: [String: String] = [:], directory: String) throws {
        self.name = name
        logPath = directory + "/\(name).log"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.executableURL = URL(fileURLWithPath: FleetHarness.binary)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "CAPFLEET_COORDINATOR")
        for (key, value) in environment { env[key] = value }
        process.environment = env
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var isRunning: Bool { process.isRunning }

    /// SIGKILL: the process gets no chance to say goodbye, as in a crash or power loss.
    func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM and wait for a clean exit.
    func stop() -> Int32 {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
}

/// A coordinator, its agents and the CLI on this machine, on ports no other test uses,
/// with state in a temporary directory that goes away with the fleet.
final class FleetHarness: @unchecked Sendable {
    static var binary: String {
        if let override = ProcessInfo.processInfo.environment["CAPFLEET_BINARY"] { return override }
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent("capfleet").path
    }

    let directory: String
    let controlPort: UInt16
    let ingestPort: UInt16
    let operatorPort: UInt16
    let telemetryPort: UInt16
    let clockPort: UInt16
    let metricsPort: UInt16
    let recordPort: UInt16
    private(set) var processes: [FleetProcess] = []

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw HarnessError("no capfleet binary at \(Self.binary): run `swift build` before `swift test`, or set CAPFLEET_BINARY")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-test-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let ports = try LoopbackPorts.free(7)
        (controlPort, ingestPort, operatorPort, telemetryPort, metricsPort, clockPort) = (ports[0], ports[1], ports[2], ports[3], ports[4], ports[5])
        recordPort = ports[6]
    }

    deinit {
        for process in processes { process.kill() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    var coordinatorEnvironment: [String: String] {
        ["CAPFLEET_CONTROL_PORT": "\(controlPort)", "CAPFLEET_INGEST_PORT": "\(ingestPort)",
         "CAPFLEET_OPERATOR_PORT": "\(operatorPort)", "CAPFLEET_TELEMETRY_PORT": "\(telemetryPort)",
         "CAPFLEET_METRICS_PORT": "\(metricsPort)", "CAPFLEET_CLOCK_PORT": "\(clockPort)", "CAPFLEET_RECORD_PORT": "\(recordPort)",
         "CAPFLEET_BIND": "127.0.0.1"]
    }

    var databasePath: String { directory + "/coordinator/fleet.sqlite" }

    @discardableResult
    func startCoordinator(environment extra: [String: String] = [:]) throws -> FleetProcess {
        let process = try FleetProcess(name: "coordinator-\(processes.count)", arguments: ["coordinator", "--data", directory + "/coordinator"],
                                       environment: coordinatorEnvironment.merging(extra) { $1 }, directory: directory)
        processes.append(process)
        return process
    }

    /// Starts an agent; the first start of an agent name enrolls it with a fresh token.
    @discardableResult
    func startAgent(_ name: String, synthetic: Int = 1, fps: Double = 15, extra: [String] = []) throws -> FleetProcess {
        let stateDirectory = directory + "/\(name)"
        let enrolled = FileManager.default.fileExists(atPath: stateDirectory + "/keys/agent.key_secret")
        let process = try FleetProcess(
            name: "\(name)-\(processes.count)",
            arguments: ["agent", "--coordinator", "127.0.0.1:\(controlPort)", "--name", name, "--synthetic", "\(synthetic)", "--no-discover",
                        "--fps", "\(fps)", "--state-dir", stateDirectory] + (enrolled ? [] : ["--enroll", try enrollmentToken(name: name)]) + extra,
            directory: directory)
        processes.append(process)
        return process
    }

    /// Starts any `capfleet` process that lives and dies with this fleet.
    @discardableResult
    func launch(_ name: String, _ arguments: [String]) throws -> FleetProcess {
        let process = try FleetProcess(name: name, arguments: arguments, directory: directory)
        processes.append(process)
        return process
    }

    var coordinatorDataDirectory: String { directory + "/coordinator" }

    /// A one-time token made on the coordinator's host (its data directory), as an install script would.
    func enrollmentToken(name: String, validSeconds: Int = 600) throws -> String {
        let result = try run(["enroll", "--name", name, "--data", coordinatorDataDirectory, "--valid", "\(validSeconds)", "--quiet"])
        guard result.status == 0 else { throw HarnessError("capfleet enroll failed: \(result.error)") }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The roles of the test operators: ana is an admin, bo an operator, vi a viewer.
    static let roles = ["ana": "admin", "bo": "operator", "vi": "viewer"]

    /// The credential file of a test operator, made on first use on the coordinator's host.
    func credential(for user: String) throws -> String {
        let path = directory + "/\(user).credential"
        guard !FileManager.default.fileExists(atPath: path) else { return path }
        let result = try run(["operator", "add", user, "--role", Self.roles[user] ?? "operator", "--data", coordinatorDataDirectory,
                              "--out", path, "--address", "127.0.0.1:\(operatorPort)"])
        guard result.status == 0 else { throw HarnessError("capfleet operator add \(user) failed: \(result.error)") }
        return path
    }

    /// Runs `capfleet` with `arguments` as they are and waits for it.
    func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String, error: String) {
        let process = Process()
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let error = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self), String(decoding: error, as: UTF8.self))
    }

    /// Runs a CLI command against this fleet's coordinator, with `user`'s credential.
    func cli(_ arguments: [String], timeout: Double = 3, user: String = "ana") throws -> (status: Int32, output: String, error: String) {
        let credential = try credential(for: user)
        return try run(arguments + ["--coordinator", "127.0.0.1:\(operatorPort)", "--timeout", "\(timeout)", "--credential", credential],
                       environment: ["USER": user])
    }

    /// Runs a listing with `--json` and parses it.
    func json(_ arguments: [String], user: String = "ana") throws -> [[String: Any]] {
        let result = try cli(arguments + ["--json"], user: user)
        guard result.status == 0 else { throw HarnessError("capfleet \(arguments.joined(separator: " ")) failed: \(result.error)") }
        guard let parsed = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [[String: Any]] else {
            throw HarnessError("capfleet \(arguments.joined(separator: " ")) printed no JSON array: \(result.output)")
        }
        return parsed
    }

    func jsonObject(_ arguments: [String], user: String = "ana") throws -> [String: Any] {
        let result = try cli(arguments + ["--json"], user: user)
        guard result.status == 0 else { throw HarnessError("capfleet \(arguments.joined(separator: " ")) failed: \(result.error)") }
        guard let parsed = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any] else {
            throw HarnessError("capfleet \(arguments.joined(separator: " ")) printed no JSON object: \(result.output)")
        }
        return parsed
    }

    /// Grants a device's consent (as the admin ana), so that its frames carry real pixels.
    func grantConsent(_ deviceID: String, reason: String = "test scene, nobody in view") throws {
        let result = try cli(["consent", "grant", deviceID, "--reason", reason])
        guard result.status == 0 else { throw HarnessError("capfleet consent grant \(deviceID) failed: \(result.error)") }
    }

    /// The coordinator's public key, as it wrote it on first start.
    func coordinatorKey() throws -> CurvePublicKey {
        try CurveCertificate.load(path: coordinatorDataDirectory + "/keys/coordinator.key").publicKey
    }

    /// An enrolled agent's key pair, from its state directory (what a thief would take).
    func agentKeys(_ name: String) throws -> CurveKeyPair {
        guard let keys = try CurveCertificate.load(path: directory + "/\(name)/keys/agent.key_secret").keys else { throw HarnessError("no agent key for \(name)") }
        return keys
    }

    func operatorKeys(_ user: String) throws -> CurveKeyPair {
        guard let keys = try CurveCertificate.load(path: try credential(for: user)).keys else { throw HarnessError("no key for \(user)") }
        return keys
    }

    /// A raw ZeroMQ socket connected to one of the coordinator's ports with `keys`, as a
    /// hand-written peer would be.
    func socket(_ type: ZMQSocketType, port: UInt16, keys: CurveKeyPair, context: ZMQContext,
                serverKey: CurvePublicKey? = nil) throws -> ZMQSocket {
        let socket = try ZMQSocket(context: context, type: type)
        try socket.makeCurveClient(serverKey: serverKey ?? coordinatorKey(), keys: keys)
        try socket.connect("tcp://127.0.0.1:\(port)")
        return socket
    }

    /// Polls `condition` until it holds or `seconds` pass; returns how long it took.
    @discardableResult
    func waitUntil(_ what: String, seconds: Double, _ condition: () throws -> Bool) async throws -> Double {
        let start = Date()
        while Date().timeIntervalSince(start) < seconds {
            if (try? condition()) == true { return Date().timeIntervalSince(start) }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw HarnessError("timed out after \(seconds) s waiting until \(what)\n" + processes.map { "--- \($0.name)\n\($0.log.suffix(3000))" }.joined(separator: "\n"))
    }

    func nodes() throws -> [[String: Any]] { try json(["nodes"]) }

    func onlineNodeIDs() throws -> Set<String> {
        Set(try nodes().filter { $0["online"] as? Bool == true }.compactMap { $0["node_id"] as? String })
    }

    func deviceStats() throws -> [String: [String: Any]] {
        Dictionary(uniqueKeysWithValues: try json(["watch", "--count", "1"]).map { ($0["device_id"] as? String ?? "", $0) })
    }

    /// Ports the kernel says are free now (bound to port 0, then released).
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
