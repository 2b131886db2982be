/// Why a device stopped delivering frames without anyone asking it to, in the terms of
/// capture-session interruptions.
public enum InterruptionReason: String, Sendable, CaseIterable {
    /// Unplugged or gone (ENODEV): capture resumes when a device with the same stable
    /// identity comes back.
    case deviceDisconnected = "device_disconnected"
    /// Another program holds the device (EBUSY): capture resumes when it lets go.
    case deviceInUse = "device_in_use"
    /// The host is under pressure at the shutdown level: capture resumes when it eases.
    case pressureShutdown = "pressure_shutdown"
    /// Any other failure of the driver; retried like the others.
    case deviceError = "device_error"
}

/// An interruption in progress.
public struct Interruption: Hashable, Sendable {
    public var reason: InterruptionReason
    /// What happened, for the operator: the failing call and what to do about it.
    public var message: String
    /// Wall-clock time it began, in milliseconds since the Unix epoch.
    public var sinceUnixMilliseconds: Int64

    public init(reason: InterruptionReason, message: String, sinceUnixMilliseconds: Int64) {
        self.reason = reason
        self.message = message
        self.sinceUnixMilliseconds = sinceUnixMilliseconds
    }
}
