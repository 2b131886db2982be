import Testing

@testable import FleetCore

/// The fleet's Center Stage, pure (detection.md, "Auto-framing"): faces in, a crop per frame out.
struct AutoFramerTests {
    static let second: UInt64 = 1_000_000_000
    static let frame: UInt64 = 33_333_333
    /// A face a tenth of the frame wide on a 16:9 frame (its box a little taller than wide).
    static func face(atX x: Double, y: Double = 0.4) -> NormalizedRect { NormalizedRect(x: x, y: y, width: 0.1, height: 0.18) }

    /// Runs `seconds` of 30 fps frames, detection at 5 fps; returns the crops.
    static func run(
        _ framer: inout AutoFramer, from start: UInt64, seconds: Double, faces: (UInt64) -> [NormalizedRect]
    ) -> [NormalizedRect] {
        var crops: [NormalizedRect] = []
        let frames = Int(seconds * 30)
        for index in 0..<frames {
            let time = start + UInt64(index) * frame
            if index % 6 == 0 { framer.observe(faces: faces(time), at: time) }
            crops.append(framer.advance(to: time))
        }
        return crops
    }

    @Test func aFace_isFramedWithItsMargin_atTheFramesAspect_afterTheHold() {
        var framer = AutoFramer(settings: .standard, width: 1920, height: 1080)
        let face = Self.face(atX: 0.6)
        let crops = Self.run(&framer, from: Self.second, seconds: 4) { _ in [face] }
        let last = crops.last!
        #expect(framer.target == last, "settled on its target within 4 s")
        #expect(last.width == last.height, "the frame's aspect, in normalised terms")
        #expect(last.x <= face.x && last.x + last.width >= face.x + face.width, "the face is inside")
        #expect(
            last.y <= face.y - 0.5 * face.height + 1e-9 && last.y + last.height >= face.y + 1.5 * face.height - 1e-9,
            "with half its height above and below")
        #expect(last.width >= FramingSettings.standard.minimumCrop && last.width < 1, "zoomed in, no further than the settings allow")
        #expect(crops.prefix(Int(0.6 * 30)).allSatisfy { $0 == .whole }, "nothing moves before the hold time: \(crops.prefix(20))")
    }

    @Test func theCrop_neverMovesFasterThanTheMaximumSpeed() {
        var framer = AutoFramer(settings: .standard, width: 1920, height: 1080)
        // A face walking from the left to the right of the frame in 3 s.
        let crops = Self.run(&framer, from: 0, seconds: 6) { time in [Self.face(atX: min(0.85, 0.05 + Double(time) / 3e9 * 0.8))] }
        let limit = FramingSettings.standard.maximumSpeed / 30 + 1e-9
        for (before, after) in zip(crops, crops.dropFirst()) {
            let moved = abs((after.x + after.width / 2) - (before.x + before.width / 2))
            let grew = abs(after.width - before.width)
            #expect(moved <= limit + 1e-9 && grew <= limit, "one frame moved \(moved), grew \(grew): at most \(limit)")
        }
        let last = crops.last!, face = Self.face(atX: 0.85)
        #expect(last.x <= face.x && last.x + last.width >= face.x + face.width, "it caught up with the face: \(last)")
    }

    @Test func aFaceThatMovesALittle_orBriefly_doesNotReframe() {
        var framer = AutoFramer(settings: .standard, width: 1920, height: 1080)
        _ = Self.run(&framer, from: 0, seconds: 4) { _ in [Self.face(atX: 0.45)] }
        let settled = framer.target
        // Jitter of a hundredth of the frame, and a jump away for less than the hold time.
        _ = Self.run(&framer, from: 4 * Self.second, seconds: 2) { time in [Self.face(atX: 0.45 + (time / Self.frame % 2 == 0 ? 0.01 : -0.01))] }
        #expect(framer.target == settled, "jitter inside the crop keeps the framing")
        _ = Self.run(&framer, from: 6 * Self.second, seconds: 0.3) { _ in [Self.face(atX: 0.05)] }
        _ = Self.run(&framer, from: 6 * Self.second + Self.second * 3 / 10, seconds: 2) { _ in [Self.face(atX: 0.45)] }
        #expect(framer.target == settled, "a move shorter than the hold is waited out")
    }

    @Test func facesGone_goBackToTheWholeFrame_afterTheHold_andAMissedDetectionDoesNot() {
        var framer = AutoFramer(settings: .standard, width: 1920, height: 1080)
        _ = Self.run(&framer, from: 0, seconds: 4) { _ in [Self.face(atX: 0.5)] }
        #expect(framer.isFraming)
        // The detector misses one examined frame: the framing stays.
        framer.observe(faces: [], at: 4 * Self.second)
        #expect(framer.target != .whole)
        let crops = Self.run(&framer, from: 4 * Self.second + Self.frame, seconds: 4) { _ in [] }
        #expect(crops.last == .whole && !framer.isFraming, "back to the whole frame")
    }

    @Test func twoFaces_areBothInView_andTheCropStaysInsideTheFrame() {
        var framer = AutoFramer(settings: .standard, width: 1280, height: 720)
        let faces = [Self.face(atX: 0.02, y: 0.05), Self.face(atX: 0.4, y: 0.1)]
        let crops = Self.run(&framer, from: 0, seconds: 5) { _ in faces }
        for crop in crops { #expect(crop.isValid, "\(crop)") }
        let last = crops.last!
        #expect(faces.allSatisfy { last.x <= $0.x && last.x + last.width >= $0.x + $0.width && last.y <= $0.y }, "\(last)")
    }

    @Test func settings_outOfRange_sayWhich() {
        #expect(FramingSettings.standard.problem == nil)
        var fast = FramingSettings.standard
        fast.maximumSpeed = 0
        #expect(fast.problem?.contains("--speed") == true)
        var tight = FramingSettings.standard
        tight.minimumCrop = 0.05
        #expect(tight.problem?.contains("--min-crop") == true)
    }
}

/// Who decides whether cameras auto-frame (detection.md, "Who decides").
struct FramingPolicyTests {
    static let codes = DetectionSettings(codes: [.qr], faces: false)
    static let framed = DetectionSettings(codes: [], faces: true, framing: .standard)

    @Test func operators_decideAlone_underOperatorControl() {
        let policy = FramingPolicy(control: .operator, framing: .standard)
        #expect(policy.effective(nil) == nil, "the policy is not used")
        #expect(policy.effective(Self.codes) == Self.codes)
        #expect(policy.refusal(of: Self.framed) == nil)
    }

    @Test func thePolicy_framesEveryCamera_andRefusesOperatorsFraming() {
        let on = FramingPolicy(control: .policy, framing: .standard)
        #expect(on.effective(nil) == DetectionSettings(codes: [], faces: true, framing: .standard))
        let withCodes = on.effective(Self.codes)
        #expect(withCodes?.codes == [.qr] && withCodes?.faces == true && withCodes?.framing == .standard, "codes kept, faces and framing added")
        #expect(on.refusal(of: Self.framed)?.contains("framing_control = policy") == true)
        #expect(on.refusal(of: Self.codes) == nil)
        let off = FramingPolicy(control: .policy, framing: nil)
        #expect(off.effective(nil) == nil && off.effective(Self.framed)?.framing == nil, "off: no camera frames")
    }

    @Test func cooperatively_anOperatorsChoiceWins_forTheirCameraOnly() {
        let policy = FramingPolicy(control: .cooperative, framing: .standard)
        #expect(policy.effective(nil)?.framing == .standard, "a camera nobody set is framed by the policy")
        #expect(policy.effective(Self.codes) == Self.codes, "one an operator set is as they set it, unframed")
        #expect(policy.refusal(of: Self.framed) == nil)
    }
}
