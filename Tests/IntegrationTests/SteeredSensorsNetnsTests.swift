import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// Steered sensor models on three namespace hosts (proto-docs/clock.md, "Frame alignment"):
    /// each agent's clock skewed, one host's by 100 ppm, links through the delay relay, each
    /// synthetic sensor free-running on its own oscillator and filming the shared timecode. Once
    /// aligned, the exposures agree by what the cameras saw (the audit), within the clocks'
    /// error bounds plus a line; the host 100 ppm off locks and holds its slot; an agent killed
    /// and restarted mid-take brings its camera back into phase, and the take's report says how
    /// long it was out, and fails the take that asked to stay in phase, naming the camera.
    @Suite struct SteeredSensorsNetnsTests {
        /// The synthetic sensor's line at 1080p timing (SyntheticSensor), and its jitter each side.
        static let lineNs = 29_630, jitterNs = 10_000

        @Test func steeredSensorsOnThreeHosts_exposeTogether_andARestartMidTakeIsReportedOutOfPhase() async throws {
            guard getuid() == 0 else {
                print("steered sensors on namespace hosts: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cfq\(getpid() % 10_000)")
            defer { fleet.down() }
            try fleet.run([
                "up", "--agents", "3", "--bin", FleetHarness.binary, "--impair", "delay=2ms,jitter=100us",
                "--skew", "1=+3.2s,+100ppm", "--skew", "2=-1.5s,-50ppm", "--skew", "3=+0.7s,-20ppm",
                "--agent-args", "--fps 25 --synthetic-format 320x240:YUYV --synthetic-overlay timecode@0.2,0.1,0.6 --no-pressure",
            ])
            try await NetnsTestFleet.waitUntil("three clocks lock", seconds: 45) {
                let clocks = try fleet.json(["clock"])
                return clocks.count == 3 && clocks.allSatisfy { $0["sync"] as? String == "locked" }
            }
            let nodeNames = Dictionary(
                uniqueKeysWithValues: try fleet.json(["nodes"]).compactMap { node in
                    (node["node_id"] as? String).flatMap { id in (node["name"] as? String).map { (id, $0) } }
                })
            let listed = try fleet.json(["devices"])
            let devices = listed.compactMap { $0["device_id"] as? String }.sorted()
            try #require(devices.count == 3)
            let restartedDevice = try #require(
                listed.first { nodeNames[$0["node_id"] as? String ?? ""] == "a1" }?["device_id"] as? String, "a1's camera")
            for device in devices {
                try fleet.run(["cli", "consent", "grant", device, "--reason", "steered sensors, test pattern"])
                try fleet.run(["cli", "lock", device, "--for", "600"])
            }
            try fleet.run(["cli", "align"] + devices)
            func alignment(_ device: String) throws -> [String: Any] {
                let text = try fleet.run(["cli", "device", device, "--json"])
                let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                return ((object?["device"] as? [String: Any])?["alignment"] as? [String: Any]) ?? [:]
            }
            try await NetnsTestFleet.waitUntil("the three cameras are in phase", seconds: 30) {
                try devices.allSatisfy { try alignment($0)["state"] as? String == "aligned" }
            }
            let a1Clock = try fleet.json(["clock"]).first { $0["name"] as? String == "a1" } ?? [:]
            let drift = a1Clock["drift_ppm"] as? Double ?? 0
            print("steered sensors: a1 (clock skewed +100 ppm) locked, drift \(drift) ppm; its camera aligned")
            #expect(abs(abs(drift) - 100) < 20, "a1's clock runs 100 ppm off fleet time, and is locked: \(a1Clock)")

            // Exposure agreement by what the cameras saw.
            let audited = try fleet.run(["cli", "sync-audit"] + devices + ["--seconds", "5", "--json", "--timeout", "30"])
            let audit = try #require(try JSONSerialization.jsonObject(with: Data(audited.utf8)) as? [String: Any], "\(audited)")
            let bounds = ((audit["cameras"] as? [[String: Any]]) ?? []).map { $0["stamp_uncertainty_ns"] as? Int ?? 0 }.sorted(by: >)
            let spread = (audit["exposure_spread"] as? [String: Any]) ?? [:]
            let allowed = bounds.prefix(2).reduce(0, +) + Self.lineNs + 2 * Self.jitterNs
            print("steered sensors: exposure spread \(spread); stamps' bounds \(bounds) ns; allowed \(allowed) ns")
            #expect((spread["samples"] as? Int ?? 0) >= 10, "\(audit)")
            #expect((spread["max_ns"] as? Int ?? .max) <= allowed, "within the two largest clock bounds, a line and the jitter: \(spread)")

            // A take asking to stay in phase; a1 is killed and restarted in the middle of it.
            let started = try fleet.run(["cli", "record", "start"] + devices + ["--require-in-phase", "--json", "--timeout", "15"])
            let takeID = try #require((try JSONSerialization.jsonObject(with: Data(started.utf8)) as? [String: Any])?["id"] as? String)
            try await Task.sleep(for: .seconds(2))
            let killed = Date()
            try fleet.run(["restart-agent", "1"])
            try await NetnsTestFleet.waitUntil("a1's camera is back in phase", seconds: 45) {
                try alignment(restartedDevice)["state"] as? String == "aligned"
            }
            let backAfter = Date().timeIntervalSince(killed)
            try await Task.sleep(for: .seconds(2))
            try fleet.run(["cli", "record", "stop", takeID, "--wait", "60", "--timeout", "70"])
            var report: [String: Any] = [:]
            try await NetnsTestFleet.waitUntil("the take's report is stored", seconds: 30) {
                let text = try fleet.run(["cli", "recordings", "show", takeID, "--json"])
                report = ((try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["sync_report"] as? [String: Any]) ?? [:]
                return ["certified", "failed"].contains(report["verdict"] as? String ?? "")
            }
            let cameras = (report["cameras"] as? [[String: Any]]) ?? []
            let out = cameras.first { $0["device_id"] as? String == restartedDevice }?["out_of_phase_ns"] as? Int ?? 0
            print(
                "steered sensors: a1 back in phase \(String(format: "%.1f", backAfter)) s after the kill; the report says out of phase \(out / 1_000_000) ms; verdict \(report["verdict"] ?? "?"): \(report["failures"] ?? [])"
            )
            #expect(
                out > 0 && Double(out) <= (backAfter + 3) * 1e9, "out of phase for a while, not longer than it took to come back (+3 s): \(out) ns")
            #expect(report["verdict"] as? String == "failed", "\(report)")
            let failures = (report["failures"] as? [String]) ?? []
            #expect(failures.contains { $0.contains(restartedDevice) }, "the failure names a1's camera: \(failures)")
            for camera in cameras where camera["device_id"] as? String != restartedDevice {
                #expect(camera["out_of_phase_ns"] as? Int == 0, "the others held their slots: \(camera)")
            }
        }
    }
}
