/// Puts a camera's own frame timestamps (its clock, in ns) on the host's CLOCK_MONOTONIC.
///
/// From the times its frames arrive: a frame arrives after it was stamped, never before, so the
/// lower envelope of (arrival − camera time) is the camera clock's offset plus the shortest
/// delay from stamp to arrival: each second's smallest difference is kept, and a line through
/// the last `windowSeconds` of them gives the offset and the camera clock's rate against the
/// host's. Frames are then placed by the camera's clock, free of the jitter of their transfer;
/// the shortest delay stays in. It is exposure, readout and transfer together, milliseconds on
/// a real camera, which an exposure audit shows as the stamps' offset.
///
/// From the instants its triggers were sent, when the host triggers it: a frame is stamped
/// after the trigger that started it was sent, never before, so each second's largest
/// (sent − camera time) is the offset less that second's shortest trigger latency (the
/// command's way to the camera and the camera's response, tens to hundreds of µs). A frame
/// paired with the wrong trigger would move one second's figure, so the line through them is
/// a robust one: the median of the slopes between every two seconds (Theil–Sen) and the
/// median second's level. Once such a line
/// exists it places the frames, and the two lines bracket the offset (`bracketNanoseconds`).
public struct CameraClockMapping: Sendable {
    public let windowSeconds: Int
    /// The first frame's camera time and arrival: the origin every difference counts from.
    private var origin: (camera: UInt64, arrival: UInt64)?
    /// Each second's smallest (arrival − camera time), and its line.
    private var arrivals: Envelope
    /// Each second's largest (trigger sent − camera time), and its line.
    private var triggers: Envelope
    /// Times the camera's clock jumped (a reset, a new PTP time) and the mapping began again.
    public private(set) var restarts = 0

    public init(windowSeconds: Int = 30) {
        self.windowSeconds = max(windowSeconds, 2)
        arrivals = Envelope(below: true, windowSeconds: self.windowSeconds)
        triggers = Envelope(below: false, windowSeconds: self.windowSeconds, robust: true)
    }

    /// One frame: its camera timestamp and when it arrived (host CLOCK_MONOTONIC ns).
    public mutating func add(cameraNs: UInt64, arrivalNs: UInt64) {
        if let predicted = arrivals.place(camera: cameraNs, origin: origin) {
            // A camera clock that jumped by more than a second: nothing before it applies.
            let gap = Double(Int64(bitPattern: arrivalNs &- predicted))
            if gap > 1e9 || gap < -1e9 {
                origin = nil
                restarts += 1
            }
        }
        guard let origin else {
            self.origin = (cameraNs, arrivalNs)
            arrivals.reset()
            triggers.reset()
            arrivals.add(second: arrivalNs / 1_000_000_000, camera: 0, difference: 0)
            return
        }
        let (camera, difference) = Self.relative(cameraNs, arrivalNs, origin)
        arrivals.add(second: arrivalNs / 1_000_000_000, camera: camera, difference: difference)
    }

    /// The frame a trigger sent at `sentNs` (host CLOCK_MONOTONIC) started, stamped `cameraNs`
    /// by the camera. Pair them only when sure: a frame paired with a later trigger than its
    /// own would put every frame too late.
    public mutating func addTrigger(sentNs: UInt64, cameraNs: UInt64) {
        guard let origin else { return }
        let (camera, difference) = Self.relative(cameraNs, sentNs, origin)
        triggers.add(second: sentNs / 1_000_000_000, camera: camera, difference: difference)
    }

    /// Triggers stopped (free-running again): only arrivals place the frames from now on.
    public mutating func forgetTriggers() { triggers.reset() }

    /// The host's CLOCK_MONOTONIC time of camera time `cameraNs`; nil before the first frame.
    public func capture(cameraNs: UInt64) -> UInt64? {
        if triggers.isFitted, let placed = triggers.place(camera: cameraNs, origin: origin) { return placed }
        return arrivals.place(camera: cameraNs, origin: origin)
    }

    /// Whether frames are placed by the triggers' envelope (within the shortest trigger
    /// latency) rather than the arrivals' (within the shortest exposure-to-arrival delay).
    public var placedByTriggers: Bool { triggers.isFitted }

    /// The arrivals' line less the triggers' at the latest frame, ns: the shortest delay from
    /// trigger to arrival, which the offset lies within; nil without triggers.
    public var bracketNanoseconds: Double? {
        guard triggers.isFitted, let camera = arrivals.latestCamera else { return nil }
        return arrivals.difference(atCamera: camera) - triggers.difference(atCamera: camera)
    }

    /// The camera clock's rate against the host's, ppm (positive: the camera's runs slow, its
    /// seconds longer); nil until the arrivals' minima span 10 s.
    public var ratePPM: Double? { arrivals.ratePPM }

    private static func relative(_ cameraNs: UInt64, _ hostNs: UInt64, _ origin: (camera: UInt64, arrival: UInt64)) -> (Double, Double) {
        let camera = Double(Int64(bitPattern: cameraNs &- origin.camera))
        return (camera, Double(Int64(bitPattern: hostNs &- origin.arrival)) - camera)
    }

    /// Each second's extreme difference (host − camera, from the origin) and a line along them:
    /// under every one of them (`below`) or over every one.
    /// With `robust`, a Theil–Sen line: medians, so that a stray second moves nothing.
    private struct Envelope: Sendable {
        let below: Bool
        let windowSeconds: Int
        let robust: Bool
        /// Each second's (camera time since origin, extreme difference), oldest first.
        private var extremes: [(second: UInt64, camera: Double, difference: Double)] = []
        private var intercept = 0.0
        private var slope = 0.0

        init(below: Bool, windowSeconds: Int, robust: Bool = false) {
            self.below = below
            self.windowSeconds = windowSeconds
            self.robust = robust
        }

        var isFitted: Bool { !extremes.isEmpty }
        var latestCamera: Double? { extremes.last?.camera }

        mutating func reset() {
            extremes = []
            intercept = 0
            slope = 0
        }

        mutating func add(second: UInt64, camera: Double, difference: Double) {
            let startsSecond = extremes.last?.second != second
            if startsSecond {
                extremes.append((second, camera, difference))
                if extremes.count > windowSeconds { extremes.removeFirst(extremes.count - windowSeconds) }
            } else if below ? difference < extremes[extremes.count - 1].difference : difference > extremes[extremes.count - 1].difference {
                extremes[extremes.count - 1] = (second, camera, difference)
            }
            // The robust line changes only when a second completes (or while none has).
            if !robust {
                fit()
            } else if startsSecond || extremes.count == 1 {
                fitRobustly()
            }
        }

        func difference(atCamera camera: Double) -> Double { intercept + slope * camera }

        func place(camera cameraNs: UInt64, origin: (camera: UInt64, arrival: UInt64)?) -> UInt64? {
            guard let origin, isFitted else { return nil }
            let camera = Double(Int64(bitPattern: cameraNs &- origin.camera))
            let offset = camera + difference(atCamera: camera)
            return offset >= 0 ? origin.arrival &+ UInt64(offset.rounded()) : origin.arrival &- UInt64((-offset).rounded())
        }

        var ratePPM: Double? {
            guard let first = extremes.first, let last = extremes.last, last.camera - first.camera >= 10e9 else { return nil }
            return slope * 1e6
        }

        private mutating func fitRobustly() {
            // As `fit`, the second under way waits until it ends (while none has, it is all there is).
            let complete = extremes.count > 1 ? Array(extremes.dropLast()) : extremes
            var slopes: [Double] = []
            if complete.count >= 3, let first = complete.first, let last = complete.last, last.camera - first.camera >= 2e9 {
                for i in complete.indices {
                    for j in complete.indices where j > i && complete[j].camera > complete[i].camera {
                        slopes.append((complete[j].difference - complete[i].difference) / (complete[j].camera - complete[i].camera))
                    }
                }
            }
            slope = slopes.isEmpty ? 0 : Self.median(slopes)
            intercept = Self.median(complete.map { $0.difference - slope * $0.camera })
        }

        private static func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        }

        private mutating func fit() {
            // The second under way is left out until it ends: its extreme is not known yet, and
            // one too far in would tilt the line.
            let complete = extremes.dropLast()
            let extreme: ([Double]) -> Double? = { [below] values in below ? values.min() : values.max() }
            guard complete.count >= 3, let first = complete.first, let last = complete.last, last.camera - first.camera >= 2e9 else {
                intercept = extreme(extremes.map(\.difference)) ?? 0
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
            // The line passes every extreme on its side: the envelope, not their average.
            intercept = extreme(complete.map { $0.difference - slope * $0.camera }) ?? meanY
        }
    }
}
