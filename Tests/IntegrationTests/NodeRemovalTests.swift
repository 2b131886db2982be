import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// `capfleet nodes forget` (operator.md, `forget_node`): an online node is refused, an
    /// offline one goes with its devices, and its agent registers it anew when it comes back.
    @Suite struct NodeRemovalTests {
        @Test func forgettingANode_refusesItWhileOnline_andRemovesItOnceOffline() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("leaving")
            try await fleet.waitUntil("the agent registers", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            let nodeID = try #require(try fleet.onlineNodeIDs().first)

            let refused = try fleet.cli(["nodes", "forget", nodeID])
            #expect(refused.status != 0 && refused.error.contains("online"), "\(refused.error)")
            #expect(try fleet.nodes().count == 1)

            #expect(agent.stop() == 0)
            try await fleet.waitUntil("the node is offline", seconds: 10) { try fleet.onlineNodeIDs().isEmpty }
            let forgot = try fleet.cli(["nodes", "forget", nodeID])
            #expect(forgot.status == 0, "\(forgot.error)")
            #expect(try fleet.nodes().isEmpty)
            #expect(try fleet.json(["devices"]).isEmpty, "its devices went with it")

            // Its key is still enrolled: the agent comes back as a new registration.
            try fleet.startAgent("leaving")
            try await fleet.waitUntil("the agent registers again", seconds: 20) { try fleet.onlineNodeIDs() == [nodeID] }
        }
    }
}
