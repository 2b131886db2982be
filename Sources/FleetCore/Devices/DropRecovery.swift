/// The opt-in policy that trades frame rate for completeness: while late drops persist the
/// frame rate is lowered step by step, and when they have stopped for a while the rate
/// the operator asked for comes back. Off unless an operator turns it on; nothing throttles
/// silently (every step is a directive the agent announces).
public struct DropRecoveryPolicy: Hashable, Sendable {
    public var isEnabled: Bool
    /// Never go below this rate.
    public var minimumFramesPerSecond: Double
    /// Late drops above this share of captured frames in one interval count as "persisting".
    public var lateDropShare: Double
    /// Each step multiplies the rate by this (then snaps to a rate the format supports).
    public var stepFactor: Double
    /// Intervals without late drops before the requested rate is restored.
    public var quietIntervalsToRestore: Int

    public init(
        isEnabled: Bool = false, minimumFramesPerSecond: Double = 5, lateDropShare: Double = 0.05,
        stepFactor: Double = 0.75, quietIntervalsToRestore: Int = 5
    ) {
        self.isEnabled = isEnabled
        self.minimumFramesPerSecond = minimumFramesPerSecond
        self.lateDropShare = lateDropShare
        self.stepFactor = stepFactor
        self.quietIntervalsToRestore = quietIntervalsToRestore
    }

    public static let off = DropRecoveryPolicy()
}

/// The policy's state for one device. Feed it one interval's counts (typically a second).
public struct DropRecovery: Sendable, Equatable {
    public enum Directive: Equatable, Sendable {
        case keep
        case lower(to: Double, lateDrops: UInt64)
        case restore(to: Double)
    }

    public var policy: DropRecoveryPolicy
    /// The rate lowered to, or nil while running at the operator's rate.
    public private(set) var loweredRate: Double?
    private var quietIntervals = 0

    public init(policy: DropRecoveryPolicy) {
        self.policy = policy
    }

    /// `requestedRate` is what the operator set; `format` bounds the steps.
    public mutating func evaluate(framesCaptured: UInt64, lateDrops: UInt64, requestedRate: Double, format: VideoFormat) -> Directive {
        guard policy.isEnabled else {
            defer { loweredRate = nil }
            return loweredRate == nil ? .keep : .restore(to: requestedRate)
        }
        let current = loweredRate ?? requestedRate
        let persisting = framesCaptured > 0 && Double(lateDrops) > policy.lateDropShare * Double(framesCaptured + lateDrops)
        if persisting {
            quietIntervals = 0
            guard let next = format.nextLowerRate(below: current, factor: policy.stepFactor),
                next >= policy.minimumFramesPerSecond - 1e-9
            else { return .keep }
            loweredRate = next
            return .lower(to: next, lateDrops: lateDrops)
        }
        guard loweredRate != nil else { return .keep }
        if lateDrops == 0 { quietIntervals += 1 } else { quietIntervals = 0 }
        guard quietIntervals >= policy.quietIntervalsToRestore else { return .keep }
        quietIntervals = 0
        loweredRate = nil
        return .restore(to: requestedRate)
    }

    /// The operator set a new rate: that is the new requested rate, and any step down is forgotten.
    public mutating func operatorChangedRate() {
        loweredRate = nil
        quietIntervals = 0
    }
}

extension VideoFormat {
    /// The highest rate this format supports at or below `rate × factor`, or nil if none is lower than `rate`.
    public func nextLowerRate(below rate: Double, factor: Double) -> Double? {
        let wanted = rate * factor
        let candidates = frameRateRanges.compactMap { range -> Double? in
            if range.minFramesPerSecond > wanted + 1e-9 {
                return nil
            }
            return min(range.maxFramesPerSecond, wanted)
        }.filter { $0 < rate - 1e-9 }
        return candidates.max()
    }
}

/// The opt-in policy that lowers a device's frame rate while its host is under pressure:
/// at `level` or above the device runs at no more than `frameRate` (the format's highest
/// supported rate at or below it); when the level falls back, the operator's rate returns.
public struct PressurePolicy: Hashable, Sendable {
    public var isEnabled: Bool
    public var level: PressureLevel
    public var frameRate: Double

    public init(isEnabled: Bool = false, level: PressureLevel = .serious, frameRate: Double = 15) {
        self.isEnabled = isEnabled
        self.level = level
        self.frameRate = frameRate
    }

    public static let off = PressurePolicy()

    /// Whether the cap is in force at this level.
    public func applies(at current: PressureLevel) -> Bool { isEnabled && current >= level }

    /// The rate to run at under the cap, when the device now runs faster than the cap and
    /// the format has a rate at or below it; nil when nothing needs to change or cannot.
    public func cappedRate(running current: Double, format: VideoFormat) -> Double? {
        guard current > frameRate + 1e-9 else { return nil }
        return format.nextLowerRate(below: current, factor: frameRate / current)
    }

    public var summary: String {
        isEnabled ? "at \(level) pressure or above: at most \(VideoFormat.trim(frameRate)) fps" : "off"
    }
}
