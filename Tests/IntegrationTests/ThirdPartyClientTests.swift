import FleetTestSupport
import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// Clients written from proto-docs alone, against a real coordinator: what a third party
    /// codes against cannot drift from what the coordinator does.
    @Suite struct ThirdPartyClientTests {
        static func runPython(_ script: String, _ arguments: [String], timeout: Double = 90) throws -> (status: Int32, output: String, error: String)
        {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments =
                [
                    try TelemetrySubscriberTests.python(),
                    TelemetrySubscriberTests.repositoryRoot.appendingPathComponent("proto-docs/examples/\(script)").path,
                ] + arguments
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let error = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, output, error)
        }

        /// minimal_agent.py enrolls with a token, registers an external camera, answers the
        /// consent push and streams black frames, then real ones once consent is granted.
        @Test func aMinimalPythonAgent_enrollsRegistersAnExternalCameraAndStreams() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let token = try fleet.enrollmentToken(name: "gige-host")
            let state = fleet.directory + "/python-agent"
            let deviceID = "gige-Acme_C1-0042"
            let first = Task.detached {
                try Self.runPython(
                    "minimal_agent.py",
                    [
                        "--coordinator", "127.0.0.1:\(fleet.controlPort)", "--token", token, "--state", state,
                        "--device-id", deviceID, "--fps", "20", "--frames", "40", "--timeout", "60",
                    ])
            }
            try await fleet.waitUntil("the external camera is listed", seconds: 30) {
                try fleet.json(["devices"]).contains { $0["device_id"] as? String == deviceID }
            }
            let device = try #require(try fleet.json(["devices"]).first { $0["device_id"] as? String == deviceID })
            #expect(device["kind"] as? String == "external", "\(device)")
            #expect(device["online"] as? Bool == true)
            let nodes = try fleet.json(["nodes"])
            #expect(nodes.first?["name"] as? String == "gige-host", "the node goes by its enrolled name: \(nodes)")
            let sent = try await first.value
            #expect(sent.status == 0, "\(sent.error)")
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(sent.output.utf8)) as? [String: Any], "\(sent.output)")
            #expect(summary["frames_sent"] as? Int == 40)
            #expect(summary["real_frames"] as? Int == 0, "no consent, no real pixels")
            #expect((summary["commands"] as? Int ?? 0) >= 1, "the coordinator pushed the device's consent: \(summary)")
            try await fleet.waitUntil("the coordinator counted the frames", seconds: 10) {
                (try fleet.deviceStats()[deviceID]?["frames_received"] as? Int ?? 0) >= 30
            }

            // Consent granted: the next run (the same node, from its state) sends real pixels.
            #expect(try fleet.cli(["consent", "grant", deviceID, "--reason", "third-party test"]).status == 0)
            let second = try Self.runPython(
                "minimal_agent.py",
                [
                    "--coordinator", "127.0.0.1:\(fleet.controlPort)", "--state", state,
                    "--device-id", deviceID, "--fps", "20", "--frames", "30", "--timeout", "60",
                ])
            #expect(second.status == 0, "\(second.error)")
            let granted = try #require(try JSONSerialization.jsonObject(with: Data(second.output.utf8)) as? [String: Any], "\(second.output)")
            #expect(granted["consent"] as? String == "CONSENT_STATE_AUTHORIZED", "\(granted)")
            #expect((granted["real_frames"] as? Int ?? 0) > 0, "\(granted)")
            #expect(try fleet.json(["nodes"]).count == 1, "the second run is the same node")
            // A new agent process: the coordinator says its counts start over, not that frames were lost.
            try await fleet.waitUntil("the restart is an event", seconds: 10) {
                try AlertsTests.events(fleet).contains { $0["kind"] as? String == "agent_restarted" }
            }
        }

        /// A client whose HELLO is repeated (retries that cross a slow WELCOME) is registered
        /// once: one registration, one consent push, one `node_registered`, and a WELCOME for
        /// every HELLO.
        @Test func repeatedHellos_registerTheNodeOnce() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("repeating")
            try await fleet.waitUntil("the agent registers", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            let nodeID = try #require(try fleet.onlineNodeIDs().first)
            let deviceID = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            #expect(agent.stop() == 0)
            func registrations() throws -> Int {
                try AlertsTests.events(fleet).filter { $0["kind"] as? String == "node_registered" && $0["node_id"] as? String == nodeID }.count
            }
            let before = try registrations()
            let node = HandWrittenAgent(
                endpoint: "tcp://127.0.0.1:\(fleet.controlPort)", coordinatorKey: try fleet.coordinatorKey(),
                keys: try fleet.agentKeys("repeating"), nodeID: nodeID, deviceID: deviceID)
            let burst = try node.registerRepeatedly(instance: "impatient", times: 3, seconds: 4)
            #expect(burst.welcomes == 3, "every HELLO is answered")
            let consentPushes = burst.commands.filter { if case .setConsent? = $0.action { true } else { false } }
            #expect(consentPushes.count == 1, "consent is pushed once: \(burst.commands.map { "\($0.action.map { "\($0)" } ?? "none")" })")
            #expect(try registrations() == before + 1, "one registration for three HELLOs")
        }

        /// `--data` names a coordinator's data directory; `capfleet dev`'s folder layout works,
        /// and a folder without a fleet is refused instead of getting a fleet of its own.
        @Test func enrollWithData_refusesAFolderWithoutAFleet_andTakesADevFolder() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try await fleet.waitUntil("the coordinator made its database", seconds: 20) {
                FileManager.default.fileExists(atPath: fleet.databasePath)
            }
            let elsewhere = fleet.directory + "/agent-state"
            let refused = try fleet.run(["enroll", "--name", "cam-x", "--data", elsewhere, "--quiet"])
            #expect(refused.status != 0)
            #expect(refused.error.contains("holds no fleet database") && refused.error.contains("--new-fleet"), "\(refused.error)")
            #expect(!FileManager.default.fileExists(atPath: elsewhere + "/fleet.sqlite"), "no fleet was made there")
            // The fleet's own folder, as `capfleet dev --data DIR` names it (its coordinator's data is DIR/coordinator).
            let token = try fleet.run(["enroll", "--name", "cam-y", "--data", fleet.directory, "--quiet"])
            #expect(token.status == 0, "\(token.error)")
            #expect(token.output.hasPrefix("cfe1_"))
        }
    }
}
