import FleetCore
import Testing

@Suite struct DropRecoveryTests {
    let format = VideoFormat(
        pixelFormat: .yuyv, width: 640, height: 480,
        frameRateRanges: [60, 30, 15, 10, 5].map { FrameRateRange(min: $0, max: $0) })

    @Test func dropRecovery_doesNothingUnlessEnabled() {
        var recovery = DropRecovery(policy: .off)
        #expect(recovery.evaluate(framesCaptured: 60, lateDrops: 40, requestedRate: 60, format: format) == .keep)
    }

    @Test func dropRecovery_lowersStepByStepWhileLateDropsPersist_andNeverBelowTheFloor() {
        var recovery = DropRecovery(policy: DropRecoveryPolicy(isEnabled: true, minimumFramesPerSecond: 10))
        #expect(recovery.evaluate(framesCaptured: 50, lateDrops: 10, requestedRate: 60, format: format) == .lower(to: 30, lateDrops: 10))
        #expect(recovery.evaluate(framesCaptured: 25, lateDrops: 5, requestedRate: 60, format: format) == .lower(to: 15, lateDrops: 5))
        #expect(recovery.evaluate(framesCaptured: 12, lateDrops: 3, requestedRate: 60, format: format) == .lower(to: 10, lateDrops: 3))
        #expect(recovery.evaluate(framesCaptured: 8, lateDrops: 2, requestedRate: 60, format: format) == .keep)
        #expect(recovery.loweredRate == 10)
    }

    @Test func dropRecovery_ignoresLateDropsBelowTheShare() {
        var recovery = DropRecovery(policy: DropRecoveryPolicy(isEnabled: true, lateDropShare: 0.05))
        #expect(recovery.evaluate(framesCaptured: 100, lateDrops: 5, requestedRate: 60, format: format) == .keep)
    }

    @Test func dropRecovery_restoresTheRequestedRateAfterQuietIntervals() {
        var recovery = DropRecovery(policy: DropRecoveryPolicy(isEnabled: true, quietIntervalsToRestore: 3))
        _ = recovery.evaluate(framesCaptured: 50, lateDrops: 10, requestedRate: 60, format: format)
        #expect(recovery.evaluate(framesCaptured: 30, lateDrops: 0, requestedRate: 60, format: format) == .keep)
        #expect(recovery.evaluate(framesCaptured: 30, lateDrops: 1, requestedRate: 60, format: format) == .keep)  // resets the count
        #expect(recovery.evaluate(framesCaptured: 30, lateDrops: 0, requestedRate: 60, format: format) == .keep)
        #expect(recovery.evaluate(framesCaptured: 30, lateDrops: 0, requestedRate: 60, format: format) == .keep)
        #expect(recovery.evaluate(framesCaptured: 30, lateDrops: 0, requestedRate: 60, format: format) == .restore(to: 60))
        #expect(recovery.loweredRate == nil)
    }

    @Test func dropRecovery_turnedOffWhileLowered_restoresAtOnce() {
        var recovery = DropRecovery(policy: DropRecoveryPolicy(isEnabled: true))
        _ = recovery.evaluate(framesCaptured: 50, lateDrops: 10, requestedRate: 60, format: format)
        recovery.policy = .off
        #expect(recovery.evaluate(framesCaptured: 30, lateDrops: 9, requestedRate: 60, format: format) == .restore(to: 60))
    }

    @Test func nextLowerRate_followsContinuousRangesByFactor_andDiscreteRatesByStep() {
        let continuous = VideoFormat(pixelFormat: .nv12, width: 1280, height: 720, frameRateRanges: [FrameRateRange(min: 1, max: 60)])
        #expect(continuous.nextLowerRate(below: 60, factor: 0.75) == 45)
        #expect(format.nextLowerRate(below: 30, factor: 0.75) == 15)
        #expect(format.nextLowerRate(below: 5, factor: 0.75) == nil)
    }
}

@Suite struct FocusTests {
    @Test func focusRequest_listsWhatTheDeviceCannotDo() {
        let request = FocusRequest(mode: .auto, lensPosition: 0.5, smoothFocus: true)
        #expect(request.problems(on: .none) == ["focus mode auto", "lens position", "smooth focus"])
        #expect(request.problems(on: SimulatedLens.capabilities).isEmpty)
        #expect(FocusRequest(lensPosition: 1.5).problems(on: SimulatedLens.capabilities) == ["lens position 1.5 (must be 0...1)"])
        #expect(FocusRequest().problems(on: SimulatedLens.capabilities) == ["an empty focus request"])
    }

    @Test func simulatedLens_autoFocusMovesToTheSubjectThenLocks() {
        var lens = SimulatedLens()
        lens.apply(FocusRequest(mode: .auto, pointOfInterest: NormalizedPoint(x: 0.5, y: 1)))
        let target = SimulatedLens.subjectLensPosition(at: NormalizedPoint(x: 0.5, y: 1))
        lens.advance(to: 0)
        lens.advance(to: 50_000_000)  // 50 ms at 4 per second: 0.2 of travel
        #expect(abs((lens.state.lensPosition ?? 0) - 0.3) < 1e-9)
        #expect(lens.state.isAdjusting)
        #expect(lens.state.mode == .auto)
        lens.advance(to: 1_000_000_000)
        #expect(abs((lens.state.lensPosition ?? 0) - target) < 1e-9)
        #expect(lens.state.mode == .locked)
        #expect(!lens.state.isAdjusting)
    }

    @Test func simulatedLens_smoothFocusIsEightTimesSlower_andRangeRestrictionClamps() {
        var lens = SimulatedLens()
        lens.apply(FocusRequest(mode: .continuous, pointOfInterest: NormalizedPoint(x: 0.5, y: 0), rangeRestriction: .near, smoothFocus: true))
        lens.advance(to: 0)
        lens.advance(to: 100_000_000)
        // Subject is far (0.85) but the near range caps it at 0.5, where the lens already is.
        #expect(abs((lens.state.lensPosition ?? 0) - 0.5) < 1e-9)
        lens.apply(FocusRequest(rangeRestriction: FocusRangeRestriction.none))
        lens.advance(to: 200_000_000)
        #expect(abs((lens.state.lensPosition ?? 0) - 0.55) < 1e-9)  // 0.5/s smooth for 100 ms
    }

    @Test func simulatedLens_lensPositionLocksThere() {
        var lens = SimulatedLens()
        lens.apply(FocusRequest(lensPosition: 0.9))
        #expect(lens.state.mode == .locked)
        lens.advance(to: 0)
        lens.advance(to: 1_000_000_000)
        #expect(lens.state.lensPosition == 0.9)
    }
}
