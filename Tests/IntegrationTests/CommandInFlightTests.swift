import FleetTestSupport
import Foundation
import GRDB
import Testing

extension IntegrationTests {
    /// A node that reconnects while an operator's command waits for it (README, "Commands";
    /// proto-docs/commands.md): a restarted agent never answers, so the operator hears so at
    /// once; the same agent on a new connection still answers.
    @Suite struct CommandInFlightTests {
        @Test func aRestartedAgent_hasItsCommandAnsweredAtOnce_aReconnectedOneStillAnswers() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            // A real agent enrolls the node; a hand-written one with its key plays it from then on.
            let agent = try fleet.startAgent("replayed")
            try await fleet.waitUntil("the agent registers", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            let nodeID = try #require(try fleet.onlineNodeIDs().first)
            let deviceID = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            _ = try fleet.json(["lock", deviceID])
            #expect(agent.stop() == 0)
            let node = HandWrittenAgent(
                endpoint: "tcp://127.0.0.1:\(fleet.controlPort)", coordinatorKey: try fleet.coordinatorKey(),
                keys: try fleet.agentKeys("replayed"), nodeID: nodeID, deviceID: deviceID)

            // 1. The command reaches the agent; the agent restarts before answering.
            try node.register(instance: "first process")
            let restartedMidCommand = Task.detached { try fleet.cli(["zoom", deviceID, "2"], timeout: 30) }
            guard let lost = try node.serveUntilZoom(seconds: 20) else {
                let result = try await restartedMidCommand.value
                Issue.record("no zoom reached the agent; the operator heard: \(result.status) \(result.error)")
                return
            }
            try node.register(instance: "second process")
            let restarted = try await restartedMidCommand.value
            #expect(restarted.status != 0)
            #expect(
                restarted.error.contains("restarted before answering") && restarted.error.contains("may or may not have been applied"),
                "the operator hears why, not a timeout: \(restarted.error)")
            // The old process's answer, were it to come now, is nobody's.
            try node.answer(lost, zoom: 2)

            // 2. The same process reconnects (a new connection, the same agent_instance): its answer still counts.
            let reconnectedMidCommand = Task.detached { try fleet.cli(["zoom", deviceID, "3", "--json"], timeout: 30) }
            guard let pending = try node.serveUntilZoom(seconds: 20) else {
                let result = try await reconnectedMidCommand.value
                Issue.record("no zoom reached the agent; the operator heard: \(result.status) \(result.error)")
                return
            }
            try node.register(instance: "second process")
            try node.answer(pending, zoom: 3)
            let reconnected = try await reconnectedMidCommand.value
            #expect(reconnected.status == 0, "\(reconnected.error)")
            let device = try JSONSerialization.jsonObject(with: Data(reconnected.output.utf8)) as? [String: Any]
            #expect(device?["zoom_factor"] as? Double == 3, "\(reconnected.output)")

            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT outcome || ': ' || detail FROM auditLog WHERE action = 'device.zoom' ORDER BY id")
            }
            #expect(audit.count == 2)
            #expect(
                audit.first?.hasPrefix("failed: ") == true && audit.first?.contains("restarted before answering") == true,
                "the lost zoom is audited with its reason: \(audit)")
            #expect(audit.last?.hasPrefix("ok: ") == true, "\(audit)")
        }
    }
}
