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
