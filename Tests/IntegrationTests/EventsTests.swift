import Foundation
import GRDB
import Testing

extension SecondLaneIntegrationTests {
    /// `capfleet events`: what happened recently, and a live stream with --follow.
    @Suite struct EventsTests {
        @Test func events_listRecentOnes_andFollowStreamsNewOnesAsTheyHappen() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("eventful")
            try await fleet.waitUntil("the node is online", seconds: 20) { !(try fleet.onlineNodeIDs().isEmpty) }
            // One JSON array, as every listing prints.
            let recent = try fleet.cli(["events", "--json"])
            let listed = try #require(try JSONSerialization.jsonObject(with: Data(recent.output.utf8)) as? [[String: Any]], "\(recent.output)")
            let kinds = listed.compactMap { $0["kind"] as? String }
            #expect(kinds.contains("node_registered") && kinds.contains("node_online") && kinds.contains("device_added"), "\(recent.output)")

            // Once its clock has locked (an event of its own), the node is quiet until it dies.
            try await fleet.waitUntil("the clock's lock is listed", seconds: 20) {
                try AlertsTests.events(fleet).contains { ($0["message"] as? String)?.hasPrefix("clock locked") == true }
            }
            // Follow: the agent dies, and the offline event arrives on the stream.
            let follower = Process()
            follower.executableURL = URL(fileURLWithPath: FleetHarness.binary)
            follower.arguments = [
                "events", "--follow", "--limit", "0", "--count", "1", "--json",
                // No --telemetry-port: the coordinator names its own (who_am_i).
                "--coordinator", "127.0.0.1:\(fleet.operatorPort)",
                "--credential", try fleet.credential(for: "vi"),
            ]
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

        /// A node's clock locking is an event, at once and audited; so is a restarted agent
        /// losing its lock. A node never heard of raises nothing for its first report.
        @Test func clockLockingAndLosingLock_areEvents() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            var agent = try fleet.startAgent("ticking")
            try await fleet.waitUntil("the agent's clock locks", seconds: 20) { agent.log.contains("clock.state=locked") }
            let node = try #require(try fleet.nodes().first?["node_id"] as? String)
            var clockEvents: [[String: Any]] = []
            try await fleet.waitUntil("capfleet events lists the lock", seconds: 5) {
                clockEvents = try AlertsTests.events(fleet).filter { $0["kind"] as? String == "clock_state_changed" }
                return clockEvents.contains { ($0["message"] as? String)?.hasPrefix("clock locked (±") == true }
            }
            print("clock events: \(clockEvents.map { $0["message"] as? String ?? "" })")
            #expect(clockEvents.allSatisfy { $0["node_id"] as? String == node }, "\(clockEvents)")
            #expect(!clockEvents.contains { ($0["message"] as? String ?? "").contains("lost lock") }, "\(clockEvents)")
            let audited = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT actor || ' ' || detail FROM auditLog WHERE action = 'clock.state' ORDER BY id")
            }
            #expect(audited.last?.hasPrefix("agent:\(node) synchronising → locked: clock locked (±") == true, "\(audited)")

            // The restarted agent starts over: it lost its lock, and locks again.
            agent.kill()
            agent = try fleet.startAgent("ticking")
            try await fleet.waitUntil("the restarted agent's lock is listed", seconds: 20) {
                clockEvents = try AlertsTests.events(fleet).filter { $0["kind"] as? String == "clock_state_changed" }
                return clockEvents.filter { ($0["message"] as? String)?.hasPrefix("clock locked") == true }.count == 2
            }
            let messages = clockEvents.compactMap { $0["message"] as? String }
            print("clock events after the restart: \(messages)")
            let lost = try #require(
                messages.firstIndex { $0.hasPrefix("clock lost lock") && $0.contains("since the node registered again") },
                "\(messages)")
            #expect(lost < messages.lastIndex { $0.hasPrefix("clock locked") }!)
        }
    }
}
