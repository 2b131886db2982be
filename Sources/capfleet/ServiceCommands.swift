import ArgumentParser
import FleetAgent
import FleetCapture
import FleetClient
import FleetCoordinator
import FleetCore
import FleetHost
import FleetProtocol
import FleetSettings
import Foundation
import Logging
import ServiceLifecycle

struct CoordinatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coordinator", abstract: "Run the coordinator: fleet state in SQLite, frame ingest, telemetry.",
        discussion: """
            The coordinator keeps the fleet's state (nodes, devices, consent, operators, the recordings \
            index, the audit log) in DATA/fleet.sqlite, its CURVE key pair in DATA/keys, and the takes' \
            files in DATA/recordings. It listens on eight TCP ports, 7600 to 7607 by default: control \
            (agents), frame ingest, operator (the CLI), telemetry, metrics (Prometheus), clock, record and \
            live (viewers of full-rate frames).

            A CAPFLEET_<KEY> variable beats the settings file (--config), and --data beats both for \
            data_dir; --check-config prints where each value came from. SIGTERM or SIGINT stops it \
            cleanly. Under systemd (Type=notify) it says READY=1 once its sockets are bound and its \
            store open.
            """)
    @Option(help: "Directory for the fleet database and coordinator state (default ./capfleet-data; setting data_dir).")
    var data: String?
    @Option(help: "Settings file (key = value; the package installs an annotated one: /etc/capfleet/coordinator.conf).")
    var config: String?
    @Flag(help: "Check the settings (file, CAPFLEET_* variables, flags), print where each comes from, and exit.")
    var checkConfig = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.bootstrap(label: "capfleet.coordinator")
        let settings = try CoordinatorSettings.load(file: config, dataOverride: data)
        if checkConfig {
            for line in settings.checkReport() { print(line) }
            return
        }
        let latency = try CPULatencyRequest.hold(settings.cpuLatencyLimit, logger: logger)
        defer { withExtendedLifetime(latency) {} }
        let service = CoordinatorService(configuration: settings.configuration, logger: logger)
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: service)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent", abstract: "Run an agent on a camera host: register its cameras and stream them to the coordinator.",
        discussion: """
            On its first start the agent joins the fleet with a token (--enroll, or enroll_token \
            in its settings) and keeps the key pair it made in its state directory; later starts need no \
            token. With a token for many agents (`capfleet enroll --uses N --name-prefix P`) the node is \
            called its --name (refused if another node has it), or else P1, P2, … in order of use; a token \
            for one name gives that name. It streams V4L2 cameras (found by itself unless --no-discover, or named by --device) \
            or synthetic test-pattern cameras, and sends black frames for every camera until an operator \
            grants it consent (`capfleet consent grant`).

            A flag beats its CAPFLEET_<KEY> variable, which beats the settings file (--config); \
            --check-config prints where each value came from. SIGTERM or SIGINT stops it cleanly. \
            Under systemd (Type=notify) it says READY=1 once enrolled with its cameras open.
            """)
    @Option(help: "Coordinator HOST[:PORT] of its control endpoint (default 127.0.0.1:7600; environment: CAPFLEET_COORDINATOR; setting coordinator).")
    var coordinator: String?
    @Option(
        help:
            "Node name in the agent's HELLO and its default state directory; enrolled with a token for many agents, the node's name (else the token's prefix and a number); a token for one name gives its own (setting name; environment CAPFLEET_NAME)."
    )
    var name: String?
    @Option(name: .customLong("device"), help: "A V4L2 camera to use, by path (/dev/video0, /dev/v4l/by-id/...) or stable id; repeat for more.")
    var devices: [String] = []
    @Flag(inversion: .prefixedNo, help: "Use every video capture device of this host (when no --device is given).")
    var discover = true
    @Option(help: "Number of synthetic test-pattern cameras (default: one if the host has no camera).")
    var synthetic: Int?
    @Option(help: "Synthetic cameras' starting format, WIDTHxHEIGHT:FOURCC.")
    var syntheticFormat: String = "640x480:YUYV"
    @Option(
        name: .customLong("synthetic-overlay"),
        help:
            "A picture every synthetic camera draws into its frames, to try code and face detection: qr:TEXT@X,Y,W or image:FILE.png@X,Y,W; or timecode@X,Y,W, a code of each frame's true exposure time for capfleet sync-audit; or flash@X,Y,W, a patch lit on the frame nearest each whole fleet-time second, when a synthetic microphone clicks (top-left corner and width as fractions of the frame; a picture given @X,Y,W,X2,FRAMES glides to X2 and back, FRAMES frames each way); repeat for more."
    )
    var syntheticOverlays: [String] = []
    @Option(help: "V4L2 cameras' starting format, WIDTHxHEIGHT:FOURCC (default: what the device has).")
    var format: String?
    @Option(help: "Starting frame rate (default: 15 for synthetic cameras, what the device has for V4L2).")
    var fps: Double?
    @Option(help: "mmap buffers per V4L2 camera.")
    var buffers: Int = 4
    @Option(
        help:
            "Agent settings file (key = value: coordinator, name, state_dir, enroll_token, pressure thresholds, spool; the package installs an annotated one: /etc/capfleet/agent.conf)."
    )
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
    @Option(
        help:
            "A one-time token from `capfleet enroll`: joins the fleet with it on the first start (environment: CAPFLEET_ENROLL_TOKEN; setting enroll_token)."
    )
    var enroll: String?
    @Option(
        help:
            "A command run when a device starts and stops sending real frames (the recording light; CAPFLEET_DEVICE, CAPFLEET_REAL_FRAMES=on|off). Setting real_frames_command."
    )
    var onRealFrames: String?
    @Option(
        name: .customLong("sensor-stream"),
        help:
            "A sensor stream this agent offers on its sensor endpoint (IMU, GPIO lines, cues: a-z 0-9 _ -, device sen-NODE-NAME; proto-docs/sensors.md); repeat for more. Setting sensor_streams."
    )
    var sensorStreams: [String] = []
    @Option(
        help:
            "Synthetic microphones: a 1 kHz tone with a click on every fleet-time second, metered like a real one (proto-docs/microphones.md; setting synthetic_microphones)."
    )
    var syntheticMicrophones: Int?
    @Option(
        name: .customLong("microphone"),
        help:
            "An ALSA capture device to use, by ALSA name (hw:CARD=ID,DEV=N) or fleet id (alsa-ID-N); repeat for more (default: every one found unless --no-discover; setting microphones, `none` for none)."
    )
    var microphones: [String] = []
    @Flag(inversion: .prefixedNo, help: "Use every ALSA capture device of this host (when no --microphone is given).")
    var discoverMicrophones = true
    @Option(
        help:
            "GenICam cameras through Aravis: off (default), usb (USB3 Vision), all (also GigE Vision on every interface), or the network interfaces GigE Vision cameras are on, e.g. eth1,eth2 (setting genicam)."
    )
    var genicam: String?
    @Option(help: "The sensor endpoint's Unix socket, mode 0660 (default: STATE_DIR/sensors.sock; setting sensor_socket).")
    var sensorSocket: String?
    @Option(
        help: ArgumentHelp(
            "For tests only: run this agent's clock off by an offset and drift, e.g. \"+3.2s,+40ppm\" (environment: CAPFLEET_TEST_CLOCK_SKEW).",
            visibility: .hidden))
    var testClockSkew: String?
    @Flag(help: "Check the settings (file, CAPFLEET_* variables, flags), print where each comes from, and exit.")
    var checkConfig = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.bootstrap(label: "capfleet.agent")
        var flags = AgentFlags()
        flags.coordinator = coordinator
        flags.name = name
        flags.devices = devices
        flags.discover = discover
        flags.synthetic = synthetic
        flags.syntheticFormat = syntheticFormat
        flags.syntheticOverlays = syntheticOverlays
        flags.format = format
        flags.fps = fps
        flags.buffers = buffers
        flags.config = config
        flags.pressureRoot = pressureRoot
        flags.watchedDisks = watchedDisks
        flags.pressureIntervalMilliseconds = pressureIntervalMs
        flags.pressure = pressure
        flags.stateDirectory = stateDir
        flags.enroll = enroll
        flags.onRealFrames = onRealFrames
        flags.testClockSkew = testClockSkew
        flags.sensorStreams = sensorStreams
        flags.sensorSocket = sensorSocket
        flags.syntheticMicrophones = syntheticMicrophones
        flags.microphones = microphones
        flags.discoverMicrophones = discoverMicrophones
        flags.genicam = genicam
        let settings = try AgentSettings.load(flags)
        if checkConfig {
            for line in settings.checkReport() { print(line) }
            return
        }
        let latency = try CPULatencyRequest.hold(settings.cpuLatencyLimit, logger: logger)
        defer { withExtendedLifetime(latency) {} }
        let service = try AgentService(configuration: settings.configuration, logger: logger)
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: service)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
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
        let dataDirectory = URL(fileURLWithPath: data).standardizedFileURL.path
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        // The daemons' logs go to a file, so the terminal shows the summary as one block and
        // what is said at Ctrl-C; errors show on both.
        let logPath = dataDirectory + "/dev.log"
        let logger = try logging.bootstrap(label: "capfleet.dev", file: logPath)
        // The first agent takes this host's real cameras; synthetic ones stand in where there are none.
        let found = V4L2Discovery.captureDevices()
        let cameraSummary =
            found.isEmpty
            ? "synthetic cameras: this host has no V4L2 camera"
            : "\(found.map { "\($0.card) at \($0.path)" }.joined(separator: ", ")) on dev-agent-1, synthetic cameras on dev-agent-2"
        // Secure by default here too: an admin key for whoever runs this, and enrolled agents.
        let credentialPath = try await Self.devCredential(dataDirectory: dataDirectory)
        let admin = try OperatorCredential.load(path: credentialPath).name
        let coordinator = CoordinatorService(
            configuration: CoordinatorConfiguration(dataDirectory: dataDirectory + "/coordinator", bindHost: "127.0.0.1"),
            logger: Logger(label: "capfleet.coordinator"),
            onReady: { endpoints in
                Task {
                    // A one-time sign-in for the dev admin, so the dashboard opens with one click:
                    // made first, so the summary is one block.
                    var signIn = ""
                    if let metrics = endpoints.metrics {
                        let base = String(metrics.dropLast("/metrics".count))
                        do {
                            let path = try await LocalAdministration.createDashboardSignIn(
                                dataDirectory: dataDirectory + "/coordinator", operatorName: admin, by: "capfleet dev")
                            signIn =
                                "Dashboard, signed in as \(admin) (this link works once, for 10 minutes; later: capfleet dashboard login):\n  \(base)\(path)\n"
                        } catch {
                            signIn = "No dashboard sign-in link (\(error)); make one with: capfleet dashboard login\n"
                        }
                    }
                    print(
                        """

                        CaptureFleet is running: a coordinator and two agents (\(cameraSummary)).
                          state           \(dataDirectory)
                          fleet database  \(endpoints.database)
                          operator        \(endpoints.operator)   (capfleet nodes | devices | formats DEVICE | watch)
                          telemetry       \(endpoints.telemetry)   (python3 proto-docs/examples/telemetry_subscriber.py)
                          dashboard       \(endpoints.metrics.map { String($0.dropLast("metrics".count)) } ?? "off")   (sign in: capfleet dashboard login)
                          metrics         \(endpoints.metrics ?? "off")   (Prometheus scrape URL)
                          agents connect  \(endpoints.control)
                          credential      \(credentialPath)   (your admin key\(credentialPath == OperatorCredential.defaultPath ? ", where the CLI looks" : "; export \(OperatorCredential.environmentVariable)=\(credentialPath)"))
                          coordinator key \(endpoints.publicKey.z85)
                          logs            \(logPath)   (tail -f; errors show here too)
                        Cameras send black frames until their consent is granted: capfleet consent grant DEVICE --reason TEXT
                        In another terminal: capfleet watch
                        Stop with Ctrl-C.

                        \(signIn)
                        """)
                    fflush(nil)
                }
            })
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: coordinator)]
        for index in 1...2 {
            var configuration = AgentConfiguration(
                nodeName: "dev-agent-\(index)", stateDirectory: dataDirectory + "/agent-\(index)",
                syntheticCameraCount: index == 1 && !found.isEmpty ? 0 : synthetic,
                discoverDevices: index == 1, syntheticFrameRate: fps)
            if try AgentCredentials.load(stateDirectory: configuration.stateDirectory) == nil {
                configuration.enrollmentToken = try await LocalAdministration.createEnrollmentToken(
                    dataDirectory: dataDirectory + "/coordinator", name: "dev-agent-\(index)", validSeconds: 600, by: "capfleet dev"
                ).token.text
            }
            let agent = try AgentService(configuration: configuration, logger: Logger(label: "capfleet.agent.\(index)"))
            services.append(.init(service: agent))
        }
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        // Said after the shutdown, once nothing else writes to the terminal.
        let restart = "capfleet dev" + (data == "capfleet-data" ? "" : " --data \(data)")
        do {
            let takes = try await LocalAdministration.takesInProgress(dataDirectory: dataDirectory + "/coordinator")
            print(LocalAdministration.inProgressNote(takes, restart: restart) ?? "Stopped; no take was recording.")
        } catch {
            print("Stopped; cannot tell which takes were recording (\(error)): capfleet recordings list shows them once the fleet is back.")
        }
    }

    /// An admin credential for this dev fleet in its data directory, also put where the CLI
    /// looks by default unless a credential of someone's own is there. Returns its path.
    static func devCredential(dataDirectory: String) async throws -> String {
        let coordinatorData = dataDirectory + "/coordinator"
        let path = dataDirectory + "/dev-admin.credential"
        let user = ProcessInfo.processInfo.environment["USER"].flatMap { AccessNames.isValid($0) ? $0 : nil } ?? "dev-admin"
        let coordinatorKey = try CoordinatorKeys.loadOrCreate(dataDirectory: coordinatorData).publicKey
        var credential = try? OperatorCredential.load(path: path)
        if credential?.coordinatorKey != coordinatorKey || credential?.telemetry == nil {
            let added = try await LocalAdministration.addOperator(
                dataDirectory: coordinatorData, name: user, role: .admin, publicKey: nil,
                by: "capfleet dev")
            let made = OperatorCredential(
                name: user, role: "admin", keys: added.keys!, coordinatorKey: coordinatorKey,
                coordinator: "127.0.0.1:\(WireDefaults.operatorPort)",
                telemetry: "127.0.0.1:\(WireDefaults.telemetryPort)", writtenByDev: true)
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

extension CPULatencyRequest {
    /// The daemon's CPU latency request (setting `cpu_latency_us`), held until it stops; nil
    /// without the setting. A host that refuses it stops the daemon: whoever set it relies on it.
    static func hold(_ microseconds: Int32?, logger: Logger) throws -> CPULatencyRequest? {
        guard let microseconds else { return nil }
        let request = try CPULatencyRequest(microseconds: microseconds)
        logger.notice(
            "holding this host's CPU wake-up latency at \(microseconds) µs or less while running (cpu_latency_us)",
            metadata: ["cpu_latency.in_force_us": "\(CPULatencyRequest.current().map(String.init) ?? "unknown")"])
        return request
    }
}
