import FleetCapture
import FleetCore
import FleetDetection
import Foundation
import Synchronization
import Testing

/// The synthetic scene's timecode: every frame shows, as a QR code, its own true start of
/// exposure, which an exposure audit reads back (proto-docs/clock.md, "Auditing exposures").
@Suite struct SyntheticTimecodeTests {
    static let bootID = "5b1f3c2e-9a0d-4e6f-8b7a-0c1d2e3f4a5b"
    static let overlay = SyntheticOverlay(timecodeOf: bootID, origin: NormalizedPoint(x: 0.55, y: 0.05), width: 0.4)

    /// Frames' pixels, copied at once (one memcpy, so the capture thread keeps its pace) so the
    /// camera's buffers go back to its pool.
    final class Collector: Sendable {
        let frames = Mutex<[(exposureStart: UInt64, pixels: FrameBuffer, layout: FrameLayout)]>([])
        func deliver(_ frame: CapturedFrame) {
            let copy = FrameBuffer(unpooledCapacity: frame.byteCount)
            copy.storage.copyMemory(from: frame.buffer.storage, byteCount: frame.byteCount)
            frames.withLock { $0.append((frame.captureMonotonicNanoseconds, copy, frame.layout)) }
        }
        var count: Int { frames.withLock { $0.count } }
    }

    @Test(arguments: [(640, 480, PixelFormat.yuyv), (1280, 720, .nv12)])
    func everyFrameShowsItsOwnStartOfExposure(_ width: Int, _ height: Int, _ pixelFormat: PixelFormat) async throws {
        let camera = SyntheticCamera(
            deviceID: "syn-timecode-\(width)", name: "Timecode", initialFormat: (width, height, pixelFormat), frameRate: 15, bufferCount: 8,
            overlays: [Self.overlay])
        let collector = Collector()
        try camera.start { collector.deliver($0) }
        // However busy the machine, until ten frames came (at most 10 s).
        for _ in 0..<100 where collector.count < 10 { try await Task.sleep(for: .milliseconds(100)) }
        camera.stop()
        let frames = collector.frames.withLock { $0 }
        #expect(frames.count >= 10, "frames keep coming: \(frames.count)")
        let scanner = try BarcodeScanner(symbologies: [.qr])
        for frame in frames {
            let luma = try #require(
                LumaPlane(base: frame.pixels.storage, pixelFormat: frame.layout.pixelFormat, width: frame.layout.width, height: frame.layout.height))
            let read = try scanner.scan(try #require(GreyImage(luma: luma))).compactMap { ExposureTimecode(text: $0.value) }
            #expect(read == [.hostMonotonic(bootID: Self.bootID, nanoseconds: frame.exposureStart)], "frame exposed at \(frame.exposureStart)")
        }
    }

    @Test func aFrameWithoutAKnownExposureShowsNoTimecode() throws {
        let format = try #require(SyntheticCamera.formatList.first { $0.width == 640 && $0.pixelFormat == .yuyv })
        var renderer = TestPatternRenderer(format: format, overlays: [Self.overlay])
        let buffer = FrameBuffer(unpooledCapacity: renderer.frameBytes)
        renderer.render(frameNumber: 1, zoom: 1, into: buffer.storage)
        let luma = try #require(LumaPlane(base: buffer.storage, pixelFormat: .yuyv, width: 640, height: 480))
        #expect(try BarcodeScanner(symbologies: [.qr]).scan(try #require(GreyImage(luma: luma))).isEmpty)
    }

    /// What the timecode costs a camera per frame: printed, not asserted (the machine is
    /// shared); the frames drawn while timing it still show their own times.
    @Test func theTimecodesCostPerFrameIsPrinted() throws {
        let format = try #require(SyntheticCamera.formatList.first { $0.width == 1280 && $0.pixelFormat == .nv12 })
        var plain = TestPatternRenderer(format: format)
        var coded = TestPatternRenderer(format: format, overlays: [Self.overlay])
        let buffer = FrameBuffer(unpooledCapacity: plain.frameBytes)
        let frames = 200
        var last: UInt64 = 0
        func time(_ body: (UInt64) -> Void) -> Double {
            let start = MonotonicTime.now()
            for index in 0..<frames {
                last = 1_000_000_000 + UInt64(index) * 33_333_333
                body(last)
            }
            return Double(MonotonicTime.now() - start) / Double(frames) / 1e3
        }
        let without = time { plain.render(frameNumber: UInt32($0 % 1000), zoom: 1, exposureStart: $0, into: buffer.storage) }
        let with = time { coded.render(frameNumber: UInt32($0 % 1000), zoom: 1, exposureStart: $0, into: buffer.storage) }
        print(
            "synthetic timecode: 1280x720 NV12 frame \(String(format: "%.0f", without)) µs plain, \(String(format: "%.0f", with)) µs with the timecode (debug build)"
        )
        let luma = try #require(LumaPlane(base: buffer.storage, pixelFormat: .nv12, width: 1280, height: 720))
        let read = try BarcodeScanner(symbologies: [.qr]).scan(try #require(GreyImage(luma: luma))).compactMap { ExposureTimecode(text: $0.value) }
        #expect(read == [.hostMonotonic(bootID: Self.bootID, nanoseconds: last)])
    }
}
