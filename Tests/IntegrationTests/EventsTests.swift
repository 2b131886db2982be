import Foundation
import Testing

extension IntegrationTests {
    /// `capfleet events`: what happened recently, and a live stream with --follow.
    @Suite struct EventsTests {
        @Test func events_listRecentOnes_andFollowStreamsNewOnesAsTheyHappen() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("eventful")
            try await fleet.waitUntil("the node is online", seconds: 20) { !(try fleet.onlineNodeIDs().isEmpty) }
            let recent = try fleet.cli(["events", "--json"])
            let kinds = recent.output.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["kind"] as? String
            }
            #expect(kinds.contains("node_registered") && kinds.contains("node_online") && kinds.contains("device_added"), "\(recent.output)")

            // Follow: the agent dies, and the offline event arrives on the stream.
            let follower = Process()
            follower.executableURL = URL(fileURLWithPath: FleetHarness.binary)
            follower.arguments = ["events", "--follow", "--limit", "0", "--count", "1", "--json",
                                  "--coordinator", "127.0.0.1:\(fleet.operatorPort)", "--telemetry-port", "\(fleet.telemetryPort)",
                                  "--credential", try fleet.credential(for: "vi")]
            let out = Pipe()
            follower.standardOutput = out
            try follower.run()
            try await Task.sleep(for: .seconds(1))
            agent.kill()
            let line = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            follower.waitUntilExit()
            let event = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            #expect(event["kind"] as? String == "node_offline", "\(line)")
        }
    }
}
