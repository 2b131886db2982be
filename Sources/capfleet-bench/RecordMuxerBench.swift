import FleetCoordinator
import FleetCore
import FleetRecording
import FleetStore
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The coordinator's recording writer alone, against the disk: `DeviceTakeRecorder` (Matroska
/// through libavformat, each segment indexed in a real SQLite fleet database, SHA-256 on the
/// hasher's thread as in the coordinator) fed 1920x1080 YUYV frames as fast as it takes them,
/// then a plain sequential write of files of the same sizes into the same directory. The
/// end-to-end ramp is bounded by what 2 cores can capture and encrypt; this stage says what the
/// writer itself costs against the disk (the 0.8 of a plain write).
enum RecordMuxerBench {
    struct Result {
        var frames: Int
        var bytes: Int64
        var seconds: Double
        var checksumSeconds: Double
        var segmentSizes: [Int64]
        var megabytesPerSecond: Double { Double(bytes) / 1e6 / seconds }
    }

    static let width = 1920, height = 1080

    static func run(directory: String, frames: Int, segmentSeconds: UInt64) throws -> Result {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        let start: UInt64 = 1_800_000_000_000_000_000
        let takeDirectory = directory + "/take"
        try blocking {
            try await store.createTake(
                TakeRecord(id: "bench", name: "muxer", startFleetNs: start, directory: takeDirectory, createdAt: 1, createdBy: "bench"),
                devices: [TakeDeviceRecord(takeId: "bench", deviceId: "cam", nodeId: "bench")],
                audit: AuditEntry(at: 1, actor: "bench", action: "recording.start", target: "bench", outcome: "ok", detail: "muxer bench"))
        }
        let recorder = DeviceTakeRecorder(
            takeID: "bench", deviceID: "cam", title: "muxer", directory: takeDirectory, start: start,
            segmentLength: segmentSeconds * 1_000_000_000,
            index: StoreSegmentIndex(store: store, clock: { Date().unixMilliseconds }))
        let hasher = SegmentHasher()
        recorder.hasher = hasher
        let format = RecordedVideoFormat(pixelFormat: PixelFormat("YUYV"), width: width, height: height, frameRate: 30)
        // A frame whose bytes change from one frame to the next, as a camera's do.
        let frame = UnsafeMutableRawBufferPointer.allocate(byteCount: width * height * 2, alignment: 64)
        defer { frame.deallocate() }
        frame.initializeMemory(as: UInt8.self, repeating: 0x80)
        // Nothing of an earlier phase left to write back: each side is timed to the disk alone.
        sync()
        let began = MonotonicTime.now()
        for index in 0..<frames {
            frame[index % frame.count] &+= 1
            _ = try recorder.record(
                UnsafeRawBufferPointer(frame), sequence: UInt64(index + 1), fleetTime: start + UInt64(index) * 33_333_333,
                format: format, cumulativeDrops: DropTally())
        }
        recorder.stop(at: start + UInt64(frames) * 33_333_333)
        try recorder.finish()
        // To the disk, not the page cache: the plain write it is compared with syncs as well.
        let segments = try blocking { try await store.segments(takeID: "bench") }
        for segment in segments {
            let descriptor = open(segment.path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0, fsync(descriptor) == 0 else {
                throw BenchFailure("cannot sync \(segment.path): \(String(cString: strerror(errno)))")
            }
            close(descriptor)
        }
        let written = MonotonicTime.now()
        while hasher.pending > 0 { usleep(20_000) }
        let checksummed = MonotonicTime.now()
        let sizes = segments.map(\.sizeBytes)
        return Result(
            frames: frames, bytes: sizes.reduce(0, +), seconds: Double(written - began) / 1e9,
            checksumSeconds: Double(checksummed - written) / 1e9, segmentSizes: sizes)
    }

    /// The store's API is async; the bench runs on the main thread, which may wait.
    private static func blocking<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Swift.Result<T, any Error>?>(nil)
        Task {
            let result: Swift.Result<T, any Error>
            do { result = .success(try await work()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }
}
