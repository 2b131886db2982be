import FleetCoordinator
import FleetCore
import FleetRecording
import FleetStore
import Foundation
import Testing

/// A device's part of a take, written to real Matroska files and indexed in a real SQLite
/// file; the files are read back with ffprobe and checked against the index.
final class DeviceTakeRecorderTests {
    let scratch: ScratchDirectory
    var directory: String { scratch.path }

    init() throws { scratch = try ScratchDirectory("capfleet-take") }

    @Test func segmentsFollowTheBoundariesAndFormatChanges_andTheIndexAgreesWithEveryFile() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        let start: UInt64 = 1_795_000_000_000_000_000
        let takeDirectory = directory + "/take-1"
        try FileManager.default.createDirectory(atPath: takeDirectory, withIntermediateDirectories: true)
        try await store.createTake(
            TakeRecord(id: "take-1", name: "scene", startFleetNs: start, directory: takeDirectory, createdAt: 1, createdBy: "operator:ana"),
            devices: [TakeDeviceRecord(takeId: "take-1", deviceId: "cam-a", nodeId: "node-1")],
            audit: AuditEntry(at: 1, actor: "operator:ana", action: "record.start", target: "take-1", outcome: "ok"))

        let interval: UInt64 = 33_333_333
        let wide = RecordedVideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRate: 30)
        let narrow = RecordedVideoFormat(pixelFormat: .yuyv, width: 32, height: 48, frameRate: 30)
        let ledger: TakeFrameLedger = try await onOwnThread {
            let recorder = DeviceTakeRecorder(
                takeID: "take-1", deviceID: "cam-a", title: "scene, cam-a", directory: takeDirectory, start: start,
                segmentLength: 1_000_000_000, index: StoreSegmentIndex(store: store, clock: { 5 }))
            try recorder.note(#"{"kind":"consent","state":"authorized"}"#, at: start - 1_000_000)
            var drops = DropTally()
            // Frames from three intervals before the start, the sequence running on.
            for index in -3..<90 {
                let sequence = UInt64(index + 100)
                if sequence == 120 || sequence == 121 { continue }  // lost on the device…
                if sequence == 122 { drops.outOfBuffers += 1 }  // …one of them reported
                let format = index >= 50 ? narrow : wide
                let frame = [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: format.width * format.height * 2)
                let fleetTime = UInt64(Int64(start) + Int64(index) * Int64(interval) + 700_000)
                try frame.withUnsafeBytes {
                    _ = try recorder.record($0, sequence: sequence, fleetTime: fleetTime, format: format, cumulativeDrops: drops)
                }
                if index == 40 {
                    try frame.withUnsafeBytes {
                        _ = try recorder.record($0, sequence: sequence, fleetTime: fleetTime, format: format, cumulativeDrops: drops)
                    }
                    try recorder.note(#"{"kind":"zoom","factor":2}"#, at: fleetTime)
                }
                if index == 70 { recorder.stop(at: start + 2_500_000_000) }
            }
            return try recorder.finish()
        }

        // Frames 0…74 are the take's (75 starts at 2.5007 s, after the stop), less the two lost.
        #expect(ledger.stored == 73)
        #expect(ledger.dropped == DropTally(outOfBuffers: 1, discontinuity: 1))
        #expect(ledger.accountedFor == ledger.lastSequence! - ledger.firstSequence! + 1)

        let segments = try await store.segments(takeID: "take-1")
        // Seconds 0 and 1 (wide), then the format change at frame 50, then second 2 (narrow).
        #expect(segments.map(\.number) == [1, 2, 3, 4])
        // Second 0 lost two frames (sequences 120 and 121 are frames 17 and 18).
        #expect(segments.map(\.frames) == [28, 20, 10, 15])
        #expect(segments.allSatisfy { $0.state == .finished })
        #expect(segments.map(\.frames).reduce(0, +) == Int64(ledger.stored))
        for segment in segments {
            let size = try FileManager.default.attributesOfItem(atPath: segment.path)[.size] as? Int64
            #expect(size == segment.sizeBytes)
            #expect(try SegmentDigest.sha256(ofFile: segment.path) == segment.sha256)
            let counted = try MatroskaSegmentWriterTests.probe([
                "-count_frames", "-select_streams", "v", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", segment.path,
            ])
            #expect(Int64(counted.trimmingCharacters(in: .whitespacesAndNewlines)) == segment.frames, "\(segment.path)")
        }
        // The files count from the take's start: segment 2 starts at frame 30, 1.0007 s in.
        let firstOfSecond = try MatroskaSegmentWriterTests.probe([
            "-select_streams", "v", "-show_entries", "packet=pts_time", "-of", "csv=p=0", segments[1].path,
        ])
        .split(separator: "\n").first.flatMap { Double($0) }
        #expect(firstOfSecond.map { abs($0 - 1.001) <= 0.0005 + 1e-9 } == true, "\(String(describing: firstOfSecond))")
        let metadata = try MatroskaSegmentWriterTests.probe([
            "-select_streams", "s", "-show_entries", "packet=pts_time", "-of", "csv=p=0", segments[0].path,
        ])
        // The consent entry noted before the first frame, sequence markers before the first
        // frame and after the gap, and the exact times of the frames before the gap and after it.
        #expect(metadata.split(separator: "\n").count == 5, "\(metadata)")

        let device = try await store.takeDevices(takeID: "take-1").first
        #expect(device?.frames == 73 && device?.drops == ledger.dropped && device?.pixelFormat == "YUYV" && device?.width == 32)
        #expect(device?.firstSequence == 100 && device?.lastSequence == 174)
        #expect(try await store.openSegments().isEmpty)
    }
}

/// A recorder with a checksummer: the part's writer waits for the checksums before it says
/// the part is stored, and a checksum the index refuses is an error, not a silence.
final class DeviceTakeRecorderChecksumTests {
    let scratch: ScratchDirectory
    init() throws { scratch = try ScratchDirectory("capfleet-checksums") }

    /// Keeps what it is told; slow to take a checksum, as a busy index is.
    final class SlowIndex: SegmentIndexing, @unchecked Sendable {
        private let lock = NSLock()
        private var finishedPaths: [Int: String] = [:]
        private var sums: [Int: String] = [:]
        let refuses: Bool
        init(refusingChecksums refuses: Bool) { self.refuses = refuses }

        func segmentOpened(_ segment: SegmentOpening) throws(RecordingError) {}
        func segmentFinished(_ segment: FinishedSegment, ledger: TakeFrameLedger, payloadBytes: Int64) throws(RecordingError) {
            lock.withLock { finishedPaths[segment.number] = segment.path }
        }
        func segmentChecksummed(_ segment: FinishedSegment, sha256: String) throws(RecordingError) {
            Thread.sleep(forTimeInterval: 0.3)
            if refuses { throw .index(what: "checksumming segment \(segment.number)", underlying: CocoaError(.fileWriteUnknown)) }
            lock.withLock { sums[segment.number] = sha256 }
        }
        var finished: [Int: String] { lock.withLock { finishedPaths } }
        var checksums: [Int: String] { lock.withLock { sums } }
    }

    /// Records two one-second segments of a tiny format and finishes; returns what waiting
    /// for the checksums said.
    func record(into index: SlowIndex, hasher: SegmentHasher) async throws -> Result<Void, RecordingError> {
        let directory = scratch.path
        return try await onOwnThread {
            let recorder = DeviceTakeRecorder(
                takeID: "take-1", deviceID: "cam-a", title: "scene, cam-a", directory: directory, start: 0,
                segmentLength: 1_000_000_000, index: index)
            recorder.hasher = hasher
            let format = RecordedVideoFormat(pixelFormat: .yuyv, width: 32, height: 16, frameRate: 10)
            let frame = [UInt8](repeating: 7, count: 32 * 16 * 2)
            for index in 0..<20 {
                try frame.withUnsafeBytes {
                    _ = try recorder.record(
                        $0, sequence: UInt64(index), fleetTime: UInt64(index) * 100_000_000 + 1,
                        format: format, cumulativeDrops: DropTally())
                }
            }
            try recorder.finish()
            return Result { () throws(RecordingError) in try recorder.waitForChecksums() }
        }
    }

    @Test func waitingForChecksums_returnsOnceEveryFinishedSegmentsSHA256IsIndexed() async throws {
        let index = SlowIndex(refusingChecksums: false), hasher = SegmentHasher()
        let waited = try await record(into: index, hasher: hasher)
        #expect(throws: Never.self) { try waited.get() }
        let finished = index.finished, checksums = index.checksums
        #expect(finished.count == 2)
        #expect(Set(checksums.keys) == Set(finished.keys), "every finished segment is checksummed when the wait returns")
        for (number, path) in finished { #expect(checksums[number] == (try SegmentDigest.sha256(ofFile: path))) }
        await hasher.stop()
    }

    @Test func aChecksumTheIndexRefuses_isThrownByTheWait() async throws {
        let index = SlowIndex(refusingChecksums: true), hasher = SegmentHasher()
        let waited = try await record(into: index, hasher: hasher)
        guard case let .failure(error) = waited, case .index = error else {
            Issue.record("the refusal is an error: \(waited)")
            return
        }
        #expect(index.checksums.isEmpty)
        await hasher.stop()
    }
}

/// Frame sets pair frames by their exact fleet times: the files keep them to the nanosecond
/// (`frame_times` entries), across gaps and segments, and a file without them still gives its
/// frames, rounded to the millisecond.
final class SegmentFrameTimesTests {
    let scratch: ScratchDirectory
    init() throws { scratch = try ScratchDirectory("capfleet-frame-times") }

    @Test func exactFrameTimes_comeBackToTheNanosecond_acrossGapsAndSegments() async throws {
        let store = try FleetDatabase(path: scratch.path + "/fleet.sqlite")
        let start: UInt64 = 1_795_000_000_000_000_000
        try await store.createTake(
            TakeRecord(id: "take-1", name: "sets", startFleetNs: start, directory: scratch.path, createdAt: 1, createdBy: "operator:ana"),
            devices: [TakeDeviceRecord(takeId: "take-1", deviceId: "cam-a", nodeId: "node-1")],
            audit: AuditEntry(at: 1, actor: "operator:ana", action: "record.start", target: "take-1", outcome: "ok"))
        let directory = scratch.path
        // 75 frames at 30 fps with a few µs of jitter each, two lost (sequences 40 and 41).
        let recorded: [FrameTime] = (0..<75).compactMap { index in
            guard index != 40, index != 41 else { return nil }
            let jitter = UInt64((index * 7919) % 5000)
            return FrameTime(sequence: UInt64(index + 10), fleetTime: start + UInt64(index) * 33_333_333 + jitter + 1)
        }
        try await onOwnThread {
            let recorder = DeviceTakeRecorder(
                takeID: "take-1", deviceID: "cam-a", title: "sets", directory: directory, start: start,
                segmentLength: 1_000_000_000, index: StoreSegmentIndex(store: store, clock: { 5 }))
            let format = RecordedVideoFormat(pixelFormat: .yuyv, width: 32, height: 16, frameRate: 30)
            let frame = [UInt8](repeating: 9, count: 32 * 16 * 2)
            var drops = DropTally()
            for time in recorded {
                if time.sequence == 42 { drops.late = 2 }
                try frame.withUnsafeBytes {
                    _ = try recorder.record($0, sequence: time.sequence, fleetTime: time.fleetTime, format: format, cumulativeDrops: drops)
                }
            }
            try recorder.finish()
        }
        let segments = try await store.segments(takeID: "take-1").sorted { $0.number < $1.number }
        #expect(segments.count == 3)
        let read = try CameraFrameTimes.read(deviceID: "cam-a", paths: segments.map(\.path), takeStart: start)
        #expect(read.exact)
        #expect(read.frames == recorded)
        let second = try SegmentFrameTimes.read(segments[1].path, takeStart: start)
        #expect(second.exact && second.frames.first?.sequence == 40 && second.frames.count == 28)
    }

    @Test func aFileWithoutExactTimes_givesItsFramesToTheMillisecond() throws {
        let path = scratch.path + "/old.mkv"
        let start: UInt64 = 1_000_000_000_000
        let format = RecordedVideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRate: 25)
        let writer = try MatroskaSegmentWriter(path: path, format: format, title: "before 1.8")
        let frame = [UInt8](repeating: 1, count: 64 * 48 * 2)
        try writer.appendMetadata(
            SequenceMarker(sequence: 500, fleetTime: start + 40_300_000, dropped: DropTally()).json, at: 40_300_000, duration: 1_000_000)
        for index in 0..<10 {
            try frame.withUnsafeBytes { try writer.appendFrame($0, at: UInt64(index + 1) * 40_000_000 + 300_000, duration: 40_000_000) }
        }
        _ = try writer.finish()
        let read = try SegmentFrameTimes.read(path, takeStart: start)
        #expect(!read.exact)
        #expect(read.frames.map(\.sequence) == Array(500..<510))
        // 40.3 ms into the take is stored as 40 ms.
        #expect(read.frames.first?.fleetTime == start + 40_000_000)
        #expect(read.frames.last?.fleetTime == start + 400_000_000)
    }
}
