import FleetCore
import FleetHTTP

/// When the coordinator raises alerts and where it hands them (coordinator settings `alert_*`).
public struct AlertConfiguration: Sendable {
    /// Run for each alert through `/bin/sh -c`, with the alert as JSON on stdin and in
    /// CAPFLEET_ALERT_* variables.
    public var command: String?
    /// POSTed the alert as JSON; must be on this machine or its local network.
    public var webhook: LocalWebhookURL?
    /// At most one alert per rule and subject (node or device) per interval.
    public var intervalSeconds: UInt32 = 60
    /// At most this many alerts in all per interval.
    public var burst: Int = 20
    /// A node's pressure rising to this level or above raises an alert.
    public var pressureLevel: PressureLevel = .serious
    /// A device losing at least this share of its frames over the window raises an alert.
    public var dropShare: Double = 0.05
    public var dropWindowSeconds: UInt32 = 10
    /// How long a command may run before it is killed.
    public var commandTimeoutSeconds: UInt32 = 10

    public init() {}
}
