import FleetCore
import Testing

@Suite struct SensorModelTests {
    let start: UInt64 = 50_000_000_000
    /// 2200 pixels at 74.25 MHz.
    let lineTime = 2200.0 * 1e9 / 74_250_000

    @Test func sensorModel_framesLastHeightPlusVBLANKLinesOfWidthPlusHBLANKPixels() {
        var sensor = SensorModel(mode: .fullHD, start: start)
        let frames = (0...30).map { _ in sensor.nextFrame() }
        // 1125 lines of 29.63 µs: 30 fps exactly, so 30 frames take one second to the ns.
        #expect(frames.allSatisfy { $0.frameLengthLines == 1125 })
        #expect(abs(frames[0].lineTime - 29_629.629_6) < 1e-3)
        #expect(frames[30].readoutStart - frames[0].readoutStart == 1_000_000_000)
        #expect(frames.map(\.sequence) == Array(0...30))
        // Readout of the 1080 active lines ends 32 ms after the frame's boundary.
        #expect(frames[0].readoutEnd - frames[0].readoutStart == UInt64((1080 * lineTime).rounded()))
    }

    @Test func sensorModel_aFastOscillatorShortensEveryFrameByItsError() {
        var fast = SensorModel(mode: .fullHD, frequencyErrorPPM: 100, start: start)
        var slow = SensorModel(mode: .fullHD, frequencyErrorPPM: -100, start: start)
        let fastFrames = (0...30).map { _ in fast.nextFrame() }, slowFrames = (0...30).map { _ in slow.nextFrame() }
        // 1 s / 1.0001 = 999 900 009.999 ns; 1 s / 0.9999 = 1 000 100 010.001 ns (whole ns, down).
        #expect(fastFrames[30].readoutStart - fastFrames[0].readoutStart == 999_900_009)
        #expect(slowFrames[30].readoutStart - slowFrames[0].readoutStart == 1_000_100_010)
    }

    @Test func sensorModel_VBLANKSetDuringAFrame_takesEffectAtTheNextFrameBoundary() throws {
        var sensor = SensorModel(mode: .fullHD, start: start)
        let first = sensor.frames(through: start + 40_000_000)
        #expect(first.map(\.sequence) == [0])
        // Set while frame 1 is being read out (its boundary was at start + 33.3 ms).
        let taken = try sensor.set(.verticalBlanking, to: 420, at: start + 40_000_000)
        #expect(taken == 420)
        #expect(sensor.frameLengthLines == 1500)
        let frames = sensor.frames(through: start + 200_000_000)
        #expect(frames.map(\.frameLengthLines) == [1125, 1500, 1500, 1500])
        let boundaries = ([first[0]] + frames).map(\.readoutStart)
        let intervals = zip(boundaries.dropFirst(), boundaries).map { $0 - $1 }
        // Frame 1 keeps its latched 1125 lines (33.33 ms); frame 2 on last 1500 (44.44 ms).
        #expect(intervals[0] == 33_333_333)
        #expect(intervals[1] == 33_333_333)
        #expect(intervals[2] == 44_444_444 || intervals[2] == 44_444_445)
    }

    @Test func sensorModel_VBLANKSetBeforeAFramesBoundary_appliesToThatFrame() throws {
        var sensor = SensorModel(mode: .fullHD, start: start)
        let frame0 = sensor.nextFrame()
        // Set after frame 0 was read out but before frame 1's boundary.
        try sensor.set(.verticalBlanking, to: 420, at: frame0.readoutEnd)
        #expect(sensor.nextFrame().frameLengthLines == 1500)
    }

    @Test func sensorModel_reportsFramesOnlyOnceTheirReadoutHasEnded() {
        var sensor = SensorModel(mode: .fullHD, start: start)
        let readout = UInt64((1080 * lineTime).rounded())
        #expect(sensor.frames(through: start + readout - 1).isEmpty)
        #expect(sensor.frames(through: start + readout).map(\.sequence) == [0])
        #expect(sensor.frames(through: start + readout).isEmpty, "a frame is reported once")
    }

    @Test func sensorModel_exposureEndsWhereReadoutBegins_andAShorterFrameCutsIt() throws {
        var sensor = SensorModel(mode: .fullHD, start: start)
        try sensor.set(.verticalBlanking, to: 2000, at: start)
        #expect(try sensor.set(.exposure, to: 3000, at: start) == 3000)
        let long = sensor.nextFrame()
        #expect(long.exposureLines == 3000)
        #expect(long.exposureStart == long.readoutStart - UInt64((3000 * lineTime).rounded()))
        #expect(long.exposureDuration == 88_888_889)
        // Back to 1125 lines: at most 1121 lines of exposure (a margin of 4), as drivers clamp.
        try sensor.set(.verticalBlanking, to: 45, at: long.readoutEnd)
        #expect(sensor.controls.first { $0.id == SensorControlID.exposure.rawValue }?.value == 1121)
        let short = sensor.nextFrame()
        #expect(short.exposureLines == 1121)
        #expect(short.readoutStart - short.exposureStart == UInt64((1121 * lineTime).rounded()))
    }

    @Test func sensorModel_listsTheSubDeviceControlsWithTheirV4L2IdsAndRanges() throws {
        var sensor = SensorModel(mode: .fullHD, start: start)
        try sensor.set(.verticalBlanking, to: 500, at: start)
        let controls = Dictionary(uniqueKeysWithValues: sensor.controls.map { ($0.id, $0) })
        #expect(controls.keys.sorted() == [0x0098_0911, 0x009E_0901, 0x009E_0902, 0x009F_0902])
        let vblank = try #require(controls[0x009E_0901])
        #expect([vblank.minimum, vblank.maximum, vblank.value] == [45, 8_000, 500])
        #expect(vblank.name == "Vertical Blanking" && !vblank.isReadOnly)
        let exposure = try #require(controls[0x0098_0911])
        #expect([exposure.minimum, exposure.maximum] == [1, 1_576], "1580 lines less the margin of 4")
        let pixelRate = try #require(controls[0x009F_0902])
        #expect(pixelRate.value == 74_250_000 && pixelRate.isReadOnly && pixelRate.kind == .integer64)
        #expect(try #require(controls[0x009E_0902]).isReadOnly, "the mode fixes HBLANK at 280")
    }

    @Test func sensorModel_clampsOutOfRangeValues_andRefusesReadOnlyControls() throws {
        var sensor = SensorModel(mode: .fullHD, start: start)
        #expect(try sensor.set(.verticalBlanking, to: 10, at: start) == 45)
        #expect(try sensor.set(.verticalBlanking, to: 1_000_000, at: start) == 8_000)
        #expect(throws: SensorControlError.readOnly(.pixelRate)) { try sensor.set(.pixelRate, to: 1, at: start) }
        #expect(throws: SensorControlError.readOnly(.horizontalBlanking)) { try sensor.set(.horizontalBlanking, to: 400, at: start) }
        var adjustable = SensorModel(mode: Self.adjustableLine, start: start)
        #expect(try adjustable.set(.horizontalBlanking, to: 1_280, at: start + 1) == 1_280)
        // 3200 pixels at 74.25 MHz: 43.10 µs a line, from the next frame on.
        #expect(adjustable.nextFrame().lineTime == 2200.0 * 1e9 / 74_250_000)
        #expect(abs(adjustable.nextFrame().lineTime - 43_097.643) < 1e-3)
    }

    @Test func sensorModel_jitterMovesEachFrameWithinItsBound_andRepeatsForASeed() {
        var jittered = SensorModel(mode: .fullHD, jitterBound: 20_000, seed: 7, start: start)
        var again = SensorModel(mode: .fullHD, jitterBound: 20_000, seed: 7, start: start)
        var steady = SensorModel(mode: .fullHD, start: start)
        var offsets: [Int64] = []
        for _ in 0..<1_000 {
            let frame = jittered.nextFrame()
            #expect(frame == again.nextFrame())
            offsets.append(Int64(bitPattern: frame.readoutStart &- steady.nextFrame().readoutStart))
        }
        #expect(offsets.allSatisfy { abs($0) <= 20_000 })
        // Not accumulated: 1000 frames on, the timeline is where the oscillator put it, and
        // the jitter fills its bound (uniform: over 1000 draws the ends are within 1 µs).
        #expect(offsets.max()! > 19_000 && offsets.min()! < -19_000)
        var reseeded = SensorModel(mode: .fullHD, jitterBound: 20_000, seed: 8, start: start)
        var seven = SensorModel(mode: .fullHD, jitterBound: 20_000, seed: 7, start: start)
        let differing = (0..<100).filter { _ in reseeded.nextFrame().readoutStart != seven.nextFrame().readoutStart }
        #expect(differing.count > 90, "another seed, other jitter")
    }

    static let adjustableLine = SensorMode(
        width: 1920, height: 1080, pixelRate: 74_250_000, horizontalBlankingRange: 280...4_000, verticalBlankingRange: 45...8_000)
}
