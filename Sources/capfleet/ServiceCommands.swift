import ArgumentParser
import FleetAgent
import FleetCapture
import FleetClient
import FleetCoordinator
import FleetCore
import FleetHTTP
import FleetProtocol
import Foundation
import Logging
import ServiceLifecycle

struct CoordinatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coordinator", abstract: "Run the coordinator: fleet state in SQLite, frame ingest, telemetry.")
    @Option(help: "Directory for the fleet database and coordinator state (default ./capfleet-data; setting data_dir).")
    var data: String?
    @Option(help: "Settings file (key = value; see deploy/coordinator.conf).")
    var config: String?
    @Flag(help: "Check the settings (file, CAPFLEET_* variables, flags), print where each comes from, and exit.")
    var checkConfig = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.bootstrap(label: "capfleet.coordinator")
        let configuration = try CoordinatorSettings.load(file: config, dataOverride: data)
        if checkConfig {
            let settings = try CoordinatorSettings.file(config)
            for line in settings.report(keys: CoordinatorSettings.keys, environment: ProcessInfo.processInfo.environment) { print(line) }
            print("settings OK: data \(configuration.dataDirectory), bind \(configuration.bindHost), control port \(configuration.controlPort)")
            return
        }
        let service = CoordinatorService(configuration: configuration, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

/// The coordinator's settings: defaults, then the file, then CAPFLEET_* variables, then flags.
enum CoordinatorSettings {
    static let keys = ["data_dir", "bind", "control_port", "ingest_port", "operator_port", "telemetry_port", "metrics_port",
                       "clock_port", "record_port", "recordings_dir", "segment_seconds", "record_lead_ms", "record_reserve_mb", "retention_budget_gb", "retention_days", "heartbeat_interval_ms", "heartbeat_liveness",
                       "alert_command", "alert_webhook", "alert_interval_s", "alert_burst", "alert_pressure_level",
                       "alert_drop_share", "alert_drop_window_s", "alert_command_timeout_s"]

    static func file(_ file: String?) throws -> SettingsFile {
        guard let file else { return SettingsFile() }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            throw CLIFailure("cannot read the settings file \(file): check the path")
        }
        return try SettingsFile(text: text, path: file, knownKeys: keys)
    }

    static func load(file: String?, dataOverride: String?) throws -> CoordinatorConfiguration {
        let settings = try Self.file(file)
        let env = ProcessInfo.processInfo.environment
        var configuration = CoordinatorConfiguration(dataDirectory: dataOverride ?? settings.value("data_dir", environment: env) ?? "capfleet-data")
        configuration.bindHost = settings.value("bind", environment: env) ?? configuration.bindHost
        configuration.controlPort = try settings.integer("control_port", environment: env) ?? configuration.controlPort
        configuration.frameIngestPort = try settings.integer("ingest_port", environment: env) ?? configuration.frameIngestPort
        configuration.operatorPort = try settings.integer("operator_port", environment: env) ?? configuration.operatorPort
        configuration.telemetryPort = try settings.integer("telemetry_port", environment: env) ?? configuration.telemetryPort
        configuration.clockPort = try settings.integer("clock_port", environment: env) ?? configuration.clockPort
        configuration.recordPort = try settings.integer("record_port", environment: env) ?? configuration.recordPort
        configuration.recordingsDirectory = settings.value("recordings_dir", environment: env) ?? configuration.recordingsDirectory
        configuration.segmentSeconds = try settings.integer("segment_seconds", environment: env) ?? configuration.segmentSeconds
        guard configuration.segmentSeconds >= 1 else { throw CLIFailure("segment_seconds must be at least 1") }
        configuration.recordLeadMilliseconds = try settings.integer("record_lead_ms", environment: env) ?? configuration.recordLeadMilliseconds
        if let reserve: Int64 = try settings.integer("record_reserve_mb", environment: env) { configuration.recordReserveBytes = reserve << 20 }
        if let text = settings.value("retention_budget_gb", environment: env) {
            guard let gigabytes = Double(text), gigabytes >= 0, gigabytes.isFinite else { throw CLIFailure("retention_budget_gb must be a number of GiB (0 = no budget), not \(text)") }
            configuration.retention.budgetBytes = Int64(gigabytes * Double(1 << 30))
        }
        if let text = settings.value("retention_days", environment: env) {
            guard let days = Double(text), days >= 0, days.isFinite else { throw CLIFailure("retention_days must be a number of days (0 = keep forever), not \(text)") }
            configuration.retention.maximumAgeSeconds = Int64(days * 86_400)
        }
        if settings.value("metrics_port", environment: env) == "off" {
            configuration.metricsPort = nil
        } else if let port: UInt16 = try settings.integer("metrics_port", environment: env) {
            configuration.metricsPort = port
        }
        configuration.heartbeatIntervalMilliseconds = try settings.integer("heartbeat_interval_ms", environment: env) ?? configuration.heartbeatIntervalMilliseconds
        configuration.heartbeatLiveness = try settings.integer("heartbeat_liveness", environment: env) ?? configuration.heartbeatLiveness
        configuration.alerts = try alerts(settings, env)
        return configuration
    }

    static func alerts(_ settings: SettingsFile, _ env: [String: String]) throws -> AlertConfiguration {
        var alerts = AlertConfiguration()
        if let command = settings.value("alert_command", environment: env), !command.isEmpty { alerts.command = command }
        if let text = settings.value("alert_webhook", environment: env), !text.isEmpty {
            do {
                let url = try LocalWebhookURL(text)
                // Refuse a public address now rather than at the first alert; a name that does
                // not resolve yet (the network may come up later) is checked again at each post.
                if let problem = WebhookClient.localCheck(url), case .notLocal = problem { throw problem }
                alerts.webhook = url
            } catch {
                throw CLIFailure("alert_webhook: \(error)")
            }
        }
        alerts.intervalSeconds = try settings.integer("alert_interval_s", environment: env) ?? alerts.intervalSeconds
        guard alerts.intervalSeconds >= 1 else { throw CLIFailure("alert_interval_s must be at least 1: it is what keeps a flapping node from flooding the pager") }
        alerts.burst = try settings.integer("alert_burst", environment: env) ?? alerts.burst
        guard alerts.burst >= 1 else { throw CLIFailure("alert_burst must be at least 1") }
        alerts.dropWindowSeconds = try settings.integer("alert_drop_window_s", environment: env) ?? alerts.dropWindowSeconds
        guard alerts.dropWindowSeconds >= 1 else { throw CLIFailure("alert_drop_window_s must be at least 1") }
        alerts.commandTimeoutSeconds = try settings.integer("alert_command_timeout_s", environment: env) ?? alerts.commandTimeoutSeconds
        guard alerts.commandTimeoutSeconds >= 1 else { throw CLIFailure("alert_command_timeout_s must be at least 1") }
        if let text = settings.value("alert_pressure_level", environment: env) {
            guard let level = PressureLevel(name: text), level > .nominal else {
                throw CLIFailure("alert_pressure_level \(text): write fair, serious, critical or shutdown")
            }
            alerts.pressureLevel = level
        }
        if let text = settings.value("alert_drop_share", environment: env) {
            guard let share = Double(text), share > 0, share <= 1 else {
                throw CLIFailure("alert_drop_share \(text): write a fraction above 0 and at most 1, e.g. 0.05 for 5 %")
            }
            alerts.dropShare = share
        }
        return alerts
    }
}

struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent", abstract: "Run an agent on a camera host: register its cameras and stream them to the coordinator.")
    @Option(help: "Coordinator HOST[:PORT] of its control endpoint (default 127.0.0.1:7600; environment: CAPFLEET_COORDINATOR; setting coordinator).")
    var coordinator: String?
    @Option(help: "Node name in the agent's HELLO and its default state directory; the coordinator shows the name given at `capfleet enroll` (setting name).")
    var name: String?
    @Option(name: .customLong("device"), help: "A V4L2 camera to use, by path (/dev/video0, /dev/v4l/by-id/...) or stable id; repeat for more.")
    var devices: [String] = []
    @Flag(inversion: .prefixedNo, help: "Use every video capture device of this host (when no --device is given).")
    var discover = true
    @Option(help: "Number of synthetic test-pattern cameras (default: one if the host has no camera).")
    var synthetic: Int?
    @Option(help: "Synthetic cameras' starting format, WIDTHxHEIGHT:FOURCC.")
    var syntheticFormat: String = "640x480:YUYV"
    @Option(help: "V4L2 cameras' starting format, WIDTHxHEIGHT:FOURCC (default: what the device has).")
    var format: String?
    @Option(help: "Starting frame rate (default: 15 for synthetic cameras, what the device has for V4L2).")
    var fps: Double?
    @Option(help: "mmap buffers per V4L2 camera.")
    var buffers: Int = 4
    @Option(help: "Agent settings file (key = value: coordinator, name, state_dir, enroll_token, pressure thresholds, spool; see deploy/agent.conf).")
    var config: String?
    @Option(help: "Where the pressure sampler reads /proc and /sys (default /; tests use fixture trees).")
    var pressureRoot: String = "/"
    @Option(name: .customLong("watch-disk"), help: "A disk whose free space counts as pressure (default: the state directory's); repeat for more.")
    var watchedDisks: [String] = []
    @Option(help: "How often pressure is sampled, in milliseconds.")
    var pressureIntervalMs: Int = 1000
    @Flag(inversion: .prefixedNo, help: "Sample and report pressure (--no-pressure only to measure its cost; nothing then protects the host).")
    var pressure = true
    @Option(help: "Where the agent keeps its identity and key (default: ~/.local/state/capfleet/agent[-NAME]; setting state_dir).")
    var stateDir: String?
    @Option(help: "A one-time token from `capfleet enroll`: joins the fleet with it on the first start (environment: CAPFLEET_ENROLL_TOKEN; setting enroll_token).")
    var enroll: String?
    @Option(help: "A command run when a device starts and stops sending real frames (the recording light; CAPFLEET_DEVICE, CAPFLEET_REAL_FRAMES=on|off). Setting real_frames_command.")
    var onRealFrames: String?
    @Option(help: ArgumentHelp("For tests only: run this agent's clock off by an offset and drift, e.g. \"+3.2s,+40ppm\" (environment: CAPFLEET_TEST_CLOCK_SKEW).",
                               visibility: .hidden))
    var testClockSkew: String?
    @Flag(help: "Check the settings (file, CAPFLEET_* variables, flags), print where each comes from, and exit.")
    var checkConfig = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.bootstrap(label: "capfleet.agent")
        let env = ProcessInfo.processInfo.environment
        var settings = SettingsFile()
        if let config {
            guard let text = try? String(contentsOfFile: config, encoding: .utf8) else {
                throw CLIFailure("cannot read the settings file \(config): check the path")
            }
            settings = try SettingsFile(text: text, path: config, knownKeys: AgentSettingKeys.all)
        }
        // Flags first, then CAPFLEET_* variables, then the file.
        let coordinator = self.coordinator ?? settings.value(AgentSettingKeys.coordinator, environment: env)
        let name = self.name ?? settings.value(AgentSettingKeys.name, environment: env).flatMap { $0.isEmpty ? nil : $0 }
        guard let address = CoordinatorAddress.resolve(coordinator, defaultPort: WireDefaults.controlPort) else {
            throw CLIFailure("cannot read the coordinator address \(coordinator ?? ""): write HOST or HOST:PORT")
        }
        var configuration = AgentConfiguration(
            coordinatorHost: address.host, controlPort: address.port, nodeName: name,
            stateDirectory: stateDir ?? settings.value(AgentSettingKeys.stateDirectory, environment: env).flatMap { $0.isEmpty ? nil : $0 }
                ?? Self.defaultStateDirectory(name: name),
            syntheticCameraCount: synthetic, devices: devices, discoverDevices: discover, bufferCount: buffers,
            deviceFormat: try format.map(Self.parseFormat), deviceFrameRate: fps,
            syntheticFormat: try Self.parseFormat(syntheticFormat), syntheticFrameRate: fps ?? 15)
        configuration.realFramesCommand = onRealFrames ?? settings.value("real_frames_command", environment: ProcessInfo.processInfo.environment)
            .flatMap { $0.isEmpty ? nil : $0 }
        if let megabytes: Int = try settings.integer(AgentSettingKeys.recordSpoolMemory, environment: ProcessInfo.processInfo.environment) {
            guard megabytes >= 16 else { throw CLIFailure("record_spool_memory_mb must be at least 16") }
            configuration.recordSpoolMemoryBytes = megabytes << 20
        }
        if let megabytes: Int64 = try settings.integer(AgentSettingKeys.recordSpoolDisk, environment: ProcessInfo.processInfo.environment) {
            guard megabytes >= 0 else { throw CLIFailure("record_spool_disk_mb cannot be negative") }
            configuration.recordSpoolDiskBytes = megabytes << 20
        }
        configuration.pressureThresholds = try PressureThresholds(settings: settings, environment: ProcessInfo.processInfo.environment)
        configuration.pressureRoot = pressureRoot
        configuration.watchedDisks = watchedDisks
        guard pressureIntervalMs >= 50 else { throw CLIFailure("--pressure-interval-ms must be at least 50") }
        configuration.pressureIntervalMilliseconds = pressureIntervalMs
        configuration.pressureEnabled = pressure
        if let skew = testClockSkew ?? ProcessInfo.processInfo.environment["CAPFLEET_TEST_CLOCK_SKEW"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard let clock = NodeClock(testSetting: skew) else {
                throw CLIFailure("cannot read the clock skew \(skew): write an offset and/or a drift, e.g. +3.2s,+40ppm (offset units s, ms, us, ns)")
            }
            configuration.nodeClock = clock
        }
        configuration.enrollmentToken = enroll ?? settings.value(AgentSettingKeys.enrollToken, environment: env).flatMap { $0.isEmpty ? nil : $0 }
        if checkConfig {
            for line in settings.report(keys: AgentSettingKeys.all, environment: env) { print(line) }
            print("settings OK: coordinator \(address), state \(configuration.stateDirectory)")
            return
        }
        let service = try AgentService(configuration: configuration, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    static func defaultStateDirectory(name: String?) -> String {
        let env = ProcessInfo.processInfo.environment
        let base = env["XDG_STATE_HOME"] ?? ((env["HOME"] ?? "/tmp") + "/.local/state")
        return base + "/capfleet/agent" + (name.map { "-" + $0 } ?? "")
    }

    static func parseFormat(_ text: String) throws -> (width: Int, height: Int, pixelFormat: PixelFormat) {
        let parts = text.split(separator: ":")
        let size = parts.first?.split(separator: "x") ?? []
        guard parts.count == 2, size.count == 2, let width = Int(size[0]), let height = Int(size[1]) else {
            throw CLIFailure("cannot read the format \(text): write WIDTHxHEIGHT:FOURCC, e.g. 1280x720:NV12")
        }
        return (width, height, PixelFormat(String(parts[1]).uppercased()))
    }
}

struct DevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev",
        abstract: "The embedded default: a coordinator and two agents on this machine; this host's cameras, or synthetic ones where there are none.")
    @Option(help: "State directory.") var data: String = "capfleet-data"
    @Option(help: "Synthetic cameras per agent.") var synthetic: Int = 1
    @Option(help: "Synthetic cameras' frame rate.") var fps: Double = 15
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.bootstrap(label: "capfleet.dev")
        let dataDirectory = URL(fileURLWithPath: data).standardizedFileURL.path
        // The first agent takes this host's real cameras; synthetic ones stand in where there are none.
        let found = V4L2Discovery.captureDevices()
        let cameraSummary = found.isEmpty ? "synthetic cameras: this host has no V4L2 camera"
            : "\(found.map { "\($0.card) at \($0.path)" }.joined(separator: ", ")) on dev-agent-1, synthetic cameras on dev-agent-2"
        // Secure by default here too: an admin key for whoever runs this, and enrolled agents.
        let credentialPath = try await Self.devCredential(dataDirectory: dataDirectory)
        let coordinator = CoordinatorService(
            configuration: CoordinatorConfiguration(dataDirectory: dataDirectory + "/coordinator", bindHost: "127.0.0.1"),
            logger: Logger(label: "capfleet.coordinator"),
            onReady: { endpoints in
                print("""

                    CaptureFleet is running: a coordinator and two agents (\(cameraSummary)).
                      state           \(dataDirectory)
                      fleet database  \(endpoints.database)
                      operator        \(endpoints.operator)   (capfleet nodes | devices | formats DEVICE | watch)
                      telemetry       \(endpoints.telemetry)   (python3 proto-docs/examples/telemetry_subscriber.py)
                      metrics         \(endpoints.metrics ?? "off")   (Prometheus scrape URL)
                      agents connect  \(endpoints.control)
                      credential      \(credentialPath)   (your admin key\(credentialPath == OperatorCredential.defaultPath ? ", where the CLI looks" : "; export \(OperatorCredential.environmentVariable)=\(credentialPath)"))
                      coordinator key \(endpoints.publicKey.z85)
                    Cameras send black frames until their consent is granted: capfleet consent grant DEVICE --reason TEXT
                    In another terminal: capfleet watch
                    Stop with Ctrl-C.

                    """)
                fflush(nil)
            })
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: coordinator)]
        for index in 1...2 {
            var configuration = AgentConfiguration(nodeName: "dev-agent-\(index)", stateDirectory: dataDirectory + "/agent-\(index)",
                                                   syntheticCameraCount: index == 1 && !found.isEmpty ? 0 : synthetic,
                                                   discoverDevices: index == 1, syntheticFrameRate: fps)
            if try AgentCredentials.load(stateDirectory: configuration.stateDirectory) == nil {
                configuration.enrollmentToken = try await LocalAdministration.createEnrollmentToken(
                    dataDirectory: dataDirectory + "/coordinator", name: "dev-agent-\(index)", validSeconds: 600, by: "capfleet dev").token.text
            }
            let agent = try AgentService(configuration: configuration, logger: Logger(label: "capfleet.agent.\(index)"))
            services.append(.init(service: agent))
        }
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// An admin credential for this dev fleet in its data directory, also put where the CLI
    /// looks by default unless a credential of someone's own is there. Returns its path.
    static func devCredential(dataDirectory: String) async throws -> String {
        let coordinatorData = dataDirectory + "/coordinator"
        let path = dataDirectory + "/dev-admin.credential"
        let user = ProcessInfo.processInfo.environment["USER"].flatMap { AccessNames.isValid($0) ? $0 : nil } ?? "dev-admin"
        let coordinatorKey = try CoordinatorKeys.loadOrCreate(dataDirectory: coordinatorData).publicKey
        var credential = try? OperatorCredential.load(path: path)
        if credential?.coordinatorKey != coordinatorKey {
            let added = try await LocalAdministration.addOperator(dataDirectory: coordinatorData, name: user, role: .admin, publicKey: nil,
                                                                  by: "capfleet dev")
            let made = OperatorCredential(name: user, role: "admin", keys: added.keys!, coordinatorKey: coordinatorKey,
                                          coordinator: "127.0.0.1:\(WireDefaults.operatorPort)", writtenByDev: true)
            try made.save(path: path)
            credential = made
        }
        // Best effort: a read-only home only means the CLI needs --credential or the variable.
        let installed = OperatorCredential.defaultPath
        let existing = try? OperatorCredential.load(path: installed)
        if let credential, !FileManager.default.fileExists(atPath: installed) || existing?.writtenByDev == true {
            try? credential.save(path: installed)
        }
        return FileManager.default.fileExists(atPath: installed) && (try? OperatorCredential.load(path: installed))?.coordinatorKey == coordinatorKey
            ? installed : path
    }
}
