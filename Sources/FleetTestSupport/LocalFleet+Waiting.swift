import Foundation

/// Waiting for a fleet to be ready: a condition polled until it holds, and a timeout whose
/// error carries the end of every child's log, which is where the reason usually is.
extension LocalFleet {
    /// Polls `condition` every `interval` seconds until it holds or `seconds` pass; returns
    /// how long it took. A condition that throws counts as not holding yet: the coordinator
    /// may not answer before it is up.
    @discardableResult
    public func waitUntil(_ what: String, seconds: Double, every interval: Double = 0.2, _ condition: () throws -> Bool) async throws -> Double {
        let start = Date()
        while Date().timeIntervalSince(start) < seconds {
            if Self.holds(condition) { return Date().timeIntervalSince(start) }
            try await Task.sleep(for: .milliseconds(Int(interval * 1000)))
        }
        throw timedOut(what, seconds: seconds)
    }

    /// The same for callers on a thread of their own (the benchmarks), which may block.
    @discardableResult
    public func waitUntilBlocking(_ what: String, seconds: Double, every interval: Double = 0.1, _ condition: () throws -> Bool) throws -> Double {
        let start = Date()
        while Date().timeIntervalSince(start) < seconds {
            if Self.holds(condition) { return Date().timeIntervalSince(start) }
            Thread.sleep(forTimeInterval: interval)
        }
        throw timedOut(what, seconds: seconds)
    }

    private static func holds(_ condition: () throws -> Bool) -> Bool {
        do { return try condition() } catch { return false }
    }

    private func timedOut(_ what: String, seconds: Double) -> FleetTestError {
        let logs = logTails()
        return FleetTestError("timed out after \(seconds) s waiting until \(what)" + (logs.isEmpty ? "" : "\n" + logs))
    }
}
