import FleetCapture
import FleetCore
import Foundation
import Synchronization
import Testing

@Suite struct SyntheticExposureTests {
    /// The blue bar's luma in each delivered frame, read on the capture thread so that no
    /// buffer is held. (630, 100): the rightmost bar, below the stamp, above the moving box.
    final class BarMeter: Sendable {
        let levels = Mutex<[UInt8]>([])

        func deliver(_ frame: CapturedFrame) {
            let luma = LumaPlane(
                base: frame.buffer.storage, pixelFormat: frame.layout.pixelFormat,
                width: frame.layout.width, height: frame.layout.height)!
            levels.withLock { $0.append(luma[630, 100]) }
        }

        var all: [UInt8] { levels.withLock { $0 } }

        /// Waits until a frame shows `level`, at most `seconds`.
        func waitFor(_ level: UInt8, seconds: Double = 5) async throws {
            for _ in 0..<Int(seconds * 20) where !all.contains(level) { try await Task.sleep(for: .milliseconds(50)) }
        }
    }

    /// The blue bar is Y 35: 19 levels above black, scaled by the exposure against 10 ms.
    static let blueAtNominal: UInt8 = 35
    static let blueAt2_5ms: UInt8 = 21  // 16 + 19 × 0.25 = 20.75
    static let blueAt40ms: UInt8 = 92  // 16 + 19 × 4

    @Test func stillFormats_areListedAfterTheStreamingOnes_keepingEveryIndex() throws {
        let formats = SyntheticCamera.formatList
        let labels = formats.map(\.label)
        #expect(
            Array(labels.prefix(12)) == [
                "640x480 YUYV 1-60fps", "640x480 NV12 1-60fps", "1280x720 YUYV 1-30fps", "1280x720 NV12 1-60fps",
                "1920x1080 YUYV 1-30fps", "1920x1080 NV12 1-60fps", "1920x1080 NV12 120fps binned",
                "3840x2160 YUYV 1-15fps", "3840x2160 NV12 1-30fps", "320x240 YUYV 1-60fps", "320x240 NV12 1-60fps", "160x120 YUYV 1-60fps",
            ], "presets and tests refer to these positions")
        #expect(Array(labels.dropFirst(12).prefix(2)) == ["4608x3456 YUYV 1-5fps", "4608x3456 Y16 1-5fps"])
        let y16 = formats[13]
        #expect(y16.bitDepth == 12 && formats[12].bitDepth == 8)
        #expect(
            formats[12...13].allSatisfy { $0.upscaleThresholdZoomFactor == 1 && $0.maxZoomFactor == 8 && !$0.isBinned },
            "the full sensor: any zoom upscales")
        // Deeper pixels after them (frames.md, "Colour and depth").
        #expect(Array(labels.dropFirst(14)) == ["1280x720 Y12 1-30fps", "1920x1080 P010 1-30fps", "640x480 Z16 1-30fps"])
        #expect(formats[14].bitDepth == 12 && formats[15].colour == .bt2020HLG && formats[16].depthUnitMetres == 0.001)
        // Stills are the largest format but too slow for video: "photo" takes them, "high" does not.
        #expect(try FormatSelector.select(.preset(.photo), from: formats).get() == 12)
        #expect(try formats[FormatSelector.select(.preset(.high), from: formats).get()].label == "3840x2160 NV12 1-30fps")
    }

    @Test func manualExposure_scalesTheBarsLuma_fromTheNextFrame_andAutomaticRestoresIt() async throws {
        let camera = SyntheticCamera(deviceID: "syn-exposure-1", name: "Test", frameRate: 30)
        #expect(camera.exposure == ExposureState(automatic: true, seconds: 0.010, minimumSeconds: 100e-6, maximumSeconds: 1))
        let meter = BarMeter()
        try camera.setExposure(.manual(seconds: 0.0025))
        try camera.start { meter.deliver($0) }
        defer { camera.stop() }
        try await meter.waitFor(Self.blueAt2_5ms)
        try camera.setExposure(.manual(seconds: 0.040))
        #expect(camera.exposure == ExposureState(automatic: false, seconds: 0.040, minimumSeconds: 100e-6, maximumSeconds: 1))
        try await meter.waitFor(Self.blueAt40ms)
        try camera.setExposure(.automatic)
        #expect(camera.exposure?.automatic == true && camera.exposure?.seconds == 0.010)
        try await meter.waitFor(Self.blueAtNominal)
        camera.stop()

        let levels = meter.all
        // Every frame shows one of the three exposures, in the order they were set.
        let runs = levels.reduce(into: [UInt8]()) { runs, level in if runs.last != level { runs.append(level) } }
        #expect(runs == [Self.blueAt2_5ms, Self.blueAt40ms, Self.blueAtNominal], "levels seen: \(runs)")
        // The brightest bar clips at video white under 4x the light, as a sensor saturates.
        #expect(TestPatternRenderer.luma(180, gain: 4) == 235 && TestPatternRenderer.luma(180, gain: 1) == 180)
    }

    @Test func manualExposure_outsideTheRange_isRefused_andChangesNothing() throws {
        let camera = SyntheticCamera(deviceID: "syn-exposure-2", name: "Test")
        for seconds in [2.0, 50e-6, 0, -0.01, .nan] {
            do {
                try camera.setExposure(.manual(seconds: seconds))
                Issue.record("\(seconds) s is outside 100 µs to 1 s")
            } catch {
                guard case let .unsupportedExposure(device, reason) = error else {
                    Issue.record("refused for another reason: \(error)")
                    continue
                }
                #expect(device == "syn-exposure-2" && reason.contains("100 µs to 1 s"))
                #expect(error.description.contains("syn-exposure-2 cannot take that exposure"))
            }
        }
        #expect(camera.exposure?.automatic == true && camera.exposure?.seconds == 0.010)
    }

    @Test func y16StillFrame_hasTwoBytesAPixel_with12BitSamplesInTheHighBits() async throws {
        let camera = SyntheticCamera(deviceID: "syn-exposure-3", name: "Test", bufferCount: 2)
        let index = try #require(SyntheticCamera.formatList.firstIndex { $0.pixelFormat == .y16 })
        try camera.setActiveFormat(index: index)
        #expect(camera.activeFrameRate == 5, "a still format runs at most 5 fps")
        let frames = Mutex<[CapturedFrame]>([])
        try camera.start { frame in frames.withLock { if $0.isEmpty { $0.append(frame) } } }
        for _ in 0..<100 where frames.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(50)) }
        camera.stop()
        let frame = try #require(frames.withLock { $0.first })
        let (width, height) = (4608, 3456)
        #expect(frame.layout == FrameLayout(pixelFormat: .y16, width: width, height: height, bytesPerLine: width * 2, bitDepth: 12))
        #expect(frame.byteCount == width * height * 2)
        let storage = frame.buffer.storage
        func sample(_ x: Int, _ y: Int) -> UInt16 {
            UInt16(littleEndian: storage.loadUnaligned(fromByteOffset: (y * width + x) * 2, as: UInt16.self))
        }
        // Every row, every 7th column (all of them would take long in a debug build).
        var lowBitsSet = 0
        for y in 0..<height { for x in stride(from: y % 7, to: width, by: 7) where sample(x, y) & 0xF != 0 { lowBitsSet += 1 } }
        #expect(lowBitsSet == 0, "12-bit samples leave the low four bits clear")
        // The white bar (Y 180) at nominal exposure: 164 of 219 levels above black, of 4095.
        let white = UInt16((164.0 / 219 * 4095).rounded()) << 4
        #expect(sample(10, 1000) == white && white == 3067 << 4)
        // The moving box is the sensor's full white, 4095.
        let box = height / 8, x = Int(UInt32(truncatingIfNeeded: frame.sequence) % 120) * (width - box) / 120
        #expect(sample(x + box / 2, height / 2) == 4095 << 4)
        let luma = try #require(LumaPlane(base: storage, pixelFormat: .y16, width: width, height: height))
        #expect(FrameNumberStamp.read(from: luma).map(UInt64.init) == frame.sequence, "the stamp is in Y16 frames too")
    }
}
