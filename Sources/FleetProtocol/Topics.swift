/// Telemetry topic names. A subscriber filters by prefix (ZeroMQ SUBSCRIBE), so
/// `"device."` receives every device and `"device.<id>"` one device. See proto-docs/telemetry.md.
public enum TelemetryTopic {
    public static let nodePrefix = "node."
    public static let devicePrefix = "device."
    public static let dropsPrefix = "drops."
    public static let eventPrefix = "event."
    public static let pressurePrefix = "pressure."
    /// Detection reports (detection.md), since 1.6.
    public static let metaPrefix = "meta."
    /// Sensor streams' readings (sensors.md), since 1.9.
    public static let dataPrefix = "data."

    public static func node(_ nodeID: String) -> String { nodePrefix + nodeID }
    public static func device(_ deviceID: String) -> String { devicePrefix + deviceID }
    public static func drops(_ deviceID: String) -> String { dropsPrefix + deviceID }
    public static func pressure(_ nodeID: String) -> String { pressurePrefix + nodeID }
    public static func meta(_ deviceID: String) -> String { metaPrefix + deviceID }
    public static func data(nodeID: String, stream: String) -> String { dataPrefix + nodeID + "." + stream }
    /// Every prefix the coordinator publishes under, as telemetry.md lists them.
    public static let prefixes = [nodePrefix, devicePrefix, dropsPrefix, eventPrefix, pressurePrefix, metaPrefix, dataPrefix]
    public static func event(_ kind: Capfleet_V1_EventKind) -> String { eventPrefix + kind.topicSuffix }
}

extension Capfleet_V1_EventKind {
    /// Lower-case name used in `event.<kind>` topics, e.g. `node_offline`.
    public var topicSuffix: String {
        switch self {
        case .nodeOnline: "node_online"
        case .nodeOffline: "node_offline"
        case .nodeRegistered: "node_registered"
        case .deviceAdded: "device_added"
        case .inputRejected: "input_rejected"
        case .deviceInterrupted: "device_interrupted"
        case .deviceResumed: "device_resumed"
        case .policyActed: "policy_acted"
        case .leaseReleased: "lease_released"
        case .pressureLevelChanged: "pressure_level_changed"
        case .alert: "alert"
        case .nodeEnrolled: "node_enrolled"
        case .nodeRevoked: "node_revoked"
        case .accessDenied: "access_denied"
        case .consentChanged: "consent_changed"
        case .clockStateChanged: "clock_state_changed"
        case .recording: "recording"
        case .zoomChanged: "zoom_changed"
        case .agentRestarted: "agent_restarted"
        case .liveFrames: "live_frames"
        case .encoder: "encoder"
        case .unspecified, .UNRECOGNIZED: "unspecified"
        }
    }
}

extension Capfleet_V1_AlertKind {
    /// Lower-case name used in metrics, hand-offs and listings, e.g. `node_offline`.
    public var name: String {
        switch self {
        case .nodeOffline: "node_offline"
        case .deviceInterrupted: "device_interrupted"
        case .pressure: "pressure"
        case .drops: "drops"
        case .unspecified, .UNRECOGNIZED: "unspecified"
        }
    }
}

/// Topics of the live endpoint, where viewers subscribe to a device's full-rate frames
/// (frames.md, "Live frames on demand"). A topic ends in "/", which no device id holds, so
/// one device's topic is never a prefix of another's.
public enum LiveTopic {
    public static let prefix = "frame/"
    /// A take's encoded packets of the device (H.264, HEVC) instead of its raw frames: a topic
    /// of its own, so neither kind of viewer is a prefix of the other's.
    public static let encodedPrefix = "encoded/"

    public static func frames(_ deviceID: String) -> String { prefix + deviceID + "/" }
    public static func encoded(_ deviceID: String) -> String { encodedPrefix + deviceID + "/" }

    /// The device a subscription names exactly, or nil for anything else (a broader prefix
    /// receives what flows for others but wakes no device).
    public static func deviceID(subscribedTo topic: some Collection<UInt8>) -> String? {
        subscription(topic).flatMap { $0.encoded ? nil : $0.deviceID }
    }

    /// The device a subscription names exactly and whether it asks for encoded packets.
    public static func subscription(_ topic: some Collection<UInt8>) -> (deviceID: String, encoded: Bool)? {
        let text = String(decoding: topic, as: UTF8.self)
        for (start, encoded) in [(prefix, false), (encodedPrefix, true)] {
            guard text.hasPrefix(start), text.hasSuffix("/"), text.count > start.count + 1 else { continue }
            let id = text.dropFirst(start.count).dropLast()
            return id.contains("/") ? nil : (String(id), encoded)
        }
        return nil
    }
}
