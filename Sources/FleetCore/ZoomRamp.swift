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
}

#if canImport(Glibc)
import Glibc
#endif
