import FleetCore
import FleetProtocol
import Testing

struct PreviewCadenceTests {
    /// Capture times of a camera at `fps` for `seconds`, in ns.
    static func captures(fps: Double, seconds: Double, from start: UInt64 = 5_000_000_000) -> [UInt64] {
        (0..<Int(fps * seconds)).map { start + UInt64(Double($0) * 1e9 / fps) }
    }

    @Test func previewCadence_picksOneFrameASecond_atAnyCameraRate_withoutDrift() {
        for fps in [7.5, 15, 30, 60] {
            var cadence = PreviewCadence(framesPerSecond: 1)
            var picked: [UInt64] = []
            for capture in Self.captures(fps: fps, seconds: 60) where cadence.isDue(at: capture) { picked.append(capture) }
            // 60 s: the first frame, then one a second, never two in one second.
            #expect(picked.count == 60, "\(fps) fps: \(picked.count) previews in 60 s")
            let gaps = zip(picked.dropFirst(), picked).map { Double($0 - $1) / 1e9 }
            #expect(gaps.allSatisfy { $0 > 0.9 && $0 < 1.0 + 1 / fps + 1e-6 }, "\(fps) fps: gaps \(gaps.min()!)…\(gaps.max()!)")
        }
    }

    @Test func previewCadence_aCameraSlowerThanTheRate_previewsEveryFrame_andAPauseStartsANewGridNotABurst() {
        var slow = PreviewCadence(framesPerSecond: 2)
        var due: [Bool] = []
        for capture in Self.captures(fps: 1, seconds: 10) { due.append(slow.isDue(at: capture)) }
        #expect(due == [Bool](repeating: true, count: 10))
        var paused = PreviewCadence(framesPerSecond: 1)
        let first = paused.isDue(at: 1_000_000_000)
        #expect(first)
        // Ten seconds without frames, then 15 fps again: one preview now, the next a second later.
        var after: [UInt64] = []
        for capture in Self.captures(fps: 15, seconds: 2, from: 11_000_000_000) where paused.isDue(at: capture) { after.append(capture) }
        #expect(after.count == 2 && after[1] - after[0] >= 1_000_000_000, "\(after)")
    }

    @Test func previewSettings_sayWhatIsOutOfRange() {
        #expect(PreviewSettings().problem == nil)
        #expect(PreviewSettings(width: 8).problem == "preview_width must be from 16 to 1920 pixels, not 8")
        #expect(PreviewSettings(quality: 0).problem == "preview_quality must be from 1 to 100, not 0")
    }

    @Test func previewValidation_takesOnlySmallJPEGs() {
        var header = Capfleet_V1_FrameHeader()
        header.flags = UInt32(Capfleet_V1_FrameFlag.preview.rawValue)
        header.layout = .with {
            $0.pixelFormat = "JPEG"; $0.width = 320; $0.height = 240
        }
        #expect(header.isPreview)
        #expect(PreviewValidation.check(header: header, payloadBytes: 12_000) == nil)
        #expect(PreviewValidation.check(header: header, payloadBytes: 2 << 20) == .oversizedClaim)
        header.layout.pixelFormat = "YUYV"
        #expect(PreviewValidation.check(header: header, payloadBytes: 12_000) == .invalidFormat, "a preview is a JPEG")
    }
}
