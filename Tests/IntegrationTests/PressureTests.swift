import Foundation
import GRDB
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension IntegrationTests {
    /// Pressure through a real agent and coordinator: fixture trees in the kernel's formats
    /// drive the levels, and a real CPU hog raises the real PSI factor.
    @Suite struct PressureTests {
        @Test func fixtureTree_drivesLevelsAndFactors_andShutdownStopsAndResumesCapture() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let host = try HostFixture(in: fleet.directory)
            func write(_ relative: String, _ text: String) throws { try host.write(relative, text) }
            func psi(cpu: Double, memory: Double, io: Double = 0) throws {
                for (resource, value) in [("cpu", cpu), ("memory", memory), ("io", io)] { try host.psi(resource, value) }
            }
            func temperature(_ celsius: Int) throws { try write("/sys/class/thermal/thermal_zone0/temp", "\(celsius * 1000)\n") }
            try psi(cpu: 1, memory: 0)
            try write("/sys/class/thermal/thermal_zone0/type", "soc\n")
            for (index, (kind, celsius)) in [("passive", 60), ("hot", 75), ("critical", 85)].enumerated() {
                try write("/sys/class/thermal/thermal_zone0/trip_point_\(index)_type", kind + "\n")
                try write("/sys/class/thermal/thermal_zone0/trip_point_\(index)_temp", "\(celsius * 1000)\n")
            }
            try temperature(40)
            try fleet.startAgent("warm", fps: 30, extra: host.agentArguments())
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 3 }
            }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try await fleet.waitUntil("the node reports nominal pressure", seconds: 10) { try Self.pressure(fleet)?.level == "nominal" }

            // The zone heats past its passive trip point: serious, because of the heat.
            try temperature(62)
            try await fleet.waitUntil("thermal pressure is serious", seconds: 10) {
                try Self.pressure(fleet).map { $0.level == "serious" && $0.factors == ["thermal": "serious"] } ?? false
            }
            // CPU stalls climb too: both contribute.
            try psi(cpu: 45, memory: 0)
            try await fleet.waitUntil("cpu joins the factors", seconds: 10) {
                try Self.pressure(fleet)?.factors == ["thermal": "serious", "cpu": "serious"]
            }
            // Memory stalls reach shutdown: the agent stops capturing and says why.
            try psi(cpu: 45, memory: 70)
            try await fleet.waitUntil("the device is interrupted for pressure", seconds: 10) {
                let info = try fleet.jsonObject(["device", device])
                return ((info["device"] as? [String: Any])?["interruption"] as? [String: Any])?["reason"] as? String == "pressure_shutdown"
            }
            // Frames already in flight land, and the once-a-second statistics catch up; then nothing more comes.
            try await Task.sleep(for: .seconds(2))
            let stopped = try Self.frames(of: device, fleet)
            try await Task.sleep(for: .seconds(2))
            #expect(try Self.frames(of: device, fleet) == stopped, "no frames while shut down")

            // All clear: after three quiet samples the level falls and capture resumes by itself.
            try psi(cpu: 0, memory: 0)
            try temperature(40)
            try await fleet.waitUntil("capture resumes", seconds: 15) {
                try Self.pressure(fleet)?.level == "nominal" && (try Self.frames(of: device, fleet)) > stopped + 5
            }
            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT action || ': ' || detail FROM auditLog WHERE actor LIKE 'agent:%' ORDER BY id")
            }
            let levels = audit.filter { $0.hasPrefix("pressure.level") }.map { $0.split(separator: "(").first.map(String.init) ?? $0 }
            // The fixture's three changes, in order. A synthetic camera restarting on a busy
            // machine may miss a slot, and one frame of the few in the next interval moves the
            // drop rate on its own afterwards: that is not what the fixture drives.
            #expect(
                levels.prefix(3).map { $0.trimmingCharacters(in: .whitespaces) } == [
                    "pressure.level: nominal → serious", "pressure.level: serious → shutdown", "pressure.level: shutdown → nominal",
                ], "\(audit)")
            #expect(audit.contains { $0.hasPrefix("device.interrupted: pressure_shutdown") }, "\(audit)")
            #expect(audit.contains { $0.hasPrefix("device.resumed: pressure eased") }, "\(audit)")
        }

        @Test func aCPUHog_raisesTheRealPSIFactor() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let settings = fleet.directory + "/agent.conf"
            try "pressure.cpu.fair = 5\npressure.cpu.serious = 200\npressure.cpu.critical = 300\n".write(
                toFile: settings, atomically: true, encoding: .utf8)
            try fleet.startAgent("real", extra: ["--config", settings, "--pressure-interval-ms", "500"])
            try await fleet.waitUntil("the node reports pressure", seconds: 20) { try Self.pressure(fleet)?.cpu != nil }
            let before = try #require(try Self.pressure(fleet)?.cpu)
            // Four busy processes on two cores: tasks wait for CPU, and PSI says so.
            let hogs = try (0..<4).map { _ in
                let hog = Process()
                // A bounded loop: a hog must not outlive a test that was killed. (Children of
                // Foundation's Process inherit a blocked signal mask, so SIGTERM would not stop it.)
                hog.executableURL = URL(fileURLWithPath: "/bin/sh")
                hog.arguments = ["-c", "i=0; while [ $i -lt 300000000 ]; do i=$((i+1)); done"]
                try hog.run()
                return hog
            }
            defer { for hog in hogs { kill(hog.processIdentifier, SIGKILL) } }
            try await fleet.waitUntil("PSI climbs and the cpu factor is reported", seconds: 40) {
                let now = try Self.pressure(fleet)
                return (now?.cpu ?? 0) >= max(5, before + 10) && now?.factors["cpu"] == "fair"
            }
        }

        static func pressure(_ fleet: FleetHarness) throws -> (level: String, factors: [String: String], cpu: Double?)? {
            guard let node = try fleet.json(["pressure"]).first, node["level"] as? String != "unknown" else { return nil }
            return (node["level"] as? String ?? "", node["factors"] as? [String: String] ?? [:], node["cpu_stall_percent"] as? Double)
        }

        /// `capfleet policy DEV --on-pressure serious --frame-rate 15`: the cap follows the level,
        /// is announced and audited, and survives the agent's restart.
        @Test func pressurePolicy_capsTheFrameRateAtItsLevel_andRestoresIt() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let host = try HostFixture(in: fleet.directory)
            func cpu(_ percent: Double) throws { try host.psi("cpu", percent) }
            try cpu(0)
            let agentArguments = host.agentArguments()
            let agent = try fleet.startAgent("capped", fps: 30, extra: agentArguments)
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 3 }
            }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            func rate() throws -> Double? {
                try fleet.json(["devices"]).first { $0["device_id"] as? String == device }?["active_frame_rate"] as? Double
            }

            // Refused: a cap at nominal would always be on; a level needs a rate.
            let nominal = try fleet.cli(["policy", device, "--on-pressure", "nominal", "--frame-rate", "15"])
            #expect(nominal.status != 0 && nominal.error.contains("fair, serious, critical, shutdown or off"))
            let noRate = try fleet.cli(["policy", device, "--on-pressure", "serious"])
            #expect(noRate.status != 0 && noRate.error.contains("needs --frame-rate"))
            let unleased = try fleet.cli(["policy", device, "--on-pressure", "serious", "--frame-rate", "15"], user: "bo")
            #expect(unleased.status != 0, "the policy needs the device's lease")

            _ = try fleet.json(["lock", device])
            let set = try fleet.json(["policy", device, "--on-pressure", "serious", "--frame-rate", "15"])
            let policy = try #require(set.first?["pressure_policy"] as? [String: Any])
            #expect(policy["level"] as? String == "serious" && policy["frame_rate"] as? Double == 15)
            // A camera on a busy machine can miss a slot, and in the fixture's 200 ms intervals one
            // frame of seven is a serious drop rate for a moment (seen in CI): the policy acts on
            // it and lets go again. What follows starts from nominal pressure, the policy idle.
            try await fleet.waitUntil("nominal pressure: the operator's rate stands", seconds: 20) {
                try Self.pressure(fleet)?.level == "nominal" && rate() == 30
                    && (try fleet.json(["devices"]).first?["pressure_policy"] as? [String: Any])?["active"] as? Bool == false
            }

            try cpu(50)
            try await fleet.waitUntil("the cap lowers the rate", seconds: 10) { try rate() == 15 }
            try await fleet.waitUntil("the action is audited", seconds: 5) {
                try SyntheticControlTests.policyActions(fleet).contains {
                    $0.contains("pressure policy lowered the frame rate to 15 fps: pressure serious (") && $0.contains("cpu serious")
                }
            }
            let events = try SecondLaneIntegrationTests.AlertsTests.events(fleet).filter { $0["kind"] as? String == "policy_acted" }
            #expect(events.contains { ($0["message"] as? String)?.contains("lowered the frame rate to 15 fps") == true }, "\(events)")
            let shown = try #require(try fleet.json(["devices"]).first?["pressure_policy"] as? [String: Any])
            #expect(shown["active"] as? Bool == true)
            try await fleet.waitUntil("frames arrive at the capped rate", seconds: 10) {
                let fps = try fleet.deviceStats()[device]?["frames_per_second"] as? Double ?? 0
                return fps > 12 && fps < 18
            }

            // `capfleet watch` flags the device: its host is under serious pressure.
            let watched = try #require(try fleet.json(["watch", "--count", "1"]).first)
            #expect((watched["trouble"] as? [String])?.contains("host pressure serious") == true, "\(watched)")
            let table = try fleet.cli(["watch", "--count", "1"]).output
            let flagged = table.split(separator: "\n").first { $0.hasPrefix("! \(device): ") }
            #expect(flagged?.contains("host pressure serious") == true, "\(table)")

            try cpu(0)
            try await fleet.waitUntil("the operator's rate comes back", seconds: 10) { try rate() == 30 }
            #expect(
                try SyntheticControlTests.policyActions(fleet).contains { $0.contains("restored the frame rate to 30 fps: pressure fell to nominal") }
            )

            // The policy is stored: a restarted agent under pressure is capped again on registration.
            agent.kill()
            try cpu(50)
            try fleet.startAgent("capped", fps: 30, extra: agentArguments)
            try await fleet.waitUntil("the restarted agent is capped again", seconds: 25) { try rate() == 15 }

            // Off lifts the cap at once.
            _ = try fleet.json(["lock", device])
            _ = try fleet.json(["policy", device, "--on-pressure", "off"])
            try await fleet.waitUntil("the cap is lifted", seconds: 10) { try rate() == 30 }
            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT detail FROM auditLog WHERE action = 'device.policy' ORDER BY id")
            }
            #expect(
                audit.contains("pressure policy at serious pressure or above: at most 15 fps") && audit.contains("pressure policy off"), "\(audit)")
        }

        static func frames(of device: String, _ fleet: FleetHarness) throws -> Int {
            try fleet.deviceStats()[device]?["frames_captured"] as? Int ?? 0
        }
    }
}
