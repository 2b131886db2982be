import FleetCore
import Testing

@testable import FleetCapture

/// The synthetic camera's simulated sensor (`SyntheticSensor`): frames timed in lines by its
/// own oscillator, stamped with their start of exposure, and a frame length that can be set.
@Suite struct SyntheticSensorTimingTests {
    /// Consecutive frames' stamps, with how many sensor frames apart they are.
    static func intervals(_ frames: [CapturedFrame]) -> [(frames: UInt64, nanoseconds: Double)] {
        zip(frames, frames.dropFirst()).map {
            ($1.sequence - $0.sequence, Double($1.captureMonotonicNanoseconds) - Double($0.captureMonotonicNanoseconds))
        }
    }

    @Test func itsFrameLengthTiming_isTheNominalLengthOfItsRateInLinesOfItsFormatsFastestClock() throws {
        let camera = SyntheticCamera(deviceID: "syn-timing", name: "Test", frameRate: 30)
        let timing = try #require(camera.frameLengthTiming)
        // 640x480 runs up to 60 fps: 1125 lines at 60 fps make 14.81 µs lines; 30 fps is 2250 of them.
        #expect(abs(timing.nominalLineTime - 14_814.8148) < 0.001, "\(timing.nominalLineTime) ns")
        #expect(timing.nominalFrameLength == 2250 && timing.frameLengthRange.lowerBound == 1125)
    }

    @Test func framesAreStampedAWholeFrameOfLinesApart_offTheNominalRateByTheOscillatorsError() async throws {
        let camera = SyntheticCamera(deviceID: "syn-oscillator", name: "Test", frameRate: 30, bufferCount: 128)
        let timing = try #require(camera.frameLengthTiming)
        let collector = SyntheticCameraTests.Collector(keepBuffers: true)
        try camera.start { collector.deliver($0) }
        try await Task.sleep(for: .seconds(2))
        camera.stop()
        let frames = collector.frames.withLock { $0 }
        let first = try #require(frames.first), last = try #require(frames.last)
        let sensorFrames = Double(last.sequence - first.sequence)
        #expect(sensorFrames >= 40)
        let measured = Double(last.captureMonotonicNanoseconds - first.captureMonotonicNanoseconds) / sensorFrames
        let ppm = SyntheticSensor.frequencyErrorPPM(deviceID: "syn-oscillator")
        let expected = Double(timing.nominalFrameLength) * timing.nominalLineTime / (1 + ppm / 1e6)
        // Each end may be 10 µs off its oscillator's instant: the mean over the run, 20 µs over its frames.
        let bound = 2 * Double(SyntheticSensor.jitterBound) / sensorFrames + 2
        print(
            "synthetic sensor: \(ppm) ppm; frame \(measured) ns, expected \(expected) ns (nominal \(Double(timing.nominalFrameLength) * timing.nominalLineTime))"
        )
        #expect(abs(measured - expected) <= bound, "measured \(measured) ns a frame, expected \(expected) ± \(bound)")
        #expect(ppm != 0 && abs(ppm) <= 40)
    }

    @Test func aFrameLengthSet_takesEffectFromTheNextFrame_inWholeLines() async throws {
        let camera = SyntheticCamera(deviceID: "syn-vblank", name: "Test", frameRate: 30, bufferCount: 128)
        let timing = try #require(camera.frameLengthTiming)
        let collector = SyntheticCameraTests.Collector(keepBuffers: true)
        try camera.start { collector.deliver($0) }
        try await Task.sleep(for: .milliseconds(500))
        camera.setFrameLength(lines: timing.nominalFrameLength + 300)
        try await Task.sleep(for: .milliseconds(700))
        camera.stop()
        let ppm = SyntheticSensor.frequencyErrorPPM(deviceID: "syn-vblank")
        let line = timing.nominalLineTime / (1 + ppm / 1e6)
        let jitter = 2 * Double(SyntheticSensor.jitterBound) + 2
        let single = Self.intervals(collector.frames.withLock { $0 }).filter { $0.frames == 1 }.map(\.nanoseconds)
        let nominal = single.filter { abs($0 - Double(timing.nominalFrameLength) * line) <= jitter }
        let longer = single.filter { abs($0 - Double(timing.nominalFrameLength + 300) * line) <= jitter }
        #expect(nominal.count >= 5 && longer.count >= 5, "both lengths ran: \(nominal.count) and \(longer.count)")
        #expect(nominal.count + longer.count == single.count, "no frame in between: \(single)")
        let firstLonger = try #require(single.firstIndex { abs($0 - Double(timing.nominalFrameLength + 300) * line) <= jitter })
        #expect(single[firstLonger...].allSatisfy { abs($0 - Double(timing.nominalFrameLength + 300) * line) <= jitter })
    }
}
