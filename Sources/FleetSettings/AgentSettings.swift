import FleetAgent
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

/// What `capfleet agent` was given on its command line, before the settings file and the
/// environment fill in the rest. Every field is what the flag said; nil where it was not given.
public struct AgentFlags: Sendable {
    public var coordinator: String?
    public var name: String?
    public var devices: [String] = []
    public var discover = true
    public var synthetic: Int?
    public var syntheticFormat = "640x480:YUYV"
    public var syntheticOverlays: [String] = []
    public var format: String?
    public var fps: Double?
    public var buffers = 4
    public var config: String?
    public var pressureRoot = "/"
    public var watchedDisks: [String] = []
    public var pressureIntervalMilliseconds = 1000
    public var pressure = true
    public var stateDirectory: String?
    public var enroll: String?
    public var onRealFrames: String?
    public var testClockSkew: String?
    public var sensorStreams: [String] = []
    public var sensorSocket: String?
    public var syntheticMicrophones: Int?
    public var microphones: [String] = []
    public var discoverMicrophones = true
    public var genicam: String?

    public init() {}
}

/// The agent's settings: flags first, then CAPFLEET_<KEY> variables, then the settings file
/// (deploy/agent.conf), then the defaults. Read and checked here, before anything starts.
public struct AgentSettings: Sendable {
    /// The file as read (empty without one).
    public let file: SettingsFile
    /// Where the agent finds the coordinator's control endpoint.
    public let coordinator: CoordinatorAddress
    public let configuration: AgentConfiguration
    /// `cpu_latency_us`: the CPU latency limit the agent holds while it runs, µs; nil: none.
    public let cpuLatencyLimit: Int32?

    public static func load(_ flags: AgentFlags, environment env: [String: String] = ProcessInfo.processInfo.environment) throws -> AgentSettings {
        let settings = try SettingsFile.read(path: flags.config, knownKeys: AgentSettingKeys.all)
        let written = flags.coordinator ?? settings.value(AgentSettingKeys.coordinator, environment: env)
        let name = flags.name ?? settings.nonEmpty(AgentSettingKeys.name, environment: env)
        let address: CoordinatorAddress
        if let written {
            guard let parsed = CoordinatorAddress(written, defaultPort: WireDefaults.controlPort) else {
                throw SettingsError("cannot read the coordinator address \(written): write HOST or HOST:PORT")
            }
            address = parsed
        } else {
            // Written nowhere (flag, CAPFLEET_COORDINATOR, file): the coordinator on this machine.
            address = CoordinatorAddress(host: "127.0.0.1", port: WireDefaults.controlPort)
        }
        var configuration = AgentConfiguration(
            coordinatorHost: address.host, controlPort: address.port, nodeName: name,
            stateDirectory: flags.stateDirectory ?? settings.nonEmpty(AgentSettingKeys.stateDirectory, environment: env)
                ?? defaultStateDirectory(name: name, environment: env),
            syntheticCameraCount: flags.synthetic, devices: flags.devices, discoverDevices: flags.discover, bufferCount: flags.buffers,
            deviceFormat: try flags.format.map(parseFormat), deviceFrameRate: flags.fps,
            syntheticFormat: try parseFormat(flags.syntheticFormat), syntheticFrameRate: flags.fps ?? 15)
        do {
            configuration.syntheticOverlays = try flags.syntheticOverlays.map(SyntheticOverlaySpec.parse)
        } catch {
            throw SettingsError(error.description)
        }
        configuration.realFramesCommand = flags.onRealFrames ?? settings.nonEmpty("real_frames_command", environment: env)
        if let megabytes: Int = try settings.integer(AgentSettingKeys.recordSpoolMemory, environment: env) {
            guard megabytes >= 16 else { throw SettingsError("record_spool_memory_mb must be at least 16") }
            configuration.recordSpoolMemoryBytes = megabytes << 20
        }
        if let megabytes: Int64 = try settings.integer(AgentSettingKeys.recordSpoolDisk, environment: env) {
            guard megabytes >= 0 else { throw SettingsError("record_spool_disk_mb cannot be negative") }
            configuration.recordSpoolDiskBytes = megabytes << 20
        }
        configuration.preview = try previewSettings(settings, environment: env)
        configuration.recordingsDirectory = settings.nonEmpty(AgentSettingKeys.recordingsDirectory, environment: env)
        if let megabytes: Int64 = try settings.integer(AgentSettingKeys.recordReserve, environment: env) {
            guard megabytes >= 0 else { throw SettingsError("record_reserve_mb cannot be negative") }
            configuration.recordReserveBytes = megabytes << 20
        }
        if let days: Int = try settings.integer(AgentSettingKeys.recordingsKeepDays, environment: env) {
            guard days >= 0 else { throw SettingsError("recordings_keep_days cannot be negative (0 keeps collected segments)") }
            configuration.recordingsKeepDays = days
        }
        if let megabytes: Int64 = try settings.integer(AgentSettingKeys.collectRate, environment: env) {
            guard megabytes >= 0 else { throw SettingsError("collect_rate_mb cannot be negative (0: no limit)") }
            configuration.collectBytesPerSecond = megabytes << 20
        }
        if let threads: Int = try settings.integer(AgentSettingKeys.encoderThreads, environment: env) {
            guard (1...64).contains(threads) else { throw SettingsError("encoder_threads must be 1 to 64 (threads each take's encoder may use)") }
            configuration.encoderThreads = threads
        }
        if let preset = settings.nonEmpty(AgentSettingKeys.encoderPreset, environment: env) {
            let presets = ["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"]
            guard presets.contains(preset) else {
                throw SettingsError("encoder_preset \(preset) is not one of x264's presets: \(presets.joined(separator: ", "))")
            }
            configuration.encoderPreset = preset
        }
        if let text = settings.nonEmpty(AgentSettingKeys.hardwareEncoders, environment: env) {
            switch text.lowercased() {
            case "on", "true", "yes", "1": configuration.hardwareEncoders = true
            case "off", "false", "no", "0": configuration.hardwareEncoders = false
            default: throw SettingsError("cannot read hardware_encoders = \(text): write on (use them where the host has them) or off")
            }
        }
        configuration.pressureThresholds = try PressureThresholds(settings: settings, environment: env)
        configuration.pressureRoot = flags.pressureRoot
        configuration.watchedDisks = flags.watchedDisks
        guard flags.pressureIntervalMilliseconds >= 50 else { throw SettingsError("--pressure-interval-ms must be at least 50") }
        configuration.pressureIntervalMilliseconds = flags.pressureIntervalMilliseconds
        configuration.pressureEnabled = flags.pressure
        if let skew = flags.testClockSkew ?? env["CAPFLEET_TEST_CLOCK_SKEW"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard let clock = NodeClock(testSetting: skew) else {
                throw SettingsError(
                    "cannot read the clock skew \(skew): write an offset and/or a drift, e.g. +3.2s,+40ppm (offset units s, ms, us, ns)")
            }
            configuration.nodeClock = clock
        }
        configuration.enrollmentToken = flags.enroll ?? settings.nonEmpty(AgentSettingKeys.enrollToken, environment: env)
        configuration.sensorStreams = try sensorStreams(flags, settings, environment: env)
        configuration.sensorSocket = flags.sensorSocket ?? settings.nonEmpty(AgentSettingKeys.sensorSocket, environment: env)
        let microphonesSetting: Int? = try settings.integer(AgentSettingKeys.syntheticMicrophones, environment: env)
        if let count = flags.syntheticMicrophones ?? microphonesSetting {
            guard (0...16).contains(count) else { throw SettingsError("synthetic_microphones must be 0 to 16") }
            configuration.syntheticMicrophoneCount = count
        }
        // `microphones`: ALSA names or fleet ids separated by commas or spaces, or `none`.
        let microphonesListed =
            flags.microphones.isEmpty
            ? (settings.nonEmpty(AgentSettingKeys.microphones, environment: env) ?? "").split(whereSeparator: { $0 == "," || $0 == " " }).map(
                String.init)
            : flags.microphones
        // `genicam`: off (the default), usb, all, or the network interfaces GigE Vision cameras are on.
        configuration.genicam = flags.genicam ?? settings.nonEmpty(AgentSettingKeys.genicam, environment: env) ?? "off"
        if microphonesListed == ["none"] {
            configuration.discoverMicrophones = false
        } else {
            configuration.microphones = microphonesListed
            configuration.discoverMicrophones = flags.discover && flags.discoverMicrophones
        }
        return AgentSettings(
            file: settings, coordinator: address, configuration: configuration,
            cpuLatencyLimit: try CPULatencySetting.limit(settings, environment: env))
    }

    /// `sensor_streams`: names separated by commas or spaces; the flags replace the setting.
    static func sensorStreams(_ flags: AgentFlags, _ settings: SettingsFile, environment env: [String: String]) throws -> [String] {
        let names =
            !flags.sensorStreams.isEmpty
            ? flags.sensorStreams
            : (settings.nonEmpty(AgentSettingKeys.sensorStreams, environment: env) ?? "")
                .split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
        if let problem = names.lazy.compactMap(SensorStreamName.problem).first { throw SettingsError("sensor_streams: \(problem)") }
        guard Set(names).count == names.count else { throw SettingsError("sensor_streams names a stream twice: \(names.joined(separator: ", "))") }
        return names
    }

    /// `preview` (on or off), `preview_width`, `preview_fps`, `preview_quality`; defaults
    /// for what is not set: on, 320 pixels wide, once a second, quality 70.
    static func previewSettings(_ settings: SettingsFile, environment env: [String: String]) throws -> PreviewSettings {
        var preview = PreviewSettings()
        if let text = settings.nonEmpty(AgentSettingKeys.preview, environment: env) {
            switch text.lowercased() {
            case "on", "true", "yes", "1": preview.enabled = true
            case "off", "false", "no", "0": preview.enabled = false
            default: throw SettingsError("cannot read preview = \(text): write on or off")
            }
        }
        if let width: Int = try settings.integer(AgentSettingKeys.previewWidth, environment: env) { preview.width = width }
        if let quality: Int = try settings.integer(AgentSettingKeys.previewQuality, environment: env) { preview.quality = quality }
        if let text = settings.nonEmpty(AgentSettingKeys.previewFPS, environment: env) {
            guard let rate = Double(text), rate.isFinite else {
                throw SettingsError("cannot read preview_fps = \(text): write previews a second, e.g. 1 or 0.5")
            }
            preview.framesPerSecond = rate
        }
        if let problem = preview.problem { throw SettingsError(problem) }
        return preview
    }

    /// `--check-config`: where each setting comes from, then what the agent will do.
    public func checkReport(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        file.report(keys: AgentSettingKeys.all, environment: environment)
            + ["settings OK: coordinator \(coordinator), state \(configuration.stateDirectory)"]
    }

    /// ~/.local/state/capfleet/agent[-NAME] (or under XDG_STATE_HOME): one per agent name, so
    /// that two agents on one host keep two identities.
    public static func defaultStateDirectory(name: String?, environment env: [String: String]) -> String {
        let base = env["XDG_STATE_HOME"] ?? ((env["HOME"] ?? "/tmp") + "/.local/state")
        return base + "/capfleet/agent" + (name.map { "-" + $0 } ?? "")
    }

    /// WIDTHxHEIGHT:FOURCC, e.g. 1280x720:NV12.
    public static func parseFormat(_ text: String) throws -> (width: Int, height: Int, pixelFormat: PixelFormat) {
        let parts = text.split(separator: ":")
        let size = parts.first?.split(separator: "x") ?? []
        guard parts.count == 2, size.count == 2, let width = Int(size[0]), let height = Int(size[1]) else {
            throw SettingsError("cannot read the format \(text): write WIDTHxHEIGHT:FOURCC, e.g. 1280x720:NV12")
        }
        return (width, height, PixelFormat(String(parts[1]).uppercased()))
    }
}
