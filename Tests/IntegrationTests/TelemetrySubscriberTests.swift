import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// The third-party view: the example Python subscriber (pyzmq + the .proto files only)
    /// against a real coordinator.
    @Suite struct TelemetrySubscriberTests {
        static var repositoryRoot: URL {
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        }

        /// A python3 that has pyzmq and protobuf.
        static func python() throws -> String { try pythonInterpreter(importing: "zmq, google.protobuf") }

        @Test func pythonSubscriber_receivesAndDecodesLiveTelemetry() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("observed")
            try await fleet.waitUntil("the agent streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 0 }
            }
            let script = Self.repositoryRoot.appendingPathComponent("proto-docs/examples/telemetry_subscriber.py").path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                try Self.python(), script, "--endpoint", "tcp://127.0.0.1:\(fleet.telemetryPort)",
                "--credential", try fleet.credential(for: "vi"),
                "--topic", "device.", "--topic", "node.", "--count", "4", "--timeout", "15",
            ]
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "subscriber failed: \(errors)")

            let lines = output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(lines.count == 4)
            let devices = lines.filter { ($0["topic"] as? String)?.hasPrefix("device.") == true }
            let nodes = lines.filter { ($0["topic"] as? String)?.hasPrefix("node.") == true }
            #expect(!devices.isEmpty && !nodes.isEmpty)
            for line in devices {
                let message = try #require(line["message"] as? [String: Any])
                #expect(line["topic"] as? String == "device.\(message["device_id"] as? String ?? "?")")
                // proto3 JSON writes 64-bit integers as strings.
                let frames = Int(message["frames_captured"] as? String ?? "") ?? 0
                #expect(frames > 0, "the subscriber decoded a DeviceStatus with frames counted: \(message)")
                #expect(message["pixel_format"] as? String == "YUYV")
            }
            for line in nodes {
                let message = try #require(line["message"] as? [String: Any])
                #expect(message["name"] as? String == "observed")
                #expect(message["online"] as? Bool == true)
            }
        }

        /// Detection reports on `meta.<device>`: the subscriber decodes them as DetectionReport,
        /// and after the region narrows away from the only code it hears once that it is gone
        /// (an empty report), then nothing more (detection.md, "Reports").
        @Test func pythonSubscriber_decodesDetectionReports_andTheEmptyOneAfterTheRegionNarrows() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("scanned", synthetic: 1, fps: 15, extra: ["--synthetic-overlay", "qr:capfleet-7@0.6,0.1,0.3"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let deviceID = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try fleet.grantConsent(deviceID)
            #expect(try fleet.cli(["lock", deviceID]).status == 0)
            _ = try fleet.jsonObject(["detect", deviceID, "--codes", "qr", "--fps", "5"])

            let script = Self.repositoryRoot.appendingPathComponent("proto-docs/examples/telemetry_subscriber.py").path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            // --count 0 with a timeout: listen for that long, then stop (status 0).
            process.arguments = [
                try Self.python(), script, "--endpoint", "tcp://127.0.0.1:\(fleet.telemetryPort)",
                "--credential", try fleet.credential(for: "vi"), "--topic", "meta.", "--timeout", "9",
            ]
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            // Reports of the code for a few seconds, then a region that leaves it out (it is at x 0.6–0.9).
            try await Task.sleep(for: .seconds(4))
            _ = try fleet.jsonObject(["detect", deviceID, "--codes", "qr", "--fps", "5", "--region", "0,0,0.5,1"])
            let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "subscriber failed: \(errors)")

            let lines = output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(!lines.isEmpty && lines.allSatisfy { $0["topic"] as? String == "meta.\(deviceID)" }, "\(lines)")
            let reports = lines.compactMap { $0["message"] as? [String: Any] }
            #expect(reports.count == lines.count, "every meta. message decoded as a DetectionReport: \(lines)")
            let found = reports.filter { !($0["objects"] as? [[String: Any]] ?? []).isEmpty }
            #expect(found.count >= 3, "about five a second before the change: \(reports.count) reports")
            for report in found {
                let code = try #require((report["objects"] as? [[String: Any]])?.first)
                #expect(
                    code["kind"] as? String == "KIND_CODE" && code["symbology"] as? String == "qr" && code["value"] as? String == "capfleet-7",
                    "\(code)")
                #expect(report["device_id"] as? String == deviceID && (report["frame_width"] as? Int ?? 0) > 0, "\(report)")
            }
            // proto3 JSON leaves an empty `objects` out: the last report is the one without any, and only one.
            let empty = reports.enumerated().filter { ($0.element["objects"] as? [Any] ?? []).isEmpty }.map(\.offset)
            #expect(empty == [reports.count - 1], "one empty report, the last, once the code is outside the region: \(reports)")
        }

        @Test func pythonSubscriber_receivesPressureLevelChangesAndEvents() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let host = try HostFixture(in: fleet.directory)
            func cpu(_ percent: Double) throws { try host.psi("cpu", percent) }
            try cpu(0)
            try fleet.startAgent("strained", extra: host.agentArguments())
            try await fleet.waitUntil("the agent registers", seconds: 20) { !(try fleet.json(["nodes"]).isEmpty) }
            let script = Self.repositoryRoot.appendingPathComponent("proto-docs/examples/telemetry_subscriber.py").path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                try Self.python(), script, "--endpoint", "tcp://127.0.0.1:\(fleet.telemetryPort)",
                "--credential", try fleet.credential(for: "vi"),
                "--topic", "event.pressure_level_changed", "--topic", "pressure.", "--count", "6", "--timeout", "20",
            ]
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            // Let the subscription settle (a late joiner misses what came before), then strain the host.
            try await Task.sleep(for: .seconds(1.5))
            try cpu(50)
            let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "subscriber failed: \(errors)")
            let lines = output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let events = lines.filter { $0["topic"] as? String == "event.pressure_level_changed" }.compactMap { $0["message"] as? [String: Any] }
            let reports = lines.filter { ($0["topic"] as? String)?.hasPrefix("pressure.") == true }.compactMap { $0["message"] as? [String: Any] }
            #expect(events.contains { ($0["message"] as? String)?.hasPrefix("nominal → serious (cpu serious)") == true }, "\(lines)")
            #expect(reports.contains { $0["level"] as? String == "PRESSURE_LEVEL_SERIOUS" && $0["cpu_stall_percent"] as? Double == 50 }, "\(lines)")
        }
    }
}
