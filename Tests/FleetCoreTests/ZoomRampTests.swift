import FleetCore
import Foundation
import Testing

@Suite struct ZoomRampTests {
    let ms: UInt64 = 1_000_000

    /// Advances frame by frame at `fps` for `seconds`, returning the factor per frame.
    func run(_ ramp: inout ZoomRamp, from start: UInt64 = 0, seconds: Double, fps: Double = 60) -> [Double] {
        let period = UInt64(1e9 / fps)
        var factors: [Double] = []
        var time = start
        while Double(time - start) / 1e9 <= seconds {
            factors.append(ramp.advance(to: time))
            time += period
        }
        return factors
    }

    @Test func zoomRamp_rateOneDoublesTheFactorEverySecondOnceUpToSpeed() {
        var ramp = ZoomRamp(maximumFactor: 64)
        ramp.ramp(to: 64, rate: 1)
        let factors = run(&ramp, seconds: 3, fps: 100)
        // After the ease-in (rate 1 reached within 1/8 s) each second doubles the factor.
        let atOne = factors[100], atTwo = factors[200], atThree = factors[300]
        #expect(abs(atTwo / atOne - 2) < 1e-6)
        #expect(abs(atThree / atTwo - 2) < 1e-6)
    }

    @Test func zoomRamp_easesInInsteadOfJumpingToFullRate() {
        var ramp = ZoomRamp(maximumFactor: 8)
        ramp.ramp(to: 8, rate: 2)
        let factors = run(&ramp, seconds: 0.1, fps: 100)
        let firstStep = log2(factors[1] / factors[0]) * 100
        let laterStep = log2(factors[10] / factors[9]) * 100
        #expect(firstStep < laterStep, "the rate builds up: \(firstStep) then \(laterStep) octaves/s")
        #expect(laterStep <= 2 + 1e-9)
    }

    @Test func zoomRamp_arrivesExactlyAtTheTargetWithoutOvershoot() {
        var ramp = ZoomRamp(maximumFactor: 10)
        ramp.ramp(to: 3, rate: 4)
        let factors = run(&ramp, seconds: 2)
        #expect(factors.allSatisfy { $0 <= 3 + 1e-9 })
        #expect(factors.last == 3)
        #expect(!ramp.isRamping)
        // And it slows down before arriving: the last steps are the smallest.
        let steps = zip(factors, factors.dropFirst()).map { $1 - $0 }.filter { $0 > 0 }
        #expect(steps.last! < steps.max()!)
    }

    @Test func zoomRamp_zoomsOutSymmetrically() {
        var ramp = ZoomRamp(factor: 8, maximumFactor: 8)
        ramp.ramp(to: 1, rate: 1)
        let factors = run(&ramp, seconds: 4, fps: 50)
        #expect(factors.last == 1)
        #expect(zip(factors, factors.dropFirst()).allSatisfy { $1 <= $0 })
    }

    @Test func zoomRamp_cancelEasesOutAndStopsShortOfTheTarget() {
        var ramp = ZoomRamp(maximumFactor: 16)
        ramp.ramp(to: 16, rate: 2)
        _ = run(&ramp, seconds: 0.5, fps: 100)
        let atCancel = ramp.factor
        ramp.cancel()
        let after = run(&ramp, from: 501 * ms, seconds: 1, fps: 100)
        #expect(after.first! >= atCancel, "no jump back")
        #expect(after.last! < 16 && after.last! > atCancel, "it coasts a little, then stops")
        #expect(!ramp.isRamping)
        let steps = zip(after, after.dropFirst()).map { $1 - $0 }
        #expect(zip(steps, steps.dropFirst()).allSatisfy { $1 <= $0 + 1e-12 }, "it only slows down")
    }

    @Test func zoomRamp_setJumpsAndClampsToTheFormatsRange() {
        var ramp = ZoomRamp(maximumFactor: 4)
        ramp.set(10)
        #expect(ramp.factor == 4)
        ramp.set(0.5)
        #expect(ramp.factor == 1)
        ramp.ramp(to: 100, rate: 1)
        _ = run(&ramp, seconds: 5)
        #expect(ramp.factor == 4)
    }

    @Test func zoomRamp_followsTheSameCurveAtAnyFrameRate() {
        var fast = ZoomRamp(maximumFactor: 8), slow = ZoomRamp(maximumFactor: 8)
        fast.ramp(to: 8, rate: 1)
        slow.ramp(to: 8, rate: 1)
        let a = run(&fast, seconds: 1.5, fps: 120).last!
        let b = run(&slow, seconds: 1.5, fps: 10).last!
        #expect(abs(a - b) < 1e-3, "120 fps: \(a), 10 fps: \(b)")
    }

    // MARK: A change of format (AVCaptureDevice's rule when activeFormat changes)

    @Test func zoomRamp_aFormatChangeMidRamp_cancelsTheRampAtOnce_andTheZoomHoldsThere() {
        var ramp = ZoomRamp(maximumFactor: 8)
        ramp.ramp(to: 4, rate: 1)
        let before = run(&ramp, seconds: 0.5).last!
        #expect(before > 1 && before < 4, "mid-ramp: \(before)")
        let (zoom, change) = ramp.adopting(maximumFactor: 8)
        #expect(change == ZoomFormatChange(factorBefore: before, factor: zoom.factor, cancelledRampTarget: 4, maximumFactor: 8))
        #expect(abs(zoom.factor - before) < 1e-9, "no easing out: the stream restarts where the zoom was")
        #expect(!zoom.isRamping)
        var after = zoom
        let later = run(&after, from: 600 * ms, seconds: 2)
        #expect(later.allSatisfy { $0 == zoom.factor }, "steady in every later frame")
        #expect(change?.message == "a format change cancelled the zoom ramp to 4x; the zoom holds at \(VideoFormat.trim(before))x")
    }

    @Test func zoomRamp_aFormatWhoseMaximumIsBelowTheZoom_clampsItDown() {
        var ramp = ZoomRamp(maximumFactor: 8)
        ramp.set(6)
        let (zoom, change) = ramp.adopting(maximumFactor: 4)
        #expect(zoom.factor == 4 && zoom.maximumFactor == 4)
        #expect(change?.isClamped == true && change?.cancelledRampTarget == nil)
        #expect(change?.message == "a format change clamped the zoom from 6x to 4x, the new format's maximum")
    }

    @Test func zoomRamp_aRampCutShortByASmallerFormat_isCancelledAndClamped() {
        var ramp = ZoomRamp(factor: 2, maximumFactor: 8)
        ramp.ramp(to: 8, rate: 1)
        let before = run(&ramp, seconds: 1).last!
        #expect(before > 3)
        let (zoom, change) = ramp.adopting(maximumFactor: 1)
        #expect(zoom.factor == 1, "a format that cannot zoom holds 1x")
        #expect(change?.cancelledRampTarget == 8 && change?.factor == 1 && change?.factorBefore == before)
        #expect(change?.message.hasPrefix("a format change cancelled the zoom ramp to 8x and clamped the zoom from ") == true)
    }

    @Test func zoomRamp_aFormatChangeWithNoRampAndTheFactorInRange_changesNothing() {
        var ramp = ZoomRamp(maximumFactor: 8)
        ramp.set(3)
        let (zoom, change) = ramp.adopting(maximumFactor: 4)
        #expect(change == nil)
        #expect(zoom.factor == 3 && zoom.maximumFactor == 4)
    }
}
