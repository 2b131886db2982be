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
            let root = fleet.directory + "/host"
            func write(_ relative: String, _ text: String) throws {
                let path = root + relative
                try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try text.write(toFile: path + ".tmp", atomically: false, encoding: .utf8)
                _ = rename(path + ".tmp", path)  // the sampler never sees half a file
            }
            func psi(cpu: Double, memory: Double, io: Double = 0) throws {
                for (resource, value) in [("cpu", cpu), ("memory", memory), ("io", io)] {
                    try write("/proc/pressure/\(resource)", "some avg10=\(value) avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
                }
            }
            func temperature(_ celsius: Int) throws { try write("/sys/class/thermal/thermal_zone0/temp", "\(celsius * 1000)\n") }
            try psi(cpu: 1, memory: 0)
            try write("/sys/class/thermal/thermal_zone0/type", "soc\n")
            for (index, (kind, celsius)) in [("passive", 60), ("hot", 75), ("critical", 85)].enumerated() {
                try write("/sys/class/thermal/thermal_zone0/trip_point_\(index)_type", kind + "\n")
                try write("/sys/class/thermal/thermal_zone0/trip_point_\(index)_temp", "\(celsius * 1000)\n")
            }
            try temperature(40)
            try fleet.startAgent("warm", fps: 30, extra: ["--pressure-root", root, "--pressure-interval-ms", "200"])
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_received"] as? Int ?? 0) > 3 }
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
            #expect(levels.map { $0.trimmingCharacters(in: .whitespaces) } == [
                "pressure.level: nominal → serious", "pressure.level: serious → shutdown", "pressure.level: shutdown → nominal",
            ], "\(audit)")
            #expect(audit.contains { $0.hasPrefix("device.interrupted: pressure_shutdown") }, "\(audit)")
            #expect(audit.contains { $0.hasPrefix("device.resumed: pressure eased") }, "\(audit)")
        }

        @Test func aCPUHog_raisesTheRealPSIFactor() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let settings = fleet.directory + "/agent.conf"
            try "pressure.cpu.fair = 5\npressure.cpu.serious = 200\npressure.cpu.critical = 300\n".write(toFile: settings, atomically: true, encoding: .utf8)
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

        static func frames(of device: String, _ fleet: FleetHarness) throws -> Int {
            try fleet.deviceStats()[device]?["frames_received"] as? Int ?? 0
        }
    }
}
