/// Who decides a device's frame rate besides the operator: the opt-in drop recovery
/// (`DropRecovery`) and the opt-in pressure cap (`PressurePolicy`), composed so they never
/// fight. The operator's rate is what both restore to; under a cap, drop recovery steps
/// down from the cap and restores to it, never above it. Pure: the caller says what the
/// device runs now and performs the rate changes it returns.
public struct FrameRateGovernor: Sendable, Equatable {
    public private(set) var dropRecovery = DropRecovery(policy: .off)
    public private(set) var pressurePolicy = PressurePolicy.off
    /// The cap is in force (the node is at the policy's level or above).
    public private(set) var pressureActive = false
    /// What the operator asked for; nil until first needed (then the device's rate).
    public private(set) var requested: FrameRateRange?
    /// The range the cap lowered the device to; nil when it already ran at or below the cap.
    private var pressureRange: FrameRateRange?
    /// Counters at the last drop-recovery interval, for the interval's differences.
    private var lastCaptured: UInt64 = 0
    private var lastLate: UInt64 = 0

    public init() {}

    /// A step the governor wants: set the device to a range and say why, or only say something.
    public enum Step: Equatable, Sendable {
        case set(RateChange)
        case announce(String)
    }

    /// Drop recovery's policy changed. Turning it off gives back at once the rate it stepped
    /// down from (the cap's, while one is in force).
    public mutating func setDropRecoveryPolicy(_ policy: DropRecoveryPolicy) -> Step? {
        let lowered = dropRecovery.loweredRate != nil
        dropRecovery.policy = policy
        guard !policy.isEnabled, lowered, let target = pressureRange ?? requested else { return nil }
        dropRecovery.operatorChangedRate()
        return .set(RateChange(range: target, reason: .dropRecoveryTurnedOff))
    }

    /// One interval of drop recovery, from the device's running totals: frames captured, and
    /// frames lost downstream (late, out of buffers), which a lower rate can cure.
    public mutating func dropIntervalEnded(
        framesCaptured: UInt64, lateDrops: UInt64, running: FrameRateRange,
        format: VideoFormat
    ) -> Step? {
        defer {
            lastCaptured = framesCaptured
            lastLate = lateDrops
        }
        let operatorRange = requested ?? running
        requested = operatorRange
        let target = pressureRange ?? operatorRange
        let captured = framesCaptured >= lastCaptured ? framesCaptured - lastCaptured : 0
        let late = lateDrops >= lastLate ? lateDrops - lastLate : 0
        switch dropRecovery.evaluate(framesCaptured: captured, lateDrops: late, requestedRate: target.maxFramesPerSecond, format: format) {
        case .keep:
            return nil
        case let .lower(rate, drops):
            let range = FrameRateRange(min: min(rate, target.minFramesPerSecond), max: rate)
            return .set(RateChange(range: range, reason: .dropRecoveryLowered(lateDrops: drops)))
        case .restore:
            return .set(RateChange(range: target, reason: .dropRecoveryRestored(quietSeconds: dropRecovery.policy.quietIntervalsToRestore)))
        }
    }

    /// The operator set the device's rate (or a format that changed it): that is the rate to
    /// restore from now on, and a cap in force applies to it.
    public mutating func operatorSetRate(running: FrameRateRange, pressure: PressureReading, format: VideoFormat) -> Step? {
        dropRecovery.operatorChangedRate()
        requested = running
        pressureActive = false
        pressureRange = nil
        return pressureChanged(pressure, running: running, format: format)
    }

    /// The pressure policy changed; it applies at once at the node's level.
    public mutating func setPressurePolicy(
        _ policy: PressurePolicy, pressure: PressureReading, running: FrameRateRange,
        format: VideoFormat
    ) -> Step? {
        let wasActive = pressureActive
        pressurePolicy = policy
        guard policy.applies(at: pressure.level) else {
            return liftCap(reason: policy.isEnabled ? "the pressure policy changed" : "the pressure policy is off")
        }
        guard wasActive else { return pressureChanged(pressure, running: running, format: format) }
        // A new cap while one is in force: straight to the new rate, even upwards.
        pressureActive = false
        pressureRange = nil
        return pressureChanged(pressure, running: running, format: format, replacing: true)
    }

    /// The node's pressure level changed: the cap comes into force or is lifted. The cap is
    /// taken from the operator's rate, not the running one: drop recovery may have stepped
    /// below it, and then restores to the cap. `replacing` moves to a new cap even upwards.
    public mutating func pressureChanged(
        _ pressure: PressureReading, running: FrameRateRange, format: VideoFormat,
        replacing: Bool = false
    ) -> Step? {
        let policy = pressurePolicy
        guard policy.applies(at: pressure.level) else { return liftCap(reason: "pressure fell to \(pressure.level)") }
        guard !pressureActive else { return nil }
        pressureActive = true
        let operatorRange = requested ?? running
        requested = operatorRange
        guard let rate = policy.cappedRate(running: operatorRange.maxFramesPerSecond, format: format) else {
            // Within the cap already, or the format has nothing slower.
            guard operatorRange.maxFramesPerSecond > policy.frameRate + 1e-9 else { return nil }
            return .announce(
                "pressure policy cannot lower the frame rate from \(VideoFormat.trim(operatorRange.maxFramesPerSecond)) fps "
                    + "to \(VideoFormat.trim(policy.frameRate)) fps: the active format has no rate at or below it (\(pressure.detail))")
        }
        let range = FrameRateRange(min: min(rate, operatorRange.minFramesPerSecond), max: rate)
        pressureRange = range
        let change = RateChange(
            range: range,
            reason: .pressureCapped(
                raised: range.maxFramesPerSecond > running.maxFramesPerSecond,
                detail: pressure.detail))
        if running.maxFramesPerSecond > rate + 1e-9 {
            // Above the cap: the cap replaces any drop-recovery step.
            dropRecovery.operatorChangedRate()
            return .set(change)
        }
        let dropRecoveryBelow = dropRecovery.loweredRate.map { $0 < rate - 1e-9 } ?? false
        if replacing && !dropRecoveryBelow && abs(running.maxFramesPerSecond - rate) > 1e-9 { return .set(change) }
        return nil
    }

    private mutating func liftCap(reason: String) -> Step? {
        guard pressureActive else { return nil }
        pressureActive = false
        defer { pressureRange = nil }
        guard pressureRange != nil, let requested else { return nil }
        dropRecovery.operatorChangedRate()
        return .set(RateChange(range: requested, reason: .pressureLifted(reason: reason)))
    }
}

/// The node's pressure level, and its factors in words for the messages policies announce.
public struct PressureReading: Sendable, Equatable {
    public var level: PressureLevel
    public var detail: String

    public init(level: PressureLevel, detail: String) {
        self.level = level
        self.detail = detail
    }

    public static let nominal = PressureReading(level: .nominal, detail: "nominal")
}

/// A frame-rate change a policy wants, and what to announce once the device has taken it or
/// refused it. Nothing throttles silently: every step the fleet can see is said.
public struct RateChange: Sendable, Equatable {
    public enum Reason: Sendable, Equatable {
        /// Late drops persisted: one step down.
        case dropRecoveryLowered(lateDrops: UInt64)
        /// No late drops for a while: back to the operator's rate (or the cap's).
        case dropRecoveryRestored(quietSeconds: Int)
        /// Drop recovery was turned off while it held the rate down.
        case dropRecoveryTurnedOff
        /// The pressure cap came into force or changed.
        case pressureCapped(raised: Bool, detail: String)
        /// The pressure cap was lifted.
        case pressureLifted(reason: String)
    }

    public var range: FrameRateRange
    public var reason: Reason

    public init(range: FrameRateRange, reason: Reason) {
        self.range = range
        self.reason = reason
    }

    /// What to tell the fleet after trying the change: `failure` is why the device refused it,
    /// nil when it took it. Nil: nothing worth an event (drop recovery's steps that failed
    /// are tried again next interval).
    public func announcement(failure: String?) -> String? {
        let rate = VideoFormat.trim(range.maxFramesPerSecond)
        switch reason {
        case let .dropRecoveryLowered(lateDrops):
            guard failure == nil else { return nil }
            return "drop recovery lowered the frame rate to \(rate) fps after \(lateDrops) late or out-of-buffer drops in a second"
        case let .dropRecoveryRestored(quietSeconds):
            guard failure == nil else { return nil }
            return "drop recovery restored the frame rate to \(rate) fps: no late or out-of-buffer drops for \(quietSeconds) s"
        case .dropRecoveryTurnedOff:
            guard let failure else { return nil }
            return "drop recovery is off but cannot restore the frame rate to \(rate) fps: \(failure)"
        case let .pressureCapped(raised, detail):
            guard let failure else { return "pressure policy \(raised ? "raised" : "lowered") the frame rate to \(rate) fps: pressure \(detail)" }
            return "pressure policy cannot set the frame rate to \(rate) fps: \(failure) (\(detail))"
        case let .pressureLifted(reason):
            guard let failure else { return "pressure policy restored the frame rate to \(rate) fps: \(reason)" }
            return "pressure policy cannot restore the frame rate to \(rate) fps: \(failure)"
        }
    }
}
