import FleetCore
import FleetStore
import Foundation
import GRDB
import Testing

/// The recordings index in a real SQLite file: a take's life from start to delete.
@Suite final class RecordingsIndexTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-takes-\(UUID().uuidString.prefix(8))").path

    init() throws { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func audit(_ action: String) -> AuditEntry { AuditEntry(at: 1_000, actor: "operator:ana", action: action, target: "take-1", outcome: "ok") }

    @Test func aTake_accountsForEverySegment_andOpenSegmentsAreFoundAfterACrash() async throws {
        let path = directory + "/fleet.sqlite"
        let store = try FleetDatabase(path: path)
        let take = TakeRecord(
            id: "take-1", name: "scene 4", startFleetNs: 1_795_000_000_000_000_000, directory: directory + "/take-1",
            createdAt: 1_000, createdBy: "operator:ana")
        try await store.createTake(
            take, devices: ["cam-a", "cam-b"].map { TakeDeviceRecord(takeId: "take-1", deviceId: $0, nodeId: "node-1") },
            audit: audit("record.start"))
        await #expect(throws: StoreError.self) {
            try await store.createTake(take, devices: [], audit: self.audit("record.start"))
        }

        var first = SegmentRecord(takeId: "take-1", deviceId: "cam-a", number: 1, path: directory + "/take-1/cam-a-0001.mkv", openedAt: 1_000)
        try await store.openSegment(first)
        try await store.openSegment(
            SegmentRecord(takeId: "take-1", deviceId: "cam-b", number: 1, path: directory + "/take-1/cam-b-0001.mkv", openedAt: 1_000))
        first.state = .finished
        first.frames = 9_000
        first.firstSequence = 100
        first.lastSequence = 9_099
        first.sha256 = String(repeating: "ab", count: 32)
        first.sizeBytes = 1 << 30
        let tally = TakeDeviceTally(
            pixelFormat: "YUYV", width: 1920, height: 1080, frameRate: 30, firstFleetNs: 1_795_000_000_000_000_000,
            lastFleetNs: 1_795_000_300_000_000_000, firstSequence: 100, lastSequence: 9_101, frames: 9_000, bytes: 1 << 30,
            drops: DropTally(late: 2))
        try await store.finishSegment(first, tally: tally)
        try await store.recordTakeEvent(
            TakeEventRecord(
                takeId: "take-1", deviceId: "cam-a", fleetNs: 1_795_000_001_000_000_000, kind: "zoom",
                detail: #"{"factor":2}"#))

        // Reopened, as after a coordinator crash: the segment still open is there to repair.
        let reopened = try FleetDatabase(path: path)
        #expect(try await reopened.openSegments().map(\.deviceId) == ["cam-b"])
        #expect(try await reopened.segments(takeID: "take-1").map(\.state) == [.finished, .open])
        let camA = try await reopened.takeDevices(takeID: "take-1").first
        #expect(camA?.drops == DropTally(late: 2, outOfBuffers: 0, discontinuity: 0))
        #expect(camA?.state == .recording && camA?.frames == 9_000 && camA?.nodeId == "node-1")
        #expect(try await reopened.takeEvents(takeID: "take-1").map(\.kind) == ["zoom"])

        await #expect(throws: StoreError.self, "a take in progress is never deleted") {
            try await reopened.deleteTake(id: "take-1", audit: self.audit("recordings.delete"))
        }
        try await reopened.endTake(id: "take-1", state: .stopped, stopFleetNs: 1_795_000_010_000_000_000, at: 2_000, audit: audit("record.stop"))
        #expect(try await reopened.take(id: "take-1")?.state == .stopped)
        try await reopened.deleteTake(id: "take-1", audit: audit("recordings.delete"))
        #expect(try await reopened.takes().isEmpty)
        #expect(try await reopened.segments(takeID: "take-1").isEmpty, "its segments and events go with it")
        #expect(try await reopened.takeEvents(takeID: "take-1").isEmpty)
    }
}
