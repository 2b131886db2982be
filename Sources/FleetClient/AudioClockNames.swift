import FleetProtocol

/// How the CLI names a microphone's timestamp source (microphones.md, "Capture times").
public enum AudioClockNames {
    public static func source(_ source: Capfleet_V1_AudioTimestampSource) -> String {
        switch source {
        case .driver: "driver"
        case .readTime: "read-time"
        case .paced: "paced"
        default: "unknown"
        }
    }

    /// "+12.3 ppm (driver, jitter 0.4 ms)", or how long until the rate is known.
    public static func summary(_ clock: Capfleet_V1_AudioClock) -> String {
        let rate = clock.rateMeasured ? String(format: "%+.1f ppm", clock.ratePpm) : "rate after 2 s"
        return "\(rate) (\(source(clock.timestampSource)), jitter \(String(format: "%.2f", Double(clock.jitterNs) / 1e6)) ms)"
    }
}
