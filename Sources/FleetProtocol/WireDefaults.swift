/// Ports and protocol constants every peer agrees on. See proto-docs/registration.md.
public enum WireDefaults {
    public static let controlPort: UInt16 = 7600
    public static let frameIngestPort: UInt16 = 7601
    public static let operatorPort: UInt16 = 7602
    public static let telemetryPort: UInt16 = 7603
    /// The coordinator's Prometheus endpoint (HTTP, `/metrics`).
    public static let metricsPort: UInt16 = 7604
    /// Clock synchronisation probes (proto-docs/clock.md).
    public static let clockPort: UInt16 = 7605
    /// The lossless recording path (proto-docs/frames.md, "The recording path").
    public static let recordPort: UInt16 = 7606
    /// Viewers of full-rate frames (proto-docs/frames.md, "Live frames on demand").
    public static let livePort: UInt16 = 7607

    /// This build's release, the one version everywhere: `capfleet --version`, the Debian
    /// package's version (scripts/build-deb.sh reads it from the binary), the software_version
    /// agents send in HELLO and enrollment, and so what `capfleet nodes` shows. Releases of one
    /// protocol major interoperate (README, "Upgrading").
    public static let release = "0.8.0"

    public static let protocolMajor: Capfleet_V1_ProtocolVersion = .current
    /// 1.1: HELLO names the agent process (agent_instance).
    /// 1.2: external cameras (SOURCE_KIND_EXTERNAL), SetRecording.not_started,
    /// event.agent_restarted, zoom_changed events, who_am_i's endpoints.
    /// 1.3: full-rate frames on demand (live_frames, the live endpoint, captured counts in status).
    /// 1.3: multi-use enrollment tokens (CreateEnrollment.uses and name_prefix,
    /// Enroll.requested_name, list_enrollments, revoke_enrollment).
    /// 1.3: previews (FRAME_FLAG_PREVIEW, get_preview, list_previews, DeviceStatus preview counts).
    /// 1.5: the web dashboard (create_dashboard_sign_in, list_ and end_dashboard_session(s),
    /// CoordinatorEndpoints.http_port and http_tls).
    /// 1.6: synchronised stills (Command.capture_still, the record link's fetch_still,
    /// still_chunk and still_collected, take_still and the stills requests); detected objects
    /// (Command.set_detection, AgentMessage.detection, telemetry meta.<device>, change_detection).
    /// 1.7: exposures that agree (FrameAlignment's steering and phase figures, Command.audit_exposures,
    /// sync_audit, StartRecording.requirements, TakeInfo.sync_report, DeviceCounters' take queue).
    /// 1.8: frame sets (get_frame_sets, TakeSyncReport.grid_origin_fleet_ns).
    /// 1.9: sensor streams (SOURCE_KIND_SENSOR, sensors.proto, AgentMessage.sensor_data, telemetry
    /// data.<node>.<stream>, the sample counters of DeviceCounters, AgentStatus and DeviceStatus).
    /// 1.20: stabilised takes (Encoding.stabilisation, EncodedPacket.stabilisation).
    /// 1.21: colour and depth (ColourDescription; VideoFormat's and FrameLayout's colour and
    /// depth unit, FrameLayout.bit_depth; PartTally's and TakeDeviceInfo's bit depth, colour, depth unit).
    /// 1.22: auto-framing (DetectionSettings.framing, FramingSettings, FrameHeader.framing).
    /// 1.26: storage destinations and offload; 1.27: offload on a schedule (StorageDestination.offload_daily_at).
    public static let protocolMinor: UInt32 = 27

    public static let heartbeatIntervalMilliseconds: UInt32 = 1000
    /// Missed heartbeats after which a peer is considered gone.
    public static let heartbeatLiveness: UInt32 = 3

    /// Largest ZeroMQ message the coordinator accepts on any endpoint (ZMQ_MAXMSGSIZE):
    /// big enough for an uncompressed 8K frame, small enough that a forged length claim
    /// cannot make it allocate gigabytes.
    public static let maxMessageBytes: Int64 = 128 * 1024 * 1024

    /// Environment variable naming the coordinator for the CLI and agents.
    public static let coordinatorEnvironmentVariable = "CAPFLEET_COORDINATOR"
}
