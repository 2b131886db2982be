import Foundation
import Testing

extension IntegrationTests {
    /// The third-party view: the example Python subscriber (pyzmq + the .proto files only)
    /// against a real coordinator.
    @Suite struct TelemetrySubscriberTests {
        static var repositoryRoot: URL {
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        }

        /// A python3 that has pyzmq and protobuf: the one on PATH, else Debian's.
        static func python() throws -> String {
            for candidate in [ProcessInfo.processInfo.environment["CAPFLEET_PYTHON"], "python3", "/usr/bin/python3"].compactMap({ $0 }) {
                let probe = Process()
                probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                probe.arguments = [candidate, "-c", "import zmq, google.protobuf"]
                probe.standardOutput = FileHandle.nullDevice
                probe.standardError = FileHandle.nullDevice
                try probe.run()
                probe.waitUntilExit()
                if probe.terminationStatus == 0 { return candidate }
            }
            throw HarnessError("no python3 with pyzmq and protobuf: run scripts/install-deps.sh")
        }

        @Test func pythonSubscriber_receivesAndDecodesLiveTelemetry() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("observed")
            try await fleet.waitUntil("the agent streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_received"] as? Int ?? 0) > 0 }
            }
            let script = Self.repositoryRoot.appendingPathComponent("proto-docs/examples/telemetry_subscriber.py").path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [try Self.python(), script, "--endpoint", "tcp://127.0.0.1:\(fleet.telemetryPort)",
                                 "--topic", "device.", "--topic", "node.", "--count", "4", "--timeout", "15"]
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
                let frames = Int(message["frames_received"] as? String ?? "") ?? 0
                #expect(frames > 0, "the subscriber decoded a DeviceStatus with frames counted: \(message)")
                #expect(message["pixel_format"] as? String == "YUYV")
            }
            for line in nodes {
                let message = try #require(line["message"] as? [String: Any])
                #expect(message["name"] as? String == "observed")
                #expect(message["online"] as? Bool == true)
            }
        }
    }
}
