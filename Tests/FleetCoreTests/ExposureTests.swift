import FleetCore
import Testing

@Suite struct ExposureBracketTests {
    /// A camera at 10 ms whose exposure runs from 100 µs to 1 s (the synthetic camera's range).
    static let tenMilliseconds = ExposureState(automatic: true, seconds: 0.010, minimumSeconds: 100e-6, maximumSeconds: 1)

    @Test func bracket_plusOneStopDoublesTheExposureTime_andMinusOneHalvesIt() throws {
        let bracket = try ExposureBracket(base: Self.tenMilliseconds, offsets: [-2, -1, 0, 1, 2])
        #expect(bracket.baseSeconds == 0.010)
        #expect(bracket.steps.map(\.seconds) == [0.0025, 0.005, 0.010, 0.020, 0.040])
        #expect(bracket.steps.map(\.ev) == [-2, -1, 0, 1, 2], "one step per offset, in the order asked")
        #expect(bracket.steps.allSatisfy { !$0.isClamped })
        #expect(bracket.steps[4].request == .manual(seconds: 0.040))
    }

    @Test func bracket_fractionalStops_followPowersOfTwo() throws {
        let bracket = try ExposureBracket(base: Self.tenMilliseconds, offsets: [-1.0 / 3, 1.0 / 3, 0.5])
        #expect(abs(bracket.steps[0].seconds - 0.010 / 1.259_921_049_894_873) < 1e-12)
        #expect(abs(bracket.steps[1].seconds - 0.012_599_210_498_948_73) < 1e-12)
        #expect(abs(bracket.steps[2].seconds - 0.014_142_135_623_730_95) < 1e-12, "half a stop is √2 times the time")
    }

    @Test func bracket_clampsTimesOutsideTheRange_andSaysWhichWere() throws {
        let base = ExposureState(automatic: false, seconds: 0.5, minimumSeconds: 100e-6, maximumSeconds: 1)
        let bracket = try ExposureBracket(base: base, offsets: [-14, -1, 0, 1, 2])
        #expect(bracket.steps.map(\.seconds) == [100e-6, 0.25, 0.5, 1, 1])
        // 0.5 s × 2^-14 is 30.5 µs, below the range; +1 lands exactly on its end, which is no clamp.
        #expect(bracket.steps.map(\.isClamped) == [true, false, false, false, true])
    }

    @Test func bracket_refusesWhatItCannotWorkOut() {
        #expect(throws: ExposureBracketError.invalidOffset(.infinity)) {
            try ExposureBracket(base: Self.tenMilliseconds, offsets: [0, .infinity])
        }
        var zero = Self.tenMilliseconds
        zero.seconds = 0
        #expect(throws: ExposureBracketError.invalidBase(seconds: 0)) { try ExposureBracket(base: zero, offsets: [0]) }
        let inverted = ExposureState(automatic: false, seconds: 0.01, minimumSeconds: 1, maximumSeconds: 0.001)
        #expect(throws: ExposureBracketError.invalidRange(minimumSeconds: 1, maximumSeconds: 0.001)) {
            try ExposureBracket(base: inverted, offsets: [0])
        }
        #expect(ExposureBracketError.invalidOffset(.nan).description.contains("-2, 0, 2"))
    }

    @Test func exposureState_refusesManualTimesOutsideItsRange_namingTheRange() throws {
        let state = Self.tenMilliseconds
        #expect(state.refusal(of: .manual(seconds: 0.040)) == nil)
        #expect(state.refusal(of: .manual(seconds: 100e-6)) == nil && state.refusal(of: .manual(seconds: 1)) == nil, "both ends are in range")
        #expect(state.refusal(of: .automatic) == nil)
        let long = try #require(state.refusal(of: .manual(seconds: 2)))
        #expect(long.contains("2 s") && long.contains("100 µs to 1 s"), "\(long)")
        #expect(state.refusal(of: .manual(seconds: 50e-6)) != nil)
        #expect(state.refusal(of: .manual(seconds: .nan)) != nil)
    }

    @Test func exposureTimes_readAsCameraPeopleWriteThem() {
        #expect(ExposureState.label(0.0025) == "2.5 ms")
        #expect(ExposureState.label(250e-6) == "250 µs")
        #expect(ExposureState.label(1) == "1 s")
        #expect(ExposureState.label(0.040) == "40 ms")
        #expect(ExposureState.label(9 * 100e-6) == "900 µs", "a V4L2 time in its 100 µs units reads whole")
    }
}

@Suite struct WideLumaPlaneTests {
    @Test func frameNumberStamp_readsBackFromY16_andLeavesTheLowBitsClear() {
        var bytes = [UInt8](repeating: 0, count: PixelFormat.y16.frameByteCount(width: 640, height: 480)!)
        let read = bytes.withUnsafeMutableBytes { raw in
            let luma = LumaPlane(base: raw.baseAddress!, pixelFormat: .y16, width: 640, height: 480)!
            FrameNumberStamp.write(987_654, into: luma)
            return FrameNumberStamp.read(from: luma)
        }
        #expect(read == 987_654)
        // Samples are 16-bit little-endian: the stamp's 8-bit white (235) is the high byte.
        let words = stride(from: 0, to: bytes.count, by: 2).map { UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8 }
        #expect(words.contains(235 << 8) && words.contains(16 << 8))
        #expect(words.allSatisfy { $0 & 0xFF == 0 }, "a 12-bit sample in the high bits stays valid")
        #expect(PixelFormat.y16.greyWordBits == 16 && PixelFormat.y10.greyWordBits == 10 && PixelFormat.nv12.greyWordBits == nil)
    }
}
