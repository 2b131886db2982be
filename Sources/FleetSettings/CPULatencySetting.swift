import FleetCore

/// `cpu_latency_us`, for the coordinator and the agent alike: `off` (the default) or the
/// longest wake-up, in µs, this host's idle CPUs may take while the daemon runs (0: they
/// poll). See `CPULatencyRequest` and clock.md, "Host tuning".
enum CPULatencySetting {
    static let key = "cpu_latency_us"

    static func limit(_ settings: SettingsFile, environment env: [String: String]) throws -> Int32? {
        guard let text = settings.nonEmpty(key, environment: env) else { return nil }
        if ["off", "no", "false"].contains(text.lowercased()) { return nil }
        // The kernel's own ceiling for a request is 2,000 s; a limit past a second asks for nothing.
        guard let microseconds = Int32(text), (0...1_000_000).contains(microseconds) else {
            throw SettingsError(
                "cannot read \(key) = \(text): write off, or the longest CPU wake-up allowed in µs from 0 (idle CPUs poll) to 1000000")
        }
        return microseconds
    }
}
