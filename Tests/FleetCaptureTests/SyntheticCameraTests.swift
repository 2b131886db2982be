import FleetCapture
import FleetCore
import Foundation
import Synchronization
import Testing

@Suite struct SyntheticCameraTests {
    /// Collects delivered frames, optionally holding on to their buffers.
    final class Collector: Sendable {
        let frames = Mutex<[CapturedFrame]>([])
        let keepBuffers: Bool
        init(keepBuffers: Bool) { self.keepBuffers = keepBuffers }
        func deliver(_ frame: CapturedFrame) {
            frames.withLock { $0.append(frame) }
        }
        func stampedNumbers() -> [UInt32?] {
            frames.withLock { frames in
                frames.map { frame in
                    let luma = LumaPlane(
                        base: frame.buffer.storage, pixelFormat: frame.layout.pixelFormat,
                        width: frame.layout.width, height: frame.layout.height)!
                    return FrameNumberStamp.read(from: luma)
                }
            }
        }
    }

    @Test func syntheticCamera_deliversStampedFramesAtItsRate() async throws {
        let camera = SyntheticCamera(deviceID: "syn-test-1", name: "Test", frameRate: 30, bufferCount: 64)
        let collector = Collector(keepBuffers: true)
        try camera.start { collector.deliver($0) }
        try await Task.sleep(for: .seconds(1))
        camera.stop()
        let frames = collector.frames.withLock { $0 }
        #expect(frames.count >= 10, "frames keep coming: \(frames.count) in a second")
        let numbers = collector.stampedNumbers()
        #expect(numbers.allSatisfy { $0 != nil })
        #expect(numbers.compactMap { $0 }.map(UInt64.init) == frames.map(\.sequence), "the pixels carry the sequence number")
        let times = frames.map(\.captureMonotonicNanoseconds)
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 })
        // Pacing: the sequence counts sensor slots (a slot the host was too busy for is
        // skipped, not squeezed in), so time per slot is the frame period whatever the load.
        let first = try #require(frames.first), last = try #require(frames.last)
        let period = Double(last.captureMonotonicNanoseconds - first.captureMonotonicNanoseconds) / Double(last.sequence - first.sequence) / 1e6
        #expect(abs(period - 1000.0 / 30) < 3.3, "one frame per 33.3 ms slot on the monotonic clock; measured \(period) ms")
        #expect(frames.first?.byteCount == 640 * 480 * 2)
    }

    @Test func syntheticCamera_countsOutOfBuffersWhenDownstreamHoldsEveryBuffer() async throws {
        let camera = SyntheticCamera(deviceID: "syn-test-2", name: "Test", frameRate: 60, bufferCount: 3)
        let collector = Collector(keepBuffers: true)
        try camera.start { collector.deliver($0) }
        try await Task.sleep(for: .milliseconds(500))
        camera.stop()
        #expect(collector.frames.withLock { $0.count } == 3)
        #expect(camera.outOfBufferDrops > 10)
    }

    @Test func syntheticCamera_listsRealisticFormats() {
        let formats = SyntheticCamera.formatList
        #expect(formats.contains { $0.width == 3840 && $0.height == 2160 && $0.pixelFormat == .nv12 })
        #expect(formats.contains { $0.isBinned && $0.maxFramesPerSecond == 120 && $0.width == 1920 })
        #expect(formats.allSatisfy { $0.fieldOfViewDegrees != nil && $0.maxZoomFactor >= 1 })
        let p720 = formats.first { $0.width == 1280 && $0.pixelFormat == .nv12 }!
        #expect(p720.upscaleThresholdZoomFactor == 3, "a 1280-wide crop of a 3840-wide sensor upscales past 3x")
    }

    @Test func syntheticCamera_refusesARateOutsideTheActiveFormat() throws {
        let camera = SyntheticCamera(deviceID: "syn-test-3", name: "Test")
        #expect(throws: CaptureError.self) { try camera.setFrameRate(500) }
        try camera.setFrameRate(60)
        #expect(camera.activeFrameRate == 60)
        let index4K = SyntheticCamera.formatList.firstIndex { $0.width == 3840 && $0.pixelFormat == .yuyv }!
        try camera.setActiveFormat(index: index4K)
        #expect(camera.activeFrameRate == 15, "a format that cannot run the rate takes its default")
        do {
            try camera.setActiveFormat(index: 99)
            Issue.record("format 99 does not exist")
        } catch {
            #expect(error.description.contains("supported formats"))
        }
    }

    @Test func syntheticCamera_switchesFormatWhileStreaming() async throws {
        let camera = SyntheticCamera(deviceID: "syn-test-4", name: "Test", frameRate: 30, bufferCount: 8)
        let sizes = Mutex<Set<Int>>([])
        try camera.start { frame in sizes.withLock { _ = $0.insert(frame.byteCount) } }
        try await Task.sleep(for: .milliseconds(300))
        try camera.setActiveFormat(index: SyntheticCamera.formatList.firstIndex { $0.width == 1280 && $0.pixelFormat == .nv12 }!)
        try await Task.sleep(for: .milliseconds(300))
        camera.stop()
        let seen: Set<Int> = sizes.withLock { $0 }
        let expected: Set<Int> = [614_400, 1_382_400]  // 640x480 YUYV, then 1280x720 NV12
        #expect(seen == expected)
    }
}
