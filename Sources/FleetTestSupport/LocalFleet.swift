import FleetBus
import FleetClient
import Foundation

/// The ports a local coordinator binds, all on 127.0.0.1 and found free just before.
public struct FleetPorts: Sendable {
    public let controlPort: UInt16
    public let ingestPort: UInt16
    public let operatorPort: UInt16
    public let telemetryPort: UInt16
    public let clockPort: UInt16
    /// 0: any free port, which WELCOME tells the agents.
    public let recordPort: UInt16
    /// Viewers of full-rate frames; 0: any free port, which `who_am_i` names.
    public let livePort: UInt16
    /// nil: the metrics endpoint is off.
    public let metricsPort: UInt16?

    /// Free ports for every endpoint; `record: false` leaves the recording port to the
    /// coordinator, `metrics: false` turns the metrics endpoint off (the benchmarks measure
    /// without it).
    public static func free(record: Bool = true, metrics: Bool = true) throws -> FleetPorts {
        let ports = try LoopbackPorts.free(6 + (record ? 1 : 0) + (metrics ? 1 : 0))
        return FleetPorts(
            controlPort: ports[0], ingestPort: ports[1], operatorPort: ports[2], telemetryPort: ports[3],
            clockPort: ports[4], recordPort: record ? ports[6] : 0, livePort: ports[5],
            metricsPort: metrics ? ports[ports.count - 1] : nil)
    }

    /// The coordinator's settings for these ports, as CAPFLEET_* variables.
    public var coordinatorEnvironment: [String: String] {
        [
            "CAPFLEET_BIND": "127.0.0.1", "CAPFLEET_CONTROL_PORT": "\(controlPort)", "CAPFLEET_INGEST_PORT": "\(ingestPort)",
            "CAPFLEET_OPERATOR_PORT": "\(operatorPort)", "CAPFLEET_TELEMETRY_PORT": "\(telemetryPort)", "CAPFLEET_CLOCK_PORT": "\(clockPort)",
            "CAPFLEET_RECORD_PORT": "\(recordPort)", "CAPFLEET_LIVE_PORT": "\(livePort)",
            "CAPFLEET_METRICS_PORT": metricsPort.map { "\($0)" } ?? "off",
        ]
    }
}

/// A fleet of `capfleet` child processes on this machine: a coordinator on free ports and
/// agents enrolled with it, with every bit of state in one directory. Keys are made the way
/// an install script makes them: on the coordinator's host, from its data directory.
///
/// Used by the integration tests and the benchmarks alike. Not thread-safe: one test or
/// benchmark drives it (`@unchecked Sendable` so that a test can hand it to async code).
public final class LocalFleet: @unchecked Sendable {
    public let directory: String
    public let binary: String
    public let ports: FleetPorts
    public let output: FleetChild.Output
    /// Every child started, oldest first.
    public private(set) var children: [FleetChild] = []

    /// `output`: nil keeps each child's output in DIRECTORY/NAME.log.
    public init(directory: String, ports: FleetPorts, output: FleetChild.Output? = nil, binary: String? = nil) throws {
        self.binary = try binary ?? CapfleetBinary.checked()
        self.directory = directory
        self.ports = ports
        self.output = output ?? .logFile(directory: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    public var coordinatorDataDirectory: String { directory + "/coordinator" }

    public var operatorAddress: CoordinatorAddress { CoordinatorAddress(host: "127.0.0.1", port: ports.operatorPort) }

    /// Starts a coordinator on this fleet's ports and data directory. `arguments` come after
    /// `coordinator --data DIR`; `environment` adds to (or overrides) the ports' settings.
    @discardableResult
    public func startCoordinator(arguments: [String] = [], environment: [String: String] = [:]) throws -> FleetChild {
        try launch(
            "coordinator-\(children.count)", ["coordinator", "--data", coordinatorDataDirectory] + arguments,
            environment: ports.coordinatorEnvironment.merging(environment) { $1 })
    }

    /// Starts an agent called `name` with its state in DIRECTORY/NAME, connected to this
    /// fleet's control port; its first start enrolls it with a fresh token, later ones use the
    /// key in its state directory. `arguments` come after those.
    @discardableResult
    public func startAgent(_ name: String, arguments: [String] = [], environment: [String: String] = [:]) throws -> FleetChild {
        let stateDirectory = directory + "/\(name)"
        let enrolled = FileManager.default.fileExists(atPath: stateDirectory + "/keys/agent.key_secret")
        return try launch(
            "\(name)-\(children.count)",
            ["agent", "--coordinator", "127.0.0.1:\(ports.controlPort)", "--name", name, "--state-dir", stateDirectory]
                + (enrolled ? [] : ["--enroll", try enrollmentToken(name: name)]) + arguments, environment: environment)
    }

    /// Starts any `capfleet` process that lives and dies with this fleet.
    @discardableResult
    public func launch(_ name: String, _ arguments: [String], environment: [String: String] = [:]) throws -> FleetChild {
        let child = try FleetChild(name: name, binary: binary, arguments: arguments, environment: environment, output: output)
        children.append(child)
        return child
    }

    /// A one-time token for an agent called `name`, made on the coordinator's host.
    public func enrollmentToken(name: String, validSeconds: Int = 600) throws -> String {
        let result = try run(["enroll", "--name", name, "--data", coordinatorDataDirectory, "--new-fleet", "--valid", "\(validSeconds)", "--quiet"])
        guard result.status == 0 else { throw FleetTestError("capfleet enroll --name \(name) failed: \(result.error)") }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The path of `user`'s credential file, made on first use on the coordinator's host with
    /// `role`. Works with the coordinator running or not (it makes the keys if it has not yet).
    public func credential(for user: String, role: String) throws -> String {
        let path = directory + "/\(user).credential"
        guard !FileManager.default.fileExists(atPath: path) else { return path }
        let result = try run([
            "operator", "add", user, "--role", role, "--data", coordinatorDataDirectory, "--new-fleet",
            "--out", path, "--address", operatorAddress.description,
        ])
        guard result.status == 0 else { throw FleetTestError("capfleet operator add \(user) failed: \(result.error)") }
        return path
    }

    public func operatorCredential(for user: String, role: String) throws -> OperatorCredential {
        try OperatorCredential.load(path: try credential(for: user, role: role))
    }

    /// Runs `capfleet` with `arguments` as they are and waits for it.
    public func run(_ arguments: [String], environment: [String: String] = [:]) throws -> CapfleetBinary.Result {
        try CapfleetBinary.run(arguments, environment: environment, binary: binary)
    }

    /// SIGTERM to every child still running, newest first (agents before the coordinator they
    /// would say goodbye to), each waited for.
    public func stop() {
        for child in children.reversed() { child.stop() }
    }

    /// SIGKILL to every child still running.
    public func kill() {
        for child in children.reversed() { child.kill() }
    }

    /// The end of every child's log, for a failure report.
    public func logTails(characters: Int = 3000) -> String {
        children.filter { $0.logPath != nil }.map { "--- \($0.name)\n\($0.log.suffix(characters))" }.joined(separator: "\n")
    }

    /// Stops the fleet (SIGTERM) and deletes its directory.
    public func remove() {
        stop()
        removeDirectory()
    }

    /// Deletes the fleet's directory. A leftover temporary directory is not worth failing a
    /// test or a benchmark for, so a failure is only reported on standard error.
    public func removeDirectory() {
        guard FileManager.default.fileExists(atPath: directory) else { return }
        do {
            try FileManager.default.removeItem(atPath: directory)
        } catch {
            FileHandle.standardError.write(Data("note: cannot remove \(directory): \(error)\n".utf8))
        }
    }
}
