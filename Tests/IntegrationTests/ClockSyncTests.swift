import Foundation
import Testing

extension IntegrationTests {
    /// Clock synchronisation end to end: an agent whose clock is off by +3.2 s and runs 40 ppm
    /// fast (the test setting) locks onto the coordinator's fleet time, and the fleet times on
    /// its frames are the true capture times, whatever its own clock says.
    @Suite struct ClockSyncTests {
        @Test func aSkewedAgent_stampsItsFramesInFleetTime() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("skewed", extra: ["--test-clock-skew", "+3.2s,+40ppm"])
            let started = Date()
            let device = try #require(try await Self.firstDevice(fleet))
            let lock = try await fleet.waitUntil("the agent's clock locks", seconds: 15) { agent.log.contains("clock.state=locked") }
            #expect(Date().timeIntervalSince(started) < 8, "locked \(lock) s after the first device was listed")
            var frame: [String: Any] = [:]
            try await fleet.waitUntil("frames carry fleet time", seconds: 10) {
                frame = try fleet.jsonObject(["snapshot", device])
                return frame["fleet_time_ns"] is Int
            }
            let skewed = try #require(frame["capture_monotonic_ns"] as? Int)
            let fleetTime = try #require(frame["fleet_time_ns"] as? Int)
            let uncertainty = try #require(frame["fleet_time_uncertainty_ns"] as? Int)
            // Undo the skew to get the true capture time, then read it as fleet time does:
            // the wall clock's offset from CLOCK_MONOTONIC (one machine, one kernel clock).
            let raw = (Double(skewed) - 3.2e9) / (1 + 40e-6)
            let expected = raw + Self.wallMinusMonotonic()
            let error = Double(fleetTime) - expected
            print("clock sync: locked after \(lock) s; frame fleet time off by \(Int(error)) ns, reported uncertainty \(uncertainty) ns")
            #expect(abs(error) < 2_000_000, "fleet time off by \(error) ns")
            #expect(uncertainty > 0 && uncertainty < 5_000_000, "uncertainty \(uncertainty) ns")
            // Its own clock really is 3.2 s ahead: the header's capture time is the node's.
            #expect(abs(Double(skewed) - raw - 3.2e9 - raw * 40e-6) < 1_000)
        }

        static func firstDevice(_ fleet: FleetHarness) async throws -> String? {
            var device: String?
            try await fleet.waitUntil("the agent registers", seconds: 20) {
                device = try fleet.json(["devices"]).first?["device_id"] as? String
                return device != nil
            }
            return device
        }

        static func wallMinusMonotonic() -> Double {
            var wall = timespec(), monotonic = timespec()
            clock_gettime(CLOCK_MONOTONIC, &monotonic)
            clock_gettime(CLOCK_REALTIME, &wall)
            return Double(wall.tv_sec - monotonic.tv_sec) * 1e9 + Double(wall.tv_nsec - monotonic.tv_nsec)
        }
    }
}
