import Foundation
import GRDB
import Testing

extension IntegrationTests {
    /// Software frame alignment as operators see it: what the agents report shows in the
    /// listings, on telemetry and in Prometheus.
    @Suite struct FrameAlignmentTests {
        @Test func alignedDevice_showsItsStateAndPhaseInListingsAndMetrics() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("steered", fps: 30)
            try await fleet.waitUntil("the clock locks", seconds: 20) { agent.log.contains("clock.state=locked") }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            #expect(try Self.alignment(of: device, in: fleet)?["state"] as? String == "off", "an agent reports alignment off until told")
            #expect(try fleet.cli(["lock", device]).status == 0)
            let aligned = try fleet.cli(["align", device])
            #expect(aligned.status == 0, "\(aligned.error)")

            var alignment: [String: Any] = [:]
            try await fleet.waitUntil("the device reports itself aligned", seconds: 10) {
                alignment = try Self.alignment(of: device, in: fleet) ?? [:]
                return alignment["state"] as? String == "aligned"
            }
            let phase = try #require(alignment["phase_ns"] as? Int)
            #expect(abs(phase) <= 100_000, "aligned means within 100 µs of the slot: \(phase) ns")
            let origin = try #require(alignment["grid_origin_fleet_ns"] as? Int)
            #expect(origin > 0 && origin % 1_000_000_000 == 0, "the grid starts at a whole second of fleet time: \(origin)")

            // People see it too: a column in the listing, a line in the device's details.
            let table = try fleet.cli(["devices"]).output
            print("frame alignment: devices listing\n\(table)")
            #expect(table.contains("ALIGN") && table.contains("aligned "), "\(table)")
            let details = try fleet.cli(["device", device]).output
            print("frame alignment: \(details.split(separator: "\n").first { $0.hasPrefix("alignment") } ?? "no alignment line")")
            #expect(details.contains("alignment  aligned (steered): latest frame"), "\(details)")
            #expect(details.contains("|phase| over") && details.contains("oscillator"), "the minute's figures and the oscillator: \(details)")
            let full = try fleet.jsonObject(["device", device])
            let listed = try #require((full["device"] as? [String: Any])?["alignment"] as? [String: Any], "\(full)")
            #expect(listed["steered"] as? Bool == true, "\(listed)")
            let figures = try #require(listed["phase"] as? [String: Any], "|phase| figures over the last minute: \(listed)")
            print("frame alignment: \(figures), oscillator \(listed["frequency_error_ppm"] ?? "?") ppm")
            #expect((figures["frames"] as? Int ?? 0) > 0 && (figures["p99_ns"] as? Int ?? .max) <= (figures["max_ns"] as? Int ?? 0), "\(figures)")
            // Telemetry's DeviceStatus carries it (capfleet watch --json reads get_fleet_stats).
            try await fleet.waitUntil("device status carries the alignment", seconds: 5) {
                (try fleet.deviceStats()[device]?["alignment"] as? [String: Any])?["state"] as? String == "aligned"
            }
            // And Prometheus: the phase in seconds and a 0/1 gauge.
            try await fleet.waitUntil("the alignment gauges are scraped", seconds: 5) {
                let scrape = try SecondLaneIntegrationTests.MetricsTests.scrape(fleet)
                guard let phase = scrape.matching("capfleet_device_alignment_phase_seconds", where: { $0["device"] == device }).first?.value,
                    let aligned = scrape.matching("capfleet_device_frame_aligned", where: { $0["device"] == device }).first?.value
                else { return false }
                return abs(phase) <= 100e-6 && aligned == 1
            }

            #expect(try fleet.cli(["align", "--off", device]).status == 0)
            try await fleet.waitUntil("the device reports alignment off", seconds: 5) {
                try Self.alignment(of: device, in: fleet)?["state"] as? String == "off"
            }
            #expect(try Self.alignment(of: device, in: fleet)?["phase_ns"] is NSNull, "no phase while off")
            try await fleet.waitUntil("the alignment gauges are gone", seconds: 5) {
                try SecondLaneIntegrationTests.MetricsTests.scrape(fleet).matching("capfleet_device_alignment_phase_seconds").isEmpty
            }
            #expect(try fleet.cli(["devices"]).output.contains("aligned ") == false)
        }

        /// The coordinator remembers alignment: a restarted agent is aligned again without
        /// another `capfleet align`, and after `align --off` it stays off.
        @Test func alignment_survivesAnAgentRestart_andSoDoesTurningItOff() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            var agent = try fleet.startAgent("remembered", fps: 30)
            try await fleet.waitUntil("the clock locks", seconds: 20) { agent.log.contains("clock.state=locked") }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            #expect(try fleet.cli(["lock", device]).status == 0)
            #expect(try fleet.cli(["align", device]).status == 0)
            try await fleet.waitUntil("the device is aligned", seconds: 10) {
                try Self.alignment(of: device, in: fleet)?["state"] as? String == "aligned"
            }
            #expect(try Self.storedAlignment(of: device, in: fleet) == true)

            // SIGKILL: the agent forgets everything; the coordinator tells it again when it registers.
            agent.kill()
            agent = try fleet.startAgent("remembered", fps: 30)
            let back = try await fleet.waitUntil("the restarted agent's device is aligned again", seconds: 20) {
                try agent.log.contains("alignment=steered") && Self.alignment(of: device, in: fleet)?["state"] as? String == "aligned"
            }
            print("frame alignment: restarted agent aligned again \(back) s after it started")

            #expect(try fleet.cli(["align", "--off", device]).status == 0)
            #expect(try Self.storedAlignment(of: device, in: fleet) == false, "off is stored too")
            agent.kill()
            agent = try fleet.startAgent("remembered", fps: 30)
            try await fleet.waitUntil("the restarted agent locks and streams", seconds: 20) {
                try agent.log.contains("clock.state=locked") && fleet.deviceStats()[device]?["streaming"] as? Bool == true
            }
            #expect(agent.log.contains("alignment=off"), "the coordinator pushed off: \(agent.log.suffix(2000))")
            try await Task.sleep(for: .seconds(2))
            #expect(try Self.alignment(of: device, in: fleet)?["state"] as? String == "off")
        }

        /// What the coordinator's database says the device should be: aligned, off, or nil (never set).
        static func storedAlignment(of device: String, in fleet: FleetHarness) throws -> Bool? {
            try DatabaseQueue(path: fleet.databasePath).read { db in
                try Bool.fetchOne(db, sql: "SELECT enabled FROM frameAlignment WHERE deviceId = ?", arguments: [device])
            }
        }

        /// The device's alignment in `capfleet devices --json`; nil while it reports none.
        static func alignment(of device: String, in fleet: FleetHarness) throws -> [String: Any]? {
            try fleet.json(["devices"]).first { $0["device_id"] as? String == device }?["alignment"] as? [String: Any]
        }
    }
}
