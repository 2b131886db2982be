import FleetBus
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// A coordinator, its agents and the CLI on this machine, on ports no other test uses,
/// with state in a temporary directory that goes away with the fleet. Starting and stopping
/// the processes is FleetTestSupport's `LocalFleet` (which the benchmarks share); this adds
/// what the tests ask of a fleet.
final class FleetHarness: @unchecked Sendable {
    static var binary: String { CapfleetBinary.path }

    let fleet: LocalFleet
    var directory: String { fleet.directory }
    var controlPort: UInt16 { fleet.ports.controlPort }
    var ingestPort: UInt16 { fleet.ports.ingestPort }
    var operatorPort: UInt16 { fleet.ports.operatorPort }
    var telemetryPort: UInt16 { fleet.ports.telemetryPort }
    var clockPort: UInt16 { fleet.ports.clockPort }
    var recordPort: UInt16 { fleet.ports.recordPort }
    let metricsPort: UInt16
    var processes: [FleetChild] { fleet.children }

    init() throws {
        let ports = try FleetPorts.free()
        guard let metricsPort = ports.metricsPort else { throw HarnessError("no free port for the metrics endpoint") }
        self.metricsPort = metricsPort
        fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-test-\(UUID().uuidString.prefix(8))").path,
            ports: ports)
    }

    deinit {
        fleet.kill()
        fleet.removeDirectory()
    }

    var coordinatorEnvironment: [String: String] { fleet.ports.coordinatorEnvironment }

    var databasePath: String { directory + "/coordinator/fleet.sqlite" }

    @discardableResult
    func startCoordinator(environment extra: [String: String] = [:]) throws -> FleetChild {
        try fleet.startCoordinator(environment: extra)
    }

    /// Starts an agent; the first start of an agent name enrolls it with a fresh token.
    @discardableResult
    func startAgent(_ name: String, synthetic: Int = 1, fps: Double = 15, extra: [String] = []) throws -> FleetChild {
        try fleet.startAgent(name, arguments: ["--synthetic", "\(synthetic)", "--no-discover", "--fps", "\(fps)"] + extra)
    }

    /// Starts any `capfleet` process that lives and dies with this fleet.
    @discardableResult
    func launch(_ name: String, _ arguments: [String]) throws -> FleetChild {
        try fleet.launch(name, arguments)
    }

    var coordinatorDataDirectory: String { fleet.coordinatorDataDirectory }

    /// The lines of every child's log that mention `text`, each after its child's name: what
    /// a failed expectation shows of why (a rejection's detail, say).
    func logLines(containing text: String) -> String {
        processes.flatMap { child -> [String] in
            guard let path = child.logPath, let log = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
            return log.split(separator: "\n").filter { $0.contains(text) }.map { "\(child.name): \($0)" }
        }.joined(separator: "\n")
    }

    /// A one-time token made on the coordinator's host (its data directory), as an install script would.
    func enrollmentToken(name: String, validSeconds: Int = 600) throws -> String {
        try fleet.enrollmentToken(name: name, validSeconds: validSeconds)
    }

    /// The roles of the test operators: ana is an admin, bo an operator, vi a viewer.
    static let roles = ["ana": "admin", "bo": "operator", "vi": "viewer"]

    /// The credential file of a test operator, made on first use on the coordinator's host.
    func credential(for user: String) throws -> String {
        try fleet.credential(for: user, role: Self.roles[user] ?? "operator")
    }

    /// Runs `capfleet` with `arguments` as they are and waits for it.
    func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String, error: String) {
        let result = try fleet.run(arguments, environment: environment)
        return (result.status, result.output, result.error)
    }

    /// Runs a CLI command against this fleet's coordinator, with `user`'s credential.
    func cli(_ arguments: [String], timeout: Double = 3, user: String = "ana") throws -> (status: Int32, output: String, error: String) {
        let credential = try credential(for: user)
        return try run(
            arguments + ["--coordinator", "127.0.0.1:\(operatorPort)", "--timeout", "\(timeout)", "--credential", credential],
            environment: ["USER": user])
    }

    /// Runs a listing with `--json` and parses it.
    func json(_ arguments: [String], user: String = "ana", timeout: Double = 3) throws -> [[String: Any]] {
        let result = try cli(arguments + ["--json"], timeout: timeout, user: user)
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
        guard let keys = try CurveCertificate.load(path: directory + "/\(name)/keys/agent.key_secret").keys else {
            throw HarnessError("no agent key for \(name)")
        }
        return keys
    }

    func operatorKeys(_ user: String) throws -> CurveKeyPair {
        guard let keys = try CurveCertificate.load(path: try credential(for: user)).keys else { throw HarnessError("no key for \(user)") }
        return keys
    }

    /// A raw ZeroMQ socket connected to one of the coordinator's ports with `keys`, as a
    /// hand-written peer would be.
    func socket(
        _ type: ZMQSocketType, port: UInt16, keys: CurveKeyPair, context: ZMQContext,
        serverKey: CurvePublicKey? = nil
    ) throws -> ZMQSocket {
        let socket = try ZMQSocket(context: context, type: type)
        try socket.makeCurveClient(serverKey: serverKey ?? coordinatorKey(), keys: keys)
        try socket.connect("tcp://127.0.0.1:\(port)")
        return socket
    }

    /// A viewer's subscription to these devices' full-rate frames on the live endpoint, which
    /// keeps their flow to the coordinator on for as long as the socket is open (it never
    /// reads: the coordinator drops what a full viewer queue cannot take, for it alone).
    func wantFrames(of deviceIDs: [String], context: ZMQContext, user: String = "ana") throws -> ZMQSocket {
        let viewer = try socket(.sub, port: fleet.ports.livePort, keys: operatorKeys(user), context: context)
        for deviceID in deviceIDs { try viewer.subscribe(LiveTopic.frames(deviceID)) }
        return viewer
    }

    /// Polls `condition` until it holds or `seconds` pass; returns how long it took.
    @discardableResult
    func waitUntil(_ what: String, seconds: Double, _ condition: () throws -> Bool) async throws -> Double {
        try await fleet.waitUntil(what, seconds: seconds, condition)
    }

    func nodes() throws -> [[String: Any]] { try json(["nodes"]) }

    func onlineNodeIDs() throws -> Set<String> {
        Set(try nodes().filter { $0["online"] as? Bool == true }.compactMap { $0["node_id"] as? String })
    }

    func deviceStats() throws -> [String: [String: Any]] {
        Dictionary(uniqueKeysWithValues: try json(["watch", "--count", "1"]).map { ($0["device_id"] as? String ?? "", $0) })
    }
}

typealias HarnessError = FleetTestError
