/// Puts a camera's own frame timestamps (its clock, in ns) on the host's CLOCK_MONOTONIC, from
/// the times its frames arrive. A frame arrives after it was stamped, never before, so the
/// lower envelope of (arrival − camera time) is the camera clock's offset plus the shortest
/// transfer: each second's smallest difference is kept, and a line through the last
/// `windowSeconds` of them gives the offset and the camera clock's rate against the host's.
/// Frames are then placed by the camera's clock, free of the jitter of their transfer; the
/// shortest transfer (a fixed bias of a few hundred µs on a quiet link) stays in.
public struct CameraClockMapping: Sendable {
    public let windowSeconds: Int
    /// The first frame's camera time and arrival: the origin every difference counts from.
    private var origin: (camera: UInt64, arrival: UInt64)?
    /// Each second's (camera time since origin, smallest arrival − camera difference), oldest first.
    private var minima: [(second: UInt64, camera: Double, difference: Double)] = []
    private var intercept = 0.0
    private var slope = 0.0
    /// Times the camera's clock jumped (a reset, a new PTP time) and the mapping began again.
    public private(set) var restarts = 0

    public init(windowSeconds: Int = 30) {
        self.windowSeconds = max(windowSeconds, 2)
    }

    /// One frame: its camera timestamp and when it arrived (host CLOCK_MONOTONIC ns).
    public mutating func add(cameraNs: UInt64, arrivalNs: UInt64) {
        if let predicted = capture(cameraNs: cameraNs) {
            // A camera clock that jumped by more than a second: nothing before it applies.
            let gap = Double(Int64(bitPattern: arrivalNs &- predicted))
            if gap > 1e9 || gap < -1e9 {
                origin = nil
                minima = []
                restarts += 1
            }
        }
        guard let origin else {
            self.origin = (cameraNs, arrivalNs)
            minima = [(arrivalNs / 1_000_000_000, 0, 0)]
            intercept = 0
            slope = 0
            return
        }
        let camera = Double(Int64(bitPattern: cameraNs &- origin.camera))
        let difference = Double(Int64(bitPattern: arrivalNs &- origin.arrival)) - camera
        let second = arrivalNs / 1_000_000_000
        if let last = minima.last, last.second == second {
            if difference < last.difference { minima[minima.count - 1] = (second, camera, difference) }
        } else {
            minima.append((second, camera, difference))
            if minima.count > windowSeconds { minima.removeFirst(minima.count - windowSeconds) }
        }
        fit()
    }

    /// The host's CLOCK_MONOTONIC time of camera time `cameraNs`; nil before the first frame.
    public func capture(cameraNs: UInt64) -> UInt64? {
        guard let origin else { return nil }
        let camera = Double(Int64(bitPattern: cameraNs &- origin.camera))
        let offset = camera + intercept + slope * camera
        return offset >= 0 ? origin.arrival &+ UInt64(offset.rounded()) : origin.arrival &- UInt64((-offset).rounded())
    }

    /// The camera clock's rate against the host's, ppm (positive: the camera's runs slow, its
    /// seconds longer); nil until the minima span 10 s.
    public var ratePPM: Double? {
        guard let first = minima.first, let last = minima.last, last.camera - first.camera >= 10e9 else { return nil }
        return slope * 1e6
    }

    private mutating func fit() {
        // The second under way is left out until it ends: its minimum is not known yet, and one
        // too high would tilt the line.
        let complete = minima.dropLast()
        guard complete.count >= 3, let first = complete.first, let last = complete.last, last.camera - first.camera >= 2e9 else {
            intercept = minima.map(\.difference).min() ?? 0
            slope = 0
            return
        }
        let n = Double(complete.count)
        let meanX = complete.reduce(0) { $0 + $1.camera } / n
        let meanY = complete.reduce(0) { $0 + $1.difference } / n
        var sxx = 0.0, sxy = 0.0
        for point in complete {
            sxx += (point.camera - meanX) * (point.camera - meanX)
            sxy += (point.camera - meanX) * (point.difference - meanY)
        }
        slope = sxx > 0 ? sxy / sxx : 0
        // The line goes under every minimum: the envelope, not their average.
        intercept = complete.map { $0.difference - slope * $0.camera }.min() ?? meanY
    }
}
