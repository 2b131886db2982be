import FleetCore
import FleetProtocol

/// Where the coordinator keeps its state and which ports it binds.
public struct CoordinatorConfiguration: Sendable {
    public var dataDirectory: String
    /// Address to bind, `*` for every interface.
    public var bindHost: String
    public var controlPort: UInt16
    public var frameIngestPort: UInt16
    public var operatorPort: UInt16
    public var telemetryPort: UInt16
    /// Clock synchronisation probes.
    public var clockPort: UInt16 = WireDefaults.clockPort
    /// Clock probe round trips a second answered from locked agents, spread over the fleet
    /// (clock.md, "Pace"; setting `clock_probe_budget`).
    public var clockProbeBudget: Double = 400
    /// The recording path; 0 binds any free port (WELCOME tells agents which).
    public var recordPort: UInt16 = WireDefaults.recordPort
    /// Viewers of full-rate frames (XPUB); 0 binds any free port (`who_am_i` says which).
    public var livePort: UInt16 = WireDefaults.livePort
    /// Where takes are written; nil = `recordings` in the data directory.
    public var recordingsDirectory: String?
    /// Length of a recording's segments (one file per device per segment).
    public var segmentSeconds: Int = 300
    /// A take starts this long after `record start` unless `--at` says when: every agent must
    /// hear of it before its first frame.
    public var recordLeadMilliseconds: Int = 1000
    /// Who decides whether cameras auto-frame (`framing_control`, `framing_policy`).
    public var framingPolicy = FramingPolicy.operatorControlled
    /// Free space recordings never eat into: below it takes stop, their files finished.
    public var recordReserveBytes: Int64 = 256 << 20
    /// Where a take is written when `record start` does not say (setting `record_store`):
    /// on each agent's disk, so recording capacity is the sum of the hosts'.
    public var recordStore: TakeBook.Store = .agent
    /// How a take stores raw cameras when `record start` does not say (settings `record_codec`,
    /// `record_quality`, `record_bitrate`, `record_gop`): raw, as captured.
    public var recordEncoding = TakeEncoding.raw
    /// How much recordings may keep (oldest deleted first; never a take in progress).
    public var retention = RetentionPolicy()
    /// The HTTP port (setting `http_port`, formerly `metrics_port`): the web dashboard and
    /// Prometheus `/metrics`; nil turns both off.
    public var metricsPort: UInt16?
    /// The address the HTTP port binds (setting `http_bind`): this machine only unless opened
    /// to a network, which should then be over TLS.
    public var httpBind: String = "127.0.0.1"
    /// PEM files for HTTPS (settings `http_tls_cert`, `http_tls_key`); nil serves plain HTTP.
    public var httpTLS: HTTPTLSFiles?
    public var heartbeatIntervalMilliseconds: UInt32
    public var heartbeatLiveness: UInt32
    public var alerts = AlertConfiguration()

    public init(
        dataDirectory: String, bindHost: String = "*", controlPort: UInt16 = WireDefaults.controlPort,
        frameIngestPort: UInt16 = WireDefaults.frameIngestPort, operatorPort: UInt16 = WireDefaults.operatorPort,
        telemetryPort: UInt16 = WireDefaults.telemetryPort, metricsPort: UInt16? = WireDefaults.metricsPort,
        heartbeatIntervalMilliseconds: UInt32 = WireDefaults.heartbeatIntervalMilliseconds,
        heartbeatLiveness: UInt32 = WireDefaults.heartbeatLiveness
    ) {
        self.dataDirectory = dataDirectory
        self.bindHost = bindHost
        self.controlPort = controlPort
        self.frameIngestPort = frameIngestPort
        self.operatorPort = operatorPort
        self.telemetryPort = telemetryPort
        self.metricsPort = metricsPort
        self.heartbeatIntervalMilliseconds = heartbeatIntervalMilliseconds
        self.heartbeatLiveness = heartbeatLiveness
    }

    func endpoint(_ port: UInt16) -> String {
        let host = bindHost.contains(":") ? "[\(bindHost)]" : bindHost
        // Port 0: any free port (libzmq's wildcard).
        return "tcp://\(host):\(port == 0 ? "*" : String(port))"
    }

    /// The bind address as a client would write it (`*` means this machine's every address).
    public var displayHost: String {
        bindHost == "*" || bindHost == "0.0.0.0" ? "localhost" : (bindHost.contains(":") ? "[\(bindHost)]" : bindHost)
    }

    /// The HTTP bind address as a browser would write it.
    public var httpDisplayHost: String {
        httpBind == "*" || httpBind == "0.0.0.0" || httpBind == "::" ? "localhost" : (httpBind.contains(":") ? "[\(httpBind)]" : httpBind)
    }

    public var databasePath: String { dataDirectory + "/fleet.sqlite" }

    public var takesDirectory: String { recordingsDirectory ?? dataDirectory + "/recordings" }
}

/// A certificate chain and its unencrypted private key, PEM files, for the HTTP port.
public struct HTTPTLSFiles: Sendable, Equatable {
    public var certificatePath: String
    public var keyPath: String

    public init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }
}
