import FleetCore
import Synchronization
import Testing

@testable import FleetCapture

/// The synthetic camera's simulated sensor (`SyntheticSensor`): frames timed in lines by its
/// own oscillator, stamped with their start of exposure, and a frame length that can be set.
@Suite struct SyntheticSensorTimingTests {
    @Test func itsFrameLengthTiming_isTheNominalLengthOfItsRateInLinesOfItsFormatsFastestClock() throws {
        let camera = SyntheticCamera(deviceID: "syn-timing", name: "Test", frameRate: 30)
        let timing = try #require(camera.frameLengthTiming)
        // 640x480 runs up to 60 fps: 1125 lines at 60 fps make 14.81 µs lines; 30 fps is 2250 of them.
        #expect(abs(timing.nominalLineTime - 14_814.8148) < 0.001, "\(timing.nominalLineTime) ns")
        #expect(timing.nominalFrameLength == 2250 && timing.frameLengthRange.lowerBound == 1125)
    }

    /// Keeps each frame's sequence and stamp (its buffer goes back at once), and can act
    /// on the capture thread once a number of frames has come: what a test asks of the
    /// camera then happens at that frame, however late the test's own tasks run.
    final class Stamps: Sendable {
        let stamps = Mutex<[(sequence: UInt64, nanoseconds: UInt64)]>([])
        let atFrame: Int
        let action: @Sendable () -> Void

        init(atFrame: Int = -1, _ action: @escaping @Sendable () -> Void = {}) {
            self.atFrame = atFrame
            self.action = action
        }

        func deliver(_ frame: CapturedFrame) {
            let count = stamps.withLock {
                $0.append((frame.sequence, frame.captureMonotonicNanoseconds))
                return $0.count
            }
            if count == atFrame { action() }
        }

        /// Waits (polling, never blocking a thread) until `count` frames have come.
        func wait(for count: Int) async throws {
            for _ in 0..<600 where stamps.withLock({ $0.count }) < count { try await Task.sleep(for: .milliseconds(50)) }
        }
    }

    @Test func framesAreStampedAWholeFrameOfLinesApart_offTheNominalRateByTheOscillatorsError() async throws {
        let camera = SyntheticCamera(deviceID: "syn-oscillator", name: "Test", frameRate: 30)
        let timing = try #require(camera.frameLengthTiming)
        let collector = Stamps()
        try camera.start { collector.deliver($0) }
        try await collector.wait(for: 61)
        camera.stop()
        let stamps = collector.stamps.withLock { $0 }
        let first = try #require(stamps.first), last = try #require(stamps.last)
        let sensorFrames = Double(last.sequence - first.sequence)
        #expect(sensorFrames >= 60)
        let measured = Double(last.nanoseconds - first.nanoseconds) / sensorFrames
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
        let camera = SyntheticCamera(deviceID: "syn-vblank", name: "Test", frameRate: 30)
        let timing = try #require(camera.frameLengthTiming)
        // Set from the capture thread as the 15th frame is delivered, as the agent's loop sets it.
        let collector = Stamps(atFrame: 15) { camera.setFrameLength(lines: timing.nominalFrameLength + 300) }
        try camera.start { collector.deliver($0) }
        try await collector.wait(for: 40)
        camera.stop()
        let ppm = SyntheticSensor.frequencyErrorPPM(deviceID: "syn-vblank")
        let line = timing.nominalLineTime / (1 + ppm / 1e6)
        let jitter = 2 * Double(SyntheticSensor.jitterBound) + 2
        let stamps = collector.stamps.withLock { $0 }
        // Between consecutive frames of the sensor (the first frame's exposure was set before it started).
        let single = zip(stamps, stamps.dropFirst()).filter { $1.sequence - $0.sequence == 1 }.map {
            Double($1.nanoseconds) - Double($0.nanoseconds)
        }
        let isNominal = { (interval: Double) in abs(interval - Double(timing.nominalFrameLength) * line) <= jitter }
        let isLonger = { (interval: Double) in abs(interval - Double(timing.nominalFrameLength + 300) * line) <= jitter }
        #expect(single.filter(isNominal).count >= 5 && single.filter(isLonger).count >= 5, "both lengths ran: \(single)")
        #expect(single.allSatisfy { isNominal($0) || isLonger($0) }, "no frame in between: \(single)")
        let firstLonger = try #require(single.firstIndex(where: isLonger))
        #expect(single[firstLonger...].allSatisfy(isLonger), "and none back: \(single)")
    }
}
