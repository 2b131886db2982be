/// Zoom that moves the way a camera operator expects: a ramp to a target factor at a rate
/// in powers of two per second (rate 1 doubles the factor every second), eased in and out so
/// that starting, stopping and changing rate never jerk; a cancel eases out from wherever
/// the zoom is. Works in log2 of the factor, where a constant rate looks constant.
///
/// Pure state: call `advance(to:)` once per frame with the frame's time and carry the factor
/// it returns on that frame.
public struct ZoomRamp: Sendable, Equatable {
    public let minimumFactor: Double
    public let maximumFactor: Double
    /// How fast the rate itself may change, in octaves per second squared.
    public let easing: Double

    /// log2 of the current factor.
    private var position: Double
    /// Octaves per second, signed.
    private var velocity: Double = 0
    private var target: Double?
    private var rate: Double = 0
    private var lastTime: UInt64?

    public init(factor: Double = 1, minimumFactor: Double = 1, maximumFactor: Double, easing: Double = 8) {
        self.minimumFactor = minimumFactor
        self.maximumFactor = max(maximumFactor, minimumFactor)
        self.easing = easing
        position = log2(min(max(factor, minimumFactor), self.maximumFactor))
    }

    public var factor: Double { exp2(position) }
    public var isRamping: Bool { target != nil || velocity != 0 }

    /// Jumps to `factor` at once, ending any ramp.
    public mutating func set(_ factor: Double) {
        position = log2(clamp(factor))
        velocity = 0
        target = nil
    }

    /// Starts (or retargets) a ramp towards `factor` at `rate` octaves per second.
    public mutating func ramp(to factor: Double, rate: Double) {
        target = log2(clamp(factor))
        self.rate = abs(rate)
    }

    /// Eases out of the current ramp: decelerates to a stop as soon as it smoothly can.
    public mutating func cancel() {
        guard velocity != 0 else {
            target = nil
            return
        }
        let stopping = velocity * velocity / (2 * easing)
        target = position + (velocity > 0 ? stopping : -stopping)
    }

    /// Moves the zoom to time `now` (nanoseconds, any monotonic clock) and returns the factor.
    public mutating func advance(to now: UInt64) -> Double {
        defer { lastTime = now }
        guard let last = lastTime, now > last, let goal = target else { return factor }
        var remaining = Double(now - last) / 1e9
        // Integrate in small steps so a long gap between frames follows the same curve.
        while remaining > 0, target != nil {
            let dt = min(remaining, 0.002)
            remaining -= dt
            step(dt, goal: goal)
        }
        return factor
    }

    private mutating func step(_ dt: Double, goal: Double) {
        let distance = goal - position
        let direction: Double = distance >= 0 ? 1 : -1
        let stopping = velocity * velocity / (2 * easing)
        let movingTowards = velocity * direction >= 0
        if !movingTowards || abs(distance) <= stopping {
            // Brake: towards zero velocity (and reverse only through zero).
            let change = easing * dt
            velocity = abs(velocity) <= change ? 0 : velocity - (velocity > 0 ? change : -change)
        } else {
            let wanted = rate * direction
            let change = easing * dt
            velocity = abs(wanted - velocity) <= change ? wanted : velocity + (wanted > velocity ? change : -change)
        }
        let next = position + velocity * dt
        let arrived = (goal - next) * direction <= 0 || (velocity == 0 && abs(distance) < 1e-9)
        if arrived || (velocity == 0 && abs(goal - next) < 1e-6) {
            position = goal
            velocity = 0
            target = nil
        } else {
            position = min(max(next, log2(minimumFactor)), log2(maximumFactor))
        }
    }

    private func clamp(_ factor: Double) -> Double { min(max(factor, minimumFactor), maximumFactor) }

    /// The zoom once the device has taken another format, as AVCaptureDevice does when its
    /// activeFormat changes: a ramp in progress is cancelled where it is, at once (the stream
    /// restarts: there is no motion left to ease out of), and the factor is clamped to the new
    /// format's range, `minimumFactor` … `maximumFactor`. The change says what happened, to be
    /// announced; nil when nothing did.
    public func adopting(maximumFactor: Double) -> (zoom: ZoomRamp, change: ZoomFormatChange?) {
        let before = factor
        let zoom = ZoomRamp(factor: before, minimumFactor: minimumFactor, maximumFactor: maximumFactor, easing: easing)
        let change = ZoomFormatChange(
            factorBefore: before, factor: zoom.factor, cancelledRampTarget: isRamping ? target.map(exp2) : nil,
            maximumFactor: zoom.maximumFactor)
        return (zoom, change.cancelledRampTarget != nil || change.isClamped ? change : nil)
    }
}

/// What a change of format did to a device's zoom (`ZoomRamp.adopting`): the ramp it cancelled
/// and where it clamped the factor. The agent announces it as a `zoom_changed` device event.
public struct ZoomFormatChange: Sendable, Equatable {
    /// The factor when the format changed, and the one the device holds from now on.
    public var factorBefore: Double
    public var factor: Double
    /// The target of the ramp the change cancelled, if one was under way.
    public var cancelledRampTarget: Double?
    /// The new format's largest factor.
    public var maximumFactor: Double

    public init(factorBefore: Double, factor: Double, cancelledRampTarget: Double?, maximumFactor: Double) {
        self.factorBefore = factorBefore
        self.factor = factor
        self.cancelledRampTarget = cancelledRampTarget
        self.maximumFactor = maximumFactor
    }

    /// The factor had to move to fit the new format.
    public var isClamped: Bool { abs(factor - factorBefore) > 1e-9 }

    /// In words, for the event: "a format change cancelled the zoom ramp to 4x; the zoom holds at 1.5x".
    public var message: String {
        var said: [String] = []
        if let target = cancelledRampTarget { said.append("cancelled the zoom ramp to \(VideoFormat.trim(target))x") }
        if isClamped {
            let bound = factor < factorBefore ? "maximum" : "minimum"
            said.append("clamped the zoom from \(VideoFormat.trim(factorBefore))x to \(VideoFormat.trim(factor))x, the new format's \(bound)")
        }
        return "a format change " + said.joined(separator: " and ") + (isClamped ? "" : "; the zoom holds at \(VideoFormat.trim(factor))x")
    }
}

#if canImport(Glibc)
    import Glibc
#endif
