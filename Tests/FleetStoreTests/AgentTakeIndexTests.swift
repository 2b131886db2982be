import FleetCore
import FleetStore
import Foundation
import Testing

/// The index of takes the agents write, in a real SQLite file: segments reported (and reported
/// again), where they are, and their collected copies.
@Suite final class AgentTakeIndexTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-agent-takes-\(UUID().uuidString.prefix(8))").path

    init() throws { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func segment(_ number: Int, frames: Int64, last: UInt64) -> SegmentRecord {
        var segment = SegmentRecord(
            takeId: "take-1", deviceId: "cam-a", number: number, path: "/var/lib/capfleet/recordings/take-1/cam-a/cam-a-000\(number).mkv",
            openedAt: 1_000)
        segment.state = .finished
        segment.nodeId = "node-1"
        segment.frames = frames
        segment.firstSequence = last - UInt64(frames) + 1
        segment.lastSequence = last
        segment.sha256 = String(repeating: "cd", count: 32)
        segment.sizeBytes = 4_096 * frames
        segment.setDrops(DropTally(discontinuity: 3))
        return segment
    }

    func tally(frames: Int64, last: UInt64) -> TakeDeviceTally {
        TakeDeviceTally(
            pixelFormat: "YUYV", width: 320, height: 240, frameRate: 30, firstFleetNs: 5, lastFleetNs: 9, firstSequence: 1,
            lastSequence: last, frames: frames, bytes: 4_096 * frames, drops: DropTally(discontinuity: 3))
    }

    @Test func segmentsReportedTwiceOrOutOfOrder_leaveOneRowEach_andTheNewestTally() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        var take = TakeRecord(id: "take-1", name: "hosts", startFleetNs: 1, directory: directory + "/take-1", createdAt: 1_000, createdBy: "ana")
        take.store = .agent
        try await store.createTake(
            take, devices: [TakeDeviceRecord(takeId: "take-1", deviceId: "cam-a", nodeId: "node-1")],
            audit: AuditEntry(at: 1_000, actor: "ana", action: "recording.start", target: "take-1", outcome: "ok"))
        #expect(try await store.take(id: "take-1")?.store == .agent)

        try await store.indexAgentSegment(segment(2, frames: 50, last: 103), tally: tally(frames: 100, last: 103))
        // The first segment's report arrives late: its older tally is not applied.
        try await store.indexAgentSegment(segment(1, frames: 50, last: 53), tally: tally(frames: 50, last: 53))
        try await store.indexAgentSegment(segment(2, frames: 50, last: 103), tally: tally(frames: 100, last: 103))
        let segments = try await store.segments(takeID: "take-1")
        #expect(segments.map(\.number) == [1, 2])
        #expect(segments.allSatisfy { $0.nodeId == "node-1" && $0.readablePath == nil && $0.drops.discontinuity == 3 })
        let device = try #require(try await store.takeDevice(takeID: "take-1", deviceID: "cam-a"))
        #expect(device.frames == 100 && device.lastSequence == 103 && device.state == .recording)
        #expect(try await store.segmentNumbers(takeID: "take-1", deviceID: "cam-a") == [1, 2])
        #expect(try await store.uncollectedSegments(takeID: "take-1").count == 2)

        // Collected: the copy is where the coordinator reads it, and a repeated report keeps it.
        try await store.markSegmentCollected(
            takeID: "take-1", deviceID: "cam-a", number: 1, path: directory + "/take-1/cam-a/cam-a-0001.mkv", at: 2_000)
        try await store.indexAgentSegment(segment(1, frames: 50, last: 53), tally: tally(frames: 50, last: 53))
        let collected = try #require(try await store.segments(takeID: "take-1").first)
        #expect(collected.readablePath == directory + "/take-1/cam-a/cam-a-0001.mkv")
        #expect(try await store.uncollectedSegments(takeID: "take-1").map(\.number) == [2])
        #expect(try await store.openSegments().isEmpty, "agent-held segments are never the coordinator's to repair")

        try await store.setCollectError(takeID: "take-1", error: "node node-1 is offline")
        #expect(try await store.take(id: "take-1")?.collectError == "node node-1 is offline")
    }

    @Test func aSegmentOfADeviceNotInTheTake_isRefused() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        await #expect(throws: StoreError.self) {
            try await store.indexAgentSegment(self.segment(1, frames: 1, last: 1), tally: self.tally(frames: 1, last: 1))
        }
    }
}
