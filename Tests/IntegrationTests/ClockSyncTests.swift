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
            let device = try #require(try await Self.firstDevice(fleet))
            // It locks (how soon is the clock benchmark's figure, not a timed assertion here: a
            // busy machine's first seconds of the suite made it 8.9 s once).
            let lock = try await fleet.waitUntil("the agent's clock locks", seconds: 20) { agent.log.contains("clock.state=locked") }
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

            // `capfleet clock` recovers the skew: the node's (skewed) wall clock is 3.2 s and a
            // little ahead of fleet time, gaining 40 ppm.
            var clock: [String: Any] = [:]
            // The drift needs a few seconds of probes to settle on loopback's jitter.
            let settled = try await fleet.waitUntil("the coordinator shows the node's clock, drift settled", seconds: 30) {
                clock = try fleet.json(["clock"]).first ?? [:]
                return clock["sync"] as? String == "locked" && abs((clock["drift_ppm"] as? Double ?? 0) - 40) < 5
            }
            print("clock sync: drift within 5 ppm of the truth after another \(settled) s: \(clock)")
            let wallOffset = try #require(clock["wall_clock_offset_ns"] as? Int)
            let expectedWallOffset = 3.2e9 + 40e-6 * Double(Self.monotonicNow())
            #expect(abs(Double(wallOffset) - expectedWallOffset) < 2_000_000, "wall clock offset \(wallOffset) ns")
            let drift = try #require(clock["drift_ppm"] as? Double)
            #expect(abs(drift - 40) < 5, "drift \(drift) ppm")
            #expect((clock["uncertainty_ns"] as? Int ?? 0) > 0 && (clock["round_trip_ns"] as? Int ?? 0) > 0)
            #expect(try fleet.cli(["clock"]).output.contains("locked"))

            // A restarted agent is back in lock within five seconds.
            agent.kill()
            let restarted = try fleet.startAgent("skewed", extra: ["--test-clock-skew", "+3.2s,+40ppm"])
            let relock = try await fleet.waitUntil("the restarted agent locks again", seconds: 15) { restarted.log.contains("clock.state=locked") }
            print("clock sync: restarted agent locked after \(relock) s")
            #expect(relock < 5)
        }

        /// The coordinator spreads its probe budget over the agents probing (clock.md, "Pace"):
        /// with a budget of one round trip a second a lone agent is asked for a pair every
        /// 2 s (it keeps its own pace until its window is half full, about two minutes; the
        /// estimator's tests and the fleet bench cover what follows), and /metrics says the
        /// pace, the agents probing and the probes answered.
        @Test func theCoordinatorsProbeBudget_isSpreadOverTheAgents_andShownInMetrics() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator(environment: ["CAPFLEET_CLOCK_PROBE_BUDGET": "1"])
            let agent = try fleet.startAgent("paced")
            try await fleet.waitUntil("the agent's clock locks", seconds: 15) { agent.log.contains("clock.state=locked") }
            var scrape = try SecondLaneIntegrationTests.MetricsTests.scrape(fleet)
            try await fleet.waitUntil("/metrics shows the clock's pace", seconds: 10) {
                scrape = try SecondLaneIntegrationTests.MetricsTests.scrape(fleet)
                return scrape.value("capfleet_clock_probe_interval_seconds") != nil
            }
            #expect(scrape.value("capfleet_clock_probe_interval_seconds") == 2, "2 round trips a pair, 1 agent, budget 1: a pair every 2 s")
            #expect(scrape.value("capfleet_clock_probing_agents") == 1)
            #expect((scrape.value("capfleet_clock_probes_answered_total") ?? 0) >= 24, "at least the probes that locked it")
        }

        /// Two agents, one of them skewed: each device's first frame at or after a fleet time
        /// comes within one frame interval of it, so the two lie within one interval of each other.
        @Test func syncCheck_findsEachDevicesFirstFrameAfterAFleetTime() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let plain = try fleet.startAgent("plain", fps: 20)
            let skewed = try fleet.startAgent("skewed", fps: 20, extra: ["--test-clock-skew=-1.5s,-30ppm"])
            try await fleet.waitUntil("both clocks lock", seconds: 20) {
                plain.log.contains("clock.state=locked") && skewed.log.contains("clock.state=locked")
            }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }
            #expect(devices.count == 2)
            let result = try fleet.cli(["sync-check"] + devices + ["--at", "+1s", "--json"], timeout: 10)
            #expect(result.status == 0, "\(result.error)")
            let check = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
            let entries = try #require(check["entries"] as? [[String: Any]])
            #expect(entries.count == 2 && entries.allSatisfy { $0["ok"] as? Bool == true }, "\(entries)")
            let interval = 1e9 / 20
            for entry in entries {
                let after = try #require(entry["after_ns"] as? Int)
                #expect(Double(after) < interval * 1.5, "first frame \(after) ns after the time asked for")
            }
            let spread = try #require(check["spread_ns"] as? Int)
            #expect(Double(spread) < interval * 1.5, "spread \(spread) ns")
            print("sync check: spread \(spread) ns of \(interval) ns frame interval, uncertainty \(check["uncertainty_ns"] ?? "?") ns")
            // People read a table.
            let table = try fleet.cli(["sync-check"] + devices, timeout: 10)
            #expect(table.output.contains("spread"), "\(table.output)")
        }

        /// Three synthetic cameras at 30 fps on three agents with differently skewed clocks:
        /// aligned to the fleet-time grid, their first frames after a time fall in the same
        /// slot, far closer together than the frame interval unaligned cameras spread over.
        @Test func alignedCameras_captureInTheSameGridSlot() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agents = try [("a", "+0s"), ("b", "+2s,+35ppm"), ("c", "-0.5s,-20ppm")].map { name, skew in
                try fleet.startAgent(name, fps: 30, extra: ["--test-clock-skew=\(skew)"])
            }
            try await fleet.waitUntil("every clock locks", seconds: 20) { agents.allSatisfy { $0.log.contains("clock.state=locked") } }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }
            #expect(devices.count == 3)
            // Like every change to a device, alignment needs its configuration lease.
            for device in devices { #expect(try fleet.cli(["lock", device]).status == 0) }
            let aligned = try fleet.cli(["align"] + devices)
            #expect(aligned.status == 0, "\(aligned.error)")
            try await Task.sleep(for: .seconds(2))
            var spreads: [Int] = []
            for _ in 0..<5 {
                let result = try fleet.cli(["sync-check"] + devices + ["--json"], timeout: 10)
                guard result.status == 0, let check = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any],
                    let spread = check["spread_ns"] as? Int
                else { continue }
                spreads.append(spread)
            }
            print("frame alignment: spreads \(spreads) ns across 3 aligned cameras at 30 fps (frame interval 33.3 ms)")
            #expect(spreads.count == 5)
            #expect(spreads.allSatisfy { $0 < 2_000_000 }, "\(spreads)")
            // Off again: each camera keeps its last phase but is no longer steered.
            #expect(try fleet.cli(["align", "--off"] + devices).status == 0)
        }

        static func monotonicNow() -> UInt64 {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
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
