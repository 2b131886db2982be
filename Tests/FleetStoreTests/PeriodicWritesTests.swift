import FleetCore
import FleetStore
import Foundation
import Testing

/// The writes the coordinator makes every few seconds for every node and device (clocks,
/// captured-frame counts, last-seen times): stored, replaced by the next batch, and skipped
/// for nodes and devices the fleet no longer has, batch after batch on one connection.
@Suite final class PeriodicWritesTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-store-\(UUID().uuidString.prefix(8))").path

    init() throws { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// A store with two nodes of one camera each.
    func storeWithTwoNodes() async throws -> FleetDatabase {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        let format = VideoFormat(pixelFormat: .yuyv, width: 160, height: 120, frameRateRanges: [.init(min: 1, max: 60)])
        for node in ["node-a", "node-b"] {
            _ = try await store.registerNode(
                NodeRegistration(
                    nodeID: node, name: "host-\(node)", hostname: "host", softwareVersion: "0.8.0", address: "127.0.0.1",
                    devices: [
                        .init(
                            description: DeviceDescription(
                                deviceID: "cam-\(node)", name: "Camera", driver: "test", kind: .synthetic,
                                formats: [format]),
                            activeFormatIndex: 0, activeFrameRate: 1)
                    ]), at: 1000)
        }
        return store
    }

    func clock(_ node: String, sync: String, offset: Int64, at time: Int64) -> NodeClockRecord {
        NodeClockRecord(
            nodeId: node, sync: sync, offsetNs: offset, wallClockOffsetNs: offset + 7, driftPpm: 1.5, uncertaintyNs: 900,
            roundTripNs: 120_000, coordinatorId: "coord-test", reportedAt: time)
    }

    @Test func saveClocks_storesEachNodesLatestClock_andSkipsNodesTheStoreDoesNotKnow() async throws {
        let store = try await storeWithTwoNodes()
        try await store.saveClocks([
            clock("node-a", sync: "synchronising", offset: 10, at: 2000),
            clock("node-b", sync: "locked", offset: 20, at: 2000),
            clock("node-gone", sync: "locked", offset: 30, at: 2000),
        ])
        try await store.saveClocks([clock("node-a", sync: "locked", offset: 11, at: 3000)])
        let clocks = try await store.clocks()
        #expect(clocks.keys.sorted() == ["node-a", "node-b"])
        #expect(clocks["node-a"] == clock("node-a", sync: "locked", offset: 11, at: 3000))
        #expect(clocks["node-b"] == clock("node-b", sync: "locked", offset: 20, at: 2000))
    }

    @Test func saveCaptureCounts_replacesEachDevicesCounts_andSkipsDevicesTheFleetNoLongerHas() async throws {
        let store = try await storeWithTwoNodes()
        let first = AgentRunCaptures(agentInstance: "run-1", currentRun: CaptureTally(frames: 5, bytes: 500))
        let second = AgentRunCaptures(
            agentInstance: "run-2", earlierRuns: CaptureTally(frames: 5, bytes: 500),
            currentRun: CaptureTally(frames: 2, bytes: 200))
        try await store.saveCaptureCounts(["cam-node-a": first, "cam-node-b": first, "cam-gone": first])
        try await store.saveCaptureCounts(["cam-node-a": second])
        #expect(try await store.captureCounts() == ["cam-node-a": second, "cam-node-b": first])
    }

    @Test func touchNodes_setsTheLastSeenTimeOfTheNodesNamed() async throws {
        let store = try await storeWithTwoNodes()
        try await store.touchNodes(["node-a", "node-gone"], at: 5000)
        try await store.touchNodes(["node-a"], at: 6000)
        #expect(try await store.node("node-a")?.lastSeenAt == 6000)
        #expect(try await store.node("node-b")?.lastSeenAt == 1000)
        #expect(try await store.node("node-gone") == nil)
    }
}
