import FleetCapture
import FleetCore
import Foundation
import Synchronization
import Testing

@Suite struct SyntheticZoomTests {
    /// What each frame showed, read on the capture thread so no buffer is held: a test
    /// delayed by a busy machine must not starve the camera of buffers.
    final class Observer: Sendable {
        struct Seen: Sendable {
            let zoom: Double
            let leftEdgeLuma: UInt8
            var pan: Int64 = 0
        }

        let seen = Mutex<[Seen]>([])

        func deliver(_ frame: CapturedFrame) {
            let luma = LumaPlane(
                base: frame.buffer.storage, pixelFormat: frame.layout.pixelFormat,
                width: frame.layout.width, height: frame.layout.height)!
            // (0, 100): below the stamp, away from the moving box's row.
            seen.withLock { $0.append(Seen(zoom: frame.zoomFactor, leftEdgeLuma: luma[0, 100], pan: frame.pan)) }
        }

        var frames: [Seen] { seen.withLock { $0 } }
    }

    @Test func syntheticZoom_cropsThePatternAndReportsTheFactorPerFrame() async throws {
        let camera = SyntheticCamera(deviceID: "syn-zoom-1", name: "Test", frameRate: 30)
        let observer = Observer()
        try camera.start { observer.deliver($0) }
        for _ in 0..<100 where observer.frames.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        try camera.zoom(.set(7))
        for _ in 0..<100 where !observer.frames.contains(where: { $0.zoom == 7 }) { try await Task.sleep(for: .milliseconds(50)) }
        camera.stop()
        let unzoomed = try #require(observer.frames.first)
        let zoomed = try #require(observer.frames.first { $0.zoom != 1 })
        #expect(unzoomed.zoom == 1 && zoomed.zoom == 7)
        #expect(unzoomed.leftEdgeLuma == 180, "at 1x the left edge is the white bar")
        #expect(zoomed.leftEdgeLuma == 112, "at 7x the left edge is the middle (green) bar")
        #expect(camera.zoomMethod == .deviceControl)
    }

    @Test func syntheticZoom_rampsFrameByFrameAndRefusesFactorsOutOfRange() async throws {
        let camera = SyntheticCamera(deviceID: "syn-zoom-2", name: "Test", frameRate: 60)
        let observer = Observer()
        #expect(throws: CaptureError.self) { try camera.zoom(.set(9)) }
        #expect(throws: CaptureError.self) { try camera.zoom(.ramp(to: 0.5, rate: 1)) }
        try camera.start { observer.deliver($0) }
        try camera.zoom(.ramp(to: 2, rate: 4))
        for _ in 0..<200 where observer.frames.last?.zoom != 2 { try await Task.sleep(for: .milliseconds(50)) }
        camera.stop()
        let factors = observer.frames.map(\.zoom)
        #expect(factors.last == 2)
        #expect(zip(factors, factors.dropFirst()).allSatisfy { $1 >= $0 }, "a zoom-in ramp never goes back")
        #expect(factors.filter { $0 > 1 && $0 < 2 }.count >= 3, "intermediate factors on successive frames: \(factors)")
    }
}

@Suite struct SyntheticFocusAndRateTests {
    @Test func syntheticCamera_focusesLikeALens_andRefusesNothingItHas() throws {
        let camera = SyntheticCamera(deviceID: "syn-focus", name: "focus", frameRate: 60)
        #expect(camera.device.focus == SimulatedLens.capabilities)
        try camera.focus(FocusRequest(lensPosition: 0.25))
        #expect(camera.focus?.mode == .locked)
        try camera.start { _ in }
        defer { camera.stop() }
        let deadline = ContinuousClock.now + .seconds(3)
        while camera.focus?.lensPosition != 0.25, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.02) }
        #expect(camera.focus?.lensPosition == 0.25)
    }

    @Test func syntheticCamera_takesAFrameDurationRangeWithinItsFormat() throws {
        let camera = SyntheticCamera(deviceID: "syn-rate", name: "rate", frameRate: 30)
        try camera.setFrameRateRange(FrameRateRange(min: 10, max: 30))
        #expect(camera.activeFrameRateRange == FrameRateRange(min: 10, max: 30))
        #expect(throws: CaptureError.self) { try camera.setFrameRateRange(FrameRateRange(min: 10, max: 90)) }
        #expect(throws: CaptureError.self) { try camera.setFrameRateRange(FrameRateRange(min: 20, max: 10)) }
    }
}

/// The synthetic camera checks a zoom command by the fleet's one set of rules
/// (DeviceCommandRules), as the V4L2 camera and the coordinator do.
@Suite struct SyntheticZoomRulesTests {
    @Test func aFactorAHairAboveTheTop_isTheTop_aFactorBeyondOrARampTooFastIsRefused() throws {
        let camera = SyntheticCamera(deviceID: "syn-zoom-rules", name: "Test", frameRate: 30)
        // Its formats zoom to 8x.
        try camera.zoom(.set(8 + 1e-12))
        #expect(throws: CaptureError.self) { try camera.zoom(.set(8.5)) }
        do {
            try camera.zoom(.ramp(to: 4, rate: 17))
            Issue.record("a ramp faster than 16 powers of two a second must be refused")
        } catch {
            #expect(
                error.description == "device syn-zoom-rules cannot ramp its zoom at 17 powers of two per second; a ramp runs at up to 16 (0 jumps)")
        }
        try camera.zoom(.ramp(to: 4, rate: 16))
        #expect(throws: CaptureError.self) { try camera.setActiveFormat(index: 999) }
    }
}

/// The synthetic camera's pan and tilt (detection.md, "Framing with the camera's optics"): its
/// view is a window of the scene, and a picture in the scene moves and grows with it.
@Suite struct SyntheticPanTiltTests {
    /// Where a dark square in the scene lands along row `row` of a rendered YUYV frame: its
    /// first and last dark columns (luma under 30).
    static func darkColumns(view: NormalizedRect, row: Int = 240) -> ClosedRange<Int>? {
        let square = GreyImage(width: 8, height: 8, pixels: [UInt8](repeating: 20, count: 64))
        var renderer = TestPatternRenderer(
            format: VideoFormat(pixelFormat: .yuyv, width: 640, height: 480, frameRateRanges: []),
            overlays: [SyntheticOverlay(image: square, origin: NormalizedPoint(x: 0.4, y: 0.4), width: 0.2)])
        var bytes = [UInt8](repeating: 0, count: renderer.frameBytes)
        bytes.withUnsafeMutableBytes { renderer.render(frameNumber: 3, view: view, into: $0.baseAddress!) }
        let dark = (0..<640).filter { bytes[row * 1280 + $0 * 2] < 30 }
        return dark.first.map { $0...dark.last! }
    }

    @Test func aPictureInTheScene_movesAndGrowsWithTheView() {
        #expect(Self.darkColumns(view: .whole) == 256...383, "at 1x: 0.4 to 0.6 of 640")
        #expect(Self.darkColumns(view: TestPatternRenderer.centredView(zoom: 2)) == 192...447, "at 2x, centred: twice as wide")
        #expect(Self.darkColumns(view: NormalizedRect(x: 0.5, y: 0.25, width: 0.5, height: 0.5)) == 0...127, "panned right: it slides left")
        #expect(
            Self.darkColumns(view: NormalizedRect(x: 0.25, y: 0.5, width: 0.5, height: 0.5), row: 400) == nil, "tilted down: row 400 passes below it")
    }

    @Test func panAndTilt_areControlsThatMoveTheView_onceZoomed() async throws {
        let camera = SyntheticCamera(deviceID: "syn-pan", name: "pan", frameRate: 30)
        let pan = try #require(camera.device.controls.first { $0.id == DeviceControl.panAbsoluteID })
        #expect(pan.minimum < 0 && pan.maximum == -pan.minimum && camera.device.controls.contains { $0.id == DeviceControl.tiltAbsoluteID })
        #expect(throws: CaptureError.self) { _ = try camera.setControl(id: DeviceControl.panAbsoluteID, value: pan.maximum + 1) }
        let observer = SyntheticZoomTests.Observer()
        try camera.start { observer.deliver($0) }
        defer { camera.stop() }
        try camera.zoom(.set(4))
        _ = try camera.setControl(id: DeviceControl.panAbsoluteID, value: pan.maximum)
        for _ in 0..<100 where !observer.frames.contains(where: { $0.pan == pan.maximum && $0.zoom == 4 }) {
            try await Task.sleep(for: .milliseconds(50))
        }
        let panned = try #require(observer.frames.last { $0.pan == pan.maximum && $0.zoom == 4 })
        // At 4x panned fully right, the view is the scene's right quarter: the left edge is the red bar.
        #expect(panned.leftEdgeLuma == 65, "\(panned)")
    }
}
