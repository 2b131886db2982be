import FleetCore
import Testing

/// The frame rate as the device's state governs it: the operator's rate, the pressure cap and
/// drop recovery in one place, each step announced.
@Suite struct DeviceStateRateTests {
    let format = VideoFormat(
        pixelFormat: .yuyv, width: 640, height: 480,
        frameRateRanges: [60, 45, 30, 15, 10, 5].map { FrameRateRange(min: $0, max: $0) })
    let now: Int64 = 1_750_000_000_000
    static func fps(_ rate: Double) -> FrameRateRange { FrameRateRange(min: rate, max: rate) }
    let serious = PressureReading(level: .serious, detail: "serious (cpu serious)")
    let capAt15 = PressurePolicy(isEnabled: true, level: .serious, frameRate: 15)

    /// The rate change a step asks for, if it asks for exactly one.
    func rateChange(_ actions: [DeviceState.Action]) -> RateChange? {
        guard actions.count == 1, case let .setFrameRate(change) = actions[0] else { return nil }
        return change
    }

    @Test func pressureCap_lowersTheRateAtItsLevel_andRestoresTheOperatorsWhenPressureFalls() {
        var device = DeviceState()
        #expect(device.handle(.pressurePolicyChanged(capAt15, pressure: .nominal, running: Self.fps(60), format: format), at: now).isEmpty)
        let lowered = rateChange(device.handle(.pressureChanged(serious, running: Self.fps(60), format: format), at: now))
        #expect(lowered?.range == Self.fps(15))
        #expect(lowered?.announcement(failure: nil) == "pressure policy lowered the frame rate to 15 fps: pressure serious (cpu serious)")
        #expect(device.rates.pressureActive)
        let restored = rateChange(device.handle(.pressureChanged(.nominal, running: Self.fps(15), format: format), at: now))
        #expect(restored?.range == Self.fps(60))
        #expect(restored?.announcement(failure: nil) == "pressure policy restored the frame rate to 60 fps: pressure fell to nominal")
    }

    @Test func pressureCap_onAFormatWithNothingSlower_saysWhyItCannot() {
        let fast = VideoFormat(pixelFormat: .nv12, width: 1920, height: 1080, frameRateRanges: [Self.fps(120)])
        var device = DeviceState()
        _ = device.handle(.pressurePolicyChanged(capAt15, pressure: .nominal, running: Self.fps(120), format: fast), at: now)
        let actions = device.handle(.pressureChanged(serious, running: Self.fps(120), format: fast), at: now)
        #expect(
            actions == [
                .notify(
                    .policyActed(
                        "pressure policy cannot lower the frame rate from 120 fps to 15 fps: the active format has no rate at or below it (serious (cpu serious))",
                        atUnixMilliseconds: now))
            ])
    }

    @Test func dropRecoveryUnderACap_stepsDownFromTheCap_andRestoresToTheCapNotAbove() {
        var device = DeviceState()
        _ = device.handle(
            .pressurePolicyChanged(
                PressurePolicy(isEnabled: true, level: .serious, frameRate: 45), pressure: serious,
                running: Self.fps(60), format: format), at: now)
        _ = device.handle(
            .dropRecoveryPolicyChanged(DropRecoveryPolicy(isEnabled: true, minimumFramesPerSecond: 5, quietIntervalsToRestore: 1)), at: now)
        _ = device.handle(.dropIntervalEnded(framesCaptured: 0, lateDrops: 0, running: Self.fps(45), format: format), at: now)
        let down = rateChange(device.handle(.dropIntervalEnded(framesCaptured: 40, lateDrops: 10, running: Self.fps(45), format: format), at: now))
        #expect(down?.range == Self.fps(30), "one step down from the cap's 45, not from the operator's 60")
        let back = rateChange(device.handle(.dropIntervalEnded(framesCaptured: 70, lateDrops: 10, running: Self.fps(30), format: format), at: now))
        #expect(back?.range == Self.fps(45))
        #expect(back?.announcement(failure: nil) == "drop recovery restored the frame rate to 45 fps: no late or out-of-buffer drops for 1 s")
    }

    @Test func dropRecoveryTurnedOffUnderACap_givesBackTheCapsRate_notTheOperators() {
        var device = DeviceState()
        _ = device.handle(
            .pressurePolicyChanged(
                PressurePolicy(isEnabled: true, level: .serious, frameRate: 45), pressure: serious,
                running: Self.fps(60), format: format), at: now)
        _ = device.handle(.dropRecoveryPolicyChanged(DropRecoveryPolicy(isEnabled: true)), at: now)
        _ = device.handle(.dropIntervalEnded(framesCaptured: 0, lateDrops: 0, running: Self.fps(45), format: format), at: now)
        _ = device.handle(.dropIntervalEnded(framesCaptured: 40, lateDrops: 10, running: Self.fps(45), format: format), at: now)
        let off = rateChange(device.handle(.dropRecoveryPolicyChanged(.off), at: now))
        #expect(off?.range == Self.fps(45))
        #expect(off?.announcement(failure: nil) == nil, "giving the rate back is not news")
        #expect(off?.announcement(failure: "EBUSY") == "drop recovery is off but cannot restore the frame rate to 45 fps: EBUSY")
    }

    @Test func theOperatorsNewRateUnderAnActiveCap_isCappedAtOnce() {
        var device = DeviceState()
        _ = device.handle(.pressurePolicyChanged(capAt15, pressure: serious, running: Self.fps(10), format: format), at: now)
        let capped = rateChange(device.handle(.operatorSetRate(running: Self.fps(60), pressure: serious, format: format), at: now))
        #expect(capped?.range == Self.fps(15))
        #expect(device.rates.requested == Self.fps(60), "60 is what comes back when the pressure falls")
    }

    @Test func aFormatThatKeepsTheRate_changesNoPolicy_andOneThatMovesIt_movesTheOperatorsRate() {
        var device = DeviceState()
        _ = device.handle(.pressurePolicyChanged(capAt15, pressure: serious, running: Self.fps(60), format: format), at: now)
        #expect(device.handle(.formatChanged(rateBefore: Self.fps(15), running: Self.fps(15), pressure: serious, format: format), at: now).isEmpty)
        #expect(device.rates.requested == Self.fps(60))
        _ = device.handle(.formatChanged(rateBefore: Self.fps(15), running: Self.fps(10), pressure: serious, format: format), at: now)
        #expect(device.rates.requested == Self.fps(10))
    }

    @Test func aFormatChangeThatCancelledAZoomRamp_isAnnounced_withTheRateStepAfterIt() {
        var device = DeviceState()
        let zoom = ZoomFormatChange(factorBefore: 1.4999, factor: 1.4999, cancelledRampTarget: 4, maximumFactor: 8)
        #expect(
            device.handle(.formatChanged(rateBefore: Self.fps(15), running: Self.fps(15), pressure: .nominal, format: format, zoom: zoom), at: now)
                == [.notify(.zoomChanged(zoom, atUnixMilliseconds: now))])
        let moved = device.handle(
            .formatChanged(rateBefore: Self.fps(15), running: Self.fps(10), pressure: .nominal, format: format, zoom: zoom), at: now)
        #expect(moved.first == .notify(.zoomChanged(zoom, atUnixMilliseconds: now)))
        #expect(device.rates.requested == Self.fps(10))
    }

    @Test func aPolicysRefusedRate_isAnnouncedWithTheDevicesReason_exceptDropRecoverysSteps() {
        let capped = RateChange(range: Self.fps(15), reason: .pressureCapped(raised: false, detail: "critical"))
        #expect(capped.announcement(failure: "EBUSY") == "pressure policy cannot set the frame rate to 15 fps: EBUSY (critical)")
        let lifted = RateChange(range: Self.fps(60), reason: .pressureLifted(reason: "pressure fell to fair"))
        #expect(lifted.announcement(failure: "EIO") == "pressure policy cannot restore the frame rate to 60 fps: EIO")
        #expect(
            RateChange(range: Self.fps(30), reason: .dropRecoveryLowered(lateDrops: 9)).announcement(failure: "EBUSY") == nil,
            "tried again next interval")
    }
}
