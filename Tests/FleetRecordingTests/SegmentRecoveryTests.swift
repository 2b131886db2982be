import FleetCoordinator
import FleetCore
import FleetRecording
import FleetStore
import Foundation
import Testing

/// The coordinator died mid-segment: the index still calls the segment open, and its file
/// holds what had reached the disk. Recovery repairs the file and indexes what it holds.
final class SegmentRecoveryTests {
    let scratch: ScratchDirectory
    var directory: String { scratch.path }

    init() throws { scratch = try ScratchDirectory("capfleet-recovery") }

    @Test func anOpenSegment_isRepairedAndIndexed_andOneWithoutAFile_isForgotten() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        let start: UInt64 = 1_795_000_000_000_000_000
        try await store.createTake(
            TakeRecord(id: "take-1", name: "crash", startFleetNs: start, directory: directory, createdAt: 1, createdBy: "operator:ana"),
            devices: ["cam-a", "cam-b"].map { TakeDeviceRecord(takeId: "take-1", deviceId: $0, nodeId: "node-1") },
            audit: AuditEntry(at: 1, actor: "operator:ana", action: "record.start", target: "take-1", outcome: "ok"))
        let directory = self.directory
        let path: String = try await onOwnThread {
            let recorder = DeviceTakeRecorder(
                takeID: "take-1", deviceID: "cam-a", title: "crash", directory: directory, start: start,
                segmentLength: 60_000_000_000, index: StoreSegmentIndex(store: store, clock: { 2 }))
            let format = RecordedVideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRate: 30)
            let frame = [UInt8](repeating: 0x80, count: 64 * 48 * 2)
            for index: UInt64 in 0..<100 where !(40..<43).contains(index) {
                // Three frames lost on the device (sequences 41…43), one of them reported out of buffers.
                let drops = DropTally(outOfBuffers: index >= 43 ? 1 : 0)
                try frame.withUnsafeBytes {
                    _ = try recorder.record($0, sequence: index + 1, fleetTime: start + index * 33_333_333, format: format, cumulativeDrops: drops)
                }
            }
            // The crash: what is on disk now is all there will be, and the recorder never
            // finishes (it is leaked, as a killed process would never run its deinit).
            let path = directory + "/cam-a/cam-a-0001.mkv"
            let onDisk = try Data(contentsOf: URL(fileURLWithPath: path))
            _ = Unmanaged.passRetained(recorder)
            try onDisk.write(to: URL(fileURLWithPath: path), options: .atomic)
            return path
        }
        // cam-b's segment was opened in the index, but the crash came before its file existed.
        try await store.openSegment(
            SegmentRecord(takeId: "take-1", deviceId: "cam-b", number: 1, path: directory + "/cam-b/cam-b-0001.mkv", openedAt: 2))

        let reports = try await SegmentRecovery.recoverOpenSegments(in: store, clock: { 3 })
        #expect(reports.count == 2)
        let repaired = try #require(reports.first { $0.path == path }?.outcome)
        #expect(repaired.frames >= 57 && repaired.frames < 97, "whole clusters on disk: \(repaired)")
        // The file's sequence markers give the kept frames' numbers and what went missing.
        #expect(repaired.firstSequence == 1)
        #expect(repaired.lastSequence == UInt64(repaired.frames) + 3)
        #expect(repaired.dropped == DropTally(outOfBuffers: 1, discontinuity: 2))

        let segments = try await store.segments(takeID: "take-1")
        #expect(segments.map(\.deviceId) == ["cam-a"], "the segment without a file is forgotten")
        let segment = try #require(segments.first)
        #expect(segment.state == .repaired && segment.frames == Int64(repaired.frames))
        #expect(segment.firstFleetNs == start)
        #expect(segment.sha256 == (try SegmentDigest.sha256(ofFile: path)))
        #expect(segment.sizeBytes == (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64))
        let counted = try MatroskaSegmentWriterTests.probe([
            "-count_frames", "-select_streams", "v", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path,
        ])
        #expect(Int(counted.trimmingCharacters(in: .whitespacesAndNewlines)) == repaired.frames)
        let device = try #require(try await store.takeDevices(takeID: "take-1").first { $0.deviceId == "cam-a" })
        #expect(device.frames == Int64(repaired.frames))
        #expect(segment.firstSequence == 1 && segment.lastSequence == repaired.lastSequence)
        // Every frame in the device's sequence range is stored or counted dropped.
        #expect(UInt64(device.frames) + device.drops.total == device.lastSequence! - device.firstSequence! + 1)
        #expect(try await store.openSegments().isEmpty)
    }
}
