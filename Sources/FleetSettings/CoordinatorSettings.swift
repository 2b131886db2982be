import FleetCoordinator
import FleetCore
import Foundation

/// The coordinator's settings: the defaults, then the settings file (deploy/coordinator.conf),
/// then CAPFLEET_<KEY> variables, then `--data`. Read and checked here, before anything starts,
/// so that a wrong value stops the daemon with the setting's name instead of a failure later.
public struct CoordinatorSettings: Sendable {
    /// Every key a coordinator settings file may hold, in the order `--check-config` lists them.
    public static let keys = [
        "data_dir", "bind", "control_port", "ingest_port", "operator_port", "telemetry_port", "http_port", "metrics_port",
        "http_bind", "http_tls_cert", "http_tls_key",
        "clock_port", "clock_probe_budget", "cpu_latency_us", "record_port", "live_port", "recordings_dir", "segment_seconds", "record_lead_ms",
        "record_reserve_mb", "record_store",
        "record_codec", "record_quality", "record_bitrate", "record_gop", "framing_control", "framing_policy",
        "retention_budget_gb", "retention_days", "heartbeat_interval_ms", "heartbeat_liveness",
        "alert_command", "alert_webhook", "alert_interval_s", "alert_burst", "alert_pressure_level",
        "alert_drop_share", "alert_drop_window_s", "alert_command_timeout_s",
    ]

    /// The file as read (empty without one).
    public let file: SettingsFile
    public let configuration: CoordinatorConfiguration
    /// `cpu_latency_us`: the CPU latency limit the coordinator holds while it runs, µs; nil: none.
    public let cpuLatencyLimit: Int32?

    /// Reads the file at `path` (if any) and checks every setting. `dataOverride` is `--data`.
    public static func load(
        file path: String?, dataOverride: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> CoordinatorSettings {
        let file = try SettingsFile.read(path: path, knownKeys: keys)
        return CoordinatorSettings(
            file: file, configuration: try configuration(file, dataOverride: dataOverride, environment: environment),
            cpuLatencyLimit: try CPULatencySetting.limit(file, environment: environment))
    }

    /// `--check-config`: where each setting comes from, then what the coordinator will do.
    public func checkReport(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        file.report(keys: Self.keys, environment: environment)
            + ["settings OK: data \(configuration.dataDirectory), bind \(configuration.bindHost), control port \(configuration.controlPort)"]
    }

    static func configuration(_ settings: SettingsFile, dataOverride: String?, environment env: [String: String]) throws -> CoordinatorConfiguration {
        var configuration = CoordinatorConfiguration(dataDirectory: dataOverride ?? settings.value("data_dir", environment: env) ?? "capfleet-data")
        configuration.bindHost = settings.value("bind", environment: env) ?? configuration.bindHost
        configuration.controlPort = try settings.integer("control_port", environment: env) ?? configuration.controlPort
        configuration.frameIngestPort = try settings.integer("ingest_port", environment: env) ?? configuration.frameIngestPort
        configuration.operatorPort = try settings.integer("operator_port", environment: env) ?? configuration.operatorPort
        configuration.telemetryPort = try settings.integer("telemetry_port", environment: env) ?? configuration.telemetryPort
        configuration.clockPort = try settings.integer("clock_port", environment: env) ?? configuration.clockPort
        if let budget: Int = try settings.integer("clock_probe_budget", environment: env) {
            guard budget >= 1 else { throw SettingsError("clock_probe_budget must be at least 1 round trip a second, not \(budget)") }
            configuration.clockProbeBudget = Double(budget)
        }
        configuration.recordPort = try settings.integer("record_port", environment: env) ?? configuration.recordPort
        configuration.livePort = try settings.integer("live_port", environment: env) ?? configuration.livePort
        configuration.recordingsDirectory = settings.value("recordings_dir", environment: env) ?? configuration.recordingsDirectory
        configuration.segmentSeconds = try settings.integer("segment_seconds", environment: env) ?? configuration.segmentSeconds
        guard configuration.segmentSeconds >= 1 else { throw SettingsError("segment_seconds must be at least 1") }
        configuration.recordLeadMilliseconds = try settings.integer("record_lead_ms", environment: env) ?? configuration.recordLeadMilliseconds
        if let reserve: Int64 = try settings.integer("record_reserve_mb", environment: env) { configuration.recordReserveBytes = reserve << 20 }
        if let text = settings.nonEmpty("framing_control", environment: env) {
            guard let control = FramingPolicy.Control(rawValue: text) else {
                throw SettingsError("framing_control must be operator, policy or cooperative, not \(text)")
            }
            configuration.framingPolicy.control = control
        }
        if let text = settings.nonEmpty("framing_policy", environment: env) {
            guard text == "on" || text == "off" else { throw SettingsError("framing_policy must be on or off, not \(text)") }
            configuration.framingPolicy.framing = text == "on" ? .standard : nil
        }
        if let text = settings.nonEmpty("record_store", environment: env) {
            guard let store = TakeBook.Store(rawValue: text) else { throw SettingsError("record_store must be agent or coordinator, not \(text)") }
            configuration.recordStore = store
        }
        if let text = settings.nonEmpty("record_codec", environment: env) {
            guard let codec = VideoCodec(rawValue: text) else {
                throw SettingsError("record_codec must be one of \(VideoCodec.allCases.map(\.rawValue).joined(separator: ", ")), not \(text)")
            }
            configuration.recordEncoding.codec = codec
        }
        if let quality: Int = try settings.integer("record_quality", environment: env) { configuration.recordEncoding.quality = quality }
        if let text = settings.nonEmpty("record_bitrate", environment: env) {
            guard let bitrate = BitRate.parse(text) else {
                throw SettingsError("record_bitrate must be bits a second (8000000, 8M or 800k), not \(text)")
            }
            configuration.recordEncoding.bitrate = bitrate
        }
        if let gop: Int = try settings.integer("record_gop", environment: env) { configuration.recordEncoding.gop = gop }
        if let problem = configuration.recordEncoding.problem {
            throw SettingsError("the record_codec settings do not fit together: " + problem.replacingOccurrences(of: "--", with: "record_"))
        }
        if let text = settings.value("retention_budget_gb", environment: env) {
            guard let gigabytes = Double(text), gigabytes >= 0, gigabytes.isFinite else {
                throw SettingsError("retention_budget_gb must be a number of GiB (0 = no budget), not \(text)")
            }
            configuration.retention.budgetBytes = Int64(gigabytes * Double(1 << 30))
        }
        if let text = settings.value("retention_days", environment: env) {
            guard let days = Double(text), days >= 0, days.isFinite else {
                throw SettingsError("retention_days must be a number of days (0 = keep forever), not \(text)")
            }
            configuration.retention.maximumAgeSeconds = Int64(days * 86_400)
        }
        // http_port serves the dashboard and /metrics; metrics_port is its older name, still read.
        if let (key, text) = try httpPort(settings, environment: env) {
            if text == "off" {
                configuration.metricsPort = nil
            } else {
                guard let port = UInt16(text) else { throw SettingsError("\(key) must be a port number (0-65535) or off, not \(text)") }
                configuration.metricsPort = port
            }
        }
        configuration.httpBind = settings.nonEmpty("http_bind", environment: env) ?? configuration.httpBind
        configuration.httpTLS = try httpTLS(settings, environment: env)
        configuration.heartbeatIntervalMilliseconds =
            try settings.integer("heartbeat_interval_ms", environment: env)
            ?? configuration.heartbeatIntervalMilliseconds
        configuration.heartbeatLiveness = try settings.integer("heartbeat_liveness", environment: env) ?? configuration.heartbeatLiveness
        configuration.alerts = try alerts(settings, environment: env)
        return configuration
    }

    /// `http_tls_cert` and `http_tls_key`: both or neither, both readable files.
    static func httpTLS(_ settings: SettingsFile, environment env: [String: String]) throws -> HTTPTLSFiles? {
        let certificate = settings.nonEmpty("http_tls_cert", environment: env)
        let key = settings.nonEmpty("http_tls_key", environment: env)
        switch (certificate, key) {
        case (nil, nil):
            return nil
        case let (certificate?, key?):
            for (name, path) in [("http_tls_cert", certificate), ("http_tls_key", key)] where !FileManager.default.isReadableFile(atPath: path) {
                throw SettingsError(
                    "\(name) names \(path), which is not a readable file: give the PEM file's path (the coordinator's user must be able to read it)")
            }
            return HTTPTLSFiles(certificatePath: certificate, keyPath: key)
        default:
            throw SettingsError(
                "http_tls_cert and http_tls_key go together: set both (the certificate chain and its private key, PEM files) or neither")
        }
    }

    /// The HTTP port under either of its names, as one setting: the environment outranks the
    /// file whichever name each uses; one source naming both, differently, is an error.
    static func httpPort(_ settings: SettingsFile, environment env: [String: String]) throws -> (key: String, value: String)? {
        let fromEnvironment = ["http_port", "metrics_port"].compactMap { key in env["CAPFLEET_" + key.uppercased()].map { (key, $0) } }
        let fromFile = ["http_port", "metrics_port"].compactMap { key in settings.values[key].map { (key, $0) } }
        for source in [fromEnvironment, fromFile] where !source.isEmpty {
            if source.count == 2, source[0].1 != source[1].1 {
                throw SettingsError(
                    "http_port (\(source[0].1)) and metrics_port (\(source[1].1)) name one port, the dashboard's and /metrics': set only http_port")
            }
            return source[0]
        }
        return nil
    }
}
